"""``medallion job list`` and ``medallion job run``: the bundle's jobs, run here or deployed."""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

from medallion import console
from medallion.bundle.local_run import JobFailed, run_job_locally
from medallion.bundle.resolve import LOCAL_TARGET, Bundle, BundleError
from medallion.bundle.workspace import find_job_id, run_job, workspace_client
from medallion.cli_arguments import (
    LAKE_VARIABLE,
    LANDING_VARIABLE,
    add_output_argument,
    print_json,
)
from medallion.cli_parser import flags_anywhere


def _pairs(values: Sequence[str] | None, what: str) -> dict[str, str]:
    out = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise BundleError(f"{what} takes NAME=VALUE, not {item!r}")
        out[name] = value
    return out


def add_job_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``medallion job list`` and ``medallion job run`` to the CLI's subcommands."""
    bundle = (("--bundle",), {"help": "folder of databricks.yml (default: found from here)"})
    job = subparsers.add_parser(
        "job",
        help="list the bundle's jobs, or run one (here or deployed)",
        anywhere=[flags_anywhere(bundle)],  # job run X --bundle DIR too
    )
    job.add_argument(*bundle[0], **bundle[1])
    actions = job.add_subparsers(dest="job_command", required=True)
    listing = actions.add_parser("list", help="one line per job: its key, then its tasks")
    listing.add_argument("--target", default=LOCAL_TARGET, help="bundle target")
    add_output_argument(listing)
    run = actions.add_parser("run", help="run a job: its notebooks here, or a deployed job")
    run.add_argument("job_key", help="the job's key in the bundle (medallion job list)")
    run.add_argument(
        "--target",
        default=LOCAL_TARGET,
        help="local: run the notebooks here; another target: run the deployed job",
    )
    run.add_argument("--stream", action="store_true", help="continuous jobs: run until stopped")
    run.add_argument("--var", action="append", metavar="NAME=VALUE", help="set a bundle variable")
    run.add_argument("--param", action="append", metavar="NAME=VALUE", help="set a job parameter")
    run.add_argument(
        "--landing",
        default=os.environ.get(LANDING_VARIABLE) or None,
        help="local runs: the landing folder, var landing ($MEDALLION_LANDING)",
    )
    run.add_argument(
        "--lake",
        default=os.environ.get(LAKE_VARIABLE) or None,
        help="local runs: the lake folder, var lake ($MEDALLION_LAKE)",
    )
    run.add_argument("--output", help="local runs: folder for the executed notebooks")
    run.add_argument("--profile", help="deployed runs: Databricks CLI profile")
    run.add_argument("--job-id", type=int, help="deployed runs: the job's id, if not found by name")
    run.add_argument(
        "--poll", type=float, default=10.0, help="deployed runs: seconds between state checks"
    )
    for parser in (job, listing, run):
        parser.epilog = "examples:\n  medallion job list\n  medallion job run medallion_pipeline"


def cmd_job(args: argparse.Namespace) -> int:
    """``medallion job ...``: list the jobs, or run one; returns the exit code."""
    logging.getLogger("traitlets").setLevel(logging.WARNING)  # nbclient's per-notebook notes
    bundle = Bundle(args.bundle) if args.bundle else Bundle()
    if args.job_command == "list":
        jobs = {
            key: [t.key for t in job.task_order()] for key, job in bundle.jobs(args.target).items()
        }
        if args.output == "json":
            print_json([{"job": key, "tasks": tasks} for key, tasks in jobs.items()])
            return 0
        listed = console.table("job", "tasks, in order")
        for key, tasks in jobs.items():
            listed.add_row(key, " ".join(tasks))
        console.show(listed)
        return 0
    variables = _pairs(args.var, "--var")
    for name in ("landing", "lake"):
        if getattr(args, name):
            variables[name] = os.path.abspath(getattr(args, name))
    params = _pairs(args.param, "--param")
    if args.target != LOCAL_TARGET:
        return _run_deployed(bundle, args, variables, params)
    job = bundle.job(args.job_key, args.target, overrides=variables)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    output = (
        Path(args.output) if args.output else bundle.root / "build" / "job-runs" / job.key / stamp
    )
    kind = "streaming until stopped" if args.stream else "available now"
    print(f"job {job.key} ({kind}); executed notebooks in {output}", flush=True)
    try:
        runs = run_job_locally(
            job, params, stream=args.stream, output_dir=output, echo=lambda s: print(s, flush=True)
        )
    except JobFailed as failure:
        console.error(f"medallion job run: {failure}")
        return 1
    print(f"job {job.key}: {len(runs)} tasks succeeded")
    return 0


def _run_deployed(bundle: Bundle, args: argparse.Namespace, variables, params) -> int:
    client = workspace_client(args.profile)
    job_id = args.job_id
    if job_id is None:
        user = client.current_user.me().user_name or ""
        job = bundle.job(args.job_key, args.target, overrides=variables, user_name=user)
        job_id = find_job_id(client, bundle.deployed_name(job, args.target, user))
    outcome = run_job(client, job_id, params or None, poll_seconds=args.poll)
    if not outcome.succeeded:
        console.error(f"medallion job run: {outcome.describe()}")
        return 1
    return 0
