"""Batch reads of a table's Change Data Feed, by version range or timestamp range."""

from __future__ import annotations

import json
from datetime import datetime

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from medallion.config import Config
from medallion.deployment import table_of
from medallion.errors import ConfigError
from medallion.tables import history, table_exists


class ChangeFeedError(ConfigError):
    """A change feed request that cannot be served; the message says why and what is available."""


def _cdf_enabled_since(commits: list) -> int | None:
    """The first version from which the change feed has been on, or None if it is off now."""
    since = None
    for commit in sorted(commits, key=lambda c: c["version"]):
        params = commit["operationParameters"] or {}
        props = params.get("properties")
        if props is None:
            continue
        enabled = json.loads(props).get("delta.enableChangeDataFeed")
        if enabled is not None:
            since = commit["version"] if str(enabled).lower() == "true" else None
    return since


def read_changes(
    spark: SparkSession,
    config: Config,
    table_key: str,
    from_version: int | None = None,
    to_version: int | None = None,
    from_timestamp: str | None = None,
    to_timestamp: str | None = None,
) -> DataFrame:
    """The change rows of a table between two versions or two timestamps (inclusive).

    Each row carries the table's columns plus ``_change_type`` (insert, update_preimage,
    update_postimage, delete), ``_commit_version`` and ``_commit_timestamp``.

    >>> read_changes(spark, config, "silver/customers", from_version=1, to_version=3)  # doctest: +SKIP
    """
    if (from_version is None) == (from_timestamp is None):
        raise ChangeFeedError("give either a starting version or a starting timestamp")
    if (
        from_version is None
        and to_version is not None
        or from_timestamp is None
        and to_timestamp is not None
    ):
        raise ChangeFeedError(
            "an end bound must be of the same kind as the start (version or timestamp)"
        )
    table = config.table(table_of(table_key).key)  # ConfigError for an unknown key
    if not table_exists(spark, table):
        raise ChangeFeedError(f"table {table.key} does not exist yet; run the pipeline first")
    commits = history(spark, table).select("version", "timestamp", "operationParameters").collect()
    latest = max(commits, key=lambda c: c["version"])
    since = _cdf_enabled_since(commits)
    if since is None:
        raise ChangeFeedError(f"the change data feed is not enabled on {table.key}")
    reader = spark.read.format("delta").option("readChangeFeed", "true")
    if from_version is not None:
        if from_version < since:
            raise ChangeFeedError(
                f"version {from_version} of {table.key} is before version {since}, which enabled "
                f"the change data feed; start at {since} or later"
            )
        for bound in (from_version, to_version):
            if bound is not None and bound > latest["version"]:
                raise ChangeFeedError(
                    f"version {bound} is past the latest commit of {table.key} (version {latest['version']})"
                )
        if to_version is not None and to_version < from_version:
            raise ChangeFeedError(
                f"the range {from_version}..{to_version} is empty: the end is before the start"
            )
        reader = reader.option("startingVersion", str(from_version))
        if to_version is not None:
            reader = reader.option("endingVersion", str(to_version))
    else:
        start = _parse_timestamp(from_timestamp)
        if start > latest["timestamp"]:
            raise ChangeFeedError(
                f"{from_timestamp} is after the latest commit of {table.key} "
                f"(version {latest['version']} at {latest['timestamp']:%Y-%m-%dT%H:%M:%S.%f})"
            )
        reader = reader.option("startingTimestamp", from_timestamp)
        if to_timestamp is not None:
            if _parse_timestamp(to_timestamp) < start:
                raise ChangeFeedError(f"the range {from_timestamp}..{to_timestamp} is empty")
            reader = reader.option("endingTimestamp", to_timestamp)
    try:
        changes = (
            reader.load(table.path)
            if table.path is not None
            else reader.table(table.qualified_name)
        )
        changes.schema  # noqa: B018 - resolve now, so a bad range fails here with a clear message
    except PySparkException as error:
        raise ChangeFeedError(
            f"cannot read the change feed of {table.key}: {str(error).splitlines()[0]}"
        ) from error
    return changes


def _parse_timestamp(text: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ChangeFeedError(f"{text!r} is not an ISO-8601 timestamp") from None
    # PySpark hands timestamps (the commit times too) to Python as naive local times.
    return parsed.astimezone().replace(tzinfo=None) if parsed.tzinfo else parsed
