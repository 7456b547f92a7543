"""The generator writes atomically and deterministically."""

from __future__ import annotations

from medallion.generate import generate


def test_files_are_deterministic_and_no_temp_files_remain(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    generate(str(a), events=300, customers=20, files=3, seed=5)
    generate(str(b), events=300, customers=20, files=3, seed=5)
    names = sorted(p.name for p in (a / "events").iterdir())
    assert names == sorted(p.name for p in (b / "events").iterdir())
    assert not [n for n in names if n.startswith(".")]
    for name in names:
        assert (a / "events" / name).read_bytes() == (b / "events" / name).read_bytes()
    assert any((a / "customers").iterdir())
