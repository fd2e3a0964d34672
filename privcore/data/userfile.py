"""Reading a user's own data set from a CSV or NPZ file.

CSV: a header row, numeric feature columns and one label column named ``label`` (or ``y``,
``target``, ``class``; matched case-insensitively, in that order of preference). NPZ: arrays ``x``
(or ``X``) and ``y``. Labels may be integers or strings; the sorted unique labels become
``0..C-1``. Every problem raises :class:`DataFileError` naming the file and, where it applies, the
column and row, so that a user can fix the file without reading this code.
"""

from __future__ import annotations

import csv
import io
import math
import os
import threading
import zipfile
import zlib
from collections import OrderedDict
from pathlib import Path

import numpy as np

from .. import limits
from .errors import DataFileError
from .sources import RawSource, readonly

__all__ = ["load_user_file", "csv_columns", "file_key", "clear_cache", "forget", "data_shape", "LABEL_COLUMNS",
           "MIN_ROWS"]

LABEL_COLUMNS: tuple[str, ...] = ("label", "y", "target", "class")
MIN_ROWS = 10


def _name(path: str | os.PathLike[str]) -> str:
    """The file's base name: messages never show a server path."""
    return os.path.basename(os.fspath(path)) or "(unnamed)"


def file_key(path: str | os.PathLike[str]) -> tuple[str, int, int]:
    """``(absolute path, mtime in ns, size)``: identifies one version of a file for memoisation.

    Raises :class:`DataFileError` if the file does not exist or cannot be inspected.
    """
    try:
        p = Path(path).expanduser().resolve()
        if p.is_dir():  # "does not exist" was wrong for a folder
            raise DataFileError(f"data_file {_name(path)!r} is a folder: name a CSV or NPZ file")
        if not p.is_file():
            raise DataFileError(f"data_file {_name(path)!r} does not exist or is not a regular file")
        st = p.stat()
    except (OSError, RuntimeError, ValueError) as exc:  # a loop of links, a NUL byte, a permission error
        if isinstance(exc, DataFileError):
            raise
        raise DataFileError(f"data_file {_name(path)!r} cannot be read: {_os_reason(exc)}") from None
    return str(p), st.st_mtime_ns, st.st_size


def load_user_file(path: str | os.PathLike[str], label_column: str | None = None) -> RawSource:
    """Load a CSV or NPZ file into a :class:`RawSource` (x float32 ``[M, D0]``, y int64 ``[M]``).

    ``label_column`` names the CSV column holding the labels (matched case-insensitively); None
    picks the first of :data:`LABEL_COLUMNS` present. An NPZ file's labels are always ``y``.

    Limits (see :mod:`privcore.limits`) are checked before anything is parsed or inflated: the
    file size, an NPZ's declared array shapes and entry sizes, a CSV's columns, and rows x columns
    x 8 bytes against the memory budget.
    """
    if label_column is not None and (not isinstance(label_column, str) or not label_column.strip()):
        raise DataFileError(f"label_column must be a column name or None, got {label_column!r}")
    return _load_cached(*file_key(path), label_column.strip() if label_column else None)


def csv_columns(path: str | os.PathLike[str]) -> list[str]:
    """The header of a CSV file (for a label-column picker); [] for an NPZ file."""
    name = _name(path)
    if Path(path).suffix.lower() != ".csv":
        return []
    try:
        with _open_text(os.fspath(path)) as fh:
            first = next(csv.reader(fh), None)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataFileError(f"data_file {name!r} cannot be read: {_clip(str(exc))}") from None
    return [h.strip() for h in (first or [])][: limits.max_columns()]


def clear_cache() -> None:
    """Forget parsed user files."""
    with _PARSED_LOCK:
        _PARSED.clear()


def forget(path: str | os.PathLike[str]) -> int:
    """Forget the parsed versions of the file at ``path`` (every label column); how many were held.

    The dashboard calls it when an upload is deleted or its last session ends, so that its memory
    goes back (the parsed matrix is the file's size as float32)."""
    target = os.path.realpath(os.fspath(path))
    with _PARSED_LOCK:
        gone = [k for k in _PARSED if k[0] == target]
        for k in gone:
            del _PARSED[k]
    return len(gone)


