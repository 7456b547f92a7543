"""Identifiers, paths and secrets: nothing from configuration can inject SQL or escape a root,
and nothing secret-looking is committed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from medallion.config import Config, ConfigError, normalize_path, path_under, quote_identifier

ROOT = Path(__file__).resolve().parents[2]

# Literal credentials, not references to environment variables or secret scopes.
SECRET_PATTERNS = {
    "Databricks token": re.compile(r"dapi[0-9a-f]{32}"),
    "AWS access key": re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36}\b"),
    "Slack token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    "password literal": re.compile(
        r"""(?i)\b(password|passwd|secret|api_key|apikey|token)["']?\s*[:=]\s*["'](?![$<{])[^"'\s]{6,}["']"""
    ),
    "JAAS password": re.compile(r"""(?i)password\s*=\s*\\?["'](?![$<{])[^"'\\]{4,}\\?["']"""),
}
SCANNED = {
    ".py",
    ".yml",
    ".yaml",
    ".ipynb",
    ".toml",
    ".cfg",
    ".ini",
    ".json",
    ".sh",
    ".md",
    ".properties",
}
ALLOWED_FILES = {"tests/unit/test_security.py"}  # the patterns above
# Throwaway values of the local test broker and of option-parsing tests; never real credentials.
TEST_FIXTURE_VALUES = {"broker-secret", "changeit", "from-the-scope", "line\\nbreak"}


def committed_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [ROOT / name for name in out.stdout.splitlines() if name]


def find_secrets(path: Path, root: Path = ROOT) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    hits = []
    for label, pattern in SECRET_PATTERNS.items():
        for match in pattern.finditer(text):
            if not any(value in match.group(0) for value in TEST_FIXTURE_VALUES):
                hits.append(f"{path.relative_to(root)}: {label}: {match.group(0)[:40]}")
    return hits


def test_no_secret_looking_literals_in_code_yaml_or_notebooks():
    files = [
        f
        for f in committed_files()
        if (f.suffix in SCANNED or f.name == "Makefile")
        and str(f.relative_to(ROOT)) not in ALLOWED_FILES
        and f.is_file()
        and f.stat().st_size < 5_000_000
    ]
    assert len(files) > 20
    hits = [hit for f in files for hit in find_secrets(f)]
    assert hits == []


@pytest.mark.parametrize(
    "planted",
    [
        'token = "dapi0123456789abcdef0123456789abcdef"',
        "password: 'hunter2hunter2'",
        '"api_key": "sk_live_abcdefghijkl"',
        "aws = 'AKIAABCDEFGHIJKLMNOP'",
    ],
)
def test_the_scan_finds_planted_secrets(tmp_path, planted):
    planted_file = tmp_path / "leak.yml"
    planted_file.write_text(f"x: 1\n{planted}\n")
    assert find_secrets(planted_file, tmp_path)


def test_references_to_secrets_are_not_flagged(tmp_path):
    ok = tmp_path / "ok.yml"
    ok.write_text('password: "${secrets.scope.key}"\ntoken = os.environ["DATABRICKS_TOKEN"]\n')
    assert find_secrets(ok, tmp_path) == []


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
    from medallion.config import Config, ConfigError, quote_path, sql_string

    lake = "/data/la`ke;x\\y'z"
    ref = Config(landing="/l", lake=lake).table("bronze/events")
    assert ref.sql_name == "delta.`/data/la``ke;x\\y'z/bronze/events`"
    assert sql_string(lake) == "'/data/la`ke;x\\\\y\\'z'"
    assert quote_path("a`b") == "`a``b`"
    for bad in ("/lake\nDROP", "/lake\x00", "/lake\r"):
        with pytest.raises(ConfigError, match="control character"):
            Config(landing="/l", lake=bad)
