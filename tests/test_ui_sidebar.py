"""ui/sidebar.py: URL problems reported as text; drawn once per run by app.py."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from test_ui_text import INJECTION, _unescaped


_SIDEBAR = """
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


_LAZY = """
import streamlit as st
from ui import sidebar
calls = []
real = sidebar.draw
sidebar.draw = lambda: calls.append(1) or real()
try:
    with sidebar.shared():
        st.session_state["drawn_at_title"] = len(calls)
        st.title("The page")
        first, second = sidebar.settings(), sidebar.settings()
        st.session_state["same"] = first is second
    st.session_state["calls"] = len(calls)
finally:
    sidebar.draw = real
"""

_NEVER_ASKS = """
import streamlit as st
from ui import sidebar
with sidebar.shared():
    st.title("A page that never reads the sidebar")
"""


def test_the_page_title_comes_before_the_sidebar_is_drawn_once(uploads):
    at = AppTest.from_string(_LAZY, default_timeout=120)
    at.query_params["dataset"] = "synthetic"
    at.run()
    assert not at.exception
    assert at.session_state["drawn_at_title"] == 0  # the heading does not wait for the data set
    assert at.session_state["calls"] == 1 and at.session_state["same"]
    assert at.title[0].value == "The page" and len(at.sidebar.selectbox) >= 1


def test_a_page_that_never_asks_still_gets_the_sidebar(uploads):
    at = AppTest.from_string(_NEVER_ASKS, default_timeout=120)
    at.query_params["dataset"] = "synthetic"
    at.run()
    assert not at.exception
    assert len(at.sidebar.selectbox) >= 1 and len(at.sidebar.radio) >= 1


def test_a_bad_upload_is_named_as_the_user_uploaded_it(uploads):
    # Once: the error named the file by the content hash it is stored under ('23e2...b39.npz').
    import hashlib
    import io

    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, x=np.zeros((30, 0)), y=np.arange(30) % 2)  # no features
    data = buf.getvalue()
    stored = hashlib.sha256(data).hexdigest() + ".npz"
    (uploads / stored).write_bytes(data)
    at = AppTest.from_string(_SIDEBAR, default_timeout=120)
    at.query_params.update({"dataset": '"file"', "data_file": f'"{stored}"'})
    at.session_state["_upload_names"] = {stored: "my_data.npz"}
    at.run()
    assert not at.exception
    errors = [e.value.replace("\\", "") for e in at.error]
    assert errors and all("'my_data.npz'" in e and stored not in e for e in errors), errors


def test_an_unavailable_download_shows_no_server_path_or_python_wrapping(uploads, monkeypatch):
    # Once: "... <urlopen error [Errno -2] Name or service not known> ... in the folder /srv/.../cache/mnist".
    import urllib.error
    import urllib.request

    def offline(*_a, **_k):
        raise urllib.error.URLError(OSError(-2, "Name or service not known"))

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    at = AppTest.from_string(_SIDEBAR, default_timeout=120)
    at.query_params["dataset"] = '"mnist"'
    at.run()
    assert not at.exception
    errors = [e.value.replace("\\", "") for e in at.error]
    assert errors, [w.value for w in at.warning]
    for text in errors:
        assert "Name or service not known" in text and "in the folder <server cache>/mnist" in text, text
        assert str(uploads.parent) not in text and "urlopen error" not in text and "Errno" not in text, text