def data_shape(source: str | os.PathLike[str] | bytes, suffix: str | None = None) -> tuple[int, int] | None:
    """(rows, feature columns) of a CSV or NPZ file, read cheaply: a CSV's header and its non-blank
    lines counted without parsing a number, an NPZ's array headers without inflating anything.

    ``source`` is a path or the file's bytes (then ``suffix``, ``.csv`` or ``.npz``, says which).
    None when the file cannot be read that far: the full reader then says what is wrong with it.
    Used to refuse an upload above :func:`privcore.limits.max_upload_cells` before it is stored.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        kind = (suffix or "").lower()
        raw = io.BytesIO(bytes(source))
    else:
        kind = (suffix or Path(source).suffix).lower()
        raw = None
    try:
        if kind == ".csv":
            fh = (io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") if raw is not None
                  else _open_text(os.fspath(source)))
            with fh:
                reader = csv.reader(fh)
                header = next(reader, None)
                if not header:
                    return None
                rows = sum(1 for row in reader if row and (len(row) > 1 or row[0].strip()))
            return rows, max(len(header) - 1, 0)
        if kind == ".npz":
            with zipfile.ZipFile(raw if raw is not None else os.fspath(source)) as zf:
                entries = {i.filename[:-4]: i for i in zf.infolist() if i.filename.endswith(".npy")}
                key = "x" if "x" in entries else "X" if "X" in entries else None
                if key is None:
                    return None
                shape, _ = _npy_header(zf, entries[key], "(upload)", key)
            if len(shape) < 2:
                return None
            return int(shape[0]), int(math.prod(shape[1:]))
    except (OSError, ValueError, UnicodeDecodeError, csv.Error, zipfile.BadZipFile, EOFError, RuntimeError,
            NotImplementedError, zlib.error, DataFileError):
        return None
    return None


def _os_reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or type(exc).__name__


#: Parsed files, most recent last: (path, mtime_ns, size, label column) -> RawSource. Few, because
#: each holds a whole matrix; :func:`forget` drops one file's entries.
_PARSED: OrderedDict[tuple, RawSource] = OrderedDict()
_PARSED_SIZE = 4
_PARSED_LOCK = threading.Lock()


def _load_cached(path: str, mtime_ns: int, size: int, label_column: str | None = None) -> RawSource:
    # mtime and size are part of the key: an edited file gets a fresh entry.
    key = (path, mtime_ns, size, label_column)
    with _PARSED_LOCK:
        hit = _PARSED.get(key)
        if hit is not None:
            _PARSED.move_to_end(key)
            return hit
    src = _parse(path, size, label_column)
    with _PARSED_LOCK:
        _PARSED[key] = src
        _PARSED.move_to_end(key)
        while len(_PARSED) > _PARSED_SIZE:
            _PARSED.popitem(last=False)
    return src


def _parse(path: str, size: int, label_column: str | None) -> RawSource:
    name = _name(path)
    suffix = Path(path).suffix.lower()
    if suffix not in (".csv", ".npz"):
        raise DataFileError(f"data_file {name!r} has unknown extension {suffix or '(none)'!r}: use .csv or .npz")
    if size > limits.max_file_bytes():
        raise DataFileError(
            f"data_file {name!r} is {size / 2**20:,.1f} MB, above the limit of "
            f"{limits.max_file_bytes() / 2**20:,.0f} MB ({limits.limit_hint('PRIVCORE_MAX_FILE_MB')})")
    try:
        if suffix == ".csv":
            x, labels, columns = _read_csv(path, name, label_column)
        else:
            if label_column not in (None, "y"):
                raise DataFileError(f"data_file {name!r} is an NPZ file: its labels are the array 'y', "
                                    f"so label_column {label_column!r} does not apply")
            x, labels = _read_npz(path, name)
            columns = None
    except OSError as exc:  # unreadable: permissions, a vanished file, an I/O error
        raise DataFileError(f"data_file {name!r} cannot be read: {_os_reason(exc)}") from None
    except MemoryError:
        raise DataFileError(f"data_file {name!r} does not fit in memory") from None
    return _finish(name, x, labels, columns)


def _open_text(path: str):  # noqa: ANN202 - one place to open files (tests replace it)
    return open(path, newline="", encoding="utf-8-sig")


def _budget_rows(name: str, columns: int) -> int:
    """Most rows of ``columns`` float64 values that fit the memory budget."""
    budget = limits.max_data_bytes()
    rows = budget // (8 * max(columns, 1))
    if rows < MIN_ROWS:
        raise DataFileError(
            f"data_file {name!r}: {columns:,} columns x 8 bytes leave room for fewer than {MIN_ROWS} rows in the "
            f"memory budget of {budget / 2**20:,.0f} MB ({limits.limit_hint('PRIVCORE_MAX_DATA_MB')})")
    return rows


#: Column separators other than the comma that spreadsheets write (Excel in many locales: ';').
OTHER_DELIMITERS = (";", "\t", "|")


def _check_delimiter(header: list[str], name: str) -> None:
    """A header read as one column that another separator splits into several: the file is not comma-separated
    (the "no label column" message that followed pointed at the label, and the label list offered one column)."""
    if len(header) != 1:
        return
    for sep in OTHER_DELIMITERS:
        parts = header[0].split(sep)
        if len(parts) > 1:
            shown = "a tab" if sep == "\t" else repr(sep)
            raise DataFileError(
                f"data_file {name!r} separates its columns with {shown}, not commas (its header {_clip(header[0])!r} "
                f"reads as one column): save it as comma-separated values (CSV), or as NPZ")


def _read_csv(path: str, name: str, label_column: str | None = None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    try:
        with _open_text(path) as fh:
            reader = csv.reader(fh)
            first = next(reader, None)
            if first is None:
                raise DataFileError(f"data_file {name!r} is empty: expected a header row and data rows")
            header = [h.strip() for h in first]
            _check_delimiter(header, name)
            if len(header) > limits.max_columns():
                raise DataFileError(
                    f"data_file {name!r} has {len(header):,} columns, above the limit of {limits.max_columns():,} "
                    f"({limits.limit_hint('PRIVCORE_MAX_COLUMNS')})")
            lowered = [h.lower() for h in header]
            seen: dict[str, str] = {}
            for h, low in zip(header, lowered):
                if low in seen:
                    raise DataFileError(
                        f"data_file {name!r} has the column name {h!r} more than once"
                        + ("" if seen[low] == h else f" (as {seen[low]!r} and {h!r})")
                        + ": give every column a distinct name")
                seen[low] = h
            if label_column is not None:
                if label_column.lower() not in lowered:
                    shown = ", ".join(repr(h) for h in header[:20]) + (", ..." if len(header) > 20 else "")
                    raise DataFileError(f"data_file {name!r} has no column {_clip(label_column)!r} to use as the "
                                        f"label (header is {shown})")
                label_col = lowered.index(label_column.lower())
            else:
                label_col = next((lowered.index(c) for c in LABEL_COLUMNS if c in lowered), None)
            if label_col is None:
                shown = ", ".join(repr(h) for h in header[:20]) + (", ..." if len(header) > 20 else "")
                raise DataFileError(
                    f"data_file {name!r} has no label column: name one column {' / '.join(LABEL_COLUMNS)} "
                    f"(header is {shown})"
                )
            feature_cols = [j for j in range(len(header)) if j != label_col]
            if not feature_cols:
                raise DataFileError(f"data_file {name!r} has a label column but no feature columns")
            max_rows = _budget_rows(name, len(feature_cols))
            x = np.empty((min(1024, max_rows), len(feature_cols)), dtype=np.float64)
            labels: list[str] = []
            count = 0
            # Errors name the file line (1-based, the header and blank lines counted, as an editor shows
            # it; a quoted cell may span lines: the record's last line) and the data row (1-based, the
            # header and blank lines not counted), which differ by at least one.
            for row in reader:
                if not any(cell.strip() for cell in row):
                    continue
                line = f"line {reader.line_num} (data row {count + 1})"
                if len(row) != len(header):
                    raise DataFileError(
                        f"data_file {name!r}: {line} has {len(row)} fields, the header has {len(header)}"
                    )
                if count >= max_rows:
                    raise DataFileError(
                        f"data_file {name!r} has more than {max_rows:,} rows of {len(feature_cols):,} features: "
                        f"above the memory budget of {limits.max_data_bytes() / 2**20:,.0f} MB "
                        f"({limits.limit_hint('PRIVCORE_MAX_DATA_MB')})")
                if count == x.shape[0]:
                    grown = np.empty((min(2 * count, max_rows), x.shape[1]), dtype=np.float64)
                    grown[:count] = x
                    x = grown
                for k, j in enumerate(feature_cols):
                    cell = row[j].strip()
                    try:
                        value = float(cell)
                    except ValueError:
                        raise DataFileError(
                            f"data_file {name!r}: non-numeric value {_clip(cell)!r} in column {_clip(header[j])!r} "
                            f"at {line}"
                        ) from None
                    if not math.isfinite(value):
                        raise DataFileError(
                            f"data_file {name!r}: NaN or infinite value {_clip(cell)!r} in column "
                            f"{_clip(header[j])!r} at {line}"
                        )
                    x[count, k] = value
                label = row[label_col].strip()
                if not label:
                    raise DataFileError(
                        f"data_file {name!r}: empty label in column {header[label_col]!r} at {line}")
                if label.lower() == "nan":  # a missing label written out (pandas' str(nan)), as NaN in an .npz
                    raise DataFileError(f"data_file {name!r}: label {label!r} in column {header[label_col]!r} at "
                                        f"{line} is a missing value: give every row a label")
                labels.append(label)
                count += 1
    except UnicodeDecodeError as exc:  # in words, not the codec's own message
        raise DataFileError(f"data_file {name!r} is not a readable UTF-8 CSV file: byte {exc.object[exc.start]:#04x} "
                            "is not UTF-8 text (save the file as UTF-8 CSV)") from None
    except csv.Error as exc:
        raise DataFileError(f"data_file {name!r} is not a readable UTF-8 CSV file: {_clip(str(exc))}") from None
    return x[:count], _parse_labels(np.asarray(labels, dtype=str)), tuple(header[j] for j in feature_cols)


def _clip(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def _npy_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, key: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from the header of one ``.npy`` entry, reading only its first bytes."""
    try:
        with zf.open(info) as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version in ((2, 0), (3, 0)):
                shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                raise ValueError(f"unsupported .npy version {version}")
            header_len = fh.tell()
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, NotImplementedError, RuntimeError,
            SyntaxError, TypeError, KeyError, zlib.error) as exc:
        raise DataFileError(f"data_file {name!r}: array {key!r} is not a readable .npy entry ({_clip(str(exc))})") from None
    if dtype.hasobject:
        raise DataFileError(f"data_file {name!r}: array {key!r} holds Python objects, which are never loaded; "
                            "save numbers or strings")
    if not all(isinstance(s, int) and s >= 0 for s in shape):
        raise DataFileError(f"data_file {name!r}: array {key!r} has an invalid shape {shape}")
    cells = math.prod(shape)
    if cells * dtype.itemsize + header_len > info.file_size:
        raise DataFileError(
            f"data_file {name!r}: array {key!r} claims shape {shape} ({_mb(cells * dtype.itemsize)}) but its entry "
            f"holds {_mb(info.file_size)}: the file is truncated or damaged")
    return tuple(shape), dtype


