"""privcore/engine/code.py: the generated CLI command and Python snippet give the view's numbers."""

from __future__ import annotations

import contextlib
import csv
import io
import shlex

import pytest

from privcore.cli import main
from privcore.engine.code import cli_command, python_code
from privcore.engine.runner import run_sweep
from privcore.engine.specs import DataSpec, SweepSpec


@pytest.fixture()
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "cache"))


def _key(method, x) -> tuple:
    return method, round(float(x), 9)


def _view(spec: SweepSpec) -> dict[tuple, float]:
    x = spec.vary or "epsilon"
    return {_key(r["method"], r[x]): r["accuracy_mean"] for r in run_sweep(spec, use_cache=False).rows}


SPECS = [
    SweepSpec(data=DataSpec(name="digits", n=200, augment=False), methods=("model_sensitivity", "subsample_aggregate"),
              epsilons=(1.0, 10.0), budget=10, teachers=10, repeats=2, seed=3, accounting="paper"),
    SweepSpec(data=DataSpec(name="synthetic", n=300, classes=3, augment=False), methods=("prediction_sensitivity",),
              epsilons=(2.0,), delta=1e-5, repeats=2, vary="budget", values=(1, 30), lam=0.01),
]


@pytest.mark.parametrize("spec", SPECS, ids=["eps", "vary-budget"])
def test_python_snippet_gives_the_views_rows(spec, fresh_cache, capsys):
    view = _view(spec)
    exec(compile(python_code(spec, secure_noise=False), "<snippet>", "exec"), {})  # noqa: S102 - our own generated code
    printed = {}
    for line in capsys.readouterr().out.splitlines():
        method, x, mean, _ = line.split()
        printed[_key(method, x if x != "inf" else float("inf"))] = float(mean)
    assert printed.keys() == view.keys()
    for k, v in view.items():
        assert printed[k] == pytest.approx(v, abs=1e-4), k


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=["eps", "vary-budget"])
def test_cli_command_gives_the_views_rows(spec, fresh_cache, capsys):
    view = _view(spec)
    argv = shlex.split(cli_command(spec, secure_noise=False))
    assert argv[:4] == ["python", "-m", "privcore", "sweep"]
    capsys.readouterr()
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(argv[3:] + ["--quiet", "--no-cache"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    x = spec.vary or "epsilon"
    got = {_key(r["method"], float(r[x])): float(r["accuracy_mean"]) for r in rows}
    assert got.keys() == view.keys()
    for k, v in view.items():
        assert got[k] == pytest.approx(v, abs=1e-9), k


def test_an_upload_appears_under_its_own_name_never_the_server_path():
    spec = SweepSpec(data=DataSpec(name="file", data_file="/srv/cache/uploads/" + "a" * 64 + ".csv",
                                   preprocess="bounds:0:1+intercept", label_column="kind"), methods=("model_sensitivity",))
    cli, py = cli_command(spec, data_file_name="mine.csv"), python_code(spec, data_file_name="mine.csv")
    for text in (cli, py):
        assert "/srv" not in text and "mine.csv" in text
    assert "--preprocess bounds:0:1+intercept" in cli and "--label-column kind" in cli
    assert "preprocess='bounds:0:1+intercept'" in py


def test_the_views_own_spec_round_trips_through_the_cli(fresh_cache, capsys):
    """The spec the Explore page builds (ui.setting.make_spec), not a hand-made one."""
    from privcore.csvtext import number_text
    from ui.setting import Setting, SidebarSettings, build_data_info, make_spec

    info = build_data_info("digits")
    side = SidebarSettings("digits", None, 2, "corrected", "cpu", info)
    s = Setting(eps=1.0, delta=0.0, budget=10, n=300, teachers=10, methods=("model_sensitivity",))
    spec = make_spec(side, s, epsilons=(1.0, 3.0))
    view = _view(spec)
    capsys.readouterr()
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(shlex.split(cli_command(spec, secure_noise=False))[3:] + ["--quiet", "--no-cache"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    # the CSV writes each number at 12 significant digits (privcore.csvtext): the view's, exactly so
    assert {_key(r["method"], float(r["epsilon"])): float(r["accuracy_mean"]) for r in rows} == {
        k: float(number_text(v)) for k, v in view.items()}


@pytest.mark.slow
def test_the_copied_code_runs_in_any_folder(tmp_path, fresh_cache):
    """The snippet and the command, run by a fresh interpreter in an empty folder (no checkout on its
    path, only the installed package), print the view's numbers (the snippet without secure noise)
    and its rows (the command as copied, with secure noise)."""
    import os
    import subprocess
    import sys

    spec = SPECS[0]
    view = _view(spec)
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    env = {**os.environ, "PRIVCORE_CACHE": str(tmp_path / "cache2")}
    env.pop("PYTHONPATH", None)
    snippet = subprocess.run([sys.executable, "-c", python_code(spec, secure_noise=False)], cwd=folder, env=env, capture_output=True,
                             text=True, timeout=600)
    assert snippet.returncode == 0, snippet.stderr[-2000:]
    printed = {}
    for line in snippet.stdout.splitlines():
        method, x, mean, _ = line.split()
        printed[_key(method, x)] = float(mean)
    assert printed.keys() == view.keys()
    for k, v in view.items():
        assert printed[k] == pytest.approx(v, abs=1e-4), k
    argv = shlex.split(cli_command(spec))  # as copied: secure noise, the same rows with other noise
    assert argv[-1] == "--secure-noise"
    command = subprocess.run([sys.executable, *argv[1:], "--quiet"], cwd=folder, env=env, capture_output=True,
                             text=True, timeout=600)
    assert command.returncode == 0, command.stderr[-2000:]
    rows = list(csv.DictReader(io.StringIO(command.stdout)))
    assert {_key(r["method"], float(r["epsilon"])) for r in rows} == set(view)


def test_copied_code_asks_for_secure_noise_by_default():
    """Code copied out of the dashboard is what someone may run to publish: it draws its noise from
    the operating system (commented in the snippet); secure_noise=False gives the reproducible form."""
    spec = SPECS[0]
    py, cli = python_code(spec), cli_command(spec)
    assert "secure_noise=True" in py and "# Noise from the operating system's entropy" in py
    assert cli.endswith(" --secure-noise")
    assert "secure_noise" not in python_code(spec, secure_noise=False)
    assert "--secure-noise" not in cli_command(spec, secure_noise=False)
    from dataclasses import replace

    secure = replace(spec, secure_noise=True)  # a spec that asks for it keeps it either way
    assert "secure_noise=True" in python_code(secure, secure_noise=False)
    assert "--secure-noise" in cli_command(secure, secure_noise=False)
    namespace: dict = {}
    exec(compile(py.split("result = run_sweep(spec)")[0], "<snippet>", "exec"), namespace)  # noqa: S102 - the spec only
    assert namespace["spec"] == secure
