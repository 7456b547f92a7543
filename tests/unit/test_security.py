"""Identifiers, paths and secrets: nothing from configuration can inject SQL or escape a root,
and nothing secret-looking is committed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from medallion.config import Config
from medallion.errors import ConfigError
from medallion.sql_names import normalize_path, path_under, quote_identifier

ROOT = Path(__file__).resolve().parents[2]

# --- The committed-secrets scan -------------------------------------------------------------
#
# A name that ends in a credential word: password, kafka_password, db_pass, client_secret,
# clientSecret, access_token, private_key, aws_secret_access_key, sasl.jaas.password,
# ssl.keystore.password, fs.s3a.secret.key, --password. The word must END the name, so
# secret_scope, token_count or password_env (names of scopes, counts, variables) are not one.
CREDENTIAL_WORDS = (
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "pass",
    "secret",
    "token",
    "credentials?",
    *(
        rf"{kind}[._-]?key"
        for kind in ("api", "access", "secret", "private", "account", "signing", "encryption")
    ),
)
CREDENTIAL_NAME = (
    f"(?=[{''.join(sorted({word[0] for word in CREDENTIAL_WORDS}))}])"  # a quick first-letter test
    # The word starts the name, or follows _ . - or a camelCase hump (not "bypass", "compass") ...
    r"(?:(?<![\w.-])|(?<=[_.-])|(?-i:(?<=[a-z0-9])(?=[A-Z])))"
    + f"(?:{'|'.join(CREDENTIAL_WORDS)})"
    + r"(?![\w.-])"  # ... and ends it.
)
ASSIGNED = r"""["']?\]?\s*(?::=|[:=])\s*"""  # name: / name = / "name": / ["name"] = / name :=
# A quoted value, also with JSON-escaped quotes (a notebook's source: password = \"...\").
QUOTED_VALUE = r"""\\?(?P<q>["'])(?P<value>(?:[^"'\s\\]|\\[^"'\s]){6,})\\?(?P=q)"""
# An unquoted value running to the end of the line (YAML, .properties, .env, .ini, shell).
BARE_VALUE = r"""(?P<value>[^\s"'#][^\s"']{5,})[ \t]*(?:\#.*)?$"""
XML_VALUE = r"\s*(?P<value>[^<\s]{6,})\s*"

# Found in every scanned file.
SECRET_PATTERNS = {
    "Databricks token": re.compile(r"dapi[0-9a-f]{32}"),
    "AWS access key": re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----"),
    "GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36}\b"),
    "Slack token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    "password literal": re.compile("(?i)" + CREDENTIAL_NAME + ASSIGNED + QUOTED_VALUE),
    "JAAS password": re.compile(r"""(?i)password\s*=\s*\\?["'](?P<value>[^"'\\]{4,})\\?["']"""),
    "XML credential element": re.compile(  # <password>...</password>
        r"(?i)<[\w.-]*?" + CREDENTIAL_NAME + ">" + XML_VALUE + "</"
    ),
    "XML credential property": re.compile(  # Hadoop: <name>fs.s3a.secret.key</name><value>...
        r"(?i)<name>\s*[\w.-]*?"
        + CREDENTIAL_NAME
        + r"\s*</name>\s*<value>"
        + XML_VALUE
        + "</value>"
    ),
}
# Found only in configuration files, where an unquoted value is a string (in Python
# ``password = settings`` or ``password: str`` is code, not a credential).
CONFIG_PATTERNS = {
    "unquoted credential": re.compile(
        "(?im)" + CREDENTIAL_NAME + r"[ \t]*(?::=|[:=])[ \t]*" + BARE_VALUE
    ),
    # spark-defaults.conf, .properties: a line "name value" (so not prose in a comment line).
    "unquoted credential, space-separated": re.compile(
        r"(?im)^[ \t]*[\w.-]*?" + CREDENTIAL_NAME + r"[ \t]+" + BARE_VALUE
    ),
}
# A value that points at a secret instead of being one: ${var.x}, {{secrets/scope/key}},
# <placeholder>, %(name)s, YAML !tags, *aliases and &anchors, environment and secret-scope lookups.
REFERENCE = re.compile(r"[$<{%!*&]|(?:os\.environ|os\.getenv|dbutils\.secrets)\b")

