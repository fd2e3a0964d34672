"""Issue 15: one regression test per defect found by the hostile-input probes.

Every test here drives only interfaces that existed before the hardening (``privcore.cli.main``,
``load_user_file``, ``ResultCache``/``run_sweep``, the value types, ``ui.uploads`` upload helpers,
the Streamlit pages), so that on the old code it fails on the *behaviour* the issue describes,
not on a missing import. Defect numbers (D1..D17) follow the "Why" list of the issue:

D1  zip-bomb NPZ                               D10 --epsilon 1e309 became the baseline
D2  the results cache unpickles                D11 tight S&A at B = 10^12 never answers
D3  a corrupt or read-only cache stops all     D12 duplicate CSV headers accepted
D4  Markdown injection from a URL value        D13 NoiseScale checks nothing
D5  Who wins takes N from the URL unclamped    D14 overflow errors escape from the library
D6  uploads non-atomic and trusted by name     D15 a killed MNIST download leaves a .part
D7  wide data: a D x D eigendecomposition      D16 uploads are never removed
D8  tracebacks instead of exit 2 (5 probes)    D17 messages show server paths and np.int64(...)
D9  --classes 0 / --dim 0 fall back to defaults
"""

from __future__ import annotations

import builtins
import io
import json
import os
import pickle
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from privcore.cli import main
from privcore.data import DataFileError
from privcore.data import userfile
from privcore.data.userfile import load_user_file

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "privcore_cache"))
    userfile.clear_cache()


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_exit_2(code: int, err: str) -> str:
    assert code == 2, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def _subprocess_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PRIVCORE_CACHE": str(tmp_path / "privcore_cache")}


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


# ---------------------------------------------------------------- D1 zip bomb

