"""A foreachBatch interrupted by a stop is reported in one line, not Py4J's traceback."""

from __future__ import annotations

import logging

import medallion.streams.stream_errors  # noqa: F401  (installs the filter on Py4J's logger)

PY4J = logging.getLogger("py4j.clientserver")


def _log_proxy_failure(error: Exception) -> None:
    try:
        raise error
    except Exception:
        PY4J.exception(
            "There was an exception while executing the Python Proxy on the Python Side."
        )


def test_an_interrupted_batch_is_one_info_line(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="py4j.clientserver"):
        _log_proxy_failure(
            RuntimeError(
                "An error occurred while calling o6401.count.\n"
                ": java.lang.InterruptedException\n\tat java.base/..."
            )
        )
    (record,) = caplog.records
    assert record.levelno == logging.INFO and record.exc_info is None
    assert "interrupted by the stop" in record.getMessage()
    assert "Traceback" not in caplog.text


def test_any_other_failure_keeps_its_traceback(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="py4j.clientserver"):
        _log_proxy_failure(ValueError("a real bug in a batch function"))
    (record,) = caplog.records
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert "Traceback" in caplog.text and "a real bug" in caplog.text
