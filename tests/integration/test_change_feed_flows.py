"""A flow that declares ``change_feed=True`` reads its source's Change Data Feed whatever starts
it: a ``batch`` flow, which the engine starts from its source, gets each micro-batch as the
source's change rows (``_change_type``, ``_commit_version``, ``_commit_timestamp``), so a gold
table kept from silver's changes follows silver's updates and deletes instead of going stale
(skipChangeCommits skips them in a stream of rows). Issue 66.

The pipeline is declared here and registered for the test only, as tests/pipelines/meters.py
is: users landed, bronze, silver MERGEd by user (a row with ``deleted`` deletes its user), and
gold's count of users per country kept from silver's changes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from medallion.cli import main
from medallion.config import Config
from medallion.contracts import FieldRule
from medallion.declarations import (
    APPEND_ONLY,
    INGEST_METADATA,
    KAFKA_METADATA,
    STREAMING_TABLE_PROPERTIES,
    Flow,
    Landing,
    Pipeline,
    Table,
)
from medallion.pipelines import registered
from medallion.streams.exactly_once import MergingBatches
from medallion.streams.sinks import Trigger, start_append
from medallion.streams.sources import input_lines
from medallion.transforms.bronze import to_bronze

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)

FIELDS = (
    FieldRule("user_id", "string", True),
    FieldRule("country", "string", True),
    FieldRule("deleted", "boolean", False),
)
BRONZE = Table(
    "bronze",
    "cdf_users",
    f"user_id STRING, country STRING, deleted STRING, {INGEST_METADATA}, {KAFKA_METADATA}",
    APPEND_ONLY,
)
SILVER = Table(
    "silver",
    "cdf_users",
    "user_id STRING NOT NULL, country STRING NOT NULL",
    {**STREAMING_TABLE_PROPERTIES, "delta.enableChangeDataFeed": "true"},
)
GOLD = Table("gold", "cdf_users_per_country", "country STRING NOT NULL, users BIGINT NOT NULL")

# The change types each gold batch was given, in the order of its batches.
SEEN: list[set[str]] = []


def start_bronze(
    spark: SparkSession, config: Config, flow: Flow, trigger: Trigger
) -> StreamingQuery:
    lines = input_lines(spark, config, flow.source.dataset)
    (table,) = flow.outputs
    checkpoint = config.checkpoint(flow.name)
    bronze = to_bronze(lines, FIELDS)
    return start_append(bronze, config.table(table.key), checkpoint, trigger, flow.name)


def latest_per_user(batch: DataFrame) -> DataFrame:
    """Each user's last row of the batch (by file, then by position in it)."""
    last = Window.partitionBy("user_id").orderBy(F.desc("_source_file"), F.desc("_n"))
    return (
        batch.withColumn("_n", F.monotonically_increasing_id())
        .withColumn("_last", F.row_number().over(last))
        .where("_last = 1")
        .select(
            "user_id",
            "country",
            F.coalesce(F.col("deleted") == "true", F.lit(False)).alias("deleted"),
        )
    )


def users_moved(changes: DataFrame) -> DataFrame:
    """Users gained (+1) and lost (-1) per country, from silver's change rows."""
    SEEN.append({r._change_type for r in changes.select("_change_type").distinct().collect()})
    sign = (
        F.when(F.col("_change_type").isin("insert", "update_postimage"), 1)
        .when(F.col("_change_type").isin("delete", "update_preimage"), -1)
        .otherwise(0)
    )
    return changes.groupBy("country").agg(F.sum(sign).cast("bigint").alias("users"))


USERS = Pipeline(
    "cdf_users",
    (BRONZE, SILVER, GOLD),
    (
        Flow("bronze_cdf_users", "bronze", Landing("cdf_users"), (BRONZE,), start_bronze),
        Flow(
            "silver_cdf_users",
            "silver",
            BRONZE,
            (SILVER,),
            batch=MergingBatches(
                latest_per_user,
                ("user_id",),
                "WHEN MATCHED AND s.deleted THEN DELETE "
                "WHEN MATCHED THEN UPDATE SET t.country = s.country "
                "WHEN NOT MATCHED AND NOT s.deleted THEN INSERT (user_id, country) "
                "VALUES (s.user_id, s.country)",
            ),
        ),
        Flow(
            "gold_cdf_users_per_country",
            "gold",
            SILVER,
            (GOLD,),
            change_feed=True,
            batch=MergingBatches(
                users_moved,
                ("country",),
                "WHEN MATCHED THEN UPDATE SET t.users = t.users + s.users "
                "WHEN NOT MATCHED THEN INSERT *",
            ),
        ),
    ),
)


def _land(landing: Path, name: str, rows: list[dict]) -> None:
    folder = landing / "cdf_users"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _run(landing: Path, lake: Path) -> None:
    assert (
        main(["run", "--landing", str(landing), "--lake", str(lake), "--pipeline", "cdf_users"])
        == 0
    )


def _expected(*files: list[dict]) -> dict[str, int]:
    """Users per country computed in plain Python: each user's last row wins, deleted ones go."""
    users: dict[str, str] = {}
    for rows in files:
        for row in rows:
            if row.get("deleted"):
                users.pop(row["user_id"], None)
            else:
                users[row["user_id"]] = row["country"]
    return dict(Counter(users.values()))


def _gold(spark: SparkSession, lake: Path) -> dict[str, int]:
    rows = spark.read.format("delta").load(str(lake / "gold" / GOLD.name)).collect()
    return {r.country: r.users for r in rows if r.users}


def test_a_batch_flow_with_change_feed_gets_silvers_updates_and_deletes_as_change_rows(spark, dirs):
    landing, lake = dirs
    SEEN.clear()
    first = [
        {"user_id": "u1", "country": "FR"},
        {"user_id": "u2", "country": "FR"},
        {"user_id": "u3", "country": "DE"},
        {"user_id": "u4", "country": "IT"},
    ]
    second = [
        {"user_id": "u1", "country": "DE"},  # moves: an update
        {"user_id": "u2", "country": "FR", "deleted": True},  # a delete
        {"user_id": "u4", "country": "IT", "deleted": True},  # the last of IT goes
        {"user_id": "u5", "country": "ES"},  # a new user
    ]
    with registered(USERS):
        _land(landing, "a.json", first)
        _run(landing, lake)
        assert _gold(spark, lake) == _expected(first) == {"FR": 2, "DE": 1, "IT": 1}
        assert set().union(*SEEN) == {"insert"}

        SEEN.clear()
        _land(landing, "b.json", second)
        _run(landing, lake)
        seen = set().union(*SEEN)
    assert seen == {"insert", "update_preimage", "update_postimage", "delete"}
    # FR and IT are down to no user (their gold rows hold 0).
    assert _gold(spark, lake) == _expected(first, second) == {"DE": 2, "ES": 1}
