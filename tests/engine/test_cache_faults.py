"""The results cache loses nothing to a busy lock, a full disk or a read-only folder.

Only a database that fails its integrity check is moved aside (tests/test_cache.py covers those);
here every fault that is not corruption leaves every stored entry where it was.
"""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import diskcache
import pytest

from privcore.engine.cache import ResultCache
from privcore.engine.cache_faults import BUSY, CORRUPT, FULL, READONLY, fault_kind
from privcore.engine.runner import run_sweep
from privcore.engine.specs import DataSpec, SweepSpec

VALUE = {"accuracies": [0.5, 0.7], "accuracy_mean": 0.6, "accuracy_std": 0.1414213562373095, "seconds": 0.1,
         "device": "cpu", "lam": 0.01, "scale": {"noise": "none"}}


def _filled(directory: Path, n: int = 5) -> ResultCache:
    store = ResultCache(directory)
    for i in range(n):
        store.put(f"k{i}", VALUE)
    assert len(store) == n and not store.messages
    return store


def _stored(directory: Path) -> dict[str, str]:
    """Every row of cache.db as it is on disk (read without the cache's own code)."""
    conn = sqlite3.connect(f"file:{directory / 'cache.db'}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT key, value FROM Cache").fetchall())
    finally:
        conn.close()


def _nothing_moved_aside(directory: Path) -> bool:
    return not any(".corrupt-" in p.name for p in directory.iterdir())