def _mb(nbytes: int | float) -> str:
    return f"{nbytes / 2**20:,.1f} MB"


def _read_npz(path: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    budget = limits.max_data_bytes()
    try:
        zf = zipfile.ZipFile(path)
    except (ValueError, EOFError, zipfile.BadZipFile, NotImplementedError, RuntimeError, zlib.error) as exc:
        raise DataFileError(f"data_file {name!r} is not a readable .npz file: {_clip(str(exc))}") from None
    with zf:
        entries = {i.filename[:-4]: i for i in zf.infolist() if i.filename.endswith(".npy")}
        xkey = "x" if "x" in entries else "X" if "X" in entries else None
        if xkey is None or "y" not in entries:
            found = ", ".join(repr(k) for k in sorted(entries)[:10])
            raise DataFileError(f"data_file {name!r} must hold arrays 'x' (or 'X') and 'y'; found [{found}]")
        # Sizes first, from the zip directory and the .npy headers: nothing is inflated before the
        # whole file is known to fit.
        for key in (xkey, "y"):
            info = entries[key]
            if info.file_size > budget + 4096:
                raise DataFileError(
                    f"data_file {name!r}: array {key!r} inflates to {_mb(info.file_size)}, above the memory budget of "
                    f"{_mb(budget)} ({limits.limit_hint('PRIVCORE_MAX_DATA_MB')})")
            if info.file_size > 16 * 2**20 and info.file_size > limits.MAX_ZIP_RATIO * max(info.compress_size, 1):
                raise DataFileError(
                    f"data_file {name!r}: array {key!r} inflates from {_mb(info.compress_size)} to "
                    f"{_mb(info.file_size)}, more than {limits.MAX_ZIP_RATIO} times: refused as a likely zip bomb")
        xshape, xdtype = _npy_header(zf, entries[xkey], name, xkey)
        yshape, ydtype = _npy_header(zf, entries["y"], name, "y")
        if len(xshape) < 2 or xdtype.kind not in "biuf":
            raise DataFileError(
                f"data_file {name!r}: {xkey!r} must be a numeric array [rows, features], got {xdtype} {xshape}"
            )
        rows, cols = xshape[0], math.prod(xshape[1:])
        if cols == 0:
            raise DataFileError(f"data_file {name!r}: {xkey!r} has no features (shape {xshape})")
        if rows < MIN_ROWS:
            raise DataFileError(f"data_file {name!r} has too few rows: {rows} (need at least {MIN_ROWS})")
        if cols > limits.max_columns():
            raise DataFileError(
                f"data_file {name!r}: {xkey!r} has {cols:,} features, above the limit of {limits.max_columns():,} "
                f"({limits.limit_hint('PRIVCORE_MAX_COLUMNS')})")
        if rows * cols * 8 > budget:
            raise DataFileError(
                f"data_file {name!r}: {xkey!r} is {rows:,} x {cols:,}, which needs {_mb(rows * cols * 8)} as float64: "
                f"above the memory budget of {_mb(budget)} ({limits.limit_hint('PRIVCORE_MAX_DATA_MB')})")
        if ydtype.kind not in "biufUS":
            raise DataFileError(f"data_file {name!r}: 'y' must hold numbers or strings, got dtype {ydtype}")
        ycount = math.prod(yshape)
        if ycount != rows:
            raise DataFileError(f"data_file {name!r}: {xkey!r} has {rows} rows but 'y' has {ycount} labels")
        try:
            with zf.open(entries[xkey]) as fh:
                x = np.lib.format.read_array(fh, allow_pickle=False)
            with zf.open(entries["y"]) as fh:
                y = np.lib.format.read_array(fh, allow_pickle=False)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, NotImplementedError, RuntimeError,
                zlib.error) as exc:
            raise DataFileError(f"data_file {name!r} is not a readable .npz file: {_clip(str(exc))}") from None
    x = x.reshape(x.shape[0], -1).astype(np.float64)  # images [M, H, W] become rows
    y = y.reshape(-1)
    _check_finite(name, x, xkey)
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise DataFileError(f"data_file {name!r}: 'y' contains NaN or infinite labels")
    return x, (y if y.dtype.kind in "biuf" else y.astype(str))