def _zip_bomb(path: Path, rows: int = 250_000, cols: int = 1000) -> Path:
    """~2 MB on disk, x inflates to rows x cols x 8 bytes = 2 GB (written in chunks)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open("x.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (rows, cols)})
            chunk, left = bytes(1 << 24), rows * cols * 8
            while left:
                n = min(left, len(chunk))
                fh.write(chunk[:n])
                left -= n
        zf.writestr("y.npy", _npy(np.zeros(rows, dtype=np.int8)))
    return path


_PEAK = """
import json, sys, time
from privcore.cli import main
t0 = time.perf_counter()
rc = main(sys.argv[1:])
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
print(json.dumps({"rc": rc, "seconds": time.perf_counter() - t0, "rss_mb": int(hwm[0].split()[1]) / 1024}))
"""


@pytest.mark.slow
def test_d1_zip_bomb_is_refused_in_under_a_second_and_500_mb(tmp_path):
    bomb = _zip_bomb(tmp_path / "bomb.npz")
    assert bomb.stat().st_size < 20 * 2**20
    try:  # the old code ran 68 s at 7 GB: give up long before that
        proc = subprocess.run([sys.executable, "-c", _PEAK, "sweep", "--dataset", "file", "--data-file", str(bomb),
                               "--quiet"], capture_output=True, text=True, cwd=ROOT, env=_subprocess_env(tmp_path),
                              timeout=45)
    except subprocess.TimeoutExpired:
        pytest.fail("the zip bomb was still being inflated after 45 s")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["rc"] == 2, (info, proc.stderr[-2000:])
    assert info["seconds"] < 1.0 and info["rss_mb"] < 500, info
    assert "bomb.npz" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- D2, D3 the results cache

def _sweep_spec(epsilons=(1.0,)):
    from privcore.engine.specs import DataSpec, SweepSpec

    return SweepSpec(data=DataSpec(name="synthetic"), methods=("model_sensitivity",), epsilons=epsilons,
                     delta=1e-5, repeats=2, lam=1e-2, device="cpu")


def _sweep(directory: Path, epsilons=(1.0,)):
    from privcore.engine.cache import ResultCache
    from privcore.engine.runner import run_sweep

    return run_sweep(_sweep_spec(epsilons), cache=ResultCache(directory))


class _Marker:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):  # unpickling creates the marker file: code from the cache ran
        return (open, (self.path, "w"))


def _plant(directory: Path, *, mode: int, value) -> None:
    conn = sqlite3.connect(directory / "cache.db")
    try:
        conn.execute("UPDATE Cache SET mode = ?, value = ?, filename = NULL", (mode, value))
        conn.commit()
    finally:
        conn.close()


def test_d2_a_pickle_planted_in_the_cache_is_never_executed(tmp_path):
    cache_dir, marker = tmp_path / "c", tmp_path / "PWNED"
    first = _sweep(cache_dir)
    _plant(cache_dir, mode=4, value=sqlite3.Binary(pickle.dumps(_Marker(str(marker)))))  # diskcache MODE_PICKLE
    res = _sweep(cache_dir)
    assert not marker.exists(), "a pickle planted in cache.db was executed"
    assert res.computed == len(first.rows) and len(res.rows) == len(first.rows)


@pytest.mark.parametrize("damage", ["random_bytes", "truncated", "directory"])
def test_d3_a_corrupt_cache_recovers_with_a_message(tmp_path, damage):
    db = tmp_path / "cache.db"
    if damage == "random_bytes":
        db.write_bytes(np.random.default_rng(0).bytes(5000))
    elif damage == "truncated":
        _sweep(tmp_path)
        for extra in ("cache.db-wal", "cache.db-shm"):
            (tmp_path / extra).unlink(missing_ok=True)
        data = db.read_bytes()
        db.write_bytes(data[: len(data) // 2])
    else:
        db.mkdir()
    res = _sweep(tmp_path)                                   # the old code: a traceback on every run
    assert len(res.rows) == 2
    assert any("corrupt" in w for w in res.warnings), res.warnings
    assert _sweep(tmp_path).computed == 0                    # rebuilt and storing again


@pytest.mark.parametrize("value", ["[1, 2]", '{"accuracy_mean": "x"}', '{"accuracies": [NaN]}'])
def test_d3_a_stored_value_of_the_wrong_shape_is_recomputed(tmp_path, value):
    first = _sweep(tmp_path)
    _plant(tmp_path, mode=1, value=value)                     # inline text: what a JSON string is stored as
    res = _sweep(tmp_path)
    assert res.computed == len(first.rows)
    assert [r["accuracy_mean"] for r in res.rows] == [r["accuracy_mean"] for r in first.rows]


def _refuse_writes(*args, **kwargs):
    raise sqlite3.OperationalError("attempt to write a readonly database")


def test_d3_a_read_only_cache_serves_every_cached_point(tmp_path, monkeypatch):
    import diskcache

    _sweep(tmp_path)
    monkeypatch.setattr(diskcache, "Cache", _refuse_writes)  # what opening a read-only cache.db raises
    res = _sweep(tmp_path)
    assert res.computed == 0 and res.cached == len(res.rows) == 2


def test_d3_a_read_only_cache_computes_the_rest_without_storing(tmp_path, monkeypatch):
    import diskcache

    _sweep(tmp_path, epsilons=(1.0,))
    monkeypatch.setattr(diskcache.Cache, "set", _refuse_writes)
    res = _sweep(tmp_path, epsilons=(1.0, 10.0))
    assert res.cached == 2 and res.computed == 1


# ---------------------------------------------------------------- D4, D5, D6, D16 the dashboard

INJECTION = "![x](http://host/x.png) [click](http://evil)"


def test_d4_a_url_value_is_shown_as_text_not_markdown(tmp_path):
    from streamlit.testing.v1 import AppTest

    script = """
