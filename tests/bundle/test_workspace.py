"""The workspace helpers (databricks-sdk) against a fake workspace on 127.0.0.1.

No Databricks workspace is reachable from the test machines: the fake speaks the few endpoints
the helpers use (Files API, Jobs API, SCIM Me), with the SDK's own client and authentication.
"""

from __future__ import annotations

from pathlib import Path

from bundle_support import ROOT

from medallion.cli import main
from medallion.pipelines import generate_input

PIPELINE = "[dev jane_doe] medallion_pipeline"


def run_state(life_cycle: str, result: str | None = None, tasks: dict | None = None) -> dict:
    state = {"life_cycle_state": life_cycle, "state_message": ""}
    if result:
        state["result_state"] = result
    task_states = [
        {"task_key": key, "state": {"life_cycle_state": "TERMINATED", "result_state": value}}
        for key, value in (tasks or {}).items()
    ]
    return {"state": state, "tasks": task_states, "run_page_url": "http://workspace/run/9001"}


def test_generate_to_a_volume_uploads_the_same_files_through_the_files_api(
    workspace, tmp_path, capsys
):
    landing = "/Volumes/main/medallion/landing"
    args = ["--records", "50", "--customers", "5", "--files", "2", "--seed", "9"]
    assert main(["generate", "--landing", landing, *args]) == 0
    assert "events: 3 files in /Volumes/main/medallion/landing/events" in capsys.readouterr().out

    local = generate_input(str(tmp_path), records=50, customers=5, files=2, seed=9)
    expected = {
        f"{landing}/{dataset}/{path.rsplit('/', 1)[1]}": Path(path).read_bytes()
        for dataset, paths in local.items()
        for path in paths
    }
    assert workspace.files == expected
    assert {f"{landing}/events", f"{landing}/customers"} <= workspace.directories
    assert f"{landing}/device_readings" in workspace.directories  # every pipeline's input


def test_generate_to_a_missing_volume_fails_with_the_path(workspace, capsys):
    assert main(["generate", "--landing", "/Volumes/main/nope/landing", "--events", "5"]) == 2
    assert "is there a volume /Volumes/main/nope/landing?" in capsys.readouterr().err
    assert workspace.files == {}


def test_job_run_on_a_target_starts_the_deployed_job_and_follows_it(workspace, capsys):
    workspace.jobs = {41: "medallion_pipeline", 42: PIPELINE}
    workspace.run_states = [
        run_state("PENDING"),
        run_state("RUNNING", tasks={"bronze": "SUCCESS"}),
        run_state(
            "TERMINATED", "SUCCESS", {"bronze": "SUCCESS", "silver": "SUCCESS", "gold": "SUCCESS"}
        ),
    ]
    command = ["job", "--bundle", str(ROOT), "run", "medallion_pipeline", "--target", "dev"]
    assert main([*command, "--poll", "0.01", "--param", "max_files_per_trigger=3"]) == 0
    out = capsys.readouterr().out
    assert "started run 9001 of job 42" in out
    assert "run 9001: PENDING" in out
    assert "run 9001: TERMINATED/SUCCESS" in out
    assert workspace.run_requests == [
        {"job_id": 42, "job_parameters": {"max_files_per_trigger": "3"}}
    ]
    assert "GET /api/2.0/preview/scim/v2/Me" in workspace.requests


def test_a_failed_deployed_run_exits_non_zero_naming_the_failed_task(workspace, capsys):
    workspace.jobs = {42: PIPELINE}
    workspace.run_states = [
        run_state(
            "TERMINATED",
            "FAILED",
            {"bronze": "SUCCESS", "silver": "FAILED", "gold": "UPSTREAM_FAILED"},
        ),
    ]
    command = ["job", "--bundle", str(ROOT), "run", "medallion_pipeline", "--target", "dev"]
    assert main([*command, "--poll", "0.01"]) == 1
    err = capsys.readouterr().err
    assert "TERMINATED/FAILED" in err and "failed tasks: silver, gold" in err


def test_a_job_that_is_not_deployed_is_a_clear_error(workspace, capsys):
    command = ["job", "--bundle", str(ROOT), "run", "medallion_stream", "--target", "dev"]
    assert main(command) == 2
    assert "no job named '[dev jane_doe] medallion_stream'" in capsys.readouterr().err
    assert workspace.run_requests == []
