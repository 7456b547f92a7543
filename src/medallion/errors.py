"""The errors a run reports to people: one line, naming what failed and the way out."""

from __future__ import annotations


class PipelineError(RuntimeError):
    """A stream failed or cannot start; the message names the stream, its checkpoint and the
    cause."""
