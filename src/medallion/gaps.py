"""Input that was lost before medallion could read it, recorded in ``<lake>/_system/data_gaps``.

A stream stops, by default, when input it planned to read has gone: a landed file deleted
after it was listed, Kafka records expired by retention or a recreated topic. An operator who
accepts the loss restarts it with the documented option (``--skip-missing-files``,
``kafka.fail_on_data_loss=false``), and what was skipped is written here, one row per file or
per Kafka partition range, so the loss is on record and ``medallion status`` shows it.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.sql_names import TableRef
from medallion.tables import append_rows, read_table, table_exists

GAPS_SCHEMA = (
    "stream STRING, kind STRING, file_path STRING, topic STRING, kafka_partition INT, "
    "from_offset BIGINT, until_offset BIGINT, detail STRING, recorded_at TIMESTAMP"
)
GAPS_PROPERTIES = {"delta.appendOnly": "true"}


@dataclass(frozen=True)
class Gap:
    """One piece of input that was skipped: a file, or offsets of one Kafka partition.

    ``until_offset`` is exclusive; None when unknown (a recreated topic).
    """

    stream: str
    kind: str  # "missing file" | "kafka data loss"
    detail: str
    file_path: str | None = None
    topic: str | None = None
    kafka_partition: int | None = None
    from_offset: int | None = None
    until_offset: int | None = None
    recorded_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


def gaps_table(config: Config) -> TableRef:
    """Where a lake records its gaps: ``<lake>/_system/data_gaps``."""
    return config.system_table("data_gaps")


def gaps_table_spec(config: Config) -> tuple[TableRef, str, dict[str, str]]:
    """(table, columns, properties), for :func:`medallion.tables.ensure_tables`."""
    return gaps_table(config), GAPS_SCHEMA, GAPS_PROPERTIES


def record_gaps(spark: SparkSession, config: Config, gaps: list[Gap]) -> None:
    """Append gaps to the gaps table (which ``medallion run`` creates)."""
    if not gaps:
        return
    append_rows(spark, gaps_table(config), [asdict(gap) for gap in gaps], GAPS_SCHEMA)


def recorded_gaps(spark: SparkSession, config: Config) -> list[dict]:
    """Every recorded gap, oldest first (empty when the table does not exist yet)."""
    table = gaps_table(config)
    if not table_exists(spark, table):
        return []
    rows = read_table(spark, table).orderBy("recorded_at").collect()
    return [row.asDict() for row in rows]


def checked_through(checkpoint: str, check: str) -> int | None:
    """The last batch of a stream whose input ``check`` has looked at for gaps (None: none).

    Kept in ``<checkpoint>/_medallion_<check>_checked``; only local (or FUSE) checkpoints.
    """
    path = os.path.join(checkpoint, f"_medallion_{check}_checked")
    try:
        with open(path, encoding="utf-8") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def mark_checked(checkpoint: str, check: str, batch_id: int) -> None:
    """Record that ``check`` has looked at every batch up to ``batch_id`` (atomically)."""
    path = os.path.join(checkpoint, f"_medallion_{check}_checked")
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(f"{int(batch_id)}\n")
    os.replace(temporary, path)


def describe_gap(gap: dict) -> str:
    """One line for a recorded gap (a row of the gaps table, as a dict)."""
    if gap.get("file_path"):
        where = gap["file_path"]
    else:
        until = "?" if gap.get("until_offset") is None else gap["until_offset"]
        where = (
            f"{gap.get('topic')}/{gap.get('kafka_partition')} offsets "
            f"[{gap.get('from_offset')}, {until})"
        )
    return f"{gap['stream']}: {gap['kind']} {where} ({gap['detail']})"
