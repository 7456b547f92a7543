"""What a failed stream says: its error's first meaningful line, the Python exception a
``foreachBatch`` raised inside the JVM's text, and a batch interrupted by a stop in one line."""

from __future__ import annotations

import logging
import re

from medallion.config import Config
from medallion.errors import PipelineError, is_failure
from medallion.streams.flows import Flow
from medallion.streams.flows import flow as _flow
from medallion.streams.kafka_loss_hint import kafka_data_loss_hint
from medallion.streams.missing_files import missing_file_hint
from medallion.streams.table_schema import schema_mismatch_in


class _InterruptedBatchNote(logging.Filter):
    """Py4J logs the traceback of a foreachBatch that ``stop()`` interrupted; that batch is not
    committed and is replayed from its checkpoint, so say so in one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and is_failure(str(error), "stopped mid-batch"):
            record.msg, record.args, record.exc_info, record.exc_text = (
                "a batch in flight was interrupted by the stop; its stream replays it from "
                "the checkpoint when it next starts",
                (),
                None,
                None,
            )
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


logging.getLogger("py4j.clientserver").addFilter(_InterruptedBatchNote())


def error_summary(error: BaseException) -> str:
    """The first meaningful line of an error, without a JVM stack trace."""
    text = getattr(error, "desc", None) or str(error)
    mismatch = schema_mismatch_in(text)  # raised inside foreachBatch: its message, whole
    if mismatch:
        return mismatch
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "JVM stacktrace", "===")):
            if line.endswith(_TRACEBACK) and (cause := _python_cause(text)):
                # Raised by a foreachBatch function: what it raised, not just that it did.
                return f"{line[: -len(_TRACEBACK)].rstrip()[:300]} {cause[:700]}"
            return line[:500]
    return type(error).__name__


_TRACEBACK = "Traceback (most recent call last):"
_PYTHON_ERROR = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b(?::.*)?$")


def _python_cause(text: str) -> str | None:
    """The exception line of the Python traceback inside a JVM error's text (the last one:
    the exception that reached Spark), if there is one."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.rstrip().endswith(_TRACEBACK)), None)
    if start is None:
        return None
    cause = None
    for line in lines[start + 1 :]:
        if line.lstrip().startswith("at ") and line[:1].isspace():
            break  # the JVM's stack trace follows the Python one
        if _PYTHON_ERROR.match(line):
            cause = line.strip()
    return cause


def describe_failure(flow: Flow, config: Config, error: BaseException) -> PipelineError:
    """A PipelineError that says which stream failed, where, why, and the way out when
    there is a documented one."""
    text = getattr(error, "desc", None) or str(error)
    hints = [missing_file_hint(text), kafka_data_loss_hint(error, config)]
    way_out = "".join(f"; {hint}" for hint in hints if hint)
    writes = [key for name in (flow.name, *flow.fuses) for key in _flow(name).writes]
    return PipelineError(
        f"stream '{flow.name}' ({flow.reads} -> {', '.join(writes)}) failed; "
        f"checkpoint {config.checkpoint(flow.name)}: {error_summary(error)}{way_out}"
    )
