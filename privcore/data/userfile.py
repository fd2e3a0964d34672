"""Reading a user's own data set from a CSV or NPZ file.

CSV: a header row, numeric feature columns and one label column named ``label`` (or ``y``,
``target``, ``class``; matched case-insensitively, in that order of preference). NPZ: arrays ``x``
(or ``X``) and ``y``. Labels may be integers or strings; the sorted unique labels become
``0..C-1``. Every problem raises :class:`DataFileError` naming the file and, where it applies, the
column and row, so that a user can fix the file without reading this code.
"""

from __future__ import annotations

import csv
import functools
import math
import os
import zipfile
from pathlib import Path

import numpy as np

from .errors import DataFileError
from .sources import RawSource, readonly

__all__ = ["load_user_file", "file_key", "clear_cache", "LABEL_COLUMNS", "MIN_ROWS"]

LABEL_COLUMNS: tuple[str, ...] = ("label", "y", "target", "class")
MIN_ROWS = 10


def file_key(path: str | os.PathLike[str]) -> tuple[str, int, int]:
    """``(absolute path, mtime in ns, size)``: identifies one version of a file for memoisation.

    Raises :class:`DataFileError` if the file does not exist.
    """
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise DataFileError(f"data_file {str(path)!r} does not exist or is not a regular file")
    st = p.stat()
    return str(p), st.st_mtime_ns, st.st_size


def load_user_file(path: str | os.PathLike[str]) -> RawSource:
    """Load a CSV or NPZ file into a :class:`RawSource` (x float32 ``[M, D0]``, y int64 ``[M]``)."""
    return _load_cached(*file_key(path))


def clear_cache() -> None:
    """Forget parsed user files."""
    _load_cached.cache_clear()


@functools.lru_cache(maxsize=4)
def _load_cached(path: str, mtime_ns: int, size: int) -> RawSource:
    # mtime and size are part of the cache key only: an edited file gets a fresh entry.
    del mtime_ns, size
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        x, labels = _read_csv(path)
    elif suffix == ".npz":
        x, labels = _read_npz(path)
    else:
        raise DataFileError(f"data_file {path!r} has unknown extension {suffix or '(none)'!r}: use .csv or .npz")
    return _finish(path, x, labels)


def _read_csv(path: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DataFileError(f"data_file {path!r} is not a readable UTF-8 CSV file: {exc}") from None
    if not rows:
        raise DataFileError(f"data_file {path!r} is empty: expected a header row and data rows")
    header = [h.strip() for h in rows[0]]
    lowered = [h.lower() for h in header]
    label_col = next((lowered.index(c) for c in LABEL_COLUMNS if c in lowered), None)
    if label_col is None:
        raise DataFileError(
            f"data_file {path!r} has no label column: name one column {' / '.join(LABEL_COLUMNS)} "
            f"(header is {header})"
        )
    feature_cols = [j for j in range(len(header)) if j != label_col]
    if not feature_cols:
        raise DataFileError(f"data_file {path!r} has a label column but no feature columns")
    # Line numbers are 1-based and count the header, matching what an editor shows; blank lines
    # are tolerated (a trailing newline is common) but still counted.
    body = [(line, r) for line, r in enumerate(rows[1:], start=2) if any(cell.strip() for cell in r)]
    x = np.empty((len(body), len(feature_cols)), dtype=np.float64)
    labels: list[str] = []
    for i, (line, row) in enumerate(body):
        if len(row) != len(header):
            raise DataFileError(
                f"data_file {path!r}: row {line} has {len(row)} fields, the header has {len(header)}"
            )
        for k, j in enumerate(feature_cols):
            cell = row[j].strip()
            try:
                x[i, k] = float(cell)
            except ValueError:
                raise DataFileError(
                    f"data_file {path!r}: non-numeric value {cell!r} in column {header[j]!r} at row {line}"
                ) from None
            if not math.isfinite(x[i, k]):
                raise DataFileError(
                    f"data_file {path!r}: NaN or infinite value {cell!r} in column {header[j]!r} at row {line}"
                )
        label = row[label_col].strip()
        if not label:
            raise DataFileError(f"data_file {path!r}: empty label in column {header[label_col]!r} at row {line}")
        labels.append(label)
    return x, _parse_labels(np.asarray(labels, dtype=str))


def _read_npz(path: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:  # not a zip, truncated, pickled, ...
        raise DataFileError(f"data_file {path!r} is not a readable .npz file: {exc}") from None
    xkey = "x" if "x" in arrays else "X" if "X" in arrays else None
    if xkey is None or "y" not in arrays:
        raise DataFileError(f"data_file {path!r} must hold arrays 'x' (or 'X') and 'y'; found {sorted(arrays)}")
    x, y = arrays[xkey], arrays["y"]
    if x.ndim < 2 or x.dtype.kind not in "biuf":
        raise DataFileError(
            f"data_file {path!r}: {xkey!r} must be a numeric array [rows, features], got {x.dtype} {x.shape}"
        )
    x = x.reshape(x.shape[0], -1).astype(np.float64)  # images [M, H, W] become rows
    y = y.reshape(-1)
    if y.shape[0] != x.shape[0]:
        raise DataFileError(f"data_file {path!r}: {xkey!r} has {x.shape[0]} rows but 'y' has {y.shape[0]} labels")
    _check_finite(path, x, xkey)
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise DataFileError(f"data_file {path!r}: 'y' contains NaN or infinite labels")
    if y.dtype.kind not in "biufUS":
        raise DataFileError(f"data_file {path!r}: 'y' must hold numbers or strings, got dtype {y.dtype}")
    return x, (y if y.dtype.kind in "biuf" else y.astype(str))


def _parse_labels(labels: np.ndarray) -> np.ndarray:
    # Integer-looking labels ("3", "3.0") are sorted numerically ("10" after "9"), others as strings.
    try:
        values = np.asarray([float(s) for s in labels])
    except ValueError:
        return labels
    if np.all(np.isfinite(values)) and np.all(values == np.round(values)):
        return values.astype(np.int64)
    return labels


def _check_finite(path: str, x: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(x)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise DataFileError(
            f"data_file {path!r}: NaN or infinite value {x[i, j]} in {name!r} at row index {i}, feature {j}"
        )


def _finish(path: str, x: np.ndarray, labels: np.ndarray) -> RawSource:
    if x.shape[0] < MIN_ROWS:
        raise DataFileError(f"data_file {path!r} has too few rows: {x.shape[0]} (need at least {MIN_ROWS})")
    uniq, y = np.unique(labels, return_inverse=True)
    if uniq.size < 2:
        raise DataFileError(f"data_file {path!r} has only one class ({uniq[0]!r}): need at least 2")
    shown = ", ".join(f"{u!r}->{k}" for k, u in enumerate(uniq[:12].tolist()))
    more = f", ... ({uniq.size} classes)" if uniq.size > 12 else ""
    return RawSource(
        x=readonly(x.astype(np.float32)),
        y=readonly(y.reshape(-1).astype(np.int64)),
        classes=int(uniq.size),
        pixel_scale=1.0,
        image_shape=None,
        notes=(
            f"user data file {path}; labels mapped {shown}{more}",
            "user features are used as given (no rescaling to [0, 1]) before the per-row clip to norm 1",
        ),
    )
