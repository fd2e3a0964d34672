"""``results export`` / ``results import``: points move between caches, validated, all or nothing.

No Dask here: these run without the optional cluster packages.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from privcore.cli import main
from privcore.engine.cache import SCHEMA_VERSION, ResultCache, point_key
from privcore.engine.cli_results import ImportRejected, export_results, import_results
from privcore.engine.runner import read_cached, run_sweep
from privcore.engine.specs import DataSpec, SweepSpec

ROOT = Path(__file__).resolve().parents[1]
SPEC = SweepSpec(data=DataSpec(name="digits"), methods=("model_sensitivity", "subsample_aggregate"),
                 epsilons=(1.0, 10.0), repeats=2, teachers=4, device="cpu")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A sweep computed into one cache and exported: (cache, result, file)."""
    base = tmp_path_factory.mktemp("results_io")
    cache = ResultCache(base / "a")
    result = run_sweep(SPEC, cache=cache)
    out = base / "points.jsonl"
    assert export_results(out, cache) == (len(result.rows), 0)
    return cache, result, out


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_round_trip_reads_as_cached_in_another_cache(exported, tmp_path):
    _, result, out = exported
    lines = _lines(out)
    header = json.loads(lines[0])
    assert header == {"format": "privcore-results", "version": 1, "schema": SCHEMA_VERSION, "count": len(result.rows)}
    other = ResultCache(tmp_path / "b")
    assert read_cached(SPEC, other) is None
    assert import_results(out, other) == (len(result.rows), 0)
    back = read_cached(SPEC, other)  # what the dashboard does before it computes anything
    assert back is not None and back.cached == len(result.rows) and back.computed == 0
    skip = {"seconds", "cached"}
    assert [{k: v for k, v in r.items() if k not in skip} for r in back.rows] == \
           [{k: v for k, v in r.items() if k not in skip} for r in result.rows]
    assert import_results(out, other) == (0, len(result.rows))  # again: nothing new, existing kept


def test_cli_round_trip(exported, tmp_path, capsys):
    _, result, out = exported
    target = tmp_path / "c"
    assert main(["results", "import", str(out), "--cache-dir", str(target)]) == 0
    assert f"imported {len(result.rows)} points" in capsys.readouterr().err
    again = tmp_path / "again.jsonl"
    assert main(["results", "export", "--out", str(again), "--cache-dir", str(target)]) == 0
    assert again.read_text() == out.read_text()  # sorted keys, same records: byte-identical


def _tamper(lines: list[str], index: int, change) -> list[str]:
    rec = json.loads(lines[index])
    change(rec)
    return lines[:index] + [json.dumps(rec)] + lines[index + 1:]


def _set(path: tuple, value):
    def change(rec):
        target = rec
        for p in path[:-1]:
            target = target[p]
        target[path[-1]] = value
    return change


