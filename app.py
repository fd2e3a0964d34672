"""Entry point: ``streamlit run app.py``. Shared sidebar + navigation over the pages (Explore first)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import streamlit as st

st.set_page_config(page_title="Private prediction trade-offs", page_icon="🔒", layout="wide",
                   initial_sidebar_state="expanded")

from ui import widgets  # noqa: E402 - after set_page_config

ROOT = Path(__file__).resolve().parent


@st.cache_resource(show_spinner=False)
def _warm_exporter() -> bool:
    """Start kaleido's Chromium in the background once per process: the first export is then fast."""
    if os.environ.get("PRIVCORE_EXPORT_WARMUP", "1") == "0":
        return False
    from ui import export

    threading.Thread(target=export.warm_up, name="kaleido-warmup", daemon=True).start()
    return True


@st.cache_resource(show_spinner=False)
def _warm_core() -> bool:
    """Compute the default Explore view in the background, once per process (ui/warmup.py)."""
    if os.environ.get("PRIVCORE_CORE_WARMUP", "1") == "0":
        return False
    from ui.warmup import warm_default_view

    threading.Thread(target=warm_default_view, name="privcore-warmup", daemon=True).start()
    return True


_PAGES = [
    ("pages/1_Explore.py", "Explore", ":material/insights:", True),
    ("pages/2_Who_wins.py", "Who wins", ":material/grid_view:", False),
    ("pages/3_Reproduce.py", "Reproduce the paper", ":material/science:", False),
    ("pages/4_Learn.py", "Learn", ":material/school:", False),
    ("pages/5_Calibrate.py", "Calibrate", ":material/tune:", False),
    ("pages/6_Measured_leakage.py", "Measured leakage", ":material/policy:", False),
]
pages = [st.Page(path, title=title, icon=icon, default=default)
         for path, title, icon, default in _PAGES if (ROOT / path).is_file()]
nav = st.navigation(pages)
_warm_core()
_warm_exporter()
nav.run()
# Every page draws the shared sidebar itself (widgets.sidebar() is idempotent within a run), after its
# title so the page never sits blank while the data set loads; this call covers a page that does not.
widgets.sidebar()
