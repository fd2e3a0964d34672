"""On-disk result cache: plain numbers keyed by a hash of the point, the data and a schema version.

(Over 400 lines: the JSON-only disk and the recovery policy for a corrupt, busy, full or
read-only database are one safety boundary, kept in one module on purpose; the schema of a stored
value is in :mod:`~privcore.engine.cache_schema`, telling faults apart in
:mod:`~privcore.engine.cache_faults`.)

The device is deliberately not part of the key: a result computed on a GPU is reused on a CPU.
Bump :data:`SCHEMA_VERSION` whenever a change alters what a stored number means.

The cache folder may be shared, copied or imported, so nothing read from it is trusted:

* Values are JSON text only (:class:`JSONOnlyDisk`): storing anything else is refused, and reading
  never unpickles, never follows a stored file name and never opens a file (a planted pickle or a
  row pointing at ``/etc/passwd`` reads as a bad value).
* Every value read is checked against the schema of a result (:func:`check_result`): a dict with
  the expected keys and types and finite numbers. A bad one is a miss (it is recomputed) and is
  reported once in :attr:`ResultCache.messages`.
* A corrupt database (random bytes, a truncated file, a folder in its place, foreign tables) is
  moved aside with a message and rebuilt -- only one that fails its integrity check, never for a
  lock, a timeout or a full disk. A write lock held by another process is waited for (reported,
  bounded by ``busy_wait``), then results are computed but not stored while it lasts; a full disk
  or a read-only folder stops storing with one message. Nothing stored is lost to any of these.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

from .cache_disk import MAX_VALUE_CHARS, json_disk
from .cache_faults import (BUSY, DB_NAME, FULL, OTHER, READONLY, _settings, connect_readonly, fault_kind,
                           wait_for_write_lock, write_lock_free)
from .cache_faults import inspect_db as _inspect_db
from .cache_faults import short_error as _short
from .cache_schema import check_result

__all__ = ["SCHEMA_VERSION", "ResultCache", "point_key", "default_results_dir", "check_result",
           "MAX_VALUE_CHARS"]

SCHEMA_VERSION = 10  # 10: DP-SGD's clipped sum with bounded rounding (privcore.roundoff: step clip C / (1 + eta b)); 9: DP-SGD's noise and Poisson batches and the auto-lambda noisy max from privcore.tails (tails not cut off, rates never above q); 8: lam = auto makes no private choice for sparse vector and the PATE student (their answers couple queries); 7: teachers solved in per-part bases (each a function of its own part); 6: PATE data-dependent epsilon (beta-smooth published cost), answered-only spread; 5: certified solver residual in every sensitivity, replace-one DP-SGD, approximate minima perturbation
# 4: JSON-only disk, validated reads (entries of 3 are not trusted)
# 3: DP-SGD draws batches and noise per chunk of steps; solves in the data eigenbasis
# 2: Gaussian loss perturbation calibrated on ||P b|| ~ sigma chi_2C; L-BFGS memory 5

_DB_NAME = DB_NAME


def default_results_dir() -> Path:
    """``results`` in the cache folder (:func:`privcore.paths.cache_dir`)."""
    from ..paths import cache_dir

    return cache_dir() / "results"


def point_key(point: dict[str, Any], fingerprint: str) -> str:
    """sha256 of the canonical JSON of ``point`` + data ``fingerprint`` + schema version."""
    text = json.dumps({"point": point, "data": fingerprint, "schema": SCHEMA_VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- a disk that never unpickles

def __getattr__(name: str) -> Any:  # ``from privcore.engine.cache import JSONOnlyDisk``
    if name == "JSONOnlyDisk":
        return _disk()
    raise AttributeError(name)


def _disk():  # noqa: ANN202
    return json_disk()


_MODE_RAW = 1  # diskcache.core.MODE_RAW
#: Seconds one write waits inside SQLite; longer waits are the cache's own, reported and bounded.
_SQLITE_TIMEOUT = 1.0
_REPORT_EVERY = 5.0  # seconds between two reports of a wait when nobody passed ``on_wait``
_LOG = logging.getLogger("privcore.cache")
_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)


def _errors() -> tuple[type[BaseException], ...]:
    """What a cache operation may raise: SQLite errors, OS errors and diskcache's ``Timeout``."""
    global _ERRORS
    if len(_ERRORS) == 2:
        from diskcache import Timeout

        _ERRORS = (sqlite3.Error, OSError, Timeout)
    return _ERRORS