class LockHolder:
    """Another process holding the database's write lock (``BEGIN EXCLUSIVE``) until released."""

    def __init__(self, db: Path, seconds: float = 120.0) -> None:
        code = ("import sqlite3, sys, time\n"
                "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                "con.execute('BEGIN EXCLUSIVE')\n"
                "print('held', flush=True)\n"
                "sys.stdin.readline() if float(sys.argv[2]) < 0 else time.sleep(float(sys.argv[2]))\n"
                "con.execute('ROLLBACK')\n")
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(db), str(seconds)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "held"

    def release(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass
        self.proc.wait(timeout=30)

    def __enter__(self) -> "LockHolder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# ---------------------------------------------------------------- a second process holds the write lock

@pytest.mark.slow
def test_a_cache_opened_while_another_process_writes_waits_then_skips_and_loses_nothing(tmp_path):
    _filled(tmp_path)
    before = _stored(tmp_path)
    reports: list[str] = []
    with LockHolder(tmp_path / "cache.db", seconds=-1):
        t0 = time.monotonic()
        store = ResultCache(tmp_path, busy_wait=4.0)          # opening does not wait for the lock
        opened = time.monotonic() - t0
        assert store.enabled and not store.readonly
        assert store.get("k0") == VALUE                      # what it holds is served while locked
        t1 = time.monotonic()
        store.put("k5", VALUE, on_wait=reports.append)       # waits (reported), then skips storing
        waited = time.monotonic() - t1
        t2 = time.monotonic()
        store.put("k6", VALUE, on_wait=reports.append)       # the wait is spent: no second wait
        again = time.monotonic() - t2
    assert opened < 3.0 and 4.0 <= waited < 9.0 and again < 3.0, (opened, waited, again)
    assert reports and all("busy" in r and "waiting" in r for r in reports)
    assert len(store.messages) == 1 and "busy" in store.messages[0] and "nothing stored earlier is lost" in \
        store.messages[0]
    assert not any("corrupt" in m for m in store.messages)
    assert not store.damaged and _nothing_moved_aside(tmp_path)
    assert _stored(tmp_path) == before                        # all 5 entries, unchanged
    store.put("k7", VALUE)                                    # the lock is free again: stored
    assert set(_stored(tmp_path)) == set(before) | {"k7"}


@pytest.mark.slow
def test_a_write_waits_for_a_lock_that_comes_free(tmp_path):
    _filled(tmp_path)
    with LockHolder(tmp_path / "cache.db", seconds=2.0) as holder:
        store = ResultCache(tmp_path, busy_wait=60)
        reports: list[str] = []
        store.put("k5", VALUE, on_wait=reports.append)
        holder.proc.wait(timeout=30)
    assert reports and not store.messages
    assert set(_stored(tmp_path)) == {f"k{i}" for i in range(6)}


@pytest.mark.slow
def test_an_open_cache_locked_by_another_process_keeps_its_entries(tmp_path):
    store = _filled(tmp_path)                                 # opened and written before the lock
    store.busy_wait = store._busy_left = 1.0
    with LockHolder(tmp_path / "cache.db", seconds=-1):
        store.put("k5", VALUE)                                # diskcache.Timeout inside: waited, skipped
        with pytest.raises(OSError, match="busy.*nothing was stored"):
            store.put_many([("k6", VALUE), ("k7", VALUE)])    # results import: all or nothing
        assert store.get("k1") == VALUE
    assert sum("busy" in m for m in store.messages) == 1
    assert _nothing_moved_aside(tmp_path) and set(_stored(tmp_path)) == {f"k{i}" for i in range(5)}


@pytest.mark.slow
def test_a_sweep_against_a_locked_cache_computes_everything_and_loses_nothing(tmp_path):
    spec = SweepSpec(data=DataSpec(name="synthetic"), methods=("model_sensitivity",), epsilons=(1.0,),
                     delta=1e-5, repeats=2, lam=1e-2, device="cpu")
    run_sweep(spec, cache=ResultCache(tmp_path))
    before = _stored(tmp_path)
    wider = SweepSpec(data=spec.data, methods=spec.methods, epsilons=(1.0, 10.0), delta=1e-5, repeats=2, lam=1e-2,
                      device="cpu")
    shown: list[str] = []
    with LockHolder(tmp_path / "cache.db", seconds=-1):
        res = run_sweep(wider, cache=ResultCache(tmp_path, busy_wait=1.5), progress=lambda f, m: shown.append(m))
    assert res.cached == len(before) and res.computed == 1
    assert any("busy" in m and "waiting" in m for m in shown)           # the wait shows as progress
    assert any("busy" in w for w in res.warnings) and not any("corrupt" in w for w in res.warnings)
    assert _nothing_moved_aside(tmp_path) and _stored(tmp_path) == before


# ---------------------------------------------------------------- the disk fills

def test_a_disk_that_fills_while_storing_skips_storing_with_one_warning(tmp_path):
    store = _filled(tmp_path)
    before = _stored(tmp_path)
    # SQLITE_FULL for real: the database may not grow by another page.
    pages = store._store._con.execute("PRAGMA page_count").fetchone()[0]
    store._store._con.execute(f"PRAGMA max_page_count = {pages}")
    big = dict(VALUE, note="x" * 20_000)
    store.put("big1", big)
    store.put("big2", big)
    assert len(store.messages) == 1 and "disk is full" in store.messages[0], store.messages
    assert store.not_storing == FULL and not store.damaged
    assert store.get("k3") == VALUE
    assert _nothing_moved_aside(tmp_path) and _stored(tmp_path) == before


@pytest.mark.parametrize("error", [sqlite3.OperationalError("database or disk is full"),
                                   OSError(errno.ENOSPC, "No space left on device")], ids=["sqlite_full", "enospc"])
def test_a_full_disk_never_moves_the_database_aside(tmp_path, monkeypatch, error):
    _filled(tmp_path)
    before = _stored(tmp_path)

    def full(self, *args, **kwargs):
        raise error

    monkeypatch.setattr(diskcache.Cache, "set", full)
    store = ResultCache(tmp_path)
    for i in range(3):
        store.put(f"new{i}", VALUE)
    with pytest.raises(OSError, match="disk is full.*nothing was stored"):
        ResultCache(tmp_path).put_many([("a", VALUE)])
    assert [m for m in store.messages if "full" in m] == store.messages and len(store.messages) == 1
    monkeypatch.undo()
    assert _nothing_moved_aside(tmp_path) and _stored(tmp_path) == before


def test_a_disk_full_when_opening_serves_what_is_stored(tmp_path, monkeypatch):
    _filled(tmp_path)

    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(diskcache, "Cache", full)
    store = ResultCache(tmp_path)
    assert store.get("k2") == VALUE
    store.put("k9", VALUE)
    assert len(store.messages) == 1 and "disk is full" in store.messages[0]
    assert _nothing_moved_aside(tmp_path) and len(_stored(tmp_path)) == 5


# ---------------------------------------------------------------- a read-only folder

def _read_only_child(directory: str, queue) -> None:
    try:
        if os.geteuid() == 0:
            try:
                os.setgid(65534)
                os.setuid(65534)                              # nobody: chmod now binds
            except PermissionError as err:
                queue.put({"skip": f"root without setuid here ({err}): a read-only folder cannot be made"})
                return
        store = ResultCache(directory)
        hit = store.get("k1")
        store.put("k9", VALUE)
        queue.put({"hit": hit, "readonly": store.readonly, "messages": store.messages, "len": len(store)})
    except BaseException as err:  # noqa: BLE001 - reported to the test
        queue.put({"error": repr(err)})


@pytest.mark.parametrize("closed", [True, False], ids=["closed_cleanly", "wal_left_behind"])
def test_a_read_only_folder_serves_what_it_holds_with_one_message(closed):
    """Once: "cached results are used" and "read-only and unreadable" together, and everything
    recomputed (a WAL database closed cleanly has no -shm file, which a read-only folder cannot create)."""
    if os.geteuid() == 0 and not hasattr(os, "setuid"):
        pytest.skip("running as root without setuid: a read-only folder cannot be made")
    folder = Path(tempfile.mkdtemp(dir="/tmp", prefix="privcore-ro-"))   # reachable by nobody
    try:
        os.chmod(folder, 0o755)
        store = _filled(folder)
        before = _stored(folder)
        if closed:
            store._store.close()
            assert sorted(p.name for p in folder.iterdir()) == ["cache.db"]
        for p in folder.iterdir():
            os.chmod(p, 0o644)
        os.chmod(folder, 0o555)
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_read_only_child, args=(str(folder), queue))
        child.start()
        out = queue.get(timeout=60)
        child.join(timeout=30)
        if "skip" in out:
            pytest.skip(out["skip"])
        assert "error" not in out, out
        assert out["hit"] == VALUE and out["readonly"] and out["len"] == 5    # cached results are used
        assert len(out["messages"]) == 1 and "read-only" in out["messages"][0], out["messages"]
        assert "cannot be read" not in out["messages"][0]
        os.chmod(folder, 0o755)
        assert _stored(folder) == before and _nothing_moved_aside(folder)
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder, ignore_errors=True)


