"""A continuous run in this process: ``run_streaming`` in a thread on the shared session,
stopped through its stop event, as ``medallion run --stream`` stops on SIGTERM."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from medallion.config import Config
from medallion.declarations import Flow
from medallion.streams.run_report import RunReport
from medallion.streams.runner import run_streaming


class StreamInThread:
    """``run_streaming(spark, config, stop, flows)`` in a daemon thread.

    Use it as a context manager: leaving the block stops the run (each query after its batch in
    flight) and re-raises what the run raised. :attr:`report` is the run's summary once it has
    stopped.
    """

    def __init__(
        self, spark, config: Config, flows: Sequence[Flow] | None = None, watch=None
    ) -> None:
        self.stop_event = threading.Event()
        self.report: RunReport | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(spark, config, flows, watch), daemon=True
        )

    def _run(self, spark, config: Config, flows, watch) -> None:
        try:
            self.report = run_streaming(spark, config, self.stop_event, flows, watch=watch)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            self.error = error

    @property
    def running(self) -> bool:
        """True while the run has neither stopped nor failed."""
        return self._thread.is_alive()

    def start(self) -> StreamInThread:
        self._thread.start()
        return self

    def stop(self, timeout: float = 300) -> RunReport | None:
        """Stop the run and wait for it; raises what the run raised."""
        self.stop_event.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the run did not stop"
        if self.error is not None:
            raise self.error
        return self.report

    def __enter__(self) -> StreamInThread:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        if exc_info[0] is None:
            self.stop()
        else:  # the test failed: stop the run, and keep the test's own error
            self.stop_event.set()
            self._thread.join(300)
