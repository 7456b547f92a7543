"""A bundle job run on this machine: :func:`run_job_locally` runs a job's tasks in dependency
order by executing their real notebooks with the job's parameters against local delta-spark;
tasks that share a job cluster share a kernel (so one Spark session), as they share a cluster on
Databricks. A continuous job runs with available-now triggers unless ``stream`` is set, in which
case its tasks run side by side until SIGINT or SIGTERM.
"""

from __future__ import annotations

import json
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from medallion.bundle.resolve import TRIGGER_PARAMETER, BundleError, Job, Task, task_parameters

if TYPE_CHECKING:
    from medallion.bundle.notebooks import Kernels

# The package whose wheel tasks run locally (python_wheel_task.package_name).
WHEEL_PACKAGE = "medallion"


class JobFailed(RuntimeError):
    """A task of a job run failed; the message names the task and its error."""


@dataclass
class TaskRun:
    """How one task of a local run went: SUCCESS, FAILED or SKIPPED."""

    key: str
    state: str
    seconds: float = 0.0
    error: str | None = None
    output: Path | None = None
    text: str = ""


def run_job_locally(
    job: Job,
    params: Mapping[str, str] | None = None,
    *,
    stream: bool = False,
    output_dir: str | Path | None = None,
    kernels: Kernels | None = None,
    echo: Callable[[str], None] = print,
    timeout: float | None = None,
) -> list[TaskRun]:
    """Run ``job``'s tasks here, in dependency order, and raise :class:`JobFailed` if one fails.

    ``params`` override the job's parameters. A task whose upstream failed is skipped, as on
    Databricks; the others still run. ``kernels`` (a :class:`~medallion.bundle.notebooks.Kernels`)
    lets several runs share kernels; by default each run starts and stops its own.
    """
    # deferred: loads nbformat, jupyter_client
    from medallion.bundle.notebooks import Kernels

    params = dict(params or {})
    if stream and not job.continuous:
        raise BundleError(f"job {job.key} is not continuous: --stream applies to continuous jobs")
    if job.continuous:
        params.setdefault(TRIGGER_PARAMETER, "processing_time" if stream else "available_now")
    unsupported = [t.key for t in job.tasks if t.notebook is None and not _runs_here(t)]
    if unsupported:
        raise BundleError(
            f"job {job.key}: tasks {', '.join(unsupported)} are neither notebook tasks nor "
            f"wheel tasks of {WHEEL_PACKAGE}; only those run locally"
        )
    missing = [
        f"{t.key} ({t.notebook})" for t in job.tasks if t.notebook and not t.notebook.is_file()
    ]
    if missing:
        raise BundleError(f"job {job.key}: notebooks not found for {', '.join(missing)}")
    order = job.task_order()
    own = kernels is None
    log = Path(output_dir) / "kernels.log" if output_dir else None
    pool = Kernels(log_path=log) if own else kernels
    try:
        if stream:
            runs = _run_side_by_side(job, order, params, pool, output_dir, echo)
        else:
            runs = _run_in_order(job, order, params, pool, output_dir, echo, timeout)
    finally:
        if own:
            pool.close()
    failed = [r for r in runs if r.state == "FAILED"]
    if failed:
        skipped = [r.key for r in runs if r.state == "SKIPPED"]
        tail = f"; skipped: {', '.join(skipped)}" if skipped else ""
        first = failed[0]
        raise JobFailed(f"job {job.key}: task {first.key} failed: {first.error}{tail}")
    return runs


def _runs_here(task: Task) -> bool:
    """A wheel task of this package: it runs here as a call of its entry point."""
    wheel = task.spec.get("python_wheel_task") or {}
    return wheel.get("package_name") == WHEEL_PACKAGE and task.entry_point is not None


def _entry_point_notebook(task: Task, folder: Path) -> Path:
    """A one-cell notebook that calls a wheel task's entry point with its parameters, as
    Databricks does (``--name=value`` arguments): the task then runs in a kernel like the
    notebook tasks, sharing the job cluster's session."""
    # deferred: loads nbformat
    import nbformat

    call = (
        "import json\n"
        "from importlib.metadata import entry_points\n\n"
        f"(entry,) = entry_points(group='console_scripts', name={task.entry_point!r})\n"
        "arguments = [f'--{name}={value}' for name, value in json.loads(params).items()]\n"
        "entry.load()(arguments)"
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(call)])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{task.key}.entry_point.ipynb"
    nbformat.write(notebook, path)
    return path


def _run_task(job, task, params, pool, output_dir, timeout, kernel_key=None) -> TaskRun:
    # deferred: loads nbformat, jupyter_client
    from medallion.bundle.notebooks import execute_notebook

    output = Path(output_dir) / f"{task.key}.ipynb" if output_dir else None
    parameters = task_parameters(job, task, params)
    with tempfile.TemporaryDirectory(prefix="medallion-task-") as scratch:
        notebook = task.notebook
        if notebook is None:  # a wheel task: its parameters become the params dict of the cell
            notebook = _entry_point_notebook(task, Path(output_dir or scratch))
            parameters = {"params": json.dumps(parameters)}
        result = execute_notebook(
            notebook,
            parameters,
            pool,
            kernel_key=kernel_key or task.job_cluster_key or "default",
            output_path=output,
            timeout=timeout,
        )
    state = "SUCCESS" if result.ok else "FAILED"
    return TaskRun(task.key, state, result.seconds, result.error, output, result.text)


def _report(run: TaskRun, echo: Callable[[str], None]) -> None:
    echo(f"task {run.key}: {run.state} in {run.seconds:.1f} s")
    for line in run.text.rstrip().splitlines():
        echo(f"  {line}")
    if run.error:
        echo(f"  error: {run.error}")


def _run_in_order(job, order, params, pool, output_dir, echo, timeout) -> list[TaskRun]:
    runs: dict[str, TaskRun] = {}
    for task in order:
        blocked = [d for d in task.depends_on if runs[d].state != "SUCCESS"]
        if blocked:
            runs[task.key] = TaskRun(task.key, "SKIPPED", error=f"upstream {blocked[0]} failed")
            echo(f"task {task.key}: SKIPPED (upstream {', '.join(blocked)} did not succeed)")
            continue
        what = task.notebook.name if task.notebook else f"entry point {task.entry_point}"
        echo(f"task {task.key}: running {what}")
        runs[task.key] = _run_task(job, task, params, pool, output_dir, timeout)
        _report(runs[task.key], echo)
    return list(runs.values())


def _run_side_by_side(job, order, params, pool, output_dir, echo) -> list[TaskRun]:
    """Every task at once, each on its own kernel, until SIGINT or SIGTERM interrupts them."""
    # deferred: loads nbformat, jupyter_client
    from medallion.bundle.notebooks import Kernels

    kernels = Kernels(pool.kernel_name, pool.env, log_path=pool.log_path)
    runs: dict[str, TaskRun] = {}
    stopping = threading.Event()

    def run(task: Task) -> None:
        runs[task.key] = _run_task(job, task, params, kernels, output_dir, None, task.key)

    def request_stop(signum: int, _frame: object) -> None:
        echo(f"received {signal.Signals(signum).name}: stopping every task after its batch")
        stopping.set()
        kernels.interrupt_all()

    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    threads = [threading.Thread(target=run, args=(t,), name=t.key) for t in order]
    try:
        for thread in threads:
            echo(f"task {thread.name}: streaming (stop with Ctrl-C or SIGTERM)")
            thread.start()
        while any(t.is_alive() for t in threads):
            time.sleep(0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        kernels.close()
    for task in order:
        _report(runs[task.key], echo)
    return [runs[t.key] for t in order]
