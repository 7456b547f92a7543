"""Starting a flow before the fused stream it reads has finished an available-now run.

A fused head's batch goes on after it commits a table: ``bronze_events`` commits silver, then
adds the batch to gold's hourly metrics and users. A flow that reads silver (the revenue
stream) need not wait for that gold. It starts once every table it reads from running heads
has a commit newer than the run's start, and its inputs' versions are noted as it starts.
When the heads have finished, it is started again only if an input moved on since then.

Over Spark Connect flows run one at a time, and a table without a readable ``_delta_log``
(a catalog table) cannot be watched without a Spark job: such flows wait, as before.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence

from pyspark.sql import SparkSession

from medallion.config import Config
from medallion.delta_log import committed_version
from medallion.streams.flows import Flow

# How often the watched tables' logs are listed while a flow waits to start early.
POLL_SECONDS = 0.5

Versions = dict[str, int | None]


class EarlyStarts:
    """Which waiting flows may start before the heads they read from have finished."""

    def __init__(
        self,
        spark: SparkSession,
        config: Config,
        flows: Sequence[Flow],
        reads_from: Mapping[str, Mapping[str, set[str]]],
    ) -> None:
        """``reads_from``: for each flow, the flows of this run that write what it reads, with
        the keys it reads from each."""
        self.spark, self.config = spark, config
        heads = {f.name for f in flows if f.fuses}
        readers = {
            f.name: writers
            for f in flows
            for writers in [{w: keys for w, keys in reads_from[f.name].items() if w in heads}]
            if writers
        }
        # A flow whose tables' logs cannot be listed is not watched: it waits, as before.
        self.baseline = {
            f: versions
            for f, writers in readers.items()
            if (versions := self._versions(f, _keys(writers))) is not None
        }
        self.watched = {f: readers[f] for f in self.baseline}
        self.started_at: dict[str, Versions] = {}  # flows started early: their inputs' versions
        self.next_poll = 0.0

    def ready(self, waiting: Sequence[Flow], pending: Mapping[str, Collection[str]]) -> list[Flow]:
        """The flows of ``waiting`` that may start now, not having run early yet: those whose
        ``pending`` writers are all watched heads, each with a new commit of what it reads."""
        now = time.monotonic()
        if now < self.next_poll:
            return []
        self.next_poll = now + POLL_SECONDS
        ready = []
        for flow in waiting:
            writers = self.watched.get(flow.name)
            if not writers or flow.name in self.started_at or not pending[flow.name]:
                continue
            if not set(pending[flow.name]) <= set(writers):
                continue
            keys = _keys({w: writers[w] for w in pending[flow.name]})
            baseline, current = self.baseline[flow.name], self._versions(flow.name, keys)
            if current is not None and all(_newer(current[k], baseline[k]) for k in keys):
                ready.append(flow)
        return ready

    def starting(self, flow: Flow) -> None:
        """Note the versions of ``flow``'s inputs as it starts early (before its query plans its
        end: a commit in between is then read twice over, never missed)."""
        self.started_at[flow.name] = self._versions(flow.name, flow.inputs) or {}

    def ran_early(self, name: str) -> bool:
        return name in self.started_at

    def read_everything(self, flow: Flow) -> bool:
        """Whether ``flow``, which ran early, has read every input as it is now."""
        return self._versions(flow.name, flow.inputs) == self.started_at.get(flow.name)

    def _versions(self, name: str, keys: Collection[str]) -> Versions | None:
        """The committed versions of these tables (None for a table not created yet), or None
        when one of them cannot be read from its log."""
        try:
            return {k: committed_version(self.spark, self.config.table(k)) for k in keys}
        except LookupError:
            return None


def _keys(writers: Mapping[str, set[str]]) -> list[str]:
    return sorted({key for keys in writers.values() for key in keys})


def _newer(version: int | None, before: int | None) -> bool:
    return version is not None and (before is None or version > before)
