"""app.py itself: it must not fail when a process runs it outside a Streamlit runtime.

multiprocessing's spawn re-runs the parent's ``__main__`` file in every child as ``__mp_main__``; after
Streamlit's AppTest has run app.py in a test session, a Dask worker started by tests/test_cluster.py is
such a child. An AttributeError there ("'Page' object has no attribute '_url_path'") stopped the worker.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_app_runs_outside_a_streamlit_runtime(tmp_path):
    code = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); "
            "runpy.run_path(sys.argv[1] + '/app.py', run_name='__mp_main__'); print('ran')")
    env = {"PRIVCORE_CACHE": str(tmp_path), "PRIVCORE_CORE_WARMUP": "0", "PRIVCORE_EXPORT_WARMUP": "0",
           "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code, str(ROOT)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ran" in out.stdout


def test_streamlit_run_finds_an_st_app_whose_lifespan_warms_up(tmp_path):
    """``streamlit run app.py`` imports app.py as the module ``app`` outside a session: it must define
    ``app``, an ``st.App`` serving this same file (no page is drawn there). Its lifespan is ui.warmup's
    (tests/test_ui_warmup.py), and tests/test_browser.py serves it for real."""
    code = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); import streamlit as st; "
                        "ns = runpy.run_path(sys.argv[1] + '/app.py', run_name='app'); a = ns['app']; "
            "assert isinstance(a, st.App), type(a); "
            "print('script', a.script_path); print('ok')")
    env = {"PRIVCORE_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code, str(ROOT)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ok" in out.stdout and str(ROOT / "app.py") in out.stdout


def _omp_spin_count(tmp_path, extra_env: dict[str, str]) -> str:
    """How long torch's OpenMP threads spin before sleeping, as its runtime (libgomp) reports it
    (OMP_DISPLAY_ENV=VERBOSE) when it loads after app.py ran as the server's module ``app`` (what
    ``streamlit run app.py`` does before the warm-up imports torch). libgomp shows OMP_WAIT_POLICY as
    'PASSIVE' when it is unset, yet spins 300,000 times: the spin count is what tells them apart."""
    code = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); runpy.run_path(sys.argv[1] + '/app.py', run_name='app'); "
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
    """Spinning OpenMP threads stalled the warm-up when a browser took a core (ui/warmup.py, README)."""
    assert _omp_spin_count(tmp_path, {}) == "0"


def test_a_wait_policy_set_by_the_user_is_kept(tmp_path):
    assert int(_omp_spin_count(tmp_path, {"OMP_WAIT_POLICY": "ACTIVE"})) > 300_000


def test_the_bundled_streamlit_config_does_not_watch_source_files():
    """The file watcher resolved every imported module's path after each script run (README, issue 16)."""
    import tomllib

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["fileWatcherType"] == "none"
    assert config["server"]["headless"] is True
