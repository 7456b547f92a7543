"""Kafka reader options: topic, offsets, rate limit, and security settings kept out of code.

Security settings (SASL mechanism, username/password or OAuth client, TLS truststore) are read
from ``MEDALLION_KAFKA_*`` environment variables, or, when a secret scope is configured, from
that Databricks secret scope through ``dbutils.secrets``. They never come from YAML, the command
line or code, and no value is ever logged or put into an error message. docs/kafka.md lists them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from medallion.config import Config
from medallion.errors import ConfigError
from medallion.session import session_kind
from medallion.source_options import DEFAULT_KAFKA_MAX_OFFSETS_PER_TRIGGER, KafkaSourceOptions

# The Kafka metadata columns every bronze row read from Kafka carries (NULL for file input).
KAFKA_COLUMNS = ("_kafka_topic", "_kafka_partition", "_kafka_offset", "_kafka_timestamp")

# Names the secret scope on a Databricks job or cluster (instead of --kafka-secret-scope).
SECRET_SCOPE_ENV = "MEDALLION_KAFKA_SECRET_SCOPE"


@dataclass(frozen=True)
class SecuritySetting:
    """One security setting: its environment variable and its key in a Databricks secret scope."""

    name: str
    env: str
    secret_key: str
    description: str


SECURITY_SETTINGS: tuple[SecuritySetting, ...] = (
    SecuritySetting(
        "security_protocol",
        "MEDALLION_KAFKA_SECURITY_PROTOCOL",
        "kafka-security-protocol",
        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (default: SASL_SSL with a SASL mechanism, "
        "SSL with a truststore, else PLAINTEXT)",
    ),
    SecuritySetting(
        "sasl_mechanism",
        "MEDALLION_KAFKA_SASL_MECHANISM",
        "kafka-sasl-mechanism",
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
    ),
    SecuritySetting(
        "username", "MEDALLION_KAFKA_USERNAME", "kafka-username", "SASL user (PLAIN, SCRAM)"
    ),
    SecuritySetting(
        "password", "MEDALLION_KAFKA_PASSWORD", "kafka-password", "SASL password (PLAIN, SCRAM)"
    ),
    SecuritySetting(
        "oauth_token_endpoint_url",
        "MEDALLION_KAFKA_OAUTH_TOKEN_ENDPOINT_URL",
        "kafka-oauth-token-endpoint-url",
        "OAuth 2 token endpoint (OAUTHBEARER, client credentials grant)",
    ),
    SecuritySetting(
        "oauth_client_id",
        "MEDALLION_KAFKA_OAUTH_CLIENT_ID",
        "kafka-oauth-client-id",
        "OAuth client id",
    ),
    SecuritySetting(
        "oauth_client_secret",
        "MEDALLION_KAFKA_OAUTH_CLIENT_SECRET",
        "kafka-oauth-client-secret",
        "OAuth client secret",
    ),
    SecuritySetting(
        "oauth_scope", "MEDALLION_KAFKA_OAUTH_SCOPE", "kafka-oauth-scope", "OAuth scope (optional)"
    ),
    SecuritySetting(
        "truststore_location",
        "MEDALLION_KAFKA_SSL_TRUSTSTORE_LOCATION",
        "kafka-ssl-truststore-location",
        "path of a JKS or PKCS12 truststore readable by the driver and executors",
    ),
    SecuritySetting(
        "truststore_password",
        "MEDALLION_KAFKA_SSL_TRUSTSTORE_PASSWORD",
        "kafka-ssl-truststore-password",
        "password of that truststore",
    ),
    SecuritySetting(
        "truststore_type",
        "MEDALLION_KAFKA_SSL_TRUSTSTORE_TYPE",
        "kafka-ssl-truststore-type",
        "JKS, PKCS12 or PEM (Kafka's default is JKS)",
    ),
    SecuritySetting(
        "truststore_certificates",
        "MEDALLION_KAFKA_SSL_TRUSTSTORE_CERTIFICATES",
        "kafka-ssl-truststore-certificates",
        "trusted CA certificates as PEM text, instead of a truststore file",
    ),
)

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_PASSWORD_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_OAUTH_CALLBACK = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
# Databricks Runtime relocates the Kafka client classes under this package.
DATABRICKS_SHADED_PREFIX = "kafkashaded."


def _env(name: str) -> str:
    return next(s.env for s in SECURITY_SETTINGS if s.name == name)


def settings_from(get: Callable[[SecuritySetting], str | None]) -> dict[str, str]:
    """The security settings that ``get`` returns a non-blank value for, by setting name."""
    found = {}
    for setting in SECURITY_SETTINGS:
        value = get(setting)
        if value is not None and value.strip():
            found[setting.name] = (
                value.strip() if setting.name != "truststore_certificates" else value
            )
    return found


def env_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The security settings from ``MEDALLION_KAFKA_*`` environment variables."""
    environ = os.environ if environ is None else environ
    return settings_from(lambda s: environ.get(s.env))