from ui import controls, sidebar
controls.epsilon_slider()
sidebar.settings()
"""
    at = AppTest.from_string(script, default_timeout=120)
    at.query_params["dataset"] = '"synthetic"'
    at.query_params["eps"] = INJECTION
    at.run()
    assert not at.exception
    shown = [w.value for w in at.warning] + [m.value for m in at.markdown] + [e.value for e in at.error]
    assert any("eps" in s for s in shown), shown                    # the bad value is reported ...
    for body in shown:                                              # ... but never as live Markdown
        assert "![x](" not in body and "[click](" not in body, body


def _who_wins_page() -> Path:
    found = sorted(ROOT.glob("*pages/*[Ww]ho_wins.py"))
    assert found, "no Who wins page"
    return found[0]


@pytest.mark.slow
def test_d5_who_wins_clamps_n_from_the_url(tmp_path):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(_who_wins_page()), default_timeout=240)
    at.query_params.update({"dataset": '"digits"', "repeats": "2", "n": "10000000",
                            "methods": '["prediction_sensitivity"]', "map_eps": "[1.0]"})
    at.run()
    assert not at.exception, at.exception                           # the old page: a 29 GiB MemoryError
    assert any("10,000,000" in w.value for w in at.warning), [w.value for w in at.warning]


class _Upload:
    name = "my data.csv"

    def getvalue(self) -> bytes:
        return b"a,label\n" + b"".join(f"{i},{i % 2}\n".encode() for i in range(20))


@pytest.fixture()
def widgets(tmp_path, monkeypatch):  # the upload helpers (ui/uploads.py since the split)
    import streamlit as st

    from ui import uploads as w

    monkeypatch.setattr(st, "session_state", {})                   # outside a Streamlit run
    return w


def test_d6_a_half_written_upload_is_never_used(tmp_path, widgets):
    data = _Upload().getvalue()
    path = Path(widgets.save_upload(_Upload()))
    assert path.read_bytes() == data
    path.write_bytes(data[: len(data) // 2])                       # an interrupted write under that name
    assert widgets.inside_uploads(str(path)) is None              # the URL cannot point at it ...
    again = Path(widgets.save_upload(_Upload()))                   # ... and the next upload replaces it
    assert again.read_bytes() == data


def test_d16_uploads_can_be_removed_and_leftovers_are_cleaned(tmp_path, widgets):
    path = Path(widgets.save_upload(_Upload()))
    folder = path.parent
    stale = folder / ".part-stale.csv"
    stale.write_text("x")
    os.utime(stale, (1, 1))
    widgets.save_upload(_Upload())                                 # any upload cleans old leftovers
    assert not stale.exists()
    assert widgets.delete_upload(path.name) and not path.exists()


# ---------------------------------------------------------------- D7 wide data

def test_d7_wide_data_is_refused_before_any_d_by_d_work(tmp_path):
    from privcore.engine.cache import ResultCache
    from privcore.engine.runner import run_sweep
    from privcore.engine.specs import DataSpec, SweepSpec

    rng = np.random.default_rng(0)
    cols, rows = 4000, 40
    path = tmp_path / "wide.csv"
    x = rng.normal(size=(rows, cols)).round(2)
    path.write_text(",".join(f"f{j}" for j in range(cols)) + ",label\n"
                    + "\n".join(",".join(map(str, r)) + f",{i % 2}" for i, r in enumerate(x)) + "\n")
    spec = SweepSpec(data=DataSpec(name="file", data_file=str(path)), methods=("model_sensitivity",),
                     epsilons=(1.0,), delta=1e-5, repeats=2, teachers=2, batch_size=8, device="cpu")
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="PCA"):
        run_sweep(spec, cache=ResultCache(tmp_path / "c"))
    assert time.perf_counter() - t0 < 10.0


# ---------------------------------------------------------------- D8 exit 2 instead of tracebacks

def test_d8_n_of_10_to_the_12_exits_2(capsys):
    _one_line_exit_2(*_cli(["sweep", "--dataset", "synthetic", "--methods", "model_sensitivity", "--epsilons", "1",
                            "--repeats", "1", "--no-cache", "--quiet", "--n", "1000000000000"], capsys)[::2])


def test_d8_a_tiny_npz_claiming_a_huge_shape_exits_2(tmp_path, capsys):
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f8", "fortran_order": False, "shape": (10**7, 10**6)})
    path = tmp_path / "claims.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x.npy", head.getvalue())
        zf.writestr("y.npy", _npy(np.arange(20) % 2))
    assert path.stat().st_size < 1000
    code, _, err = _cli(["sweep", "--dataset", "file", "--data-file", str(path), "--quiet"], capsys)
    assert "claims.npz" in _one_line_exit_2(code, err)


def test_d8_an_unreadable_data_file_exits_2(tmp_path, capsys, monkeypatch):
    path = tmp_path / "locked.csv"
    path.write_text("a,label\n" + "".join(f"{i},{i % 2}\n" for i in range(20)))
    real_open = builtins.open

    def denied(file, *args, **kwargs):  # like chmod 000 (we may be root)
        if str(file).endswith("locked.csv"):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", denied)
    code, _, err = _cli(["sweep", "--dataset", "file", "--data-file", str(path), "--quiet"], capsys)
    assert "locked.csv" in _one_line_exit_2(code, err)


def test_d8_dpsgd_tight_at_the_smallest_delta_exits_2(capsys):
    _one_line_exit_2(*_cli(["calibrate", "--method", "dpsgd", "--epsilon", "1", "--delta", "5e-324",
                            "--accounting", "tight"], capsys)[::2])


def test_d8_stdout_closed_early_exits_quietly(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "privcore", "calibrate", "--method", "subsample_aggregate",
                             "--epsilon", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            env=_subprocess_env(tmp_path))
    proc.stdout.close()                                             # like `| true`
    _, err = proc.communicate(timeout=120)
    assert err.strip() == b"", err.decode(errors="replace")[-2000:]


# ---------------------------------------------------------------- D9, D10, D11 values silently replaced

@pytest.mark.parametrize("flag", ["--classes", "--dim"])
def test_d9_zero_classes_or_dim_is_an_error_not_the_default(flag, capsys):
    line = _one_line_exit_2(*_cli(["calibrate", "--method", "model_sensitivity", "--epsilon", "1", flag, "0"],
                                  capsys)[::2])
    assert flag[2:] in line


@pytest.mark.parametrize("flag", ["--classes", "--dim"])
def test_d9_zero_classes_or_dim_is_an_error_in_a_sweep(flag, capsys):
    _one_line_exit_2(*_cli(["sweep", "--dataset", "synthetic", "--methods", "model_sensitivity", "--epsilons", "1",
                            "--repeats", "1", "--no-cache", "--quiet", flag, "0"], capsys)[::2])


def test_d10_epsilon_1e309_is_an_error_not_the_baseline(capsys):
    code, out, err = _cli(["calibrate", "--method", "model_sensitivity", "--epsilon", "1e309", "--json"], capsys)
    assert '"noise": "none"' not in out
    _one_line_exit_2(code, err)


def test_d11_tight_subsample_aggregate_at_a_huge_budget_answers_quickly(tmp_path):
    args = [sys.executable, "-m", "privcore", "calibrate", "--method", "subsample_aggregate", "--epsilon", "1",
            "--delta", "1e-5", "--budget", "1000000000000", "--accounting", "tight"]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=_subprocess_env(tmp_path),
                              timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("calibrate --accounting tight at B = 10^12 did not answer within 60 s")
    _one_line_exit_2(proc.returncode, proc.stderr)


# ---------------------------------------------------------------- D12 duplicate headers

@pytest.mark.parametrize("header", ["a,a,b,label,label", "a,A,label"])
def test_d12_duplicate_csv_headers_are_rejected(tmp_path, header):
    path = tmp_path / "dup.csv"
    ncol = len(header.split(","))
    path.write_text(header + "\n" + "".join(",".join([str(i % 2)] * ncol) + "\n" for i in range(20)))
    with pytest.raises(DataFileError, match="more than once"):
        load_user_file(path)


# ---------------------------------------------------------------- D13, D14 the value types

@pytest.mark.parametrize("kwargs", [
    dict(epsilon=float("nan")), dict(epsilon=-1.0), dict(delta=2.0), dict(noise="gaussian", sigma=-1.0),
    dict(noise="gaussian", sigma=float("nan")), dict(method=""), dict(notes=(1, 2)),
])
def test_d13_noise_scale_checks_its_fields(kwargs):
    from privcore.types import NoiseScale

    base = dict(method="model_sensitivity", epsilon=1.0, delta=0.0, accounting="paper", noise="none")
    with pytest.raises((ValueError, TypeError)):
        NoiseScale(**{**base, **kwargs})


@pytest.mark.parametrize("make", [
    lambda t: t.PrivacyBudget(10**400),
    lambda t: t.PrivacyBudget(1.0, 10**400),
    lambda t: t.Problem(n=10**400),
    lambda t: t.Problem(budget=10**400),
    lambda t: t.Problem(lam=10**400),
    lambda t: t.NoiseScale("model_sensitivity", 1.0, 0.0, "paper", "gaussian", sigma=10**400),
], ids=["budget_eps", "budget_delta", "problem_n", "problem_B", "problem_lam", "noise_sigma"])
def test_d14_out_of_range_values_are_value_errors_not_overflow(make):
    from privcore import types

    with pytest.raises(ValueError):                                 # OverflowError is not a ValueError
        make(types)


def test_d14_cli_out_of_float_range_values_exit_2(capsys):
    _one_line_exit_2(*_cli(["calibrate", "--method", "model_sensitivity", "--epsilon", "1",
                            "--n", "1" + "0" * 400], capsys)[::2])


# ---------------------------------------------------------------- D15 MNIST leftovers

def test_d15_a_killed_downloads_part_file_is_removed_next_time(tmp_path, monkeypatch):
    from privcore.data import mnist_download

    folder = tmp_path / "mnist"
    folder.mkdir()

    def killed(url, target, md5, **kw):  # leave the .part behind like SIGKILL would
        import tempfile

        fd, _ = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
        os.write(fd, b"half")
        os.close(fd)
        raise OSError("killed")

    monkeypatch.setattr(mnist_download, "_download", killed)
    with pytest.raises(mnist_download.DataUnavailableError):
        mnist_download.ensure_mnist_files(folder)
    parts = list(folder.glob("*.part"))
    assert parts
    for p in parts:
        os.utime(p, (1, 1))                                         # from an old, dead process

    def offline(url, target, md5, **kw):
        raise OSError("offline")

    monkeypatch.setattr(mnist_download, "_download", offline)
    with pytest.raises(mnist_download.DataUnavailableError):
        mnist_download.ensure_mnist_files(folder)
    assert not list(folder.glob("*.part"))


# ---------------------------------------------------------------- D17 messages

def test_d17_messages_show_no_server_path_and_no_numpy_repr(tmp_path):
    one_class = tmp_path / "one.npz"
    np.savez(one_class, x=np.ones((20, 3)), y=np.ones(20, dtype=np.int64))
    with pytest.raises(DataFileError) as info:
        load_user_file(one_class)
    text = str(info.value)
    assert "one.npz" in text and str(tmp_path) not in text and "np.int64" not in text, text
    with pytest.raises(DataFileError) as info:
        load_user_file(tmp_path / "nowhere" / "gone.csv")
    assert "gone.csv" in str(info.value) and str(tmp_path) not in str(info.value)


# ---------------------------------------------------------------- the URL parser (property test finding)

def test_url_integer_too_large_for_a_float_is_reported_not_raised():
    from ui import state

    values, errors = state.from_params({"clip": "1" * 400, "eps": "1" * 400, "n": "1" * 400})
    assert "clip" not in values and "eps" not in values
    assert any("clip" in e for e in errors) and any("eps" in e for e in errors)


@pytest.mark.parametrize("call, error, message", [
    (lambda: __import__("privcore.recommend", fromlist=["x"]).recommend(
        [{"method": "dpsgd", "accuracy_mean": float("nan"), "accuracy_std": 0.0, "repeats": 2},
         {"method": "model_sensitivity", "accuracy_mean": 0.5, "accuracy_std": 0.0, "repeats": 2}]),
     ValueError, "accuracy_mean of 'dpsgd' must be a number in [0, 1]"),
    (lambda: __import__("privcore.recommend", fromlist=["x"]).recommend(None), TypeError, "rows must be a list"),
    (lambda: __import__("privcore.recommend", fromlist=["x"]).significance_threshold(float("nan"), 0, 5),
     ValueError, "std_a must be a finite number >= 0"),
    (lambda: __import__("privcore.recommend", fromlist=["x"]).significance_threshold(-1, 0, 5),
     ValueError, "std_a must be a finite number >= 0"),
    (lambda: __import__("privcore.leakage.stats", fromlist=["x"]).epsilon_from_rates(-1, 0.5),
     ValueError, "fpr must be a number in [0, 1]"),
    (lambda: __import__("privcore.leakage.stats", fromlist=["x"]).epsilon_from_rates(float("nan"), 0.5),
     ValueError, "fpr must be a number in [0, 1]"),
    (lambda: __import__("privcore.leakage.stats", fromlist=["x"]).epsilon_from_rates(0.5, 0.5, delta=1),
     ValueError, "delta must be a number in [0, 1)"),
    (lambda: __import__("privcore.leakage.stats", fromlist=["x"]).tpr_at_fpr([1], [0], -1),
     ValueError, "max_fpr must be a number in [0, 1]"),
    (lambda: __import__("privcore.leakage.stats", fromlist=["x"]).auc("ab", [1]), ValueError, "in_scores must be numbers"),
    (lambda: __import__("privcore.leakage.stats", fromlist=["x"]).dp_region_tpr([2.0], 1), ValueError, "in [0, 1]"),
    (lambda: __import__("privcore.tradeoff", fromlist=["x"]).gaussian_tradeoff_tpr([0.1], -1),
     ValueError, "mu must be a finite number >= 0"),
    (lambda: __import__("privcore.accounting.forward", fromlist=["x"]).bisect_epsilon(lambda e: float("nan"), 1.0),
     ValueError, "is not a number"),
    (lambda: __import__("privcore.deep.spec", fromlist=["x"]).DeepSpec(methods="dpsgd"),
     TypeError, "methods must be a list or tuple, got 'dpsgd'"),
    (lambda: __import__("privcore.deep.spec", fromlist=["x"]).DeepSpec(epsilons=1.0),
     TypeError, "epsilons must be a list or tuple, got 1.0"),
    (lambda: __import__("privcore.engine.specs", fromlist=["x"]).SweepSpec(lam="AUTO"),
     ValueError, "lam must be a real number or 'auto', got 'AUTO'"),
    (lambda: __import__("privcore.engine.specs", fromlist=["x"]).SweepSpec.from_json('{"data": {"zzz": 1}}'),
     ValueError, "a data spec has no field 'zzz'"),
])
def test_library_calls_with_bad_values_name_them(call, error, message):
    """A bad-input hunt of the public library: NaN accuracies won recommendations, out-of-range rates gave
    infinite or zero epsilons, a NaN noise function returned 2e-9, and several errors came from deep inside
    (numpy, tuple(), __init__) without the parameter's name."""
    import re

    with pytest.raises(error, match=re.escape(message)):
        call()
