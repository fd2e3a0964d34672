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
