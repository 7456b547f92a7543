"""An available-now run that has little to read starts its JVM with C1 alone: what it has to
read is the landed bytes its file sources' checkpoints have not taken yet."""

from __future__ import annotations

import json
import os
from dataclasses import replace

from medallion.config import Config
from medallion.session import local_conf
from medallion.source_options import KafkaSourceOptions
from medallion.streams import run_size
from medallion.streams.run_size import SMALL_RUN_JVM_OPTIONS, pending_landing_bytes, run_jvm_options


def _land(folder, name: str, size: int):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("x" * size)
    return path


def _taken(config: Config, stream: str, *paths) -> None:
    """A file source's log of one batch that took ``paths``, as Spark writes it."""
    log = config.checkpoint(stream) + "/sources/0"
    entries = [json.dumps({"path": p.as_uri(), "timestamp": 1, "batchId": 0}) for p in paths]
    os.makedirs(log, exist_ok=True)
    with open(f"{log}/0", "w", encoding="utf-8") as handle:
        handle.write("\n".join(["v1", *entries]) + "\n")


def test_a_run_with_little_to_read_gets_c1_alone(tmp_path, monkeypatch):
    config = Config(landing=str(tmp_path / "landing"), lake=str(tmp_path / "lake"))
    first = _land(tmp_path / "landing" / "events", "a.json", 300)
    _land(tmp_path / "landing" / "events", "b.json", 200)
    _land(tmp_path / "landing" / "customers", "c.json", 50)
    _land(tmp_path / "landing" / "events", "_hidden.json", 1000)  # the file source skips it
    assert pending_landing_bytes(config) == 550  # a new lake: every landed file
    assert run_jvm_options(config, streaming=False) == SMALL_RUN_JVM_OPTIONS
    assert run_jvm_options(config, streaming=True) == ""  # a stream lives long: C2 pays

    _taken(config, "bronze_events", first)
    assert pending_landing_bytes(config) == 250

    monkeypatch.setattr(run_size, "SMALL_RUN_BYTES", 249)
    assert run_jvm_options(config, streaming=False) == ""  # a large backlog: C2 pays
    kafka = replace(
        config, source="kafka", kafka=KafkaSourceOptions(bootstrap_servers="127.0.0.1:9092")
    )
    assert pending_landing_bytes(kafka) is None and run_jvm_options(kafka, False) == ""


def test_a_runs_options_come_before_the_users(monkeypatch):
    monkeypatch.setenv("MEDALLION_JAVA_OPTIONS", "-XX:TieredStopAtLevel=4")
    options = local_conf(java=SMALL_RUN_JVM_OPTIONS)["spark.driver.extraJavaOptions"]
    assert options.index(SMALL_RUN_JVM_OPTIONS) < options.index("-XX:TieredStopAtLevel=4")
    assert SMALL_RUN_JVM_OPTIONS not in local_conf()["spark.driver.extraJavaOptions"]
