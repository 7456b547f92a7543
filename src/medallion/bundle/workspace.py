"""Workspace-side steps over databricks-sdk: land sample data in a Volume, run a deployed job.

The client comes from the SDK's unified authentication: a profile of ``~/.databrickscfg``,
``DATABRICKS_HOST`` with a token or OAuth settings in the environment, or a notebook's own
context. Nothing here stores or prints a credential.

The endpoints used are few: ``/api/2.0/fs/directories`` and ``/api/2.0/fs/files`` (Files API),
``/api/2.2/jobs/list``, ``/api/2.2/jobs/run-now``, ``/api/2.2/jobs/runs/get`` (Jobs API) and
``/api/2.0/preview/scim/v2/Me``. The tests run them against a local HTTP server.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from medallion.errors import ConfigError
from medallion.pipelines import generate_input

VOLUMES_PREFIX = "/Volumes/"
TERMINAL_STATES = {"TERMINATED", "SKIPPED", "INTERNAL_ERROR"}


def is_volume_path(path: str) -> bool:
    """True for a Unity Catalog volume path (``/Volumes/<catalog>/<schema>/<volume>/...``)."""
    return path.startswith(VOLUMES_PREFIX)


def needs_files_api(path: str) -> bool:
    """True for a volume path written from off Databricks, where only the Files API reaches it
    (on a Databricks cluster a volume is also a local folder, ``/Volumes/...``)."""
    return is_volume_path(path) and "DATABRICKS_RUNTIME_VERSION" not in os.environ


def workspace_client(profile: str | None = None):
    """A ``WorkspaceClient`` from the SDK's unified authentication (optionally a profile)."""
    try:
        # deferred: loads databricks.sdk
        from databricks.sdk import WorkspaceClient
    except ImportError:
        raise ConfigError(
            "databricks-sdk is not installed: pip install 'medallion[databricks]'"
        ) from None
    return WorkspaceClient(profile=profile) if profile else WorkspaceClient()


def upload_folder(client, local: str | Path, remote: str, overwrite: bool = True) -> list[str]:
    """Upload every visible file under ``local`` to the volume folder ``remote``.

    Files whose names start with ``.`` or ``_`` are skipped, as the file sources skip them.
    Each file is one single-shot upload, which becomes visible only once it is complete.
    Returns the remote paths, in order.
    """
    if not is_volume_path(remote):
        raise ConfigError(f"not a volume path: {remote!r} (use /Volumes/<catalog>/<schema>/...)")
    # deferred: loads databricks.sdk
    from databricks.sdk.errors import NotFound

    local = Path(local)
    uploaded = []
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        relative = path.relative_to(local)
        if any(part.startswith((".", "_")) for part in relative.parts):
            continue
        target = f"{remote.rstrip('/')}/{relative.as_posix()}"
        try:
            client.files.create_directory(target.rsplit("/", 1)[0])
            with path.open("rb") as handle:
                client.files.upload(target, handle, overwrite=overwrite)
        except NotFound:
            volume = "/".join(remote.split("/")[:5])
            raise ConfigError(
                f"cannot write {target}: is there a volume {volume}? A pipeline job's first "
                "run creates its volumes, or CREATE VOLUME creates one"
            ) from None
        uploaded.append(target)
    return uploaded


def generate_to_volume(
    client, landing: str, pipelines: Sequence[str] = (), **generate_args: object
) -> dict[str, list[str]]:
    """Generate sample input of ``pipelines`` (default: all;
    :func:`medallion.pipelines.generate_input`) into a volume's landing.

    ``client`` defaults to :func:`workspace_client`. The files are written to a local temporary folder, then uploaded with the Files API.
    Returns the remote paths per dataset.
    """
    client = client or workspace_client()
    with tempfile.TemporaryDirectory(prefix="medallion-landing-") as folder:
        written = generate_input(folder, pipelines, **generate_args)
        remote = upload_folder(client, folder, landing)
    return {
        dataset: [r for r in remote if f"/{dataset}/" in r[len(landing) :]] for dataset in written
    }


def find_job_id(client, name: str) -> int:
    """The id of the one job called ``name``; a clear error when there is none or several."""
    matches = [job.job_id for job in client.jobs.list(name=name)]
    if not matches:
        raise ConfigError(f"no job named {name!r} in the workspace: deploy the bundle first")
    if len(matches) > 1:
        ids = ", ".join(str(m) for m in matches)
        raise ConfigError(f"several jobs are named {name!r} ({ids}): pass --job-id")
    return int(matches[0])


@dataclass
class RunOutcome:
    """How a job run ended."""

    run_id: int
    life_cycle_state: str
    result_state: str | None
    message: str = ""
    url: str | None = None
    failed_tasks: list[str] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.result_state == "SUCCESS"

    def describe(self) -> str:
        """One line: the run, how it ended, the failed tasks and the run's page."""
        text = f"run {self.run_id} ended {self.life_cycle_state}/{self.result_state}"
        if self.failed_tasks:
            text += f"; failed tasks: {', '.join(self.failed_tasks)}"
        if self.message:
            text += f": {self.message}"
        return text + (f" ({self.url})" if self.url else "")


def _name(value: object) -> str | None:
    return None if value is None else str(getattr(value, "value", value))


def run_job(
    client,
    job_id: int,
    job_parameters: Mapping[str, str] | None = None,
    poll_seconds: float = 10.0,
    echo: Callable[[str], None] = print,
    timeout_seconds: float | None = None,
) -> RunOutcome:
    """Start a run of a deployed job and follow it, printing each change of state, until it
    ends (or ``timeout_seconds`` pass). Returns how it ended."""
    started = client.jobs.run_now(job_id=job_id, job_parameters=dict(job_parameters or {}) or None)
    run_id = started.response.run_id
    echo(f"started run {run_id} of job {job_id}")
    deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
    last = None
    while True:
        run = client.jobs.get_run(run_id)
        state = run.state
        life_cycle = _name(state.life_cycle_state) if state else None
        result = _name(state.result_state) if state else None
        tasks = {
            t.task_key: _name(t.state.result_state) if t.state else None for t in run.tasks or []
        }
        now = (life_cycle, result, tuple(sorted(tasks.items(), key=lambda kv: kv[0])))
        if now != last:
            done = ", ".join(f"{k}={v}" for k, v in tasks.items() if v) or "none finished"
            echo(f"run {run_id}: {life_cycle}{'/' + result if result else ''} (tasks: {done})")
            last = now
        if life_cycle in TERMINAL_STATES:
            failed = [k for k, v in tasks.items() if v and v != "SUCCESS"]
            message = (state.state_message or "") if state else ""
            return RunOutcome(run_id, life_cycle, result, message, run.run_page_url, failed)
        if deadline is not None and time.monotonic() > deadline:
            return RunOutcome(run_id, life_cycle or "UNKNOWN", None, "still running (timed out)")
        time.sleep(poll_seconds)
