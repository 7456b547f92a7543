"""Kafka configuration without a broker: options, security settings, secret scopes, CLI checks."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from medallion.cli import main
from medallion.config import Config, ConfigError, KafkaSourceOptions
from medallion.layers import TaskParams
from medallion.session import KAFKA_MAVEN_PACKAGE, local_packages, packages_for
from medallion.streams.kafka import (
    SECURITY_SETTINGS,
    env_settings,
    reader_options,
    secret_scope_settings,
    security_options,
)


def _kafka_config(**options: object) -> Config:
    kafka = KafkaSourceOptions(bootstrap_servers="127.0.0.1:9092", **options)
    return Config(landing="/tmp/lake", lake="/tmp/lake", source="kafka", kafka=kafka)


def test_reader_options_pick_the_dataset_topic_offsets_and_rate_limit():
    config = _kafka_config(customers_topic="crm.changes", max_offsets_per_trigger=500)
    assert reader_options(config, "customers") == {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "subscribe": "crm.changes",
        "startingOffsets": "earliest",
        "includeHeaders": "false",
        "maxOffsetsPerTrigger": "500",
    }
    assert reader_options(config, "events")["subscribe"] == "events"
    latest = _kafka_config(starting_offsets="latest")
    assert reader_options(latest, "events")["startingOffsets"] == "latest"
    # Bounded by default, so a first run over a long topic never reads it in one batch.
    assert reader_options(latest, "events")["maxOffsetsPerTrigger"] == "1000000"
    with pytest.raises(ConfigError, match="no Kafka topic"):
        reader_options(config, "orders")
    with pytest.raises(ConfigError, match="may not set"):
        reader_options(config, "events", {"subscribe": "other"})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bootstrap_servers": "no-port"}, "bootstrap servers"),
        ({"events_topic": "bad topic"}, "events topic"),
        ({"customers_topic": ".."}, "customers topic"),
        ({"starting_offsets": "yesterday"}, "starting offsets"),
        ({"max_offsets_per_trigger": 0}, "maxOffsetsPerTrigger"),
        ({"secret_scope": " "}, "secret scope"),
    ],
)
def test_invalid_kafka_options_are_rejected(options, message):
    with pytest.raises(ConfigError, match=message):
        KafkaSourceOptions(**options)


def test_the_kafka_source_needs_bootstrap_servers_and_only_it_needs_the_connector():
    with pytest.raises(ConfigError, match="bootstrap"):
        Config(landing="/l", lake="/k", source="kafka")
    with pytest.raises(ConfigError, match="unknown source"):
        Config(landing="/l", lake="/k", source="ftp")
    assert packages_for(Config(landing="/l", lake="/k")) == []
    assert packages_for(_kafka_config()) == [KAFKA_MAVEN_PACKAGE]
    assert local_packages(packages_for(_kafka_config()))[1:] == [KAFKA_MAVEN_PACKAGE]


def test_no_security_settings_means_plaintext():
    assert security_options({}) == {}
    assert env_settings({"MEDALLION_KAFKA_USERNAME": "  "}) == {}


def test_sasl_scram_over_tls_with_a_truststore_from_the_environment():
    environ = {
        "MEDALLION_KAFKA_SASL_MECHANISM": "scram-sha-512",
        "MEDALLION_KAFKA_USERNAME": "svc",
        "MEDALLION_KAFKA_PASSWORD": 'pa"ss\\word',
        "MEDALLION_KAFKA_SSL_TRUSTSTORE_LOCATION": "/etc/kafka/truststore.p12",
        "MEDALLION_KAFKA_SSL_TRUSTSTORE_PASSWORD": "changeit",
        "MEDALLION_KAFKA_SSL_TRUSTSTORE_TYPE": "pkcs12",
    }
    assert security_options(env_settings(environ)) == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="svc" password="pa\\"ss\\\\word";',
        "kafka.ssl.truststore.location": "/etc/kafka/truststore.p12",
        "kafka.ssl.truststore.type": "PKCS12",
        "kafka.ssl.truststore.password": "changeit",
    }


def test_oauth_client_credentials_and_pem_certificates_shaded_for_databricks():
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    settings = {
        "sasl_mechanism": "OAUTHBEARER",
        "oauth_token_endpoint_url": "https://login.example.com/oauth2/token",
        "oauth_client_id": "client",
        "oauth_client_secret": "secret",
        "oauth_scope": "kafka",
        "truststore_certificates": pem,
    }
    options = security_options(settings, shaded=True)
    assert options == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.jaas.config": "kafkashaded.org.apache.kafka.common.security.oauthbearer."
        'OAuthBearerLoginModule required clientId="client" clientSecret="secret" scope="kafka";',
        "kafka.sasl.oauthbearer.token.endpoint.url": "https://login.example.com/oauth2/token",
        "kafka.sasl.login.callback.handler.class": "kafkashaded.org.apache.kafka.common.security."
        "oauthbearer.OAuthBearerLoginCallbackHandler",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.certificates": pem,
    }


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"username": "u", "password": "p"}, "MEDALLION_KAFKA_SASL_MECHANISM is not"),
        ({"sasl_mechanism": "PLAIN", "username": "u"}, "MEDALLION_KAFKA_PASSWORD"),
        ({"sasl_mechanism": "GSSAPI"}, "unsupported"),
        ({"sasl_mechanism": "PLAIN", "security_protocol": "SSL"}, "SASL_SSL or SASL_PLAINTEXT"),
        ({"security_protocol": "SASL_SSL"}, "needs MEDALLION_KAFKA_SASL_MECHANISM"),
        ({"security_protocol": "TLS"}, "must be one of"),
        ({"sasl_mechanism": "OAUTHBEARER", "oauth_client_id": "c"}, "OAUTH_CLIENT_SECRET"),
        (
            {"sasl_mechanism": "PLAIN", "username": "u", "password": "line\nbreak"},
            "MEDALLION_KAFKA_PASSWORD must be a single line",
        ),
        ({"truststore_location": "/t", "security_protocol": "PLAINTEXT"}, "truststore needs"),
        ({"truststore_password": "hunter2"}, "TRUSTSTORE_LOCATION is missing"),
    ],
)
def test_inconsistent_security_settings_name_the_variable_not_the_value(settings, message):
    with pytest.raises(ConfigError, match=message) as error:
        security_options(settings)
    for secret in ("password", "oauth_client_secret", "truststore_password"):
        if secret in settings:
            assert settings[secret] not in str(error.value)


class _FakeSecrets:
    def __init__(self, scopes: dict[str, dict[str, str]]) -> None:
        self.scopes = scopes
        self.read: list[str] = []

    def list(self, scope: str) -> list[SimpleNamespace]:
        return [SimpleNamespace(key=key) for key in self.scopes[scope]]

    def get(self, scope: str, key: str) -> str:
        self.read.append(key)
        return self.scopes[scope][key]


def test_a_databricks_secret_scope_supplies_the_same_settings():
    secrets = _FakeSecrets(
        {
            "kafka-prod": {
                "kafka-sasl-mechanism": "PLAIN",
                "kafka-username": "svc",
                "kafka-password": "from-the-scope",
                "unrelated": "never read",
            }
        }
    )
    settings = secret_scope_settings("kafka-prod", SimpleNamespace(secrets=secrets))
    assert settings == {"sasl_mechanism": "PLAIN", "username": "svc", "password": "from-the-scope"}
    assert "unrelated" not in secrets.read
    assert security_options(settings, shaded=True)["kafka.sasl.jaas.config"].startswith(
        "kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule required"
    )


def test_every_setting_has_a_distinct_variable_and_secret_key():
    assert len({s.env for s in SECURITY_SETTINGS}) == len(SECURITY_SETTINGS)
    assert len({s.secret_key for s in SECURITY_SETTINGS}) == len(SECURITY_SETTINGS)
    assert all(s.env.startswith("MEDALLION_KAFKA_") for s in SECURITY_SETTINGS)


def test_cli_checks_source_arguments_before_starting_spark(capsys):
    assert main(["run", "--lake", "/tmp/x"]) == 2
    assert "--landing is required" in capsys.readouterr().err
    assert main(["run", "--source", "kafka", "--lake", "/tmp/x"]) == 2
    assert "bootstrap" in capsys.readouterr().err
    bad_topic = ["--kafka-bootstrap", "127.0.0.1:9", "--events-topic", "a b"]
    assert main(["run", "--source", "kafka", *bad_topic, "--lake", "/tmp/x"]) == 2
    assert "events topic" in capsys.readouterr().err


def test_a_missing_secret_scope_is_a_clear_error_naming_the_scope():
    with pytest.raises(
        ConfigError, match=r"cannot list the Kafka secret scope 'nope'.*create-scope"
    ):
        secret_scope_settings("nope", SimpleNamespace(secrets=_FakeSecrets({})))


def test_task_parameters_describe_the_kafka_source():
    """Job parameters and notebook widgets are text; TaskParams turns them into the options."""
    params = TaskParams(
        lake="/tmp/lake",
        source="kafka",
        kafka_bootstrap="b1:9092,b2:9092",
        events_topic="prod.events",
        customers_topic="prod.customers",
        starting_offsets="latest",
        max_offsets_per_trigger="5000",
        kafka_secret_scope="kafka-prod",
    )
    config = params.config()
    assert config.source == "kafka" and config.landing == "/tmp/lake"
    assert config.kafka == KafkaSourceOptions(
        bootstrap_servers="b1:9092,b2:9092",
        events_topic="prod.events",
        customers_topic="prod.customers",
        starting_offsets="latest",
        max_offsets_per_trigger=5000,
        secret_scope="kafka-prod",
    )
    assert packages_for(config) == [KAFKA_MAVEN_PACKAGE]
    # The defaults: files, and no Kafka settings that matter.
    files = TaskParams(landing="/tmp/in", lake="/tmp/lake").config()
    assert files.source == "files" and files.kafka.secret_scope is None
    assert packages_for(files) == []


@pytest.mark.parametrize(
    "params, message",
    [
        ({"source": "pubsub"}, "unknown source 'pubsub'"),
        ({"source": "kafka"}, "needs bootstrap servers"),
        ({"source": "kafka", "kafka_bootstrap": "h:1", "max_offsets_per_trigger": "lots"}, "lots"),
        ({"source": "kafka", "kafka_bootstrap": "h:1", "events_topic": "a b"}, "invalid events"),
    ],
)
def test_invalid_kafka_task_parameters_are_rejected(params, message):
    with pytest.raises(ConfigError, match=message):
        TaskParams(lake="/tmp/lake", **params).config()