BAD = {
    "point edited (key no longer matches)": (2, _set(("point", "epsilon"), 3.0), "key does not match"),
    "other data fingerprint": (3, _set(("data",), "0" * 64), "key does not match"),
    "old schema": (2, _set(("schema",), SCHEMA_VERSION - 1), f"schema {SCHEMA_VERSION - 1}"),
    "accuracy out of range": (4, _set(("value", "accuracy_mean"), 1.5), "accuracy_mean"),
    "mean edited (not its accuracies' mean)": (2, _set(("value", "accuracy_mean"), 0.987654), "not the mean"),
    "unknown method": (2, _set(("point", "method"), "oracle"), "point.method"),
    "extra field": (3, _set(("extra",), 1), "fields must be"),
    "another version of the method's code (key recomputed)": (2, lambda rec: (
        _set(("point", "code"), "0" * 16)(rec), _set(("key",), point_key(rec["point"], rec["data"]))(rec)),
        "another version of"),
    # a bad-input hunt: both were imported (a key no run asks for; a seed no command takes)
    "a field privcore does not key by (key recomputed)": (2, lambda rec: (
        _set(("point", "note"), "x" * 1000)(rec), _set(("key",), point_key(rec["point"], rec["data"]))(rec)),
        "fields privcore does not key"),
    "a negative seed (key recomputed)": (2, lambda rec: (
        _set(("point", "seed"), -7)(rec), _set(("key",), point_key(rec["point"], rec["data"]))(rec)),
        "point.seed must be an integer >= 0"),
    # a bad-input hunt: all three were imported into the rows
    "a value field no run stores": (2, _set(("value", "remark"), "x"), "fields privcore does not store"),
    "a 500,000-character note": (3, _set(("value", "note"), "x" * 500_000), "note must be one line of at most"),
    "a note of two lines": (2, _set(("value", "note"), "a\n# Guarantee"), "note must be one line"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_line_is_named_and_nothing_is_imported(exported, tmp_path, case):
    _, _, out = exported
    index, change, why = BAD[case]
    bad = _write(tmp_path / "bad.jsonl", _tamper(_lines(out), index, change))
    target = ResultCache(tmp_path / "t")
    with pytest.raises(ImportRejected) as info:
        import_results(bad, target)
    assert info.value.problems[0].startswith(f"line {index + 1}: ") and why in info.value.problems[0], info.value.problems
    assert len(target) == 0


def test_broken_lines_truncation_and_header(exported, tmp_path, capsys):
    _, _, out = exported
    lines = _lines(out)
    nan = lines[2].replace('"accuracy_std": ', '"accuracy_std": NaN, "x": ', 1)
    bad = _write(tmp_path / "bad.jsonl", [lines[0], lines[1], "{not json", nan, ""] + lines[3:])
    target = tmp_path / "t"
    code = main(["results", "import", str(bad), "--cache-dir", str(target)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: bad.jsonl: "), err
    for where in ("line 1: the header counts", "line 3: not valid JSON", "line 4: not valid JSON", "line 5: empty line"):
        assert where in err, err
    assert "nothing was imported" in err and len(ResultCache(target)) == 0
    truncated = _write(tmp_path / "cut.jsonl", lines[:-1])
    with pytest.raises(ImportRejected, match="header counts"):
        import_results(truncated, ResultCache(target))
    with pytest.raises(ImportRejected, match="line 1: not a privcore-results header"):
        import_results(_write(tmp_path / "nohead.jsonl", lines[1:]), ResultCache(target))
    assert len(ResultCache(target)) == 0


def test_a_failed_write_stores_nothing(exported, tmp_path, monkeypatch):
    _, result, out = exported
    target = ResultCache(tmp_path / "t")
    real_set, calls = target._store.set, []

    def failing_set(key, value, *a, **k):
        calls.append(key)
        if len(calls) == 3:
            raise sqlite3.OperationalError("disk I/O error")
        return real_set(key, value, *a, **k)

    monkeypatch.setattr(target._store, "set", failing_set)
    with pytest.raises(OSError, match="nothing was stored"):
        import_results(out, target)
    monkeypatch.undo()
    assert len(target) == 0  # the two points written before the failure were rolled back
    assert import_results(out, target) == (len(result.rows), 0)


def test_entries_without_an_identity_are_not_exported(tmp_path):
    cache = ResultCache(tmp_path / "a")
    value = {"accuracies": [0.5], "accuracy_mean": 0.5, "accuracy_std": 0.0, "seconds": 0.1, "device": "cpu",
             "lam": 0.001, "scale": {"noise": "none"}}
    cache.put(point_key({"method": "model_sensitivity"}, "f"), value)  # as stored before identities were kept
    assert export_results(tmp_path / "x.jsonl", cache) == (0, 1)
    assert json.loads(_lines(tmp_path / "x.jsonl")[0])["count"] == 0


@pytest.mark.slow
def test_nothing_imports_dask_by_default():
    code = ("import sys, privcore.cli, privcore.engine.runner, privcore.engine.cli_results;"
            "privcore.cli.build_parser();"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]; print(bad); sys.exit(bool(bad))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_executor_flags_are_checked(capsys):
    for args, why in ((["--workers", "2"], "need --executor dask"),
                      (["--executor", "dask", "--workers", "2", "--scheduler", "tcp://x:1"], "not both"),
                      (["--executor", "dask", "--workers", "0"], "workers must be")):
        code = main(["sweep", "--dataset", "digits", "--methods", "model_sensitivity", "--epsilons", "1", *args])
        err = capsys.readouterr().err
        assert code == 2 and why in err, err


def test_a_device_or_pipe_is_refused_without_reading_it(tmp_path):
    # Once: `results import /dev/zero` read until the machine ran out of memory (/dev/null: "empty file").
    import os

    with pytest.raises(ImportRejected, match="not a regular file"):
        import_results("/dev/null", ResultCache(tmp_path / "c"))
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ImportRejected, match="not a regular file"):  # and opening it does not wait for a writer
        import_results(fifo, ResultCache(tmp_path / "c"))


def test_a_file_above_the_size_limit_is_refused_before_parsing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PRIVCORE_MAX_FILE_MB", "1")
    big = tmp_path / "big.jsonl"
    big.write_text(json.dumps({"format": "privcore-results", "version": 1, "schema": SCHEMA_VERSION, "count": 0,
                               "pad": "x" * 2_000_000}) + "\n")
    assert main(["results", "import", str(big)]) == 2
    err = capsys.readouterr().err
    assert "larger than 1 MB" in err and "PRIVCORE_MAX_FILE_MB" in err and str(tmp_path) not in err


def test_an_unusable_out_path_is_named_as_given_not_by_its_temporary_file(tmp_path, capsys):
    # Once: "Is a directory: .dir.a1b2.tmp", "Device or resource busy: ..x.tmp" (for --out '').
    (tmp_path / "taken").mkdir()
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out, fragment in ((tmp_path / "taken", "--out must name a file, got the folder 'taken'"),
                          (tmp_path / "missing" / "r.jsonl", "--out 'r.jsonl': its folder does not exist"),
                          (afile / "r.jsonl", "--out 'r.jsonl': its folder does not exist"),
                          ("", "--out must name a .jsonl file, got ''")):
        assert main(["results", "export", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert fragment in err and ".tmp" not in err and str(tmp_path) not in err, err


def test_export_refuses_special_files_read_only_files_and_a_missing_cache_folder(exported, tmp_path, capsys):
    """A bad-input hunt: `--out /dev/null` renamed a regular file over the device; a read-only file was
    replaced; a mistyped --cache-dir created an empty cache and exported 0 points."""
    import os
    import stat

    cache, _, _ = exported
    link = tmp_path / "link.jsonl"
    target = tmp_path / "target.jsonl"
    target.write_text("kept\n")
    link.symlink_to(target)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    for out in (link, fifo):
        assert main(["results", "export", "--out", str(out), "--cache-dir", str(cache.directory)]) == 2
        assert "not a regular file" in capsys.readouterr().err
    assert link.is_symlink() and stat.S_ISFIFO(fifo.stat().st_mode) and target.read_text() == "kept\n"
    locked = tmp_path / "locked.jsonl"
    locked.write_text("kept\n")
    locked.chmod(0o444)
    if not os.access(locked, os.W_OK):  # root may write anyway: then only the mode is checked below
        assert main(["results", "export", "--out", str(locked), "--cache-dir", str(cache.directory)]) == 2
        assert "read-only" in capsys.readouterr().err and locked.read_text() == "kept\n"
    missing = tmp_path / "typo_cache"
    assert main(["results", "export", "--out", str(tmp_path / "x.jsonl"), "--cache-dir", str(missing)]) == 2
    assert "no such folder" in capsys.readouterr().err and not missing.exists() and not (tmp_path / "x.jsonl").exists()


def test_export_from_a_damaged_cache_keeps_the_previous_export(exported, tmp_path, capsys):
    import shutil

    cache, _, _ = exported
    copy = tmp_path / "cache"
    shutil.copytree(cache.directory, copy)
    good = tmp_path / "good.jsonl"
    assert main(["results", "export", "--out", str(good), "--cache-dir", str(copy)]) == 0
    before = good.read_text()
    db = copy / "cache.db"
    db.write_bytes(db.read_bytes()[:4096] + b"\x00garbage" * 64)  # damaged: moved aside when opened
    assert main(["results", "export", "--out", str(good), "--cache-dir", str(copy)]) == 2
    err = capsys.readouterr().err
    assert "damaged" in err and "nothing exported" in err
    assert good.read_text() == before


def test_importing_a_folder_says_so(tmp_path, capsys):
    assert main(["results", "import", str(tmp_path), "--cache-dir", str(tmp_path / "c")]) == 2
    assert "a folder, not a results file" in capsys.readouterr().err


def test_export_never_replaces_a_file_with_nothing_nor_writes_into_the_cache(exported, tmp_path, capsys):
    """A bad-input hunt: `--cache-dir` naming any existing folder created an empty cache.db there and replaced a
    25-point export with 0 points; `--out <cache>/cache.db` replaced the live cache with JSON Lines, which the
    next command found corrupt and moved aside."""
    cache, result, out = exported
    keep = tmp_path / "keep.jsonl"
    keep.write_text(out.read_text())
    elsewhere = tmp_path / "somefolder"
    elsewhere.mkdir()
    assert main(["results", "export", "--out", str(keep), "--cache-dir", str(elsewhere)]) == 2
    assert "holds no privcore results cache" in capsys.readouterr().err
    assert keep.read_text() == out.read_text() and not any(elsewhere.iterdir())  # nothing created there
    empty = tmp_path / "empty_cache"
    ResultCache(empty)  # a results cache with no points
    assert main(["results", "export", "--out", str(keep), "--cache-dir", str(empty)]) == 2
    assert "nothing to export" in capsys.readouterr().err and keep.read_text() == out.read_text()
    live = cache.directory / "cache.db"
    before = live.read_bytes()
    for target in (live, cache.directory / "export.jsonl"):
        assert main(["results", "export", "--out", str(target), "--cache-dir", str(cache.directory)]) == 2
        assert "inside the results cache's folder" in capsys.readouterr().err
    assert live.read_bytes() == before and not (cache.directory / "export.jsonl").exists()
    assert len(ResultCache(cache.directory).keys()) >= len(result.rows)  # still a working cache


def test_lam_auto_points_of_methods_that_run_at_the_stand_in_import(tmp_path):
    """The import check took the private choice of lambda's share out of every lam = auto point, but the methods
    whose queries are coupled (sparse vector, the student) run at the stand-in with the whole budget: their
    exported points were refused on import."""
    cache = ResultCache(tmp_path / "a")
    spec = SweepSpec(data=DataSpec(name="digits", n=400), methods=("sparse_vector", "pate_student", "model_sensitivity"),
                     epsilons=(1.0,), delta=1e-5, repeats=2, teachers=4, device="cpu", lam="auto")
    result = run_sweep(spec, cache=cache)
    out = tmp_path / "auto.jsonl"
    exported, _ = export_results(out, cache)
    assert exported == len(result.rows) and import_results(out, ResultCache(tmp_path / "b")) == (exported, 0)


def test_a_file_with_a_byte_order_mark_imports(exported, tmp_path):
    """Windows editors write a byte-order mark; the header was then "not a privcore-results header"."""
    _, result, out = exported
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + out.read_bytes())
    assert import_results(bom, ResultCache(tmp_path / "c")) == (len(result.rows), 0)
