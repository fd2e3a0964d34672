"""privcore/atomic.py: a file is either absent, its old content, or complete; never half-written."""

from __future__ import annotations

import pytest

from privcore.atomic import atomic_write


def test_writes_and_replaces(tmp_path):
    target = tmp_path / "out.bin"
    atomic_write(target, lambda fh: fh.write(b"first"))
    atomic_write(target, lambda fh: fh.write(b"second"), fsync=True)
    assert target.read_bytes() == b"second"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_a_failure_keeps_the_old_file_and_leaves_nothing_behind(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")

    def half(fh):
        fh.write(b"partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, half)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]
