"""The CLI's failure messages: short, on stderr, naming what failed and where."""

from __future__ import annotations

import re

from processes import run_medallion

from medallion.cli import main
from medallion.pipelines.retail.generator import generate
from medallion.streams.runner import run_available_now


def test_a_broken_checkpoint_fails_with_a_message_naming_the_stream(spark, config, dirs, capsys):
    landing, lake = dirs
    generate(str(landing), events=100, customers=10, files=1, seed=1)
    run_available_now(spark, config)
    offsets = lake / "_checkpoints" / "silver_customers" / "offsets" / "0"
    offsets.write_text("this is not an offset log\n")
    generate(str(landing), events=50, customers=10, files=1, seed=2)
    capsys.readouterr()

    # In this process (its Spark session): the CLI's error handling is what is under test.
    assert main(["run", "--landing", str(landing), "--lake", str(lake)]) == 1
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert message.startswith("medallion run: failed: stream 'silver_customers'")
    assert "_checkpoints/silver_customers" in message
    assert len(message) < 1200

    # `changes` reads the one change data feed among the tables the lake holds (retail's
    # silver/customers; banking's silver/accounts is declared but not there).
    assert main(["changes", "--lake", str(lake), "--from-version", "0", "--rows", "1"]) == 0
    assert re.match(r"[1-9][0-9]* changes\n", capsys.readouterr().out)
    assert main(["changes", "--lake", str(lake), "--pipeline", "iot", "--from-version", "0"]) == 2
    assert "name the table with --table" in capsys.readouterr().err


def test_bad_arguments_exit_2_with_a_clear_message(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    result = run_medallion("generate", "--landing", str(not_a_folder), "--events", "1")
    assert result.returncode == 2
    assert result.stderr.startswith("medallion generate: error:")
