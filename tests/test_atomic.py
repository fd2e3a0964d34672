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


def test_a_shared_file_keeps_its_mode_or_takes_the_umasks(tmp_path):
    """Exports were created 0600 (tempfile's mode), and a replaced 0644 file became 0600 (a bad-input hunt);
    uploads and checkpoints stay readable by their owner only."""
    import os
    import stat

    from privcore.atomic import _umask

    new = atomic_write(tmp_path / "new.csv", lambda fh: fh.write(b"a"), shared=True)
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~_umask()
    old = tmp_path / "old.csv"
    old.write_bytes(b"x")
    os.chmod(old, 0o640)
    atomic_write(old, lambda fh: fh.write(b"y"), shared=True)
    assert stat.S_IMODE(old.stat().st_mode) == 0o640 and old.read_bytes() == b"y"
    private = atomic_write(tmp_path / "upload.csv", lambda fh: fh.write(b"a"))
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert _umask() == (lambda m: (os.umask(m), m)[1])(os.umask(0o022))  # the same as os.umask reports
