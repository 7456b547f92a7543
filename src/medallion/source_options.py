"""How the sources read: the Delta source options of every Delta-to-Delta stream, and where and how
the Kafka source reads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from medallion.errors import ConfigError
from medallion.sql_names import validate_identifier

# Kafka's legal topic names: ASCII letters, digits, '.', '_' and '-', at most 249 characters.
_KAFKA_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_KAFKA_BOOTSTRAP = re.compile(r"[A-Za-z0-9._\[\]:-]+:[0-9]{1,5}(,[A-Za-z0-9._\[\]:-]+:[0-9]{1,5})*")


@dataclass(frozen=True)
class DeltaSourceOptions:
    """Options of every Delta-to-Delta stream (see the Delta streaming documentation)."""

    starting_version: int | str | None = None
    starting_timestamp: str | None = None
    max_files_per_trigger: int | None = None
    max_bytes_per_trigger: str | None = None
    # MERGE and maintenance rewrite files upstream; skipping those commits keeps readers alive.
    skip_change_commits: bool = True
    with_event_time_order: bool = False

    def as_options(self) -> dict[str, str]:
        """The non-default options as ``DataStreamReader.option`` pairs."""
        if self.starting_version is not None and self.starting_timestamp is not None:
            raise ConfigError("set startingVersion or startingTimestamp, not both")
        options: dict[str, str] = {}
        if self.starting_version is not None:
            options["startingVersion"] = str(self.starting_version)
        if self.starting_timestamp is not None:
            options["startingTimestamp"] = self.starting_timestamp
        if self.max_files_per_trigger is not None:
            options["maxFilesPerTrigger"] = str(self.max_files_per_trigger)
        if self.max_bytes_per_trigger is not None:
            options["maxBytesPerTrigger"] = str(self.max_bytes_per_trigger)
        if self.skip_change_commits:
            options["skipChangeCommits"] = "true"
        if self.with_event_time_order:
            options["withEventTimeOrder"] = "true"
        return options


# Every source reads a bounded amount per micro-batch unless told otherwise, so a first run over
# a huge backlog takes several batches that fit the default 1 GiB driver (384 MiB of lines is
# about 2.3M events; a batch of 2M used all of it and finished), instead of one batch
# that runs out of memory and, replaying the same recorded offsets, runs out again on every
# restart. Delta sources and Auto Loader already stop at 1,000 files a batch by default.
DEFAULT_LANDING_MAX_BYTES_PER_TRIGGER = 384 << 20  # the file source takes plain bytes
DEFAULT_KAFKA_MAX_OFFSETS_PER_TRIGGER = 1_000_000


@dataclass(frozen=True)
class KafkaSourceOptions:
    """Where and how the Kafka source reads (``source="kafka"``); see docs/kafka.md.

    Each input dataset is read from the topic of its own name unless ``topics`` maps it to
    another. Credentials never live here: they come from ``MEDALLION_KAFKA_*`` environment
    variables, or from the Databricks secret scope named by ``secret_scope``
    (medallion/streams/kafka.py).

    >>> options = KafkaSourceOptions(topics={"events": "shop.clicks"})
    >>> options.topic("events"), options.topic("customers")
    ('shop.clicks', 'customers')
    """

    bootstrap_servers: str | None = None
    # The topic of each dataset whose topic is not named like the dataset.
    topics: Mapping[str, str] = field(default_factory=dict)
    # Where a new checkpoint starts: earliest, latest or Spark's JSON {"topic": {"0": 42}}.
    # An existing checkpoint always resumes from the offsets it recorded.
    starting_offsets: str = "earliest"
    # Records per micro-batch (all partitions together); None means the default bound.
    max_offsets_per_trigger: int | None = None
    secret_scope: str | None = None
    # Stop when records the stream has not read yet are gone (expired by retention, deleted,
    # or the topic recreated): Spark's failOnDataLoss. False (--kafka-accept-data-loss) reads
    # what remains and records each lost range in <lake>/_system/data_gaps (docs/kafka.md).
    fail_on_data_loss: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.fail_on_data_loss, bool):
            raise ConfigError(
                f"fail_on_data_loss must be true or false, not {self.fail_on_data_loss!r}"
            )
        servers = self.bootstrap_servers
        if servers is not None and not _KAFKA_BOOTSTRAP.fullmatch(servers):
            raise ConfigError(
                f"invalid Kafka bootstrap servers {servers!r}: use HOST:PORT[,HOST:PORT...]"
            )
        for dataset in self.topics:
            validate_identifier(dataset, "dataset")
            topic = self.topics[dataset]
            legal = isinstance(topic, str) and _KAFKA_TOPIC.fullmatch(topic)
            if not legal or topic in (".", ".."):
                raise ConfigError(
                    f"invalid {dataset} topic {topic!r}: use letters, digits, '.', '_' and '-' "
                    "(at most 249)"
                )
        offsets = self.starting_offsets
        if offsets not in ("earliest", "latest") and not str(offsets).lstrip().startswith("{"):
            raise ConfigError(
                f"invalid starting offsets {offsets!r}: use earliest, latest or JSON such as "
                '{"events": {"0": 42}}'
            )
        if self.max_offsets_per_trigger is not None and self.max_offsets_per_trigger <= 0:
            raise ConfigError("maxOffsetsPerTrigger must be positive")
        if self.secret_scope is not None and not self.secret_scope.strip():
            raise ConfigError("the Kafka secret scope must not be empty")

    def topic(self, dataset: str) -> str:
        """The topic the input records of ``dataset`` are read from."""
        return self.topics.get(dataset) or validate_identifier(dataset, "dataset")
