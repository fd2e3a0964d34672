"""ui/sidebar.py: URL problems reported as text; drawn once per run by app.py."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from apptest import ROOT
from test_ui_text import INJECTION, _unescaped


_SIDEBAR = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from ui import controls, sidebar
sidebar.settings()         # reads every URL value first and reports the bad ones
controls.epsilon_slider()
"""


def test_a_url_value_is_shown_as_text_not_markdown(uploads):
    at = AppTest.from_string(_SIDEBAR, default_timeout=120)
    at.query_params["dataset"] = '"synthetic"'
    at.query_params["eps"] = INJECTION
    at.run()
    assert not at.exception
    bodies = [w.value for w in at.warning if "eps" in w.value]
    assert bodies, [w.value for w in at.warning]
    for body in bodies:
        assert "\\!\\[x\\]\\(http\\:" in body                  # the image syntax is escaped, char by char
        assert _unescaped(body) == [], body                         # and so is every other syntax character
