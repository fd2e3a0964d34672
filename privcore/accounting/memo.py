"""A small on-disk memo of DP-SGD noise multipliers: a repeated calibration skips the accountant.

``dpsgd_noise_multiplier`` (PLD accountant) costs the ``dp_accounting`` import (about 1 s, scipy.stats
and friends) plus a few accountant evaluations per epsilon. Its answer depends only on its
arguments, the calibration code and the accountant's version, so it is stored here, as plain JSON
in ``$PRIVCORE_CACHE/calibrations.json`` (else ``<repo>/cache/calibrations.json``), and a later
process with the same inputs reads it instead of importing dp_accounting at all.

Soundness: only multipliers that the PLD search verified are stored (it writes after the check).
The key holds every argument (floats as ``repr``, exact), a sha256 of the calibration code's own
source files (any change to the search, the grids or this file starts afresh) and the installed
dp-accounting, numpy and scipy versions; each entry carries a sha256 of its key and value, so a
damaged entry is detected. That checksum is not keyed: an entry edited by hand along with its
checksum would pass it, so dpsgd.py also re-checks every replace-one multiplier it reads here
against the independent numpy PLD (pld_approx, a few ms) and recomputes one that is too small. A file that cannot be read, is not this format, or has a damaged entry is ignored as a
whole with a warning (and replaced on the next store). Nothing is ever unpickled: JSON numbers only.
``PRIVCORE_CALIBRATION_MEMO=off`` disables it (the evaluation-counting tests do).

A second, read-only table in the same format ships with privcore (``calibrations_bundled.json``,
written by privcore/accounting/bundle.py): a lookup that misses the user's memo consults it, so the
dashboard's default settings are answered without the accountant even on a first run. Its entries
are re-checked on reading like any other. ``PRIVCORE_CALIBRATION_BUNDLE=off`` (or the memo's own
``off``) leaves it out.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from functools import lru_cache
from pathlib import Path

__all__ = ["memo_path", "bundled_path", "lookup", "bundled_value", "store", "key", "checksum", "write_entries",
           "library_versions"]

FILE_NAME = "calibrations.json"
FORMAT = "privcore-calibration-memo-1"
MAX_ENTRIES = 4096
#: The files whose source decides a calibration: a change to any of them changes every key
#: (gaussian.py only places the search's start, which can still move the returned z within its tolerance).
_SOURCES = ("dpsgd.py", "pld_approx.py", "memo.py", "gaussian.py")
#: The installed libraries whose numbers decide it: the accountant and what it computes with.
_LIBRARIES = ("dp-accounting", "numpy", "scipy")


def memo_path() -> Path | None:
    """Where the memo lives, or None when ``PRIVCORE_CALIBRATION_MEMO`` is ``off``/``0``."""
    if _off("PRIVCORE_CALIBRATION_MEMO"):
        return None
    env = os.environ.get("PRIVCORE_CACHE")
    base = Path(env).expanduser() if env else Path(__file__).resolve().parents[2] / "cache"
    return base / FILE_NAME


def _off(variable: str) -> bool:
    return os.environ.get(variable, "").strip().lower() in ("off", "0", "no", "false")


def bundled_path() -> Path | None:
    """The table shipped with privcore, or None when it is switched off (either variable ``off``)."""
    if _off("PRIVCORE_CALIBRATION_MEMO") or _off("PRIVCORE_CALIBRATION_BUNDLE"):
        return None
    from .table import BUNDLED_PATH

    return BUNDLED_PATH


def library_versions() -> dict[str, str]:
    """The installed versions of the libraries in every key (:data:`_LIBRARIES`), without importing them."""
    from importlib import metadata

    out = {}
    for package in _LIBRARIES:
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:  # pragma: no cover - requirements
            out[package] = "none"
    return out


@lru_cache(maxsize=1)
def _code_version() -> str:
    """sha256 of the calibration sources and the installed dp-accounting, numpy and scipy versions (no import)."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in _SOURCES:
        h.update((here / name).read_bytes())
    for package, version in library_versions().items():
        h.update(f"{package}={version};".encode())
    return h.hexdigest()[:24]


