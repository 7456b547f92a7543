"""Kafka configuration without a broker: options, security settings, secret scopes, CLI checks."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from medallion.cli import main
from medallion.config import Config
from medallion.errors import ConfigError, failure_text
from medallion.session import KAFKA_MAVEN_PACKAGE, local_packages, packages_for
from medallion.source_options import KafkaSourceOptions
from medallion.streams.kafka import (
    SECURITY_SETTINGS,
    env_settings,
    reader_options,
    secret_scope_settings,
    security_options,
)
from medallion.streams.kafka_loss_hint import kafka_data_loss_hint
from medallion.task_params import TaskParams


def _kafka_config(**options: object) -> Config:
    kafka = KafkaSourceOptions(bootstrap_servers="127.0.0.1:9092", **options)
    return Config(landing="/tmp/lake", lake="/tmp/lake", source="kafka", kafka=kafka)


def test_reader_options_pick_the_dataset_topic_offsets_and_rate_limit():
    config = _kafka_config(topics={"customers": "crm.changes"}, max_offsets_per_trigger=500)
    assert reader_options(config, "customers") == {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "subscribe": "crm.changes",
        "startingOffsets": "earliest",
        "includeHeaders": "false",
        "maxOffsetsPerTrigger": "500",
        "failOnDataLoss": "true",
    }
    assert reader_options(config, "events")["subscribe"] == "events"
    latest = _kafka_config(starting_offsets="latest")
    assert reader_options(latest, "events")["startingOffsets"] == "latest"
    # Bounded by default, so a first run over a long topic never reads it in one batch.
    assert reader_options(latest, "events")["maxOffsetsPerTrigger"] == "1000000"
    # Another pipeline's dataset is read from the topic of its own name.
    assert reader_options(config, "readings")["subscribe"] == "readings"
    with pytest.raises(ConfigError, match="invalid dataset"):
        reader_options(config, "no;such")
    with pytest.raises(ConfigError, match="may not set"):
        reader_options(config, "events", {"subscribe": "other"})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bootstrap_servers": "no-port"}, "bootstrap servers"),
        ({"topics": {"events": "bad topic"}}, "events topic"),
        ({"topics": {"customers": ".."}}, "customers topic"),
        ({"topics": {"no;such": "t"}}, "invalid dataset"),
        ({"starting_offsets": "yesterday"}, "starting offsets"),
        ({"max_offsets_per_trigger": 0}, "maxOffsetsPerTrigger"),
        ({"secret_scope": " "}, "secret scope"),
        ({"fail_on_data_loss": "false"}, "fail_on_data_loss must be true or false"),
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
    params = TaskParams.from_mapping(
        {
            "lake": "/tmp/lake",
            "source": "kafka",
            "kafka_bootstrap": "b1:9092,b2:9092",
            "topics": "events=prod.events",
            # A <dataset>_topic parameter, as retail's jobs pass; its dataset's own name is the
            # default and changes nothing.
            "customers_topic": "prod.customers",
            "transactions_topic": "transactions",
            "starting_offsets": "latest",
            "max_offsets_per_trigger": "5000",
            "kafka_secret_scope": "kafka-prod",
            "kafka_fail_on_data_loss": "False",
        }
    )
    config = params.config()
    assert config.source == "kafka" and config.landing == "/tmp/lake"
    assert config.kafka == KafkaSourceOptions(
        bootstrap_servers="b1:9092,b2:9092",
        topics={"events": "prod.events", "customers": "prod.customers"},
        starting_offsets="latest",
        max_offsets_per_trigger=5000,
        secret_scope="kafka-prod",
        fail_on_data_loss=False,
    )
    assert packages_for(config) == [KAFKA_MAVEN_PACKAGE]
    # The defaults: files, and no Kafka settings that matter.
    files = TaskParams(landing="/tmp/in", lake="/tmp/lake").config()
    assert files.source == "files" and files.kafka.secret_scope is None
    assert files.kafka.fail_on_data_loss is True
    assert packages_for(files) == []


@pytest.mark.parametrize(
    "params, message",
    [
        ({"source": "pubsub"}, "unknown source 'pubsub'"),
        ({"source": "kafka"}, "needs bootstrap servers"),
        ({"source": "kafka", "kafka_bootstrap": "h:1", "max_offsets_per_trigger": "lots"}, "lots"),
        ({"source": "kafka", "kafka_bootstrap": "h:1", "topics": "events=a b"}, "invalid events"),
        ({"topics": "events"}, "a topic is written NAME=VALUE"),
        ({"topics": "events=a", "events_topic": "b"}, "the events topic is given twice"),
        ({"kafka_fail_on_data_loss": "sometimes"}, "kafka_fail_on_data_loss must be true or"),
    ],
)
def test_invalid_kafka_task_parameters_are_rejected(params, message):
    with pytest.raises(ConfigError, match=message):
        TaskParams.from_mapping({"lake": "/tmp/lake", **params}).config()


def test_data_loss_stops_the_stream_unless_accepted_and_the_choice_reaches_spark(monkeypatch):
    """failOnDataLoss is always explicit: true by default, false with --kafka-accept-data-loss."""
    assert KafkaSourceOptions().fail_on_data_loss is True
    assert reader_options(_kafka_config(), "events")["failOnDataLoss"] == "true"
    accepting = _kafka_config(fail_on_data_loss=False)
    assert reader_options(accepting, "customers")["failOnDataLoss"] == "false"
    with pytest.raises(ConfigError, match="may not set"):
        reader_options(accepting, "events", {"failOnDataLoss": "true"})

    import medallion.run_command

    seen: list[Config] = []

    class Stop(Exception):
        pass

    def capture(config: Config) -> list[str]:
        seen.append(config)
        raise Stop

    monkeypatch.setattr(medallion.run_command, "packages_for", capture)
    run = ["run", "--source", "kafka", "--kafka-bootstrap", "127.0.0.1:9", "--lake", "/tmp/x"]
    for extra, expected in (([], True), (["--kafka-accept-data-loss"], False)):
        assert main([*run, *extra]) != 0  # stopped before Spark starts
        assert seen.pop().kafka.fail_on_data_loss is expected


# Spark 4.2's messages, as they reached the driver against a real broker (tests/integration/
# test_kafka.py reproduces both): records deleted (retention, kafka-delete-records) under a
# planned batch, and a topic deleted and recreated with fewer records.
EXPIRED = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [TASK_WRITE_FAILED] \
Task failed while writing rows to file:/lake/bronze/events. SQLSTATE: 58030 SQLSTATE: XXKST

JVM stacktrace:
Caused by: org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost \
because they are not available in Kafka any more;
either the data was aged out by Kafka or the topic may have been deleted before all the data in the
topic was processed.
If you don't want your streaming query to fail on such cases, set the source option failOnDataLoss to false.
Reason: Could not read records in offset [10, 20) for topic partition ta-0
with consumer group spark-kafka-source-a63a4ee9--1198129787-executor.
"""
RECREATED = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Some data may \
have been lost because they are not available in Kafka any more;
either the data was aged out by Kafka or the topic may have been deleted before all the data in the
topic was processed.
If you don't want your streaming query to fail on such cases, set the source option failOnDataLoss to false.
Reason: Partition tb-0 offset was changed from 10 to 3.
This could be either 1) a user error that the start offset is set beyond available offset when \
starting query, or 2) the kafka topic-partition is deleted and re-created. SQLSTATE: XXKST
"""


@pytest.mark.parametrize(
    ("text", "what"),
    [
        (EXPIRED, "Kafka records of ta-0 at offsets [10, 20) were gone before they were read"),
        (RECREATED, "offsets of Kafka partition tb-0 went back from 10 to 3"),
        (
            "Some data may have been lost because they are not available in Kafka any more;\n"
            "Reason: Starting offset for tc-1 was 4 but consumer reset to 9",
            "Kafka records of tc-1 from offset 4 on were gone",
        ),
        ("[KAFKA_DATA_LOSS.PARTITIONS_DELETED] Partitions [td-0] have been deleted.", "[td-0]"),
    ],
)
def test_a_data_loss_failure_gets_one_line_with_the_ways_out(text, what):
    hint = kafka_data_loss_hint(text, _kafka_config())
    assert hint is not None and "\n" not in hint
    assert what in hint
    assert "--kafka-accept-data-loss" in hint and "kafka_fail_on_data_loss=false" in hint
    assert "/tmp/lake/_system/data_gaps" in hint
    assert "medallion reset --lake /tmp/lake --layer bronze" in hint


def test_other_failures_and_other_sources_get_no_data_loss_hint():
    assert (
        kafka_data_loss_hint("[TASK_WRITE_FAILED] Task failed while writing", _kafka_config())
        is None
    )
    # The Delta source's own failOnDataLoss (a VACUUMed upstream table) is not Kafka's.
    delta = "The stream from your Delta table was expecting process data ... failOnDataLoss"
    assert kafka_data_loss_hint(delta, _kafka_config()) is None
    files = Config(landing="/tmp/in", lake="/tmp/lake")
    assert kafka_data_loss_hint(EXPIRED, files) is None


def test_the_hint_finds_the_kafka_cause_under_the_failed_write():
    """A micro-batch's failure names the Delta write; the Kafka read under it is a cause."""
    cause = RuntimeError(EXPIRED.split("JVM stacktrace:")[1])
    error = RuntimeError("[TASK_WRITE_FAILED] Task failed while writing rows")
    error.__cause__ = cause
    assert kafka_data_loss_hint(str(error), _kafka_config()) is None
    assert "ta-0 at offsets [10, 20)" in kafka_data_loss_hint(error, _kafka_config())
    assert "ta-0" in failure_text(error)


