"""Helpers shared by the Streamlit AppTest modules (tests/test_app_*.py); fixtures are in conftest.py."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
PAGES = ROOT / "app_pages"


def texts(elements) -> list[str]:
    """Element values as shown: messages quoting user text are Markdown-escaped (ui/text.py)."""
    return [re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", str(e.value)) for e in elements]


def run(path: str, base: dict[str, str], **params):  # AppTest
    """An AppTest of ``path`` (app.py or one page) with URL parameters ``base`` updated by ``params``."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(path, default_timeout=240)
    at.query_params.update({**base, **{k: str(v) for k, v in params.items()}})
    return at


def open_more_settings(at):  # AppTest
    """Open the "More settings" expander before the next run (its sliders are drawn only while open)."""
    from ui.controls import MORE_KEY

    at.session_state[MORE_KEY] = True
    return at
