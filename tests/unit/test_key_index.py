"""The key index: exact membership, whatever the order keys arrive in, in memory or mapped from
files beyond its memory bound."""

from __future__ import annotations

import numpy as np
import pytest

from medallion.streams import key_index
from medallion.streams.key_index import KEY_BYTES, KeyIndex, memory_bound, write_run


def _keys(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(-(2**63), 2**63 - 1, n), rng.integers(-(2**63), 2**63 - 1, n)


def test_an_index_holds_exactly_the_keys_added_in_any_number_of_runs():
    rng = np.random.default_rng(7)
    index, held = KeyIndex(), []
    for size in (1000, 10, 0, 400, 3, 2000, 1, 1):
        keys = _keys(rng, size)
        index.add(*keys)
        held.append(keys)
    h1, h2 = (np.concatenate(parts) for parts in zip(*held, strict=True))
    assert len(index) == len(h1) == 3415
    assert len(index.runs) <= int(np.log2(len(h1))) + 1
    assert index.contains(h1, h2).all()
    other1, other2 = _keys(rng, 5000)
    assert not index.contains(other1, other2).any()


def test_keys_that_share_their_first_hash_are_told_apart_by_the_second():
    index = KeyIndex()
    first = np.array([5, 5, 5, 9], dtype=np.int64)
    index.add(first, np.array([1, 2, 3, 4], dtype=np.int64))
    found = index.contains(
        np.array([5, 5, 5, 9, 9], dtype=np.int64), np.array([3, 4, 1, 4, 5], dtype=np.int64)
    )
    assert found.tolist() == [True, False, True, True, False]


def test_merged_runs_forget_the_file_they_were_kept_in():
    rng = np.random.default_rng(8)
    index = KeyIndex()
    index.add(*_keys(rng, 100))
    index.runs[0].file = "run-a.npy"
    index.add(*_keys(rng, 10))
    assert [run.file for run in index.runs] == ["run-a.npy", None]
    index.add(*_keys(rng, 90))  # merged with both runs before it
    assert [run.file for run in index.runs] == [None]


def test_beyond_its_memory_bound_an_index_maps_its_runs_from_files_and_stays_exact(
    tmp_path, monkeypatch
):
    # Small merge steps, so that a merge into a file takes many of them.
    monkeypatch.setattr(key_index, "MERGE_CHUNK_KEYS", 64)
    rng = np.random.default_rng(9)
    bound = 500 * KEY_BYTES
    index, held = KeyIndex(folder=str(tmp_path), memory_bytes=bound), []
    for size in (300, 300, 20, 700, 5, 1200, 40, 2, 900):
        keys = _keys(rng, size)
        # A few keys share their first hash with one held already.
        if held and size > 10:
            keys[0][:3] = held[0][0][:3]
        index.add(*keys)
        held.append(keys)
        assert index.memory_held <= bound
    h1, h2 = (np.concatenate(parts) for parts in zip(*held, strict=True))
    assert len(index) == len(h1)
    assert any(run.mapped for run in index.runs)
    for run in index.runs:
        order = np.lexsort((run.h2, run.h1))
        assert (order == np.arange(len(run))).all()  # each run sorted, merged in steps
    assert index.contains(h1, h2).all()
    other1, other2 = _keys(rng, 3000)
    other1[:5] = h1[:5]  # same first hash, another second one
    assert not index.contains(other1, other2).any()
    # Only the runs' files are left in the folder: the merged-away ones were never renamed in.
    assert {p.suffix for p in tmp_path.iterdir()} <= {".npy", ".tmp"}


def test_a_run_is_written_from_ordered_parts_as_one_mapped_file(tmp_path):
    parts = [
        key_index.sorted_run(np.array([3, 1]), np.array([0, 0])),
        key_index.Run(np.array([7, 9]), np.array([1, 2])),
    ]
    run = write_run(str(tmp_path), parts, 4)
    assert run.mapped and run.h1.tolist() == [1, 3, 7, 9] and run.h2.tolist() == [0, 0, 1, 2]
    with pytest.raises(ValueError, match="a run of 5 keys was given 4"):
        write_run(str(tmp_path), parts, 5)


def test_the_memory_bound_comes_from_its_variable(monkeypatch):
    monkeypatch.delenv("MEDALLION_KEY_INDEX_MEMORY_MB", raising=False)
    assert memory_bound() == 256 * 2**20
    monkeypatch.setenv("MEDALLION_KEY_INDEX_MEMORY_MB", "0.5")
    assert memory_bound() == 2**19
    for wrong in ("lots", "0", "-3"):
        monkeypatch.setenv("MEDALLION_KEY_INDEX_MEMORY_MB", wrong)
        with pytest.raises(ValueError, match="MEDALLION_KEY_INDEX_MEMORY_MB must be"):
            memory_bound()