def _parse_labels(labels: np.ndarray) -> np.ndarray:
    """Integer-looking labels ("3", "3.0", "1e3") become int64 and sort numerically ("10" after "9");
    any other set stays text. Read exactly (``decimal.Decimal``), never through float: "10000000000000001"
    and "10000000000000000" were one class, and "1e19" wrapped to -2**63. Labels beyond int64 stay text."""
    from decimal import Decimal, InvalidOperation

    values = []
    for s in labels:
        try:
            d = Decimal(str(s).strip())
        except InvalidOperation:
            return labels
        if not d.is_finite() or d != d.to_integral_value():
            return labels
        v = int(d)
        if not -(2 ** 63) <= v < 2 ** 63:
            return labels
        values.append(v)
    return np.asarray(values, dtype=np.int64)


def _check_finite(path: str, x: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(x)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise DataFileError(
            f"data_file {path!r}: NaN or infinite value {float(x[i, j])} in {name!r} at row index {i}, feature {j}"
        )


def _finish(path: str, x: np.ndarray, labels: np.ndarray, columns: tuple[str, ...] | None = None) -> RawSource:
    if x.shape[0] < MIN_ROWS:
        raise DataFileError(f"data_file {path!r} has too few rows: {x.shape[0]} (need at least {MIN_ROWS})")
    if x.size and float(np.abs(x).max()) > float(np.finfo(np.float32).max):
        raise DataFileError(f"data_file {path!r} has values beyond +-3.4e38, which do not fit in float32: "
                            "rescale the features")
    uniq, y = np.unique(labels, return_inverse=True)
    if uniq.size < 2:
        only = uniq[0].item() if hasattr(uniq[0], "item") else uniq[0]
        raise DataFileError(f"data_file {path!r} has only one class ({_clip(str(only), 30)!r}): need at least 2")
    shown = ", ".join(f"{_clip(str(u), 30)!r}->{k}" if isinstance(u, str) else f"{u!r}->{k}"
                      for k, u in enumerate(uniq[:12].tolist()))
    more = f", ... ({uniq.size} classes)" if uniq.size > 12 else ""
    return RawSource(
        x=readonly(x.astype(np.float32)),
        y=readonly(y.reshape(-1).astype(np.int64)),
        classes=int(uniq.size),
        pixel_scale=1.0,
        image_shape=None,
        notes=(
            f"user data file {path}; labels mapped {shown}{more}: this label set was read off the file, so the "
            "guarantee holds among data sets with the same labels; a row whose label no other row has would change "
            "the classes and this map, which is not covered",
        ),
        columns=columns,
        label_names=tuple(str(u) for u in uniq.tolist()),
    )
