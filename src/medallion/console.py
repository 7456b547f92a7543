"""What medallion tells people on the console: one line per step, details behind ``-v``.

A step (a stream finished, a stop requested) is an INFO record of the module's own logger
marked as a step (:func:`step`). The CLI shows steps as plain lines on stderr, with warnings
and errors; stdout is kept for what a command prints as its result (a summary table, JSON).
``-v`` shows every record, timestamped. Without the CLI's configuration (a notebook, a library
call) logging is Python's default: steps are silent.

Tables and colour come from ``rich``. Colour is on only for a terminal, and off with
``NO_COLOR`` or ``TERM=dumb`` (rich's own rules). Output that is not a terminal is never
wrapped, so a table piped to a file keeps one line per row.
"""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TextIO

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

DETAIL_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_STEP = "medallion_step"
# A record for the log file and -v only: a failure's traceback (:func:`detail`).
_DETAIL = "medallion_detail"
# One rule of dashes under the header, and no other lines: plain ASCII, as a file wants it.
HEADER_RULE = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)
# Wide enough that no table or line piped to a file is wrapped.
_UNWRAPPED = 10_000
# A live display (medallion/streams/live.py) prints log records through its own console.
_live_console: Console | None = None


def console_for(stream: TextIO | None = None) -> Console:
    """A rich console writing to ``stream`` (stdout by default) at the time of each write:
    a terminal's width and colours, or unwrapped plain text."""
    target = stream or sys.stdout
    terminal = target.isatty() if hasattr(target, "isatty") else False
    # Text in a notebook too: rich would otherwise send it to Jupyter's display, not to stream.
    return Console(
        file=target,
        force_jupyter=False,
        width=None if terminal else _UNWRAPPED,
        highlight=False,
        soft_wrap=not terminal,
    )


def table(*columns: str, numeric: Iterable[str] = (), caption: str | None = None) -> Table:
    """A table in medallion's style: bold header, one rule under it, numbers to the right."""
    numbers = set(numeric)
    shown = Table(
        box=HEADER_RULE,
        header_style="bold",
        show_edge=False,
        pad_edge=False,
        caption=caption,
        caption_justify="left",
    )
    for name in columns:
        shown.add_column(name, justify="right" if name in numbers else "left", no_wrap=True)
    return shown


def rows_table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> Table:
    """Rows of a query as a table; columns whose values are all numbers go to the right."""
    rows = [tuple(row) for row in rows]
    numeric = [
        name
        for position, name in enumerate(columns)
        if rows
        and all(
            isinstance(row[position], (int, float, Decimal)) or row[position] is None
            for row in rows
        )
    ]
    shown = table(*columns, numeric=numeric)
    for row in rows:
        shown.add_row(*("null" if value is None else str(value) for value in row))
    return shown


def show(renderable: RenderableType, stream: TextIO | None = None) -> None:
    """Print a table (or any rich renderable) to stdout, or to ``stream``: styled on a
    terminal, else as :func:`plain` text."""
    target = stream or sys.stdout
    if target.isatty():
        console_for(target).print(renderable)
    else:
        print(plain(renderable), file=target)


def plain(renderable: RenderableType) -> str:
    """What ``renderable`` prints as plain text, without colour or wrapping."""
    buffer = io.StringIO()
    Console(
        file=buffer, width=_UNWRAPPED, color_system=None, highlight=False, force_jupyter=False
    ).print(renderable)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())


def error(message: str) -> None:
    """One line on stderr, in red on a terminal."""
    console_for(sys.stderr).print(Text(message, style="red"))


def _styled(record: logging.LogRecord, message: str) -> Text:
    if record.levelno >= logging.ERROR:
        return Text(message, style="bold red")
    if record.levelno >= logging.WARNING:
        return Text(message, style="yellow")
    text = Text(message)
    if getattr(record, _STEP, False):
        text.highlight_words(["  OK  "], style="green")
        text.highlight_words(["nothing new"], style="dim")
    return text


class _ConsoleHandler(logging.Handler):
    """Steps as they are; anything else with its time, level and logger."""

    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(DETAIL_FORMAT))
        if not verbose:
            self.addFilter(_shown_quietly)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage() if getattr(record, _STEP, False) else self.format(record)
            (_live_console or console_for(sys.stderr)).print(_styled(record, message))
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


def _shown_quietly(record: logging.LogRecord) -> bool:
    """Steps, warnings and errors; never a detail, nor py4j's own records (the traceback of a
    failed foreachBatch function, logged before the failure reaches the CLI's one line)."""
    if getattr(record, _DETAIL, False) or record.name.split(".")[0] == "py4j":
        return False
    return record.levelno >= logging.WARNING or getattr(record, _STEP, False)


def configure(verbose: bool) -> None:
    """Steps, warnings and errors on stderr; with ``verbose``, every record too."""
    root = logging.getLogger()
    root.handlers[:] = [_ConsoleHandler(verbose)]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.getLogger("py4j").setLevel(logging.WARNING)


def keep_details(path: Path) -> None:
    """Write every record (INFO and up, tracebacks included) to ``path`` too: the file that
    keeps the JVM's output, where a quiet console's hidden details are found."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _DetailFile)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(_DetailFile(path))


class _DetailFile(logging.FileHandler):
    """The log file's handler (:func:`keep_details`): INFO and up, with time and logger."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8")
        self.setFormatter(logging.Formatter(DETAIL_FORMAT))
        self.setLevel(logging.INFO)


def detail(logger: logging.Logger, message: str, *args: object) -> None:
    """Record ``message`` with the exception being handled, for the log file and ``-v`` only."""
    logger.info(message, *args, exc_info=True, extra={_DETAIL: True})


def use_live_console(console: Console | None) -> None:
    """Route log records through a live display's console (None: back to stderr)."""
    global _live_console
    _live_console = console


def step(logger: logging.Logger, message: str, *args: object) -> None:
    """Tell people that a step happened, in one line (an INFO record of ``logger``)."""
    logger.info(message, *args, extra={_STEP: True})


def plural(count: int, noun: str) -> str:
    """``1 batch``, ``2 batches``, ``1,204 rows``."""
    suffix = "" if count == 1 else ("es" if noun.endswith(("s", "sh", "ch", "x")) else "s")
    return f"{count:,} {noun}{suffix}"