def _dbutils(spark: object) -> object:
    """``dbutils`` on a Databricks cluster or through Databricks Connect."""
    try:
        # deferred: only in a Databricks runtime
        from pyspark.dbutils import DBUtils  # Databricks Runtime only

        return DBUtils(spark)
    except ImportError:
        pass
    try:
        # deferred: only in a Databricks runtime
        from databricks.sdk.runtime import dbutils  # databricks-sdk, with Databricks Connect

        return dbutils
    except ImportError:
        raise ConfigError(
            "a Kafka secret scope needs dbutils: run on Databricks or with Databricks Connect, "
            "or leave the scope unset and use MEDALLION_KAFKA_* environment variables"
        ) from None


def secret_scope_settings(scope: str, dbutils: object) -> dict[str, str]:
    """The security settings stored in a Databricks secret scope (missing keys are unset)."""
    try:
        present = {meta.key for meta in dbutils.secrets.list(scope)}
    except Exception as error:  # dbutils raises its own (Java or SDK) error types
        raise ConfigError(
            f"cannot list the Kafka secret scope {scope!r} ({type(error).__name__}): create it "
            "(databricks secrets create-scope) and put the keys docs/kafka.md lists, or set "
            "kafka_secret_scope to empty to use MEDALLION_KAFKA_* environment variables"
        ) from None

    def get(setting: SecuritySetting) -> str | None:
        if setting.secret_key not in present:
            return None
        return dbutils.secrets.get(scope=scope, key=setting.secret_key)

    return settings_from(get)


def _jaas_value(value: str, env: str) -> str:
    """A JAAS option value in double quotes (Kafka's parser honours backslash escapes)."""
    if any(c in value for c in "\r\n\0"):
        raise ConfigError(f"{env} must be a single line")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _jaas(module: str, options: dict[str, tuple[str, str]]) -> str:
    pairs = " ".join(f"{key}={_jaas_value(value, env)}" for key, (value, env) in options.items())
    return f"{module} required {pairs};"


def security_options(settings: Mapping[str, str], shaded: bool = False) -> dict[str, str]:
    """The ``kafka.*`` reader options of some security settings (see :data:`SECURITY_SETTINGS`).

    ``shaded`` prefixes Kafka class names with ``kafkashaded.``, as Databricks Runtime needs.
    Raises :class:`ConfigError` naming the variables (never the values) that are inconsistent.

    >>> security_options({})
    {}
    >>> plain = {"sasl_mechanism": "PLAIN", "username": "u", "password": 'p"w'}
    >>> print(security_options(plain)["kafka.sasl.jaas.config"])
    org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p\\"w";
    """
    prefix = DATABRICKS_SHADED_PREFIX if shaded else ""
    mechanism = settings.get("sasl_mechanism", "").upper() or None
    tls = any(k.startswith("truststore_") for k in settings)
    protocol = settings.get("security_protocol", "").upper() or None
    if protocol is None and (mechanism or tls):
        protocol = "SASL_SSL" if mechanism else "SSL"
    if protocol is not None and protocol not in _PROTOCOLS:
        raise ConfigError(f"{_env('security_protocol')} must be one of {', '.join(_PROTOCOLS)}")
    options: dict[str, str] = {}
    if protocol is not None:
        options["kafka.security.protocol"] = protocol
    sasl = protocol is not None and protocol.startswith("SASL_")
    credentials = [k for k in ("username", "password") if k in settings]
    oauth = [k for k in settings if k.startswith("oauth_")]
    if mechanism is None and (credentials or oauth):
        raise ConfigError(f"Kafka credentials are set but {_env('sasl_mechanism')} is not")
    if mechanism is not None and not sasl:
        raise ConfigError(
            f"a SASL mechanism needs {_env('security_protocol')}=SASL_SSL or SASL_PLAINTEXT"
        )
    if sasl and mechanism is None:
        raise ConfigError(f"{_env('security_protocol')}={protocol} needs {_env('sasl_mechanism')}")
    if mechanism in _PASSWORD_MODULES:
        missing = [_env(k) for k in ("username", "password") if k not in settings]
        if missing:
            raise ConfigError(f"SASL {mechanism} needs {' and '.join(missing)}")
        if oauth:
            raise ConfigError(f"SASL {mechanism} takes a username and password, not OAuth settings")
        options["kafka.sasl.mechanism"] = mechanism
        options["kafka.sasl.jaas.config"] = _jaas(
            prefix + _PASSWORD_MODULES[mechanism],
            {
                "username": (settings["username"], _env("username")),
                "password": (settings["password"], _env("password")),
            },
        )
    elif mechanism == "OAUTHBEARER":
        needed = ("oauth_token_endpoint_url", "oauth_client_id", "oauth_client_secret")
        missing = [_env(k) for k in needed if k not in settings]
        if missing:
            raise ConfigError(f"SASL OAUTHBEARER needs {', '.join(missing)}")
        if credentials:
            raise ConfigError("SASL OAUTHBEARER takes OAuth client settings, not a password")
        jaas = {
            "clientId": (settings["oauth_client_id"], _env("oauth_client_id")),
            "clientSecret": (settings["oauth_client_secret"], _env("oauth_client_secret")),
        }
        if "oauth_scope" in settings:
            jaas["scope"] = (settings["oauth_scope"], _env("oauth_scope"))
        options["kafka.sasl.mechanism"] = mechanism
        options["kafka.sasl.jaas.config"] = _jaas(prefix + _OAUTH_MODULE, jaas)
        options["kafka.sasl.oauthbearer.token.endpoint.url"] = settings["oauth_token_endpoint_url"]
        options["kafka.sasl.login.callback.handler.class"] = prefix + _OAUTH_CALLBACK
    elif mechanism is not None:
        raise ConfigError(
            f"unsupported {_env('sasl_mechanism')}: "
            "use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"
        )
    if tls:
        if protocol not in ("SSL", "SASL_SSL"):
            raise ConfigError(f"a truststore needs {_env('security_protocol')}=SSL or SASL_SSL")
        if "truststore_location" in settings and "truststore_certificates" in settings:
            raise ConfigError(
                f"set {_env('truststore_location')} or {_env('truststore_certificates')}, not both"
            )
        if "truststore_certificates" in settings:
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.certificates"] = settings["truststore_certificates"]
        else:
            if "truststore_location" not in settings:
                raise ConfigError(f"{_env('truststore_location')} is missing")
            options["kafka.ssl.truststore.location"] = settings["truststore_location"]
            if "truststore_type" in settings:
                options["kafka.ssl.truststore.type"] = settings["truststore_type"].upper()
            if "truststore_password" in settings:
                options["kafka.ssl.truststore.password"] = settings["truststore_password"]
    return options


