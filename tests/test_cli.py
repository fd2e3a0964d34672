"""Every expected CLI failure exits 2 with one line on stderr; a closed stdout exits quietly."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from privcore.cli import main
from privcore.data import userfile
from privcore.types import NoiseScale, PrivacyBudget, Problem

ROOT = Path(__file__).resolve().parents[1]
HUGE = "1" + "0" * 400


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "cache"))


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "np.int64" not in err
    return lines[0]


@pytest.mark.parametrize("args, fragment", [
    (["sweep", "--n", "1000000000000"], "n must be at most"),
    (["calibrate", "--method", "model_sensitivity", "--epsilon", "1", "--n", HUGE], "n must be an integer"),
    (["calibrate", "--method", "model_sensitivity", "--epsilon", "1", "--n", "1000000000000000000000"], "2**53"),
    (["calibrate", "--method", "model_sensitivity", "--epsilon", "1", "--classes", "0"], "classes must be"),
    (["calibrate", "--method", "model_sensitivity", "--epsilon", "1", "--dim", "0"], "dim must be"),
    (["sweep", "--classes", "0"], "classes must be"),
    (["sweep", "--dim", "0"], "dim must be"),
    (["calibrate", "--method", "model_sensitivity", "--epsilon", "1e309"], "finite number"),
    (["sweep", "--epsilons", "1,1e309"], "finite number"),
    (["calibrate", "--method", "model_sensitivity", "--epsilon", "1", "--lam", "1e309"], "finite number"),
    (["calibrate", "--method", "dpsgd", "--epsilon", "1", "--delta", "5e-324", "--accounting", "tight"],
     "cannot reach epsilon"),  # the PLD accountant: no multiplier reaches such a delta
    # a bad-input hunt: argparse took these values for options ("expected one argument")
    (["calibrate", "--method", "model_sensitivity", "--epsilon", "-inf"], "got '-inf'"),
    (["calibrate", "--method", "model_sensitivity", "--epsilon", "-1e5"], "epsilon must be in (0, inf], got -100000"),
    (["sweep", "--epsilons", "-1e3,2"], "epsilon must be in (0, inf], got -1000"),
])
def test_expected_failures_exit_2_with_one_line(args, fragment, capsys):
    code, out, err = _run(args, capsys)
    line = _assert_one_line_error(code, err)
    assert fragment in line and not out


def test_epsilon_inf_literal_still_means_the_baseline(capsys):
    code, out, _ = _run(["calibrate", "--method", "model_sensitivity", "--epsilon", "inf", "--json"], capsys)
    assert code == 0 and '"noise": "none"' in out


def test_tight_subsample_aggregate_at_a_huge_budget_is_refused_quickly(capsys):
    # How quickly: bench/bench_refusals.py (timing asserts live in benchmarks, not tests).
    code, _, err = _run(["calibrate", "--method", "subsample_aggregate", "--epsilon", "1", "--delta", "1e-5",
                         "--budget", "1000000000000", "--accounting", "tight"], capsys)
    assert "B <= 10,000,000" in _assert_one_line_error(code, err)


def test_a_tiny_npz_claiming_a_huge_shape_exits_2(tmp_path, capsys):
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f8", "fortran_order": False, "shape": (10**7, 10**6)})
    y = io.BytesIO()
    np.save(y, np.arange(20) % 2)
    path = tmp_path / "claims.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x.npy", head.getvalue())
        zf.writestr("y.npy", y.getvalue())
    assert path.stat().st_size < 1000
    code, _, err = _run(["sweep", "--dataset", "file", "--data-file", str(path), "--quiet"], capsys)
    line = _assert_one_line_error(code, err)
    assert "claims.npz" in line and str(tmp_path) not in line


def test_an_unreadable_data_file_exits_2(tmp_path, capsys, monkeypatch):
    path = tmp_path / "locked.csv"
    path.write_text("a,label\n" + "".join(f"{i},{i % 2}\n" for i in range(20)))

    def denied(p):
        raise PermissionError(13, "Permission denied", p)

    monkeypatch.setattr(userfile, "_open_text", denied)
    userfile.clear_cache()
    code, _, err = _run(["sweep", "--dataset", "file", "--data-file", str(path), "--quiet"], capsys)
    assert "Permission denied" in _assert_one_line_error(code, err)
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    code, _, err = _run(["sweep", "--dataset", "file", "--data-file", str(folder), "--quiet"], capsys)
    _assert_one_line_error(code, err)


@pytest.mark.parametrize("args", [
    ["calibrate", "--method", "subsample_aggregate", "--epsilon", "1"],
    ["calibrate", "--method", "subsample_aggregate", "--epsilon", "1", "--json"],
])
@pytest.mark.slow
def test_stdout_closed_early_exits_quietly(args):
    proc = subprocess.Popen([sys.executable, "-m", "privcore", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT)
    proc.stdout.close()  # like `| true`: the reader is gone before anything is written
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and b"BrokenPipe" not in err and err.strip() == b"", err
    assert proc.returncode in (0, 141)


def test_library_values_are_checked_exactly():
    with pytest.raises(ValueError, match="epsilon"):
        PrivacyBudget(10**400)
    with pytest.raises(ValueError, match="n must be"):
        Problem(n=10**400)
    with pytest.raises(ValueError, match="2\\*\\*53"):
        Problem(n=2**60, teachers=16)
    with pytest.raises(ValueError, match="epsilon"):
        NoiseScale("model_sensitivity", float("nan"), 0.0, "paper", "none")
    with pytest.raises(ValueError, match="delta"):
        NoiseScale("model_sensitivity", 1.0, 2.0, "paper", "none")
    with pytest.raises(ValueError, match="sigma"):
        NoiseScale("model_sensitivity", 1.0, 0.0, "paper", "gaussian", sigma=10**400)
    with pytest.raises(TypeError, match="notes"):
        NoiseScale("model_sensitivity", 1.0, 0.0, "paper", "none", notes=(1, 2))


@pytest.mark.slow
def test_a_method_that_cannot_run_fails_alone(capsys):
    # N = 100 with DP-SGD's default batch 256: a warning for DP-SGD, rows for the others, exit 0
    code, out, err = _run(["sweep", "--dataset", "synthetic", "--n", "100", "--repeats", "2", "--epsilons", "1",
                           "--delta", "1e-5", "--methods", "dpsgd,model_sensitivity,subsample_aggregate", "--quiet"],
                          capsys)
    assert code == 0, err
    assert "dpsgd batch_size must be at most N = 100, got 256" in err
    methods = {line.split(",")[0] for line in out.strip().splitlines()[1:]}
    assert {"model_sensitivity", "subsample_aggregate"} <= methods and "dpsgd" not in methods


def test_a_sweep_where_no_requested_method_runs_exits_2(capsys):
    """A bad-input hunt: `--methods dpsgd` at delta 0 printed the non-private row alone and exited 0."""
    code, out, err = _run(["sweep", "--dataset", "synthetic", "--n", "100", "--repeats", "2", "--epsilons", "1",
                           "--delta", "0", "--methods", "dpsgd", "--quiet"], capsys)
    assert code == 2 and "none of the requested methods can run" in err and "DP-SGD" in err
    assert out.strip() == ""


def test_an_accountant_limit_is_said_in_words(capsys, monkeypatch):
    """'warning: dpsgd: math range error' said nothing: the warning names epsilon and what to do."""
    import privcore.engine.units as units  # where a unit of a sweep is computed

    def overflow(*a, **k):
        raise OverflowError("math range error")

    monkeypatch.setattr(units, "_compute", overflow)
    code, out, err = _run(["sweep", "--dataset", "synthetic", "--n", "100", "--repeats", "2", "--epsilons", "1e6",
                           "--delta", "1e-5", "--methods", "dpsgd", "--quiet", "--no-cache"], capsys)
    assert "cannot be calibrated at epsilon 1e+06" in err and "choose a smaller epsilon" in err and code == 2


def test_warnings_print_as_one_line_without_source_lines(tmp_path, monkeypatch, capsys):
    # Once: Python's format, "<server path>/dpsgd.py:221: RuntimeWarning: ..." plus the source line.
    afile = tmp_path / "not_a_folder"
    afile.write_text("x")
    monkeypatch.setenv("PRIVCORE_CACHE", str(afile))
    assert main(["calibrate", "--method", "dpsgd", "--epsilon", "1.2345", "--delta", "1e-5"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err and all(line.startswith("warning: ignoring the calibration memo") for line in err), err
    assert not any(".py:" in line for line in err)
    assert len(err) == len(set(err)), err  # read on lookup and on store: the same line once, not twice


def test_all_inside_a_method_list_is_explained(capsys):
    # Once: "unknown method 'all'; choose from all, ..." (a contradiction).
    assert main(["sweep", "--methods", "all,dpsgd", "--epsilons", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "'all' cannot be combined with method names" in err and "unknown method" not in err and "\n" not in err


@pytest.mark.parametrize("args, message", [
    (["calibrate", "--method", "model_sensitivity", "--epsilon", "1_0"], "must be a number, got '1_0'"),
    (["calibrate", "--method", "model_sensitivity", "--epsilon", "١"], "must be a number, got '١'"),
    (["calibrate", "--method", "model_sensitivity", "--epsilon", "1", "--budget", "1_000"], "must be an integer"),
    (["sweep", "--dataset", "digits", "--epsilons", "1,,2"], "separated by single commas"),
    (["deep", "--epsilons", "1,2,"], "separated by single commas"),
])
def test_numbers_are_ascii_and_lists_have_no_empty_entries(args, message, capsys):
    """A bad-input hunt: int() and float() read "1_0" (as 10) and other scripts' digits, and "1,,2" ran as 1,2."""
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "\n" not in err.strip(), err


def test_calibrate_says_what_the_dashboard_warns_of_at_the_setting(capsys):
    """A bad-input hunt: Private-kNN was calibrated with k = 25 neighbours at N = 1 without a word (the dashboard
    warns of a subsample smaller than k); the same warnings now go to stderr."""
    assert main(["calibrate", "--method", "private_knn", "--epsilon", "1", "--n", "5"]) == 0
    assert "warning: A subsample of γ N = 0 rows has fewer than k = 25" in capsys.readouterr().err
    assert main(["calibrate", "--method", "subsample_aggregate", "--epsilon", "1", "--n", "50", "--teachers", "16"]) == 0
    assert "only ⌊N/T⌋ = 3 examples" in capsys.readouterr().err
    assert main(["calibrate", "--method", "private_knn", "--epsilon", "1", "--n", "5000"]) == 0
    assert "warning" not in capsys.readouterr().err
