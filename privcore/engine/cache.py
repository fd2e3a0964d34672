"""On-disk result cache: plain numbers keyed by a hash of the point, the data and a schema version.

(Over 400 lines: the JSON-only disk, validation of every stored value and recovery from a
corrupt or read-only database are one safety boundary, kept in one module on purpose.)

The device is deliberately not part of the key: a result computed on a GPU is reused on a CPU.
Bump :data:`SCHEMA_VERSION` whenever a change alters what a stored number means.

The cache folder may be shared, copied or imported, so nothing read from it is trusted:

* Values are JSON text only (:class:`JSONOnlyDisk`): storing anything else is refused, and reading
  never unpickles, never follows a stored file name and never opens a file (a planted pickle or a
  row pointing at ``/etc/passwd`` reads as a bad value).
* Every value read is checked against the schema of a result (:func:`check_result`): a dict with
  the expected keys and types and finite numbers. A bad one is a miss (it is recomputed) and is
  reported once in :attr:`ResultCache.messages`.
* A corrupt database (random bytes, a truncated file, a folder in its place) is moved aside with a
  message and rebuilt. A read-only cache serves what it holds and stores nothing (message once).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

__all__ = ["SCHEMA_VERSION", "ResultCache", "point_key", "default_results_dir", "check_result",
           "MAX_VALUE_CHARS"]

SCHEMA_VERSION = 7  # 7: teachers solved in per-part bases (each a function of its own part); 6: PATE data-dependent epsilon (beta-smooth published cost), answered-only spread; 5: certified solver residual in every sensitivity, replace-one DP-SGD, approximate minima perturbation
# 4: JSON-only disk, validated reads (entries of 3 are not trusted)
# 3: DP-SGD draws batches and noise per chunk of steps; solves in the data eigenbasis
# 2: Gaussian loss perturbation calibrated on ||P b|| ~ sigma chi_2C; L-BFGS memory 5

#: A stored result is a few hundred characters; anything far larger is not ours.
MAX_VALUE_CHARS = 1_000_000
_DB_NAME = "cache.db"


def default_results_dir() -> Path:
    """``results`` in the cache folder (:func:`privcore.paths.cache_dir`)."""
    from ..paths import cache_dir

    return cache_dir() / "results"


def point_key(point: dict[str, Any], fingerprint: str) -> str:
    """sha256 of the canonical JSON of ``point`` + data ``fingerprint`` + schema version."""
    text = json.dumps({"point": point, "data": fingerprint, "schema": SCHEMA_VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- schema of a stored result

def _finite(value: Any, *, low: float | None = None, high: float | None = None) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        v = float(value)
    except OverflowError:  # a JSON integer of hundreds of digits
        return False
    return math.isfinite(v) and (low is None or v >= low) and (high is None or v <= high)


_SCALE_NUMBERS = ("sigma", "beta", "rho", "noise_multiplier", "per_query_epsilon", "per_query_delta", "sensitivity",
                  "solver_tolerance", "output_scale", "threshold", "test_noise", "cap")


def _check_scale(scale: Any) -> str | None:
    if not isinstance(scale, dict):
        return "scale is not an object"
    if not isinstance(scale.get("noise"), str):
        return "scale.noise is not a string"
    for key, value in scale.items():
        if not isinstance(key, str):
            return "scale has a non-string key"
        if key in _SCALE_NUMBERS or key in ("epsilon", "delta"):
            if value is None or value == "inf" or _finite(value, low=0.0):
                continue
            return f"scale.{key} is not a finite number >= 0"
        if key == "notes":
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                return "scale.notes is not a list of strings"
        elif not (value is None or isinstance(value, str)):
            return f"scale.{key} is not a string"
    return None


def check_result(value: Any) -> str | None:
    """None when ``value`` has the shape of a stored result (see ``runner._stored``), else why not.

    Required: ``accuracies`` (non-empty list of numbers in [0, 1]), ``accuracy_mean`` in [0, 1],
    ``accuracy_std`` >= 0, ``seconds`` >= 0 (all finite), ``device`` (str), ``lam`` (finite > 0),
    ``scale`` (an object of strings and finite numbers); optional ``note`` (str) and
    ``solver_grad_norm`` (finite >= 0 or null).
    """
    if not isinstance(value, dict):
        return f"not an object ({type(value).__name__})"
    acc = value.get("accuracies")
    if not isinstance(acc, list) or not acc or not all(_finite(a, low=0.0, high=1.0) for a in acc):
        return "accuracies is not a non-empty list of numbers in [0, 1]"
    if not _finite(value.get("accuracy_mean"), low=0.0, high=1.0):
        return "accuracy_mean is not a number in [0, 1]"
    if not _finite(value.get("accuracy_std"), low=0.0):
        return "accuracy_std is not a finite number >= 0"
    # The summary must be the repetitions' own (a one-byte edit of the stored mean came back as a wrong
    # accuracy, unnoticed): recomputed in float64, with room for the float32 sums the runner may use.
    mean = math.fsum(acc) / len(acc)
    if abs(value["accuracy_mean"] - mean) > 1e-6:
        return f"accuracy_mean {value['accuracy_mean']!r} is not the mean {mean:.9g} of its accuracies"
    std = math.sqrt(math.fsum((a - mean) ** 2 for a in acc) / (len(acc) - 1)) if len(acc) > 1 else 0.0
    if abs(value["accuracy_std"] - std) > 1e-5:
        return f"accuracy_std {value['accuracy_std']!r} is not the standard deviation {std:.9g} of its accuracies"
    if not _finite(value.get("seconds"), low=0.0):
        return "seconds is not a finite number >= 0"
    if not isinstance(value.get("device"), str) or len(value["device"]) > 200:
        return "device is not a short string"
    if not _finite(value.get("lam"), low=0.0) or value["lam"] <= 0:
        return "lam is not a finite number > 0"
    problem = _check_scale(value.get("scale"))
    if problem:
        return problem
    if not isinstance(value.get("note", ""), str):
        return "note is not a string"
    grad = value.get("solver_grad_norm")
    if grad is not None and not _finite(grad, low=0.0):
        return "solver_grad_norm is not a finite number >= 0"
    for key in ("answered_fraction", "accuracy_answered", "accuracy_answered_std"):  # methods that may abstain
        if value.get(key) is not None and not _finite(value[key], low=0.0, high=1.0):
            return f"{key} is not a number in [0, 1]"
    for key in ("epsilon_data_dependent", "epsilon_dd_published"):  # Confident-GNMax (not a guarantee)
        if value.get(key) is not None and not _finite(value[key], low=0.0):
            return f"{key} is not a finite number >= 0"
    return None


# ---------------------------------------------------------------- a disk that never unpickles

def _json_disk_class():  # noqa: ANN202 - built lazily so that importing this module stays cheap
    import diskcache
    from diskcache.core import MODE_RAW

    class JSONOnlyDisk(diskcache.Disk):
        """A diskcache ``Disk`` for str keys and str (JSON text) values, always stored inline.

        ``store`` refuses anything but a str; ``fetch`` returns the stored text for inline text
        rows and None for anything else (pickles, file references, blobs): it never calls pickle
        and never opens a file. ``get`` never unpickles a key.
        """

        def put(self, key: object) -> tuple[str, bool]:
            if type(key) is not str:
                raise TypeError(f"cache keys must be str, got {type(key).__name__}")
            return key, True

        def get(self, key: object, raw: bool) -> str:
            return key if (raw and isinstance(key, str)) else "<unreadable key>"

        def store(self, value: object, read: bool, key: object = None) -> tuple[int, int, None, str]:
            if read or type(value) is not str:
                raise TypeError(f"cache values must be JSON text (str), got {type(value).__name__}")
            if len(value) > MAX_VALUE_CHARS:
                raise ValueError(f"cache value of {len(value)} characters exceeds {MAX_VALUE_CHARS}")
            return 0, MODE_RAW, None, value

        def fetch(self, mode: int, filename: str | None, value: object, read: bool) -> str:
            if read or mode != MODE_RAW or filename is not None or not isinstance(value, str):
                return ""  # not ours: reported as a bad value by ResultCache.get
            return value

        def filename(self, key: object = None, value: object = None) -> tuple[str, str]:  # never used: values are inline
            raise TypeError("JSONOnlyDisk stores values inline only")

        def remove(self, file_path: str) -> None:  # never delete a file a row names
            return None

    return JSONOnlyDisk


_DISK_CLASS = None


def __getattr__(name: str) -> Any:  # ``from privcore.engine.cache import JSONOnlyDisk``
    if name == "JSONOnlyDisk":
        return _disk()
    raise AttributeError(name)


def _disk():  # noqa: ANN202
    global _DISK_CLASS
    if _DISK_CLASS is None:
        _DISK_CLASS = _json_disk_class()
    return _DISK_CLASS


_MODE_RAW = 1  # diskcache.core.MODE_RAW
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

        with tempfile.TemporaryDirectory() as tmp:
            diskcache.Cache(tmp, disk=_disk(), **_settings()).close()
            conn = sqlite3.connect(os.path.join(tmp, _DB_NAME))
            try:
                _REFERENCE["schema"] = set(conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
            finally:
                conn.close()
    return _REFERENCE["schema"]


def _inspect_db(db: Path) -> str | None:
    """Why ``db`` is not a database this module wrote (corrupt, foreign tables or triggers), or None.

    Opened read-only; nothing in it runs. Memoised per file version.
    """
    if db.is_symlink() or not db.is_file():
        return f"{_DB_NAME} is not a regular file"
    st = db.stat()
    stamp = (str(db), st.st_ino, st.st_size, st.st_mtime_ns)
    if stamp in _INSPECTED:
        return None
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error as err:
        return f"cannot be opened: {_short(err)}"
    try:
        check = conn.execute("PRAGMA quick_check").fetchall()
        if check != [("ok",)]:
            return f"integrity check failed: {str(check[0][0])[:100] if check else 'no answer'}"
        schema = set(conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
        extra = schema - _reference_schema()
        if extra:
            return f"unexpected schema objects: {', '.join(sorted(str(e[1]) for e in extra))[:100]}"
        from diskcache.core import METADATA

        keys = {row[0] for row in conn.execute("SELECT key FROM Settings").fetchall()}
        unknown = keys - set(_settings()) - set(METADATA)
        if unknown:
            return f"unexpected settings: {', '.join(sorted(map(str, unknown)))[:100]}"
    except sqlite3.DatabaseError as err:
        if _is_readonly_error(err):
            return None
        return _short(err)
    finally:
        conn.close()
    _INSPECTED[stamp] = None
    return None


def _is_readonly_error(err: BaseException) -> bool:
    text = str(err).lower()
    return isinstance(err, PermissionError) or "readonly" in text or "read-only" in text


class ResultCache:
    """A diskcache store of JSON-able result dicts; ``enabled=False`` turns it into a no-op.

    ``messages`` collects what went wrong with the cache itself (a corrupt database moved aside,
    a read-only folder, a bad stored value), each message once; :meth:`drain_messages` hands them
    over. ``validate`` checks every value read (default :func:`check_result`; None to accept any
    JSON object).
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, enabled: bool = True,
                 validate: Callable[[Any], str | None] | None = check_result) -> None:
        self.enabled = enabled
        self.directory = Path(directory) if directory is not None else default_results_dir()
        self.validate = validate
        self.readonly = False
        self.messages: list[str] = []
        #: True once the database was found corrupt (moved aside, or not): what it held is gone.
        self.damaged = False
        self._store = None
        self._ro_conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        if enabled:
            self._open()

    # ------------------------------------------------------------ opening and recovery

    def _note(self, message: str) -> None:
        if message not in self.messages:
            self.messages.append(message)

    def drain_messages(self) -> list[str]:
        """The messages so far (each once), then forget them."""
        out, self.messages = self.messages, []
        return out

    def _open(self, retry: bool = True) -> None:
        import diskcache

        db = self.directory / _DB_NAME
        try:
            if db.exists() or db.is_symlink():
                problem = _inspect_db(db)
                if problem is not None:
                    raise sqlite3.DatabaseError(problem)
            self.directory.mkdir(parents=True, exist_ok=True)
            # Every setting is passed explicitly: nothing read from the Settings table of a planted
            # database reaches diskcache's PRAGMA statements or the Disk.
            store = diskcache.Cache(str(self.directory), disk=_disk(), **_settings())
            try:
                store.get("__privcore_probe__")
            except BaseException:
                store.close()
                raise
            self._store = store
        except (sqlite3.DatabaseError, OSError) as err:
            if _is_readonly_error(err):
                self._open_readonly(db)
                return
            if retry and isinstance(err, sqlite3.DatabaseError) and self._quarantine(err):
                self._open(retry=False)
                return
            self._store = None
            self.enabled = False
            self._note(f"results cache unusable ({_short(err)}): results are computed but not stored")

    def _open_readonly(self, db: Path) -> None:
        """Serve what a read-only cache holds; store nothing."""
        self.readonly = True
        self._note("results cache is read-only: cached results are used, new ones are computed but not stored")
        if not db.is_file():
            return
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
            conn.execute("SELECT 1 FROM Cache LIMIT 1").fetchall()
            self._ro_conn = conn
        except sqlite3.Error as err2:
            self._note(f"results cache is read-only and unreadable ({_short(err2)}): nothing is served from it")

    def _quarantine(self, err: BaseException) -> bool:
        """Move a corrupt ``cache.db`` (and its journal files) aside; True when done. Sets :attr:`damaged`."""
        self.damaged = True
        with self._lock:
            if self._store is not None:
                try:
                    self._store.close()
                except Exception:  # noqa: BLE001
                    pass
                self._store = None
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
                self._note(f"results cache is corrupt ({_short(err)}) and could not be moved aside "
                           f"({_short(move_err)}): results are computed but not stored")
                return False
            self._note(f"results cache was corrupt ({_short(err)}): moved aside as {moved or _DB_NAME} in the "
                       "results folder and rebuilt")
            return True

    def _recover(self, err: BaseException) -> None:
        """A query failed on an open database: rebuild it if it is corrupt, else stop using it."""
        if _is_readonly_error(err):
            self.readonly = True
            self._note("results cache is read-only: cached results are used, new ones are computed but not stored")
            return
        if self._quarantine(err):
            self._open(retry=False)
        else:
            self.enabled = False

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
        except sqlite3.DatabaseError as err:
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

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` (must be JSON-serialisable: plain numbers, strings, lists)."""
        if not self.enabled or self.readonly or self._store is None:
            return
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as err:
            self._note(f"a result was not stored: {_short(err)}")
            return
        try:
            self._store.set(key, text)
        except sqlite3.DatabaseError as err:
            self._recover(err)
            if self._store is not None and not self.readonly:
                try:
                    self._store.set(key, text)
                except sqlite3.DatabaseError as err2:
                    self._note(f"results cache write failed ({_short(err2)}): results are not stored")
        except OSError as err:
            self._note(f"results cache write failed ({_short(err)}): results are not stored")

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
        except sqlite3.DatabaseError as err:
            self._recover(err)
        return []

    def put_many(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        """Store all of ``items`` in one transaction, or none of them (raises ``OSError`` then).

        Unlike :meth:`put`, a cache that cannot store is an error here (``results import``).
        """
        if not self.enabled or self.readonly or self._store is None:
            raise OSError("the results cache cannot be written" + (f" ({self.messages[-1]})" if self.messages else ""))
        texts = [(key, json.dumps(value, allow_nan=False)) for key, value in items]
        try:
            with self._lock, self._store.transact():
                for key, text in texts:
                    self._store.set(key, text)
        except sqlite3.DatabaseError as err:
            raise OSError(f"results cache write failed ({_short(err)}): nothing was stored") from None

    def clear(self) -> None:
        """Remove every stored result."""
        if self._store is not None and not self.readonly:
            try:
                self._store.clear()
            except sqlite3.DatabaseError as err:
                self._recover(err)

    def __len__(self) -> int:
        try:
            if self._store is not None:
                return len(self._store)
            if self._ro_conn is not None:
                return int(self._ro_conn.execute("SELECT COUNT(*) FROM Cache").fetchone()[0])
        except sqlite3.DatabaseError:
            return 0
        return 0


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _short(err: BaseException) -> str:
    """An exception as a short message without any server path."""
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    for attr in ("filename", "filename2"):
        p = getattr(err, attr, None)
        if p:
            text = text.replace(str(p), os.path.basename(str(p)))
    return text[:200]