class ResultCache:
    """A diskcache store of JSON-able result dicts; ``enabled=False`` turns it into a no-op.

    ``messages`` collects what went wrong with the cache itself (a corrupt database moved aside,
    a read-only folder, a busy lock, a full disk, a bad stored value), each message once;
    :meth:`drain_messages` hands them over. ``validate`` checks every value read (default
    :func:`check_result`; None to accept any JSON object).

    Nothing stored is lost to a fault that is not corruption: when another process holds the write
    lock, a write waits for it (reported, at most ``busy_wait`` seconds in all for this object),
    then results are computed but not stored while it stays busy; a full disk or a read-only folder
    stops storing with one message. Only a file that fails :func:`_inspect_db` is moved aside.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, enabled: bool = True,
                 validate: Callable[[Any], str | None] | None = check_result, busy_wait: float = 60.0) -> None:
        from ..validation import check_real

        self.busy_wait = check_real("busy_wait", busy_wait, low=0.0, high=24 * 3600.0)
        self.enabled = enabled
        self.directory = Path(directory) if directory is not None else default_results_dir()
        self.validate = validate
        self.readonly = False
        self.messages: list[str] = []
        #: True once the database was found corrupt (moved aside, or not): what it held is gone.
        self.damaged = False
        #: Why results are not being stored although the cache is readable ("busy", "full"), or None.
        self.not_storing: str | None = None
        self._store = None
        self._ro_conn: sqlite3.Connection | None = None
        self._deferred = False  # the write lock was taken at opening: the store opens on the first write
        self._busy_left = self.busy_wait
        self._lock = threading.RLock()
        if enabled:
            self._open()

    @property
    def _db(self) -> Path:
        return self.directory / _DB_NAME

    # ------------------------------------------------------------ opening and recovery

    def _note(self, message: str) -> None:
        if message not in self.messages:
            self.messages.append(message)

    def drain_messages(self) -> list[str]:
        """The messages so far (each once), then forget them."""
        out, self.messages = self.messages, []
        return out

    def _kind(self, err: BaseException) -> str:
        return fault_kind(err, self.directory)

    def _new_store(self) -> Any:
        import diskcache

        # Every setting is passed explicitly: nothing read from the Settings table of a planted
        # database reaches diskcache's PRAGMA statements or the Disk.
        store = diskcache.Cache(str(self.directory), timeout=_SQLITE_TIMEOUT, disk=_disk(), **_settings())
        try:
            store.get("__privcore_probe__")
        except BaseException:
            store.close()
            raise
        return store

    def _open(self, retry: bool = True) -> None:
        db = self._db
        try:
            if db.exists() or db.is_symlink():
                problem = _inspect_db(db)
                if problem is not None:
                    self._corrupt(problem, retry)
                    return
                if not write_lock_free(db):  # another process is writing: read now, open for writing later
                    self._open_reader(db)
                    self._deferred = True
                    return
            self.directory.mkdir(parents=True, exist_ok=True)
            self._store = self._new_store()
        except _errors() as err:
            kind = self._kind(err)
            if kind == READONLY:
                self._open_readonly(db)
            elif kind == BUSY:
                self._open_reader(db)
                self._deferred = True
            elif kind == FULL:
                self._open_reader(db)
                self._stop_storing(FULL, err)
            else:
                self._confirm_corrupt(err, retry)

    def _open_reader(self, db: Path) -> bool:
        """Read what ``db`` holds through a read-only connection (no store). True when it could."""
        if self._ro_conn is not None:
            return True
        if not db.is_file():
            return False
        try:
            self._ro_conn = connect_readonly(db)
            self._ro_conn.execute("SELECT 1 FROM Cache LIMIT 1").fetchall()
            return True
        except sqlite3.Error:
            if self._ro_conn is not None:
                self._ro_conn.close()
            self._ro_conn = None
            return False

    def _open_readonly(self, db: Path) -> None:
        """Serve what a read-only cache holds; store nothing (one message either way)."""
        self.readonly = True
        if self._store is not None or self._open_reader(db) or not db.exists():
            self._note("results cache is read-only: cached results are used, new ones are computed but not stored")
        else:
            self._note("results cache is read-only and cannot be read: results are computed but not stored")

    def _stop_storing(self, why: str, err: BaseException | None = None) -> None:
        if self.not_storing == why:
            return
        self.not_storing = why
        if why == FULL:
            self._note(f"results cache not written: the disk is full ({_short(err) if err else 'no space left'}); "
                       "new results are computed but not stored, nothing stored earlier is lost")
        else:
            self._note(f"results cache busy: another process has held its write lock for over {self.busy_wait:g} s; "
                       "new results are computed but not stored while it lasts, nothing stored earlier is lost")

    def _integrity_problem(self) -> str | None:
        """Why the database fails its integrity check now; None when it passes or cannot be checked."""
        db = self._db
        try:
            return _inspect_db(db, fresh=True) if (db.exists() or db.is_symlink()) else None
        except _errors():
            return None

    def _confirm_corrupt(self, err: BaseException, retry: bool = True) -> None:
        """``err`` is not a lock, a full disk or a read-only folder: move the database aside only if it
        fails its integrity check now; otherwise stop using the cache and keep the file as it is."""
        problem = self._integrity_problem()
        if problem is not None:
            self._corrupt(problem, retry)
            return
        self._close_store()
        self.enabled = False
        self._note(f"results cache unusable ({_short(err)}): results are computed but not stored")

    def _corrupt(self, problem: str, retry: bool) -> None:
        if retry and self._quarantine(problem):
            self._open(retry=False)
        else:
            self._close_store()
            self.enabled = False

    def _close_store(self) -> None:
        for thing in (self._store, self._ro_conn):
            if thing is not None:
                try:
                    thing.close()
                except Exception:  # noqa: BLE001 - closing what failed must not fail again
                    pass
        self._store, self._ro_conn = None, None

    def _quarantine(self, problem: str) -> bool:
        """Move a corrupt ``cache.db`` (and its journal files) aside; True when done. Sets :attr:`damaged`."""
        self.damaged = True
        with self._lock:
            self._close_store()
            stamp = time.strftime("%Y%m%d-%H%M%S")
            moved = None
            try:
                for suffix in ("", "-wal", "-shm"):
                    src = self.directory / (_DB_NAME + suffix)
                    if src.exists() or src.is_symlink():
                        dst = self.directory / f"{_DB_NAME}{suffix}.corrupt-{stamp}-{os.getpid()}"
                        os.replace(src, dst)
                        if suffix == "":
                            moved = dst.name
            except OSError as move_err:
                self._note(f"results cache is corrupt ({problem}) and could not be moved aside "
                           f"({_short(move_err)}): results are computed but not stored")
                return False
            self._note(f"results cache was corrupt ({problem}): moved aside as {moved or _DB_NAME} in the "
                       "results folder and rebuilt")
            return True

    def _recover(self, err: BaseException) -> None:
        """A read failed on an open database: a busy lock is a miss; a corrupt file is rebuilt."""
        kind = self._kind(err)
        if kind == BUSY:
            self._note("results cache busy: a stored result could not be read while another process writes; "
                       "it is recomputed")
        elif kind == READONLY:
            self._open_readonly(self._db)
        elif kind == FULL:
            self._stop_storing(FULL, err)
        else:
            self._confirm_corrupt(err)

    # ------------------------------------------------------------ waiting for another process's lock

    def _wait_for_lock(self, on_wait: Callable[[str], None] | None) -> bool:
        """Wait (reported) for the write lock another process holds, within what is left of
        ``busy_wait``; once that is spent, only look. True when the lock is free."""
        db = self._db
        if self._busy_left <= 0:
            return write_lock_free(db)
        last = [0.0]

        def report(waited: float) -> None:
            total = self.busy_wait - self._busy_left + waited
            message = (f"results cache busy: another process holds its write lock; waiting to store "
                       f"({total:.0f} s of at most {self.busy_wait:g} s)")
            if on_wait is not None:
                on_wait(message)
            elif total - last[0] >= _REPORT_EVERY:
                last[0] = total
                _LOG.warning(message)

        start = time.monotonic()
        try:
            return wait_for_write_lock(db, self._busy_left, report)
        finally:
            self._busy_left = max(0.0, self._busy_left - (time.monotonic() - start))

    def _writable_store(self) -> Any:
        """The open store; a deferred one is opened now (raises a busy error if still locked)."""
        if self._store is None and self._deferred:
            db = self._db
            if not write_lock_free(db):
                raise sqlite3.OperationalError("database is locked")
            problem = _inspect_db(db) if db.exists() else None  # written by another process since
            if problem is not None:
                self._deferred = False
                self._corrupt(problem, True)
            else:
                store = self._new_store()
                self._close_store()
                self._store, self._deferred = store, False
        return self._store

    def _write(self, action: Callable[[Any], None], on_wait: Callable[[str], None] | None) -> str | None:
        """Run ``action(store)``, waiting for a busy lock; None when done, else why not (a fault kind)."""
        corrupt_retried = False
        while True:
            try:
                store = self._writable_store()
                if store is None or not self.enabled or self.readonly:
                    return READONLY if self.readonly else OTHER
                action(store)
                if self.not_storing == BUSY:
                    self.not_storing = None
                return None
            except _errors() as err:
                kind = self._kind(err)
                if kind == BUSY:
                    if self._wait_for_lock(on_wait):
                        continue
                    return BUSY
                if kind in (FULL, READONLY):
                    return kind
                problem = None if corrupt_retried else self._integrity_problem()
                if problem is None:  # the file is sound (or was just rebuilt): only this write failed
                    self._note(f"results cache write failed ({_short(err)}): results are not stored")
                    return OTHER
                corrupt_retried = True
                self._corrupt(problem, True)  # moved aside and rebuilt: write once more

    # ------------------------------------------------------------ reading and writing

    def _raw_get(self, key: str) -> Any:
        if self._store is not None:
            return self._store.get(key)
        if self._ro_conn is not None:
            row = self._ro_conn.execute(
                "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1 "
                "AND (expire_time IS NULL OR expire_time > ?)", (key, time.time())).fetchone()
            if row is None or row[0] != _MODE_RAW or row[1] is not None or not isinstance(row[2], str):
                return None if row is None else ""
            return row[2]
        return None

    def get(self, key: str, validate: Callable[[Any], str | None] | None = None) -> dict[str, Any] | None:
        """The stored dict for ``key``, or None (missing, unreadable or failing validation).

        ``validate`` replaces the cache's own check for this read (for records of another shape,
        e.g. leakage results); the JSON-only decoding applies either way.
        """
        if not self.enabled:
            return None
        try:
            value = self._raw_get(key)
        except _errors() as err:
            self._recover(err)
            return None
        if value is None:
            return None
        problem = None
        if not isinstance(value, str) or not value or len(value) > MAX_VALUE_CHARS:
            problem = "not JSON text: a pickle, a blob or a file reference"
        else:
            try:
                value = json.loads(value, parse_constant=_reject_constant)
            except (ValueError, RecursionError) as err:
                problem = f"not valid JSON ({_short(err)})"
        check = validate if validate is not None else self.validate
        if problem is None and check is not None:
            problem = check(value)
        if problem is not None:
            self._note(f"ignored a stored result that does not have the expected form ({problem}); it is recomputed")
            return None
        return value

    def put(self, key: str, value: dict[str, Any], on_wait: Callable[[str], None] | None = None) -> None:
        """Store ``value`` (must be JSON-serialisable: plain numbers, strings, lists).

        Never raises for the cache's own faults: a busy lock is waited for (``on_wait(message)``
        reports the wait, else it is logged), then, like a full disk or a read-only folder, the
        result is just not stored and :attr:`messages` says so once.
        """
        if not self.enabled or self.readonly or self.not_storing == FULL:
            return
        if self._store is None and not self._deferred:
            return
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as err:
            self._note(f"a result was not stored: {_short(err)}")
            return
        with self._lock:
            why = self._write(lambda store: store.set(key, text), on_wait)
        if why == BUSY:
            self._stop_storing(BUSY)
        elif why == FULL:
            self._stop_storing(FULL)
        elif why == READONLY:
            self._open_readonly(self._db)

    def keys(self) -> list[str]:
        """Every stored key (str keys only; what else a planted database holds is skipped)."""
        if not self.enabled:
            return []
        try:
            if self._store is not None:
                return [k for k in self._store.iterkeys() if isinstance(k, str)]
            if self._ro_conn is not None:
                return [r[0] for r in self._ro_conn.execute("SELECT key FROM Cache WHERE raw = 1").fetchall()
                        if isinstance(r[0], str)]
        except _errors() as err:
            self._recover(err)
        return []

    def put_many(self, items: list[tuple[str, dict[str, Any]]], on_wait: Callable[[str], None] | None = None) -> None:
        """Store all of ``items`` in one transaction, or none of them (raises ``OSError`` then).

        Unlike :meth:`put`, a cache that cannot store is an error here (``results import``); a busy
        lock is waited for first, as in :meth:`put`.
        """
        texts = [(key, json.dumps(value, allow_nan=False)) for key, value in items]
        if (not self.enabled or self.readonly or self.not_storing == FULL
                or (self._store is None and not self._deferred)):
            raise OSError("the results cache cannot be written" + (f" ({self.messages[-1]})" if self.messages else ""))

        def store_all(store: Any) -> None:
            with store.transact():
                for key, text in texts:
                    store.set(key, text)

        with self._lock:
            why = self._write(store_all, on_wait)
        if why == BUSY:
            raise OSError(f"results cache busy: another process held its write lock for over {self.busy_wait:g} s; "
                          "nothing was stored")
        if why == FULL:
            raise OSError("results cache not written: the disk is full; nothing was stored")
        if why is not None:
            raise OSError("results cache write failed" + (f" ({self.messages[-1]})" if self.messages else "")
                          + ": nothing was stored")

    def clear(self) -> None:
        """Remove every stored result (raises ``OSError`` when another process holds the lock)."""
        if not self.enabled or self.readonly:
            return
        with self._lock:
            why = self._write(lambda store: store.clear(), None)
        if why == BUSY:
            raise OSError("results cache busy: another process holds its write lock; nothing was removed")

    def __len__(self) -> int:
        try:
            if self._store is not None:
                return len(self._store)
            if self._ro_conn is not None:
                return int(self._ro_conn.execute("SELECT COUNT(*) FROM Cache").fetchone()[0])
        except _errors():
            return 0
        return 0


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")