def resolve_security_options(spark: object, kafka: KafkaSourceOptions) -> dict[str, str]:
    """The security options of this deployment: from the secret scope if one is set, else the env.

    The scope is ``kafka.secret_scope`` or ``$MEDALLION_KAFKA_SECRET_SCOPE``. Class names
    are shaded for Databricks Runtime (also behind Databricks Connect).
    """
    shaded = session_kind() in ("databricks", "databricks-connect")
    scope = kafka.secret_scope or os.environ.get(SECRET_SCOPE_ENV) or None
    settings = secret_scope_settings(scope, _dbutils(spark)) if scope else env_settings()
    return security_options(settings, shaded=shaded)


def reader_options(
    config: Config, dataset: str, security: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Every ``DataStreamReader.option`` of the Kafka stream of one dataset.

    Offsets live only in the stream's checkpoint: Spark assigns partitions itself and commits
    nothing to Kafka consumer groups. ``startingOffsets`` only applies to a new checkpoint.
    ``failOnDataLoss`` is always explicit: "true" (the default) stops the stream when records it
    has not read are gone; "false" reads what remains (medallion/streams/kafka_gaps.py records
    what was skipped).
    """
    kafka = config.kafka
    options = {
        **_connection_options(kafka),
        "subscribe": kafka.topic(dataset),
        "startingOffsets": kafka.starting_offsets,
        "includeHeaders": "false",
        "maxOffsetsPerTrigger": str(
            kafka.max_offsets_per_trigger or DEFAULT_KAFKA_MAX_OFFSETS_PER_TRIGGER
        ),
        "failOnDataLoss": "true" if kafka.fail_on_data_loss else "false",
    }
    return _with_security(options, security)


def _connection_options(kafka: KafkaSourceOptions) -> dict[str, str]:
    if not kafka.bootstrap_servers:
        raise ConfigError("the Kafka source needs bootstrap servers (--kafka-bootstrap HOST:PORT)")
    return {"kafka.bootstrap.servers": kafka.bootstrap_servers}


def _with_security(options: dict[str, str], security: Mapping[str, str] | None) -> dict[str, str]:
    overlap = set(options) & set(security or {})
    if overlap:
        raise ConfigError(f"security settings may not set {', '.join(sorted(overlap))}")
    return {**options, **(security or {})}


def connection_options(spark: object, config: Config, **options: str) -> dict[str, str]:
    """This deployment's ``kafka.bootstrap.servers`` and security options, with ``options``:
    how a run reaches the broker, for another reader or a client of its own."""
    return _with_security(
        {**_connection_options(config.kafka), **options},
        resolve_security_options(spark, config.kafka),
    )


def batch_read(spark: object, config: Config, **options: str):
    """A batch DataFrame of Kafka records with this deployment's servers and security options,
    and ``options`` (for example ``assign`` and ``startingOffsets``) instead of the stream's
    subscription and rate limit."""
    merged = connection_options(spark, config, **options)
    reader = spark.read.format("kafka")  # type: ignore[attr-defined]
    for key, value in merged.items():
        reader = reader.option(key, value)
    return reader.load()


def topic_has_records(spark: object, config: Config, dataset: str) -> bool:
    """Whether the topic of ``dataset`` exists and holds a record (a pattern subscription:
    a missing topic matches nothing, where subscribing to it fails)."""
    topic = config.kafka.topic(dataset)
    records = batch_read(
        spark,
        config,
        subscribePattern=re.escape(topic),
        startingOffsets="earliest",
        endingOffsets="latest",
    )
    return bool(records.select("offset").limit(1).count())