def test_writes_refused_as_read_only_midway_lose_nothing(tmp_path, monkeypatch):
    store = _filled(tmp_path)
    before = _stored(tmp_path)

    def refuse(self, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(diskcache.Cache, "set", refuse)
    store.put("k9", VALUE)
    store.put("k10", VALUE)
    assert store.readonly and len(store.messages) == 1 and "read-only" in store.messages[0]
    assert store.get("k4") == VALUE
    monkeypatch.undo()
    assert _nothing_moved_aside(tmp_path) and _stored(tmp_path) == before


# ---------------------------------------------------------------- only a failed integrity check moves the file

def test_a_failed_write_on_a_sound_database_keeps_it(tmp_path, monkeypatch):
    store = _filled(tmp_path)
    before = _stored(tmp_path)

    def io_error(self, *args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(diskcache.Cache, "set", io_error)
    store.put("k9", VALUE)
    monkeypatch.undo()
    assert any("write failed" in m for m in store.messages) and not store.damaged
    assert _nothing_moved_aside(tmp_path) and _stored(tmp_path) == before
    store.put("k9", VALUE)                                    # the cache is still in use
    assert "k9" in _stored(tmp_path)


@pytest.mark.parametrize("error, kind", [
    (sqlite3.OperationalError("database is locked"), BUSY),
    (diskcache.Timeout(), BUSY),
    (sqlite3.OperationalError("database or disk is full"), FULL),
    (OSError(errno.ENOSPC, "No space left on device"), FULL),
    (OSError(errno.EROFS, "Read-only file system"), READONLY),
    (sqlite3.OperationalError("attempt to write a readonly database"), READONLY),
    (sqlite3.DatabaseError("database disk image is malformed"), CORRUPT),
    (sqlite3.DatabaseError("file is not a database"), CORRUPT),
])
def test_fault_kinds(error, kind):
    assert fault_kind(error) == kind


def test_a_full_disk_hidden_behind_a_failed_rollback_is_still_a_full_disk():
    try:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError:
            raise sqlite3.OperationalError("cannot rollback - no transaction is active")
    except sqlite3.OperationalError as err:
        assert fault_kind(err) == FULL


def test_real_sqlite_errors_are_classified(tmp_path):
    db = tmp_path / "x.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.execute("PRAGMA max_page_count = 2")
    with pytest.raises(sqlite3.Error) as full:
        conn.executemany("INSERT INTO t VALUES (?)", [(json.dumps("y" * 4000),)] * 10)
    assert fault_kind(full.value) == FULL
    conn.close()
    db.write_bytes(os.urandom(4096))
    with pytest.raises(sqlite3.DatabaseError) as bad:
        sqlite3.connect(db).execute("SELECT * FROM sqlite_master").fetchall()
    assert fault_kind(bad.value) == CORRUPT


def test_busy_wait_is_checked():
    with pytest.raises(ValueError, match="busy_wait"):
        ResultCache(enabled=False, busy_wait=-1)
    with pytest.raises(TypeError, match="busy_wait"):
        ResultCache(enabled=False, busy_wait="10")
