"""The generator writes atomically and deterministically, in name order, with the faults the
oracle has to decide: re-sent copies that differ from the first, and tied customer changes."""

from __future__ import annotations

import json
import os
from collections import defaultdict

from oracle import customer_change, event_is_valid, read_file_lines

from medallion.generate import FaultRates
from medallion.pipelines.retail.generator import generate


def test_files_are_deterministic_and_no_temp_files_remain(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    faults = FaultRates(altered_duplicate=0.5)
    generate(str(a), events=300, customers=20, files=3, seed=5, faults=faults)
    generate(str(b), events=300, customers=20, files=3, seed=5, faults=faults)
    for dataset in ("events", "customers"):
        names = sorted(p.name for p in (a / dataset).iterdir())
        assert names == sorted(p.name for p in (b / dataset).iterdir())
        assert not [n for n in names if n.startswith(".")]
        for name in names:
            assert (a / dataset / name).read_bytes() == (b / dataset / name).read_bytes()
    assert any((a / "customers").iterdir())


def test_files_land_in_name_order_by_modification_time(tmp_path):
    written = generate(str(tmp_path), events=200, customers=20, files=4, seed=6)
    paths = written["events"] + written["customers"]
    assert written["events"] == sorted(written["events"])
    assert written["customers"] == sorted(written["customers"])
    millis = [os.stat(p).st_mtime_ns // 1_000_000 for p in paths]
    assert millis == sorted(set(millis)), "modification times must grow file by file"


def _copies_by_event_id(events_dir):
    copies = defaultdict(list)
    for index, path in enumerate(sorted(events_dir.iterdir())):
        for line in read_file_lines(path):
            event = event_is_valid(line)
            if event is not None:
                copies[event["event_id"]].append((index, event))
    return copies


def test_altered_resends_differ_and_land_in_the_same_and_in_later_files(tmp_path):
    faults = FaultRates(altered_duplicate=0.5)
    generate(str(tmp_path), events=1500, customers=100, files=4, seed=3, faults=faults)
    same_file = later_file = 0
    for copies in _copies_by_event_id(tmp_path / "events").values():
        first_file, first = copies[0]
        for file, event in copies[1:]:
            if event != first:
                same_file += file == first_file
                later_file += file > first_file
    assert same_file >= 2 and later_file >= 5, (same_file, later_file)


def test_by_default_resent_copies_are_identical(tmp_path):
    generate(str(tmp_path), events=1500, customers=0, files=4, seed=3)
    copies = _copies_by_event_id(tmp_path / "events")
    assert sum(len(c) - 1 for c in copies.values()) > 20
    assert all(event == c[0][1] for c in copies.values() for _, event in c)


def test_customer_changes_tie_on_sequence_operation_and_instant_with_other_content(tmp_path):
    generate(str(tmp_path), events=10, customers=100, files=4, seed=3)
    ties = defaultdict(set)
    for path in sorted((tmp_path / "customers").iterdir()):
        for line in read_file_lines(path):
            change = customer_change(line)
            if change is not None:
                key = (change["customer_id"], change["sequence_num"], change["operation"])
                content = tuple(change[f] for f in ("name", "email", "country", "segment"))
                ties[(*key, change["updated_at"])].add((content, json.loads(line)["updated_at"]))
    tied = [texts for texts in ties.values() if len({content for content, _ in texts}) > 1]
    assert len(tied) >= 3
    # Some twins write the same instant in another zone.
    assert any(len({text for _, text in texts}) > 1 for texts in tied)