def key(name: str, args: tuple) -> str:
    """The entry key of ``name(*args)``: every argument exactly, and :func:`_code_version`."""
    parts = [repr(float(a)) if isinstance(a, float) else repr(a) for a in args]
    return f"{name}({', '.join(parts)})@{_code_version()}"


def checksum(entry_key: str, value: float) -> str:
    """The per-entry sha256 that detects damage (not a signature: see the module docstring)."""
    return hashlib.sha256(f"{entry_key}={value!r}".encode()).hexdigest()[:16]



def _read(path: Path) -> dict[str, list]:
    """The entries of ``path`` ({} if absent); a damaged or foreign file: {} and a warning."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        warnings.warn(f"ignoring the calibration memo {path}: cannot read it ({exc})", RuntimeWarning, stacklevel=3)
        return {}
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
            raise ValueError("not a privcore calibration memo")
        entries = data["entries"]
        for k, entry in entries.items():
            ok = (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], float)
                  and math.isfinite(entry[0]) and entry[0] > 0 and entry[1] == checksum(k, entry[0]))
            if not ok:
                raise ValueError(f"entry {k[:60]!r} is damaged")
        return entries
    except (ValueError, TypeError, RecursionError) as exc:
        warnings.warn(f"ignoring the calibration memo {path}: {exc}", RuntimeWarning, stacklevel=3)
        return {}


@lru_cache(maxsize=2)
def _bundled_entries(path: Path) -> dict[str, list]:
    """The table's entries, read once per process; {} with a warning when its sha256 is not the one
    privcore/accounting/table.py names (editing the table takes editing the code too)."""
    from .table import TABLE_SHA256

    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return {}
    if digest != TABLE_SHA256:
        warnings.warn(f"ignoring the calibration table {path}: its sha256 {digest[:16]}... is not the one "
                      "privcore/accounting/table.py names (rebuild it: python -m privcore.accounting.bundle)",
                      RuntimeWarning, stacklevel=3)
        return {}
    return _read(path)


def bundled_value(name: str, args: tuple) -> float | None:
    """The value of ``name(*args)`` in the table shipped with privcore, or None."""
    path = bundled_path()
    entry = None if path is None else _bundled_entries(path).get(key(name, args))
    return None if entry is None else float(entry[0])


def lookup(name: str, args: tuple, *, bundled: bool = True) -> float | None:
    """The stored value of ``name(*args)`` for this code and accountant version: the user's memo,
    then (with ``bundled``) the table shipped with privcore; None when neither has it (or the memo
    is off). The caller passes ``bundled=False`` where it cannot re-check what it reads."""
    path = memo_path()
    if path is None:
        return None
    entry = _read(path).get(key(name, args))
    if entry is not None:
        return float(entry[0])
    return bundled_value(name, args) if bundled else None


def write_entries(path: Path, entries: dict[str, list], **extra: object) -> None:
    """Write ``entries`` (key -> [value, checksum]) as a memo file at ``path`` (atomically); ``extra``
    top-level fields (e.g. the library versions of a bundled table) are kept for readers."""
    from ..atomic import atomic_write

    text = json.dumps({"format": FORMAT, **extra, "entries": entries}, indent=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))


def store(name: str, args: tuple, value: float) -> None:
    """Record ``name(*args) = value`` (a verified result). Failing to write is not an error."""
    path = memo_path()
    if path is None or not (isinstance(value, float) and math.isfinite(value) and value > 0):
        return
    entries = _read(path)
    k = key(name, args)
    entries.pop(k, None)
    entries[k] = [value, checksum(k, value)]
    while len(entries) > MAX_ENTRIES:  # oldest first (insertion order)
        entries.pop(next(iter(entries)))
    try:
        write_entries(path, entries)
    except OSError:
        pass  # a read-only cache only costs the next process a recomputation
