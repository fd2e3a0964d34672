"""``python -m privcore results export|import``: move computed points between machines.

A results file is JSON Lines. Line 1 is a header (format, version, the cache schema and the number
of records); every other line is one point::

    {"format": "privcore-results", "version": 1, "schema": 5, "count": 2}
    {"key": "<sha256>", "schema": 5, "data": "<data fingerprint>", "point": {...}, "value": {...}}

``point`` is the point's identity (method, epsilon, delta, accounting, repeats, seed and the
settings the method uses) and ``data`` the fingerprint of the data set it was computed on; the key
is ``point_key(point, data)``. ``value`` is the stored result (accuracies, noise scale, timing).

Import trusts nothing in the file: every line must parse, name this privcore's cache schema,
have a key equal to the one recomputed from its point and fingerprint, and a value of the shape
of a stored result (:func:`~privcore.engine.cache.check_result`) that agrees with its own point
(:func:`~privcore.engine.import_checks.check_against_point`: repetitions, method, ε, δ, accounting
and the noise recomputed); the record count must match the header. One bad line and nothing is
imported (the error names every bad line, by number, up to 20; a record that contradicts its point
as "record i (line N): field: why", i counting the records after the header from 0); otherwise
all new points are written in one transaction. Points already in the cache are kept. What the
checks cannot tell is whether the accuracies are true: import files you trust.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable

from ..atomic import atomic_write
from .cache import SCHEMA_VERSION, MAX_VALUE_CHARS, ResultCache, check_result, default_results_dir, point_key
from .cache_faults import DB_NAME
from .import_checks import check_against_point

__all__ = ["add_results_parser", "run_results_command", "export_results", "import_results", "ImportRejected", "CacheDamaged",
           "FORMAT", "FORMAT_VERSION"]

FORMAT = "privcore-results"
FORMAT_VERSION = 1
_RECORD_KEYS = {"key", "schema", "data", "point", "value"}
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_MAX_LINE_CHARS = 2 * MAX_VALUE_CHARS
_MAX_ERRORS = 20
#: Fields a stored value carries for export only (the record holds them at its top level).
_IDENTITY = ("point", "data")


class ImportRejected(ValueError):
    """A results file failed validation; ``problems`` are 'line N: why' strings. Nothing was imported."""

    def __init__(self, problems: list[str], total: int) -> None:
        self.problems = problems
        self.total = total
        more = f" (and {total - len(problems)} more)" if total > len(problems) else ""
        super().__init__(f"{total} bad line{'s' if total != 1 else ''}, nothing was imported: "
                         + "; ".join(problems) + more)


def _accept_any(_value: Any) -> None:
    return None


def _record(key: str, value: Any) -> dict[str, Any] | None:
    """The export record of one stored entry, or None (no identity, other shape, or a stale key)."""
    if not isinstance(value, dict) or check_result(value) is not None:
        return None
    point, data = value.get("point"), value.get("data")
    if not isinstance(point, dict) or not isinstance(data, str) or point_key(point, data) != key:
        return None
    return {"key": key, "schema": SCHEMA_VERSION, "data": data, "point": point,
            "value": {k: v for k, v in value.items() if k not in _IDENTITY}}


class CacheDamaged(OSError):
    """The results cache was found damaged (and moved aside) while exporting: nothing was written."""


def export_results(out: str | os.PathLike[str], cache: ResultCache | None = None, *,
                   before_write: Callable[[int], None] | None = None) -> tuple[int, int]:
    """Write every exportable point of ``cache`` to ``out`` (atomically: a temporary file, then a rename).

    Returns (exported, skipped): skipped entries are those without a stored identity (computed
    before privcore stored one, or records of another kind such as leakage results). ``before_write``
    is called with the number of points before ``out`` is touched (it may refuse by raising).
    """
    store = cache if cache is not None else ResultCache()
    records, skipped = [], 0
    for key in sorted(store.keys()):
        rec = _record(key, store.get(key, validate=_accept_any))
        if rec is None:
            skipped += 1
        else:
            records.append(rec)
    if store.damaged:  # moved aside on opening or while reading: the empty rebuild must not replace a good export
        raise CacheDamaged("the results cache was damaged; nothing exported, the output file left as it was: "
                           + "; ".join(store.messages))
    if before_write is not None:
        before_write(len(records))
    out = Path(out)
    header = {"format": FORMAT, "version": FORMAT_VERSION, "schema": SCHEMA_VERSION, "count": len(records)}

    def write(fh) -> None:  # noqa: ANN001 - a binary file
        fh.write((json.dumps(header, sort_keys=True) + "\n").encode("utf-8"))
        for rec in records:
            fh.write((json.dumps(rec, sort_keys=True, allow_nan=False) + "\n").encode("utf-8"))

    atomic_write(out, write, suffix=".tmp", shared=True)
    return len(records), skipped


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _check_point(point: Any) -> str | None:
    if not isinstance(point, dict) or not point:
        return "point is not a non-empty object"
    for k, v in point.items():
        if not isinstance(k, str) or len(k) > 100:
            return "point has a key that is not a short string"
        if not (v is None or isinstance(v, (str, int, float, bool))):
            return f"point.{k} is not a plain value"
    from ..methods import BASELINE, METHOD_NAMES, get_method

    if point.get("method") not in METHOD_NAMES + (BASELINE.name,):
        return f"point.method is not a method of this privcore ({str(point.get('method'))[:40]!r})"
    if point.get("code") != get_method(point["method"]).code_version:
        return (f"computed by another version of {point['method']}'s code than this privcore's (recompute it "
                "with this version)")
    # A point names exactly what privcore keys a result by (plan.point_identity): an extra field makes a key
    # no run ever asks for, and a negative seed is one no command takes
    entry = BASELINE if point["method"] == BASELINE.name else get_method(point["method"])
    known = {"method", "epsilon", "delta", "accounting", "repeats", "seed", "code", *entry.uses}
    extra = sorted(set(point) - known)
    if extra:
        return f"point has fields privcore does not key {point['method']} by: {', '.join(map(repr, extra[:5]))}"
    seed = point.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        return f"point.seed must be an integer >= 0, got {str(seed)[:20]!r}"
    return None


#: What a stored result holds besides its method's declared result fields (units._stored).
_VALUE_KEYS = {"accuracies", "accuracy_mean", "accuracy_std", "seconds", "device", "lam", "scale", "note",
               "solver_grad_norm"}
#: privcore's own notes are a sentence or two; a file's longer or multi-line note is not one of them.
_MAX_NOTE_CHARS = 2_000


def _value_fields(point: dict[str, Any], value: dict[str, Any]) -> str | None:
    """Why a result holds fields no run stores (imported, a 500,000-character note went into the rows), or None."""
    from ..methods import BASELINE, get_method

    entry = BASELINE if point["method"] == BASELINE.name else get_method(point["method"])
    known = _VALUE_KEYS | {f.name for f in entry.result_fields if not f.on_scale}
    extra = sorted(k for k in value if k not in known and k not in _IDENTITY)
    if extra:
        return f"fields privcore does not store for {point['method']}: {', '.join(repr(k[:40]) for k in extra[:5])}"
    note = value.get("note", "")
    if len(note) > _MAX_NOTE_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in note):
        return f"note must be one line of at most {_MAX_NOTE_CHARS:,} characters, got {len(note):,} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in value["device"]):
        return f"device must be one line of text, got {value['device'][:40]!r}"
    return None


def _check_line(number: int, text: str) -> tuple[str, dict[str, Any]] | str:
    """(key, value to store) for a good record line, else 'line N: why'."""
    where = f"line {number}"
    if len(text) > _MAX_LINE_CHARS:
        return f"{where}: longer than {_MAX_LINE_CHARS:,} characters"
    if not text.strip():
        return f"{where}: empty line"
    try:
        rec = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as err:
        return f"{where}: not valid JSON ({str(err)[:80]})"
    if not isinstance(rec, dict):
        return f"{where}: not a JSON object"
    if set(rec) != _RECORD_KEYS:
        return f"{where}: fields must be {', '.join(sorted(_RECORD_KEYS))}"
    if rec["schema"] != SCHEMA_VERSION:
        return (f"{where}: computed under cache schema {str(rec['schema'])[:20]}, this privcore reads schema "
                f"{SCHEMA_VERSION} (recompute it with this version)")
    key, data, point, value = rec["key"], rec["data"], rec["point"], rec["value"]
    if not isinstance(key, str) or not _HEX64.match(key):
        return f"{where}: key is not a sha256 hex digest"
    if not isinstance(data, str) or not 1 <= len(data) <= 200:
        return f"{where}: data is not a fingerprint string"
    problem = _check_point(point)
    if problem:
        return f"{where}: {problem}"
    if point_key(point, data) != key:
        return f"{where}: key does not match the point and data fingerprint (edited or corrupted)"
    if not isinstance(value, dict) or any(k in value for k in _IDENTITY):
        return f"{where}: value is not a result object"
    problem = check_result(value) or _value_fields(point, value)
    if problem:
        return f"{where}: value: {problem}"
    problem = check_against_point(point, value)
    if problem:
        return f"record {number - 2} ({where}): {problem}"
    return key, dict(value, point=point, data=data)


def _read_lines(path: Path) -> list[str]:
    import stat

    from .. import limits

    if path.is_dir():  # os.open of a folder read "Is a directory: 6" (the descriptor) at the user
        raise ImportRejected(["line 1: a folder, not a results file"], 1)
    # O_NONBLOCK: opening a named pipe must not wait for a writer; fstat then refuses it.
    with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as fh:
        info, most = os.fstat(fh.fileno()), limits.max_file_bytes()
        if not stat.S_ISREG(info.st_mode):  # a device or pipe (/dev/zero) would be read until memory ran out
            raise ImportRejected(["line 1: not a regular file"], 1)
        raw = fh.read(most + 1)
    if len(raw) > most:
        raise ImportRejected([f"line 1: the file is larger than {most // 2**20:,} MB "
                              f"({limits.limit_hint('PRIVCORE_MAX_FILE_MB')})"], 1)
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark (Windows editors write one) was "not a header"
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise ImportRejected([f"line {line}: not UTF-8 text"], 1) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    return lines


def import_results(path: str | os.PathLike[str], cache: ResultCache | None = None) -> tuple[int, int]:
    """Validate every line of ``path``, then store all new points in one transaction.

    Returns (imported, already_present). Raises :class:`ImportRejected` (nothing imported) when
    any line is bad, and ``OSError`` when the cache cannot be written (nothing imported either).
    """
    lines = _read_lines(Path(path))
    if not lines:
        raise ImportRejected(["line 1: empty file (no header)"], 1)
    problems: list[str] = []
    try:
        header = json.loads(lines[0], parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ImportRejected([f"line 1: not a {FORMAT} header (export with: python -m privcore results export)"], 1)
    if header.get("version") != FORMAT_VERSION:
        problems.append(f"line 1: format version {str(header.get('version'))[:20]}, this privcore reads {FORMAT_VERSION}")
    if header.get("schema") != SCHEMA_VERSION:
        problems.append(f"line 1: exported under cache schema {str(header.get('schema'))[:20]}, this privcore reads "
                        f"schema {SCHEMA_VERSION} (recompute with this version)")
    count = header.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        problems.append("line 1: count is not an integer >= 0")
    total_bad = len(problems)
    good: dict[str, dict[str, Any]] = {}
    for number, text in enumerate(lines[1:], start=2):
        checked = _check_line(number, text)
        if isinstance(checked, tuple):
            key, value = checked
            if key in good and good[key] != value:
                checked = f"line {number}: the same point as an earlier line with another value"
            else:
                good[key] = value
                continue
        total_bad += 1
        if len(problems) < _MAX_ERRORS:
            problems.append(checked)
    if isinstance(count, int) and not isinstance(count, bool) and count != len(lines) - 1:
        total_bad += 1
        problems.insert(0, f"line 1: the header counts {count} records, the file has {len(lines) - 1} "
                           "(truncated or edited)")
    if total_bad:
        raise ImportRejected(problems, total_bad)
    store = cache if cache is not None else ResultCache()
    new = [(k, v) for k, v in good.items() if store.get(k) is None]
    if new:
        store.put_many(new)
    return len(new), len(good) - len(new)


# ---------------------------------------------------------------- command line

def add_results_parser(sub) -> None:  # noqa: ANN001
    """Register ``results export`` and ``results import`` on the sub-parser collection ``sub``."""
    res = sub.add_parser("results", help="export or import computed points (move them between machines)")
    inner = res.add_subparsers(dest="results_command", required=True, parser_class=type(res))
    exp = inner.add_parser("export", help="write every computed point of the cache to a JSON Lines file")
    exp.add_argument("--out", required=True, metavar="FILE.jsonl", help="the file to write (replaced whole)")
    exp.add_argument("--cache-dir", default=None, metavar="DIR",
                     help="the results cache (default: results in $PRIVCORE_CACHE, the checkout's cache/ or ~/.cache/privcore)")
    imp = inner.add_parser("import", help="validate a results file, then add its points to the cache (all or nothing)")
    imp.add_argument("file", metavar="FILE.jsonl")
    imp.add_argument("--cache-dir", default=None, metavar="DIR", help="the results cache (as for export)")


def _open_cache(directory: str | None, *, existing: bool = False) -> ResultCache:
    """The results cache; with ``existing`` (export) a ``--cache-dir`` that does not exist is an error
    (a mistyped folder exported nothing, and created an empty cache there)."""
    if existing and directory is not None:
        name = os.path.basename(str(directory).rstrip(os.sep)) or str(directory)
        if not Path(directory).is_dir():
            raise ValueError(f"--cache-dir {name!r}: no such folder")
        if not (Path(directory) / DB_NAME).is_file():  # opening would create an empty cache, and export nothing
            raise ValueError(f"--cache-dir {name!r} holds no privcore results cache (no {DB_NAME} in it): name the "
                             "folder a results cache lives in (its 'results' folder)")
    store = ResultCache(directory if directory is not None else default_results_dir())
    if not store.enabled:
        raise OSError("the results cache cannot be used: " + "; ".join(store.messages))
    return store


def _check_out(out: str) -> None:
    """``--out`` must name a file in an existing folder (checked before anything is written)."""
    path = Path(out)
    name = os.path.basename(str(out)) or str(out)
    if not str(out).strip():
        raise ValueError("--out must name a .jsonl file, got ''")
    if path.is_dir():
        raise ValueError(f"--out must name a file, got the folder {name!r}")
    if path.is_symlink() or (path.exists() and not path.is_file()):  # a device (/dev/null), FIFO or link: never renamed over
        raise ValueError(f"--out {name!r} is not a regular file (a device, pipe or link); name a .jsonl file")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"--out {name!r} is read-only; it is kept as it is")
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"--out {name!r}: its folder does not exist (create it first)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"--out {name!r}: its folder is not writable")


def _check_out_beside(out: str, store: ResultCache) -> None:
    """``--out`` must not be the results cache's own database (or anything in its folder): the export replaced
    the live cache.db with JSON Lines, which the next command found corrupt and moved aside."""
    where = Path(out).resolve()
    if where == store.directory.resolve() or store.directory.resolve() in where.parents:
        raise ValueError(f"--out {os.path.basename(str(out))!r} is inside the results cache's folder; write the "
                         "export somewhere else")


def _keep_nonempty_out(out: str, exported: int) -> None:
    """An export of no points does not replace an existing file (a mistyped cache emptied one)."""
    path = Path(out)
    if exported == 0 and path.is_file() and path.stat().st_size > 0:
        raise ValueError(f"nothing to export (0 points in this results cache): --out {path.name!r} kept as it was")


def run_results_command(args: argparse.Namespace) -> int:
    """Exit code 0 on success; a rejected file raises ValueError (one line, exit 2)."""
    if args.results_command == "export":
        _check_out(args.out)
        store = _open_cache(args.cache_dir, existing=True)
        _check_out_beside(args.out, store)
        try:
            exported, skipped = export_results(args.out, store, before_write=lambda n: _keep_nonempty_out(args.out, n))
        except CacheDamaged as err:
            raise ValueError(str(err)) from None
        except OSError as err:  # named by --out, not by the temporary file beside it
            raise ValueError(f"--out {os.path.basename(str(args.out))!r} cannot be written: "
                             f"{err.strerror or 'write failed'}") from None
        extra = f"; {skipped} entries without a stored identity skipped" if skipped else ""
        print(f"exported {exported} points to {args.out}{extra}", file=sys.stderr)
        return 0
    store = _open_cache(args.cache_dir)
    try:
        imported, present = import_results(args.file, store)
    except ImportRejected as err:  # one line on stderr (exit 2), naming every bad line up to 20
        raise ValueError(f"{os.path.basename(str(args.file))}: {err}") from None
    print(f"imported {imported} points into {store.directory}" + (f" ({present} already there, kept)" if present else ""),
          file=sys.stderr)
    return 0
