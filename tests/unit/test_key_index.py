"""The in-memory key index: exact membership, whatever the order keys arrive in."""

from __future__ import annotations

import numpy as np

from medallion.streams.known_keys import KeyIndex


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
    index.kept_in(["run-a.npz"])
    assert [name for _, _, name in index.runs] == ["run-a.npz"]
    index.add(*_keys(rng, 10))
    assert [name for _, _, name in index.runs] == ["run-a.npz", None]
    index.add(*_keys(rng, 90))  # merged with both runs before it
    assert [name for _, _, name in index.runs] == [None]
