"""The dashboard's entry scripts, app.py (a checkout) and app_pages/main.py (``privcore app``), and
``privcore app`` itself. They must not fail when a process runs them outside a Streamlit runtime.

multiprocessing's spawn re-runs the parent's ``__main__`` file in every child as ``__mp_main__``; after
Streamlit's AppTest has run app.py in a test session, a Dask worker started by tests/test_cluster.py is
such a child. An AttributeError there ("'Page' object has no attribute '_url_path'") stopped the worker.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from privcore import dashboard

ROOT = Path(__file__).resolve().parents[1]
#: The checkout's entry script and the installed package's (the one `privcore app` serves).
ENTRIES = [ROOT / "app.py", ROOT / "app_pages" / "main.py"]


def _code(path: Path) -> str:
    """A script's code without its module docstring."""
    import ast

    tree = ast.parse(path.read_text())
    return ast.unparse(tree.body[1:])


def test_the_two_entry_scripts_are_twins():
    assert _code(ENTRIES[0]) == _code(ENTRIES[1])


def test_privcore_app_serves_the_installed_entry_script():
    assert dashboard.main_script() == ENTRIES[1].resolve()  # an editable install: this checkout's file
    argv = dashboard.command(["--server.port", "8600"])
    assert argv[:5] == [sys.executable, "-m", "streamlit", "run", str(ENTRIES[1].resolve())]
    assert argv[-2:] == ["--server.port", "8600"]  # the user's options last: they win


@pytest.mark.parametrize("entry", ENTRIES, ids=["app.py", "main.py"])
def test_app_runs_outside_a_streamlit_runtime(tmp_path, entry):
    code = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__mp_main__'); print('ran')"
    env = {"PRIVCORE_CACHE": str(tmp_path), "PRIVCORE_CORE_WARMUP": "0", "PRIVCORE_EXPORT_WARMUP": "0",
           "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code, str(entry)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ran" in out.stdout


@pytest.mark.parametrize("entry", ENTRIES, ids=["app.py", "main.py"])
def test_streamlit_run_finds_an_st_app_whose_lifespan_warms_up(tmp_path, entry):
    """``streamlit run app.py`` imports app.py as the module ``app`` outside a session: it must define
    ``app``, an ``st.App`` serving this same file (no page is drawn there). Its lifespan is ui.warmup's
    (tests/test_ui_warmup.py), and tests/test_browser.py serves it for real."""
    code = ("import runpy, sys; import streamlit as st; "
            "ns = runpy.run_path(sys.argv[1], run_name='app'); a = ns['app']; "
            "assert isinstance(a, st.App), type(a); "
            "print('script', a.script_path); print('ok')")
    env = {"PRIVCORE_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code, str(entry)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ok" in out.stdout and str(entry) in out.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_privcore_app_starts_the_server_from_any_folder(tmp_path):
    """``privcore app`` (the console script's function, in a fresh process) run in an empty folder
    answers Streamlit's health check: the dashboard needs no checkout."""
    port = _free_port()
    env = {**os.environ, "PRIVCORE_CACHE": str(tmp_path / "cache"), "PRIVCORE_CORE_WARMUP": "0",
           "PRIVCORE_EXPORT_WARMUP": "0"}
    code = "import sys; from privcore.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "app", "--server.port", str(port)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, answer = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None and answer is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as r:
                    answer = r.read().decode()
            except OSError:
                time.sleep(0.5)
        assert answer == "ok", (proc.poll(), answer)
    finally:
        proc.terminate()
        out = proc.communicate(timeout=60)[0]
    assert "Traceback" not in out, out[-3000:]


def _omp_spin_count(tmp_path, extra_env: dict[str, str]) -> str:
    """How long torch's OpenMP threads spin before sleeping, as its runtime (libgomp) reports it
    (OMP_DISPLAY_ENV=VERBOSE) when it loads after app.py ran as the server's module ``app`` (what
    ``streamlit run app.py`` does before the warm-up imports torch). libgomp shows OMP_WAIT_POLICY as
    'PASSIVE' when it is unset, yet spins 300,000 times: the spin count is what tells them apart."""
    code = ("import runpy, sys; runpy.run_path(sys.argv[1] + '/app.py', run_name='app'); "
            "assert 'torch' not in sys.modules, 'app.py imported torch: the policy would come too late'; "
            "import torch; torch.ones(64).sum()")
    env = {"PRIVCORE_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin", "OMP_DISPLAY_ENV": "VERBOSE", **extra_env}
    out = subprocess.run([sys.executable, "-c", code, str(ROOT)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    shown = [line.split("=", 1)[1].strip(" '") for line in out.stderr.splitlines() if "GOMP_SPINCOUNT" in line]
    if not shown:
        import pytest

        pytest.skip("this torch build's OpenMP runtime does not display its settings (not libgomp)")
    return shown[0]


def test_the_server_process_makes_torchs_openmp_threads_wait_passively(tmp_path):
    """Spinning OpenMP threads stalled the warm-up when a browser took a core (bench/bench_first_visit.py --busy)."""
    assert _omp_spin_count(tmp_path, {}) == "0"


def test_a_wait_policy_set_by_the_user_is_kept(tmp_path):
    assert int(_omp_spin_count(tmp_path, {"OMP_WAIT_POLICY": "ACTIVE"})) > 300_000


def test_the_bundled_streamlit_config_does_not_watch_source_files():
    """The file watcher resolved every imported module's path after each script run
    (bench/bench_first_visit.py --spy)."""
    import tomllib

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["fileWatcherType"] == "none"
    assert config["server"]["headless"] is True


def test_privcore_app_passes_the_checkouts_config_as_flags():
    """An installed package has no .streamlit/config.toml: ``privcore app`` passes the same options."""
    import tomllib

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    flat = {f"{section}.{name}": str(value).lower() for section, options in config.items()
            for name, value in options.items()}
    assert dashboard.STREAMLIT_OPTIONS == flat
