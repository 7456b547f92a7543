"""Wall seconds a run's batch functions spend in each of their stages (validation, each
write...), added up over the batches of a run: the runner reports them (``RunReport``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class StageClock:
    """Wall seconds spent in each stage, added up over the batches of a run."""

    seconds: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @contextmanager
    def timing(self, stage: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                self.seconds[stage] = self.seconds.get(stage, 0.0) + time.monotonic() - started

    def __reduce__(self) -> tuple[Callable[[], StageClock], tuple[()]]:
        # A batch function sent to another process (Spark Connect's foreachBatch worker)
        # times its stages on that process's clock: a lock cannot be pickled.
        return _stage_clock, ()


# Stage times of the batches run in this process, read by the runner for its report.
STAGE_CLOCK = StageClock()


def _stage_clock() -> StageClock:
    return STAGE_CLOCK
