"""What went wrong with the results cache's SQLite file: busy, full, read-only or corrupt.

The cache (:mod:`privcore.engine.cache`) moves its database aside only when the file itself fails
its integrity check. A write lock held by another process, a timeout, a full disk or a read-only
folder never does: SQLite rolls the failed transaction back, so what was stored stays, and only
new results go unstored. Telling these apart is this module's job; the policy is the cache's.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

__all__ = ["BUSY", "FULL", "READONLY", "CORRUPT", "OTHER", "DB_NAME", "fault_kind", "write_lock_free",
           "wait_for_write_lock", "connect_readonly", "disk_is_full", "inspect_db", "short_error"]

DB_NAME = "cache.db"

BUSY, FULL, READONLY, CORRUPT, OTHER = "busy", "full", "readonly", "corrupt", "other"

# Primary SQLite result codes (https://sqlite.org/rescode.html).
_CODES = {5: BUSY, 6: BUSY, 8: READONLY, 11: CORRUPT, 13: FULL, 26: CORRUPT}
_TEXTS = (("database is locked", BUSY), ("database table is locked", BUSY), ("database is busy", BUSY),
          ("disk is full", FULL), ("readonly", READONLY), ("read-only", READONLY),
          ("malformed", CORRUPT), ("not a database", CORRUPT))
_ERRNOS = {errno.ENOSPC: FULL, errno.EDQUOT: FULL, errno.EROFS: READONLY, errno.EACCES: READONLY,
           errno.EPERM: READONLY}
_CANTOPEN, _IOERR, _IOERR_SHORT_READ = 14, 10, 10 | (2 << 8)


def _kind_of(err: BaseException, directory: Path | None) -> str:
    if type(err).__name__ == "Timeout" and type(err).__module__.startswith("diskcache"):
        return BUSY  # diskcache's BEGIN IMMEDIATE found the write lock taken for its whole timeout
    if isinstance(err, OSError):
        return _ERRNOS.get(err.errno, OTHER)
    if not isinstance(err, sqlite3.Error):
        return OTHER
    code = getattr(err, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    kind = _CODES.get(primary) if primary is not None else None
    if code == _IOERR_SHORT_READ:
        return CORRUPT  # the file ends before the pages its header counts: truncated
    if kind is None:
        text = str(err).lower()
        kind = next((k for needle, k in _TEXTS if needle in text), OTHER)
        if kind == OTHER and primary is None and "unable to open" in text:
            primary = _CANTOPEN
        if kind == OTHER and primary is None and "disk i/o error" in text:
            primary = _IOERR
    if kind == OTHER and directory is not None:
        # A WAL database in a folder we may not write cannot create its -wal/-shm files (CANTOPEN);
        # a full disk may show as a failed write (IOERR) rather than SQLITE_FULL.
        if primary == _CANTOPEN and directory.is_dir() and not os.access(directory, os.W_OK):
            return READONLY
        if primary == _IOERR and disk_is_full(directory):
            return FULL
    return kind


def fault_kind(err: BaseException, directory: Path | None = None) -> str:
    """BUSY, FULL, READONLY, CORRUPT or OTHER for ``err``, else for the error it was raised while
    handling (diskcache's ROLLBACK after a failed write can replace SQLITE_FULL with "no transaction
    is active"). ``directory`` (the cache folder) refines "unable to open" and "disk I/O error"."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        kind = _kind_of(current, directory)
        if kind != OTHER:
            return kind
        current = current.__cause__ or current.__context__
    return OTHER


def disk_is_full(directory: Path) -> bool:
    """Whether the file system holding ``directory`` has (almost) no space left for us."""
    try:
        st = os.statvfs(directory)
    except (OSError, AttributeError):
        return False
    return st.f_bavail * st.f_frsize < 64 * 1024


def write_lock_free(db: Path, timeout: float = 0.0) -> bool:
    """Whether this process could take ``db``'s write lock within ``timeout`` seconds (taken and
    released at once). Raises what is not a busy lock (read-only folder, corrupt file)."""
    conn = sqlite3.connect(str(db), timeout=max(0.0, timeout), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError as err:
        if fault_kind(err) == BUSY:
            return False
        raise
    finally:
        conn.close()


def wait_for_write_lock(db: Path, seconds: float, report: Callable[[float], None] | None = None,
                        step: float = 0.5) -> bool:
    """Whether ``db``'s write lock comes free within ``seconds``; ``report(waited)`` after every
    ``step`` seconds spent waiting. Never waits longer than ``seconds`` (plus one ``step``)."""
    start = time.monotonic()
    while True:
        left = seconds - (time.monotonic() - start)
        if write_lock_free(db, timeout=max(0.0, min(step, left))):
            return True
        waited = time.monotonic() - start
        if waited >= seconds:
            return False
        if report is not None:
            report(waited)


def connect_readonly(db: Path) -> sqlite3.Connection:
    """A read-only connection to ``db`` that has been used once (so a failure shows here).

    A WAL database in a folder we may not write cannot be read normally (its -shm file cannot be
    created); it is then opened as immutable, which is sound because nobody can write there either.
    """
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return conn
    except sqlite3.Error as err:
        conn.close()
        if fault_kind(err, db.parent) != READONLY:
            raise
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True, check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.Error:
        conn.close()
        raise
    return conn


# ---------------------------------------------------------------- is this a database the cache wrote?

_REFERENCE: dict[str, Any] = {}
_INSPECTED: dict[tuple, None] = {}


def _settings() -> dict[str, Any]:
    from diskcache.core import DEFAULT_SETTINGS

    return dict(DEFAULT_SETTINGS)


def _reference_schema() -> set[tuple[str, str, str | None]]:
    """(type, name, sql) of every schema object a fresh diskcache database has (computed once)."""
    if "schema" not in _REFERENCE:
        import tempfile

        import diskcache

        from .cache_disk import json_disk

        with tempfile.TemporaryDirectory() as tmp:
            diskcache.Cache(tmp, disk=json_disk(), **_settings()).close()
            conn = sqlite3.connect(os.path.join(tmp, DB_NAME))
            try:
                _REFERENCE["schema"] = set(conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
            finally:
                conn.close()
    return _REFERENCE["schema"]


def inspect_db(db: Path, *, fresh: bool = False) -> str | None:
    """Why ``db`` is not a database this module wrote (it fails its integrity check, is not a
    database, or holds foreign tables, triggers or settings), or None.

    Opened read-only; nothing in it runs. Memoised per file version unless ``fresh``. Raises
    (``sqlite3.Error``, ``OSError``) when it cannot tell: a busy lock, a read-only folder or an I/O
    error is never taken for corruption.
    """
    if db.is_symlink() or not db.is_file():
        return f"{DB_NAME} is not a regular file"
    st = db.stat()
    stamp = (str(db), st.st_ino, st.st_size, st.st_mtime_ns)
    if stamp in _INSPECTED and not fresh:
        return None
    try:
        conn = connect_readonly(db)
    except sqlite3.DatabaseError as err:
        if fault_kind(err) == CORRUPT:
            return f"cannot be opened: {short_error(err)}"
        raise
    try:
        check = conn.execute("PRAGMA quick_check").fetchall()
        if check != [("ok",)]:
            return f"integrity check failed: {str(check[0][0])[:100] if check else 'no answer'}"
        schema = set(conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
        extra = schema - _reference_schema()
        if extra:
            return f"unexpected schema objects: {', '.join(sorted(str(e[1]) for e in extra))[:100]}"
        if any(kind == "table" and name == "Settings" for kind, name, _ in schema):
            from diskcache.core import METADATA

            keys = {row[0] for row in conn.execute("SELECT key FROM Settings").fetchall()}
            unknown = keys - set(_settings()) - set(METADATA)
            if unknown:
                return f"unexpected settings: {', '.join(sorted(map(str, unknown)))[:100]}"
    except sqlite3.DatabaseError as err:
        if fault_kind(err) == CORRUPT:
            return short_error(err)
        raise
    finally:
        conn.close()
    _INSPECTED[stamp] = None
    return None


def short_error(err: BaseException) -> str:
    """An exception as a short message without any server path."""
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    for attr in ("filename", "filename2"):
        p = getattr(err, attr, None)
        if p:
            text = text.replace(str(p), os.path.basename(str(p)))
    return text[:200]
