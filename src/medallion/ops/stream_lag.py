"""Where each stream that reads a table stands in it, and since when a file it still needs could
have been removed: what VACUUM must keep clear of (ops/maintain.py), and what ``status``
reports as lag."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.delta_log import commit_actions, commit_timestamp, committed_version
from medallion.ops.lineage import stream_readers
from medallion.pipelines import all_tables
from medallion.sql_names import TableRef
from medallion.streams import checkpoint_files as checkpoints
from medallion.tables import history, table_exists


@dataclass(frozen=True)
class StreamLag:
    """Where a stream stands in its Delta source, and since when files it needs could go.

    ``position`` is the version the stream resumes at: every earlier version is read; with
    ``index`` -1 nothing of ``position`` is read yet, with ``index`` >= 0 it is read up to that
    file (often completely). Files the stream still needs were added at ``position`` or later,
    so no commit older than ``position + 1`` can have removed them: ``next_commit_at`` (the time
    of version ``position + 1``, None while there is none) is what VACUUM must keep clear of.
    """

    stream: str
    table: str
    position: int
    index: int
    latest_version: int
    next_commit_at: datetime | None

    @property
    def versions_behind(self) -> int:
        """Versions of the source committed after the stream's position (the position's own
        version counts while none of it is read)."""
        unread_from = self.position if self.index < 0 else self.position + 1
        return max(0, self.latest_version - unread_from + 1)

    def hours_behind(self, now: datetime) -> float:
        """Hours since a commit could first have removed a file the stream still needs."""
        if self.next_commit_at is None:
            return 0.0
        return max(0.0, (now - self.next_commit_at).total_seconds() / 3600)


def stream_lags(spark: SparkSession, config: Config, table: TableRef) -> list[StreamLag]:
    """The position of every stream that reads ``table`` as a Delta source and has started."""
    if table.key not in all_tables() or not table_exists(spark, table):
        return []
    lags = []
    commits: _CommitTimes | None = None
    for flow in stream_readers(table.key):
        position = checkpoints.delta_position(config.checkpoint(flow.name))
        if position is None:
            continue
        commits = commits or _CommitTimes(spark, table)
        at = None
        if position.version + 1 <= commits.latest:
            at = commits.at(position.version + 1)
        lags.append(
            StreamLag(flow.name, table.key, position.version, position.index, commits.latest, at)
        )
    return lags


class _CommitTimes:
    """When each commit of a table was made: read from its log's commit files where they can
    be read from here (no Spark job), else from ``DESCRIBE HISTORY``."""

    def __init__(self, spark: SparkSession, table: TableRef) -> None:
        self._spark, self._table = spark, table
        self._history: dict[int, datetime] | None = None
        try:
            latest = committed_version(spark, table)
        except LookupError:
            latest = None
        self.latest = latest if latest is not None else max(self._from_history())

    def _from_history(self) -> dict[int, datetime]:
        if self._history is None:
            rows = history(self._spark, self._table).collect()
            # Collected as local times.
            self._history = {r.version: r.timestamp.astimezone(timezone.utc) for r in rows}
        return self._history

    def at(self, version: int) -> datetime:
        """When ``version`` was committed; a version the log's clean-up removed is as old as
        the oldest commit left, as old as can be told."""
        if self._history is None:
            try:
                stamp = commit_timestamp(commit_actions(self._spark, self._table, version))
            except LookupError:
                stamp = None
            if stamp is not None:
                return datetime.fromtimestamp(stamp / 1000, timezone.utc)
        commits = self._from_history()
        return commits.get(version, commits[min(commits)])
