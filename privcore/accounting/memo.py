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
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from functools import lru_cache
from pathlib import Path

__all__ = ["memo_path", "lookup", "store"]

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
    if os.environ.get("PRIVCORE_CALIBRATION_MEMO", "").strip().lower() in ("off", "0", "no", "false"):
        return None
    env = os.environ.get("PRIVCORE_CACHE")
    base = Path(env).expanduser() if env else Path(__file__).resolve().parents[2] / "cache"
    return base / FILE_NAME


@lru_cache(maxsize=1)
def _code_version() -> str:
    """sha256 of the calibration sources and the installed dp-accounting, numpy and scipy versions (no import)."""
    from importlib import metadata

    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in _SOURCES:
        h.update((here / name).read_bytes())
    for package in _LIBRARIES:
        try:
            h.update(f"{package}={metadata.version(package)};".encode())
        except metadata.PackageNotFoundError:  # pragma: no cover - requirements
            h.update(f"{package}=none;".encode())
    return h.hexdigest()[:24]


def _key(name: str, args: tuple) -> str:
    parts = [repr(float(a)) if isinstance(a, float) else repr(a) for a in args]
    return f"{name}({', '.join(parts)})@{_code_version()}"


def _check(key: str, value: float) -> str:
    return hashlib.sha256(f"{key}={value!r}".encode()).hexdigest()[:16]


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
        for key, entry in entries.items():
            ok = (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], float)
                  and math.isfinite(entry[0]) and entry[0] > 0 and entry[1] == _check(key, entry[0]))
            if not ok:
                raise ValueError(f"entry {key[:60]!r} is damaged")
        return entries
    except (ValueError, TypeError, RecursionError) as exc:
        warnings.warn(f"ignoring the calibration memo {path}: {exc}", RuntimeWarning, stacklevel=3)
        return {}


def lookup(name: str, args: tuple) -> float | None:
    """The stored value of ``name(*args)`` for this code and accountant version, or None."""
    path = memo_path()
    if path is None:
        return None
    entry = _read(path).get(_key(name, args))
    return None if entry is None else float(entry[0])


def store(name: str, args: tuple, value: float) -> None:
    """Record ``name(*args) = value`` (a verified result). Failing to write is not an error."""
    path = memo_path()
    if path is None or not (isinstance(value, float) and math.isfinite(value) and value > 0):
        return
    from ..atomic import atomic_write

    entries = _read(path)
    key = _key(name, args)
    entries.pop(key, None)
    entries[key] = [value, _check(key, value)]
    while len(entries) > MAX_ENTRIES:  # oldest first (insertion order)
        entries.pop(next(iter(entries)))
    text = json.dumps({"format": FORMAT, "entries": entries}, indent=0)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))
    except OSError:
        pass  # a read-only cache only costs the next process a recomputation