def _offsets_file(checkpoint, batch: int, offsets: dict, committed: bool = True) -> None:
    """A Spark offsets log entry (and its commit) for a Kafka source."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    metadata = {"batchWatermarkMs": 0, "batchTimestampMs": 1_700_000_000_000 + batch, "conf": {}}
    text = f"v1\n{json.dumps(metadata)}\n{json.dumps(offsets)}"
    (checkpoint / "offsets" / str(batch)).write_text(text)
    if committed:
        (checkpoint / "commits").mkdir(exist_ok=True)
        (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_batch_ranges_come_from_consecutive_offsets_and_offsets_that_went_back_are_gaps(tmp_path):
    from medallion.streams.kafka_gaps import _ranges

    config = _kafka_config(topics={"events": "t"})
    checkpoint = tmp_path / "bronze_events"
    _offsets_file(checkpoint, 0, {"t": {"0": 10}})
    _offsets_file(checkpoint, 1, {"t": {"0": 20, "1": 4}})  # a partition was added
    _offsets_file(checkpoint, 2, {"t": {"0": 3, "1": 4}})  # the topic was recreated
    _offsets_file(checkpoint, 3, {"t": {"0": 9}})  # ... with one partition

    ranges, gaps = _ranges(config, "bronze_events", str(checkpoint), 0, 3)

    # Batch 0's start is unknown (startingOffsets earliest); a new partition starts at 0.
    assert [(r.batch, r.partition, r.start, r.end) for r in ranges] == [
        (1, 0, 10, 20),
        (1, 1, 0, 4),
        (3, 0, 3, 9),
    ]
    assert ranges[0].timestamp_ms == 1_700_000_000_001
    assert [(g.kafka_partition, g.from_offset, g.until_offset) for g in gaps] == [
        (0, 20, None),  # the old topic's records from 20 on were never read
        (0, 0, 3),  # Spark skipped the new topic's records below 3
        (1, 4, None),  # partition 1 is gone
    ]
    assert all(g.kind == "kafka data loss" and g.topic == "t" for g in gaps)
    # A JSON starting position makes batch 0's range known.
    json_start = _kafka_config(topics={"events": "t"}, starting_offsets='{"t": {"0": 2}}')
    ranges, _ = _ranges(json_start, "bronze_events", str(checkpoint), 0, 0)
    assert [(r.batch, r.start, r.end) for r in ranges] == [(0, 2, 10)]


def test_with_the_default_only_the_watermark_moves(tmp_path):
    """No query at all (spark=None) unless batches may have been read accepting data loss."""
    from medallion.gaps import checked_through
    from medallion.streams.kafka_gaps import ACCEPTING_MARKER, CHECK, record_kafka_gaps

    lake = tmp_path / "lake"
    kafka = KafkaSourceOptions(bootstrap_servers="127.0.0.1:9092")
    config = Config(landing=str(lake), lake=str(lake), source="kafka", kafka=kafka)
    checkpoint = lake / "_checkpoints" / "bronze_events"
    # A new checkpoint is checked from its first batch; one that exists from where it stands.
    assert record_kafka_gaps(None, config, "bronze_events") == []
    assert checked_through(str(checkpoint), CHECK) == -1
    old = lake / "_checkpoints" / "bronze_customers"
    _offsets_file(old, 0, {"customers": {"0": 5}})
    assert record_kafka_gaps(None, config, "bronze_customers") == []
    assert checked_through(str(old), CHECK) == 0
    for batch in (0, 1):
        _offsets_file(checkpoint, batch, {"events": {"0": 5 * (batch + 1)}})
    assert record_kafka_gaps(None, config, "bronze_events") == []
    assert checked_through(str(checkpoint), CHECK) == 1
    assert not (checkpoint / ACCEPTING_MARKER).exists()
    assert record_kafka_gaps(None, config, "silver_events") == []
    # Accepting data loss marks the checkpoint, so that even a later run with the default
    # checks the batches read meanwhile; once they are checked, the mark goes.
    accepting = config.with_options(kafka=replace(kafka, fail_on_data_loss=False))
    assert record_kafka_gaps(None, accepting, "bronze_events") == []
    assert (checkpoint / ACCEPTING_MARKER).exists()
    assert record_kafka_gaps(None, config, "bronze_events") == []
    assert not (checkpoint / ACCEPTING_MARKER).exists()
    files = Config(landing=str(lake), lake=str(lake))
    assert record_kafka_gaps(None, files, "bronze_events") == []
