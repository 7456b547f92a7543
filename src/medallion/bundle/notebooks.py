"""Execute a Jupyter notebook with parameters, as a job task does (nbclient and ipykernel).

Parameters follow papermill's convention: the cell tagged ``parameters`` holds the notebook's
defaults, and a cell inserted after it assigns the run's values. A first cell makes the
notebook's folder the working directory, as Databricks does, so ``../src`` resolves alike.

Kernels are started on demand and kept by key in :class:`Kernels`: notebooks run with the same
key share one kernel, and so one Spark session, as tasks on one job cluster share its Spark.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import nbformat
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class NotebookError(RuntimeError):
    """A notebook could not run: a cell failed, or its parameters are unusable."""


@dataclass
class NotebookResult:
    """What one execution did: its printed text, its error (None when it succeeded)."""

    path: Path
    output_path: Path | None
    seconds: float
    text: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def inject_parameters(nb: nbformat.NotebookNode, params: Mapping[str, str], cwd: Path):
    """A copy of ``nb`` that runs in ``cwd``, from an empty namespace, with ``params`` assigned
    after its parameters cell.

    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    >>> nb.cells[0].metadata["tags"] = ["parameters"]
    >>> [c.source for c in inject_parameters(nb, {"x": "2"}, Path("/tmp")).cells][1:]
    ['x = 1', "# Parameters of this run\\nx = '2'"]
    """
    bad = [name for name in params if not _IDENTIFIER.fullmatch(name)]
    if bad:
        raise NotebookError(f"parameter names must be Python identifiers: {', '.join(bad)}")
    copy = nbformat.from_dict(nb)
    cells = list(copy.cells)
    tagged = [i for i, c in enumerate(cells) if PARAMETERS_TAG in c.metadata.get("tags", [])]
    assignments = "\n".join(f"{name} = {str(value)!r}" for name, value in params.items())
    injected = nbformat.v4.new_code_cell(f"# Parameters of this run\n{assignments}")
    injected.metadata["tags"] = [INJECTED_TAG]
    position = tagged[0] + 1 if tagged else 0
    if params:
        cells.insert(position, injected)
    # A shared kernel keeps the variables of the notebook it ran before (a change-data task's
    # ``flows``, say): each notebook starts without them, as each task does on Databricks.
    # Only the variables it defined go (``%reset_selective``), not IPython's own names nor
    # ``__main__``'s (Spark Connect's foreachBatch pickles by them); modules and so the Spark
    # session stay.
    start = (
        'get_ipython().run_line_magic("reset_selective", "-f .")\n'
        f"import os\nos.chdir({str(cwd)!r})"
    )
    chdir = nbformat.v4.new_code_cell(start)
    chdir.metadata["tags"] = [INJECTED_TAG]
    copy.cells = [chdir, *cells]
    return copy


def _error_message(error: CellExecutionError) -> str:
    name, value = getattr(error, "ename", None), getattr(error, "evalue", None)
    text = f"{name}: {value}" if name else str(error).strip().splitlines()[-1]
    return _ANSI.sub("", text)[:2000]


def _printed_text(nb: nbformat.NotebookNode) -> str:
    """What the cells printed to stdout (Spark's own logging goes to stderr)."""
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stdout":
                parts.append(output.get("text", ""))
    return "".join(parts)


class Kernels:
    """Python kernels by key, started on first use and shut down by :meth:`close`.

    With ``shared=True`` every key gets the same kernel: one Spark session for everything
    (the tests run all jobs that way). A kernel's own output, such as the JVM's messages after
    a cell ends, goes to ``log_path`` (by default nowhere).
    """

    def __init__(
        self,
        kernel_name: str = "python3",
        env: Mapping[str, str] | None = None,
        shared: bool = False,
        log_path: str | Path | None = None,
    ):
        self.kernel_name = kernel_name
        self.env = dict(os.environ if env is None else env)
        self.shared = shared
        self.log_path = Path(log_path) if log_path else None
        self._managers: dict[str, AsyncKernelManager] = {}
        self._logs: list = []

    def start_options(self) -> dict:
        """Keyword arguments for starting a kernel: its environment and where its output goes."""
        if self.log_path is None:
            sink = open(os.devnull, "wb")  # noqa: SIM115 - closed with the kernels
        else:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            sink = open(self.log_path, "ab")  # noqa: SIM115 - closed with the kernels
        self._logs.append(sink)
        return {"env": self.env, "stdout": sink, "stderr": sink}

    def __enter__(self) -> Kernels:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def manager(self, key: str) -> AsyncKernelManager:
        """The kernel manager of ``key``; its kernel starts when a notebook first runs on it."""
        key = "shared" if self.shared else key
        if key not in self._managers:
            self._managers[key] = AsyncKernelManager(kernel_name=self.kernel_name)
        return self._managers[key]

    def interrupt_all(self) -> None:
        """Send every running kernel an interrupt (SIGINT): a streaming task stops cleanly."""
        for manager in self._managers.values():
            if manager.has_kernel:
                run_sync(manager.interrupt_kernel)()

    def close(self) -> None:
        """Shut every kernel down (and with it its Spark session)."""
        for manager in self._managers.values():
            if manager.has_kernel:
                run_sync(manager.shutdown_kernel)(now=False)
        self._managers.clear()
        for sink in self._logs:
            sink.close()
        self._logs.clear()


def execute_notebook(
    path: str | Path,
    params: Mapping[str, str],
    kernels: Kernels,
    kernel_key: str = "default",
    output_path: str | Path | None = None,
    timeout: float | None = None,
) -> NotebookResult:
    """Run the notebook at ``path`` with ``params`` on the kernel of ``kernel_key``.

    The executed copy, with its outputs, is written to ``output_path`` when given. A failing
    cell does not raise: the result's ``error`` says which error it raised.
    """
    path = Path(path).resolve()
    nb = inject_parameters(nbformat.read(path, as_version=4), params, path.parent)
    manager = kernels.manager(kernel_key)
    client = NotebookClient(
        nb,
        km=manager,
        timeout=timeout,
        kernel_name=kernels.kernel_name,
        resources={"metadata": {"path": str(path.parent)}},
    )
    started = time.monotonic()
    error = None
    try:
        options = {} if manager.has_kernel else kernels.start_options()
        client.execute(cwd=str(path.parent), **options)
    except CellExecutionError as failure:
        error = _error_message(failure)
    except (CellTimeoutError, DeadKernelError) as failure:
        error = f"{type(failure).__name__}: {failure}"[:2000]
    finally:
        if client.kc is not None:
            client.kc.stop_channels()
    if output_path is not None:
        output_path = Path(output_path)
        output_path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(client.nb, output_path)
    return NotebookResult(
        path, output_path, time.monotonic() - started, _printed_text(client.nb), error
    )
