"""The hostile corpus in tests/data/hostile: every line lands in bronze, then in silver or in
quarantine with the specific reason EXPECTED.json gives; nothing crashes. Its line over 10 MiB
is written at test time (tests/data/make_hostile_corpus.py), not kept in git."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from data.make_hostile_corpus import MADE_AT_TEST_TIME, write_made_at_test_time
from lake_checks import assert_lake_matches, rows_of
from oracle import event_is_valid, expected_from, read_file_lines

from medallion.streams.runner import run_available_now
from medallion.tables import read_table

CORPUS = Path(__file__).resolve().parents[1] / "data" / "hostile"


def test_hostile_corpus_lands_as_the_contract_says(spark, config, dirs):
    landing, _ = dirs
    shutil.copytree(CORPUS, landing / "events", ignore=shutil.ignore_patterns("EXPECTED.json"))
    write_made_at_test_time(landing / "events")
    assert all((landing / "events" / name).stat().st_size > 10 << 20 for name in MADE_AT_TEST_TIME)
    report = run_available_now(spark, config)

    expected = expected_from(landing)
    assert_lake_matches(spark, config, expected)
    reasons = {row._raw: row.reason for row in rows_of(config, "silver/events_quarantine")}
    manifest = json.loads((CORPUS / "EXPECTED.json").read_text())
    checked = 0
    for name, outcomes in manifest.items():
        lines = read_file_lines(landing / "events" / name)
        assert len(lines) == len(outcomes), name
        for text, outcome in zip(lines, outcomes, strict=True):
            if outcome == "valid":
                assert text not in reasons, (name, reasons.get(text))
                assert event_is_valid(text) is not None, name
            else:
                assert outcome in reasons[text], (name, outcome, reasons[text])
                assert event_is_valid(text) is None, name
            checked += 1
    assert checked == expected.bronze_lines == report.table("bronze/events").rows_out
    assert not [r for r in reasons.values() if r.strip().lower() in ("invalid", "invalid record")]
    longest = read_table(spark, config.table("silver/events")).where("event_id = 'long-1'").count()
    assert longest == 1