SCANNED = {
    ".py",
    ".ipynb",
    ".sh",
    ".md",
    ".txt",
    ".sql",
    ".scala",
    ".java",
    ".json",
    ".yml",
    ".yaml",
    ".toml",
    ".cfg",
    ".ini",
    ".conf",
    ".properties",
    ".env",
    ".tf",
    ".tfvars",
    ".xml",
    ".pom",
    ".pem",
    ".key",
    ".crt",
}
SCANNED_NAMES = {"Makefile", "Dockerfile", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"}
CONFIG_SUFFIXES = {".yml", ".yaml", ".properties", ".env", ".conf", ".cfg", ".ini", ".sh"}
ALLOWED_FILES = {"tests/unit/test_security.py"}  # the patterns above
# Throwaway values of the local test broker and of option-parsing tests; never real credentials.
# A value is allowed only when it equals one of these exactly.
TEST_FIXTURE_VALUES = {
    "broker-secret",
    "changeit",
    "from-the-scope",
    "hunter2",
    "line\\nbreak",
    "secret",
}


def committed_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [ROOT / name for name in out.stdout.splitlines() if name]


def is_scanned(path: Path) -> bool:
    """Code, configuration, notebooks, docs and key files; .env, .env.local, prod.env alike."""
    return (
        path.suffix.lower() in SCANNED or path.name in SCANNED_NAMES or path.name.startswith(".env")
    )


def is_config_file(path: Path) -> bool:
    return (
        path.suffix.lower() in CONFIG_SUFFIXES
        or path.name.startswith(".env")
        or path.name == "Makefile"
    )


def secret_value(match: re.Match[str]) -> str:
    """The credential a match found: its ``value`` group, else the whole match (a token, a key)."""
    return match.groupdict().get("value") or match.group(0)


def is_allowed(value: str) -> bool:
    """A reference to a secret, or a throwaway test value (exactly, not as a substring)."""
    return value in TEST_FIXTURE_VALUES or REFERENCE.match(value) is not None


def find_secrets(path: Path, root: Path = ROOT) -> list[str]:
    """Secret-looking literals in a file, as ``file: kind: start of the match``.

    Tokens and keys of known shapes are found anywhere; so are quoted values of credential-named
    keys (``kafka_password: '...'``, ``"client_secret": "..."``, JAAS ``password="..."``) and XML
    credential elements and Hadoop properties. Unquoted values (``password: hunter2``,
    ``KAFKA_PASSWORD=...``) only count in configuration files. References to secrets
    (``${...}``, ``{{secrets/...}}``, ``os.environ``, ``dbutils.secrets``) and the exact values of
    :data:`TEST_FIXTURE_VALUES` are not findings.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    patterns = SECRET_PATTERNS | (CONFIG_PATTERNS if is_config_file(path) else {})
    hits = []
    for label, pattern in patterns.items():
        for match in pattern.finditer(text):
            if not is_allowed(secret_value(match)):
                hits.append(f"{path.relative_to(root)}: {label}: {match.group(0)[:40]}")
    return hits


def test_no_secret_looking_literals_in_code_yaml_or_notebooks():
    files = [
        f
        for f in committed_files()
        if is_scanned(f)
        and str(f.relative_to(ROOT)) not in ALLOWED_FILES
        and f.is_file()
        and f.stat().st_size < 5_000_000
    ]
    assert len(files) > 20
    hits = [hit for f in files for hit in find_secrets(f)]
    assert hits == []


PRIVATE_KEY_BLOCK = (
    "-----BEGIN {kind}PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
    "-----END {kind}PRIVATE KEY-----\n"
)


@pytest.mark.parametrize(
    ("name", "planted"),
    [
        ("leak.yml", 'token = "dapi0123456789abcdef0123456789abcdef"'),
        ("leak.yml", "password: 'hunter2hunter2'"),
        ("leak.yml", '"api_key": "sk_live_abcdefghijkl"'),
        ("leak.yml", "aws = 'AKIAABCDEFGHIJKLMNOP'"),
        # A credential word ending a longer name.
        ("leak.yml", "kafka_password: 'hunter2hunter2'"),
        ("leak.py", 'client_secret = "abcdefgh12345"'),
        ("leak.py", 'clientSecret = "abcdefgh12345"'),
        ("leak.py", 'db_pass = "abcdefgh12345"'),
        ("leak.py", 'access_token = "abcdefgh12345"'),
        ("leak.py", 'private_key = "abcdefgh12345"'),
        ("leak.py", 'aws_secret_access_key = "abcdefgh12345"'),
        ("leak.py", 'os.environ["MEDALLION_KAFKA_PASSWORD"] = "abcdefgh12345"'),
        ("leak.py", 'options = {"kafka.sasl.jaas.password": "abcdefgh12345"}'),
        ("leak.sh", "spark-submit --kafka-password='abcdefgh12345' job.py"),
        ("leak.ipynb", r'"kafka_password = \"hunter2hunter2\"\n",'),
        # Unquoted values in configuration files.
        ("leak.yml", "password: hunter2hunter2"),
        ("leak.yaml", "  client_secret: abcdefgh12345  # rotate me"),
        ("leak.yml", "- ssl.keystore.password=abcdefgh12345"),
        ("client.properties", "ssl.keystore.password=abcdefgh12345"),
        ("client.properties", "ssl.truststore.password = abcdefgh12345"),
        (
            "client.properties",
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="svc" password="s3cr3tpass";',
        ),
        (".env", "KAFKA_PASSWORD=hunter2hunter2"),
        (".env.local", "export DATABRICKS_TOKEN=abcdefgh12345"),
        ("prod.env", "AWS_SECRET_ACCESS_KEY=abcdefgh12345"),
        ("spark-defaults.conf", "spark.hadoop.fs.s3a.secret.key   abcdefgh12345"),
        ("client.properties", "ssl.key.password abcdefgh12345"),
        ("jaas.conf", 'KafkaClient {\n  PlainLoginModule required password="s3cr3tpass";\n};'),
        ("settings.ini", "[kafka]\npassword = hunter2hunter2"),
        ("Makefile", "TOKEN := abcdefgh12345"),
        # Private keys, whatever file they are in.
        ("server.pem", PRIVATE_KEY_BLOCK.format(kind="")),
        ("server.key", PRIVATE_KEY_BLOCK.format(kind="RSA ")),
        ("server.key", PRIVATE_KEY_BLOCK.format(kind="EC ")),
        ("id_ed25519", PRIVATE_KEY_BLOCK.format(kind="OPENSSH ")),
        ("cert.pem", PRIVATE_KEY_BLOCK.format(kind="ENCRYPTED ")),
        # XML: credential elements and Hadoop-style properties.
        ("settings.xml", "<server><password>hunter2hunter2</password></server>"),
        ("core-site.xml", "<name>fs.s3a.secret.key</name><value>abcdefgh12345</value>"),
        (
            "core-site.xml",
            "<property>\n  <name>fs.adl.oauth2.credential</name>\n"
            "  <value>abcdefgh12345</value>\n</property>",
        ),
        # Exact allow-list: a fixture value inside a longer value is not allowed.
        ("leak.yml", 'password: "changeit-prod-8f7a"'),
        ("leak.yml", 'password: "xbroker-secret"'),
        ("leak.yml", "password: changeit-prod-8f7a"),
    ],
)
def test_the_scan_finds_planted_secrets(tmp_path, name, planted):
    planted_file = tmp_path / name
    planted_file.write_text(f"x: 1\n{planted}\n")
    assert is_scanned(planted_file)
    assert find_secrets(planted_file, tmp_path)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (
            "ok.yml",
            'password: "${secrets.scope.key}"\n'
            "password: ${var.kafka_password}\n"
            'password: "{{secrets/scope/key}}"\n'
            'MEDALLION_KAFKA_PASSWORD: "{{secrets/medallion-kafka/kafka-password}}"\n'
            "secret_scope: medallion\n"
            "kafka_secret_scope: medallion-kafka\n"
            "password_env: MEDALLION_KAFKA_PASSWORD\n"
            "token_count: 1234567\n"
            "password: null\n"
            "password:\n"
            "  scope: medallion\n"
            "password: !secret kafka_password\n"
            "password: changeit\n"
            "# change the password regularly\n",
        ),
        (
            "ok.py",
            'token = os.environ["DATABRICKS_TOKEN"]\n'
            'password = dbutils.secrets.get(scope="medallion", key="kafka-password")\n'
            "password = settings.get_password()\n"
            "def connect(password: Optional[str] = None, token_count: int = 0): ...\n"
            'secret_scope = "medallion-kafka"\n'
            'kafka_password_env = "MEDALLION_KAFKA_PASSWORD"\n'
            'token_count = "1234567890"\n'
            'bypass = "abcdefgh12345"\n'
            'password = "changeit"\n',
        ),
        (
            ".env",
            "KAFKA_PASSWORD=${VAULT_KAFKA_PASSWORD}\n"
            "MEDALLION_KAFKA_SECRET_SCOPE=medallion-kafka\n"
            "MEDALLION_KAFKA_PASSWORD_ENV=KAFKA_PASSWORD\n",
        ),
        ("client.properties", "ssl.truststore.password=changeit\nsecurity.protocol=SASL_SSL\n"),
        (
            "settings.xml",
            "<password>${env.KAFKA_PASSWORD}</password>\n<token_count>12345678</token_count>\n",
        ),
        (
            "cert.pem",
            "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n",
        ),
    ],
)
def test_references_to_secrets_are_not_flagged(tmp_path, name, text):
    ok = tmp_path / name
    ok.write_text(text)
    assert find_secrets(ok, tmp_path) == []


def test_only_an_exact_fixture_value_is_allowed(tmp_path):
    allowed = tmp_path / "ok.yml"
    allowed.write_text('password: "changeit"\nkafka_password: "broker-secret"\n')
    assert find_secrets(allowed, tmp_path) == []
    leaked = tmp_path / "leak.yml"
    leaked.write_text('password: "changeit-prod-8f7a"\npassword: "xbroker-secret"\n')
    assert len(find_secrets(leaked, tmp_path)) == 2


@pytest.mark.parametrize(
    "name",
    [
        "silver`; DROP TABLE x; --",
        "a b",
        "a\tb",
        "a\nb",
        "x'y",
        'x"y',
        "a.b",
        "a;b",
        " a",
        "a ",
        "é",
    ],
)
def test_identifiers_with_quotes_semicolons_backticks_or_whitespace_are_rejected(name):
    with pytest.raises(ConfigError, match="invalid"):
        quote_identifier(name)
    with pytest.raises(ConfigError):
        Config(landing="/l", lake="/k", catalog=name)


def test_landing_paths_cannot_escape_their_root():
    cfg = Config(landing="/data/landing/../landing/", lake="/data/lake")
    assert cfg.landing == "/data/landing"
    assert cfg.landing_dir("events") == "/data/landing/events"
    for bad in ("..", "../etc", "/etc", "events/../../x"):
        with pytest.raises(ConfigError):
            cfg.landing_dir(bad)
    with pytest.raises(ConfigError, match="escapes"):
        path_under("/data/landing", "../../etc/passwd")
    assert normalize_path("s3://bucket/a/./b/") == "s3://bucket/a/b"


def test_paths_reach_sql_fully_escaped_and_control_characters_are_refused():
    from medallion.config import Config
    from medallion.errors import ConfigError
    from medallion.sql_names import quote_path, sql_string

    lake = "/data/la`ke;x\\y'z"
    ref = Config(landing="/l", lake=lake).table("bronze/events")
    assert ref.sql_name == "delta.`/data/la``ke;x\\y'z/bronze/events`"
    assert sql_string(lake) == "'/data/la`ke;x\\\\y\\'z'"
    assert quote_path("a`b") == "`a``b`"
    for bad in ("/lake\nDROP", "/lake\x00", "/lake\r"):
        with pytest.raises(ConfigError, match="control character"):
            Config(landing="/l", lake=bad)
