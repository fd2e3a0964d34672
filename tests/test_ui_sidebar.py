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



_STOPS = """
import streamlit as st
from ui import sidebar
side = sidebar.settings(require_data=True)   # as the pages do: stop while the data set cannot be used
st.write("SPEC " + side.data_spec().preprocess)
"""


def _shown(widget):  # a streamlit.testing Radio, Checkbox or TextInput
    """What the browser shows for a widget it holds no value for: the value sent with it, else its default."""
    proto = widget.proto
    if widget.type == "radio":
        return proto.raw_value if proto.set_value else widget.options[proto.default]
    return proto.value if proto.set_value else proto.default


def test_declared_preprocessing_survives_a_bad_upload_replaced_by_a_good_one(uploads):
    """A walk-through saw declared bounds and intercept come back as "As given" after a bad file was replaced by a
    good one. The browser drops the old file first: a run without a file draws no preprocessing controls and the
    page ends it with st.stop(), after which Streamlit keeps the server's values of undrawn widgets while the
    browser forgets its own. The controls came back at their defaults, without their values being sent, and the
    browser's next rerun sent those defaults, dropping prep from the URL and from the data set."""
    from ui.userdata import MODE_LABELS

    def csv(label) -> bytes:
        return ("f1,f2,label\n" + "".join(f"{i % 7}.5,{i % 5}.25,{label(i)}\n" for i in range(40))).encode()

    at = AppTest.from_string(_STOPS, default_timeout=120)
    at.query_params.update(dataset="file", prep="bounds:0:10+intercept")
    at.run()
    at.sidebar.file_uploader[0].set_value(("bad.csv", csv(lambda i: 1), "text/csv")).run()  # one class only
    assert any("only one class" in e.value for e in at.error), [e.value for e in at.error]
    at.sidebar.file_uploader[0].clear().run()
    at.sidebar.file_uploader[0].set_value(("good.csv", csv(lambda i: i % 2), "text/csv")).run()
    assert not at.exception, at.exception
    mode, intercept, bounds = (at.sidebar.radio(key="ud:mode"), at.sidebar.checkbox(key="ud:intercept"),
                               at.sidebar.text_input(key="ud:bounds"))
    shown = (_shown(mode), _shown(intercept), _shown(bounds))
    assert shown == (MODE_LABELS["bounds"], True, "0:10"), shown
    # the browser's next rerun sends what it shows: the declared preprocessing stays in force
    mode.set_value({v: k for k, v in MODE_LABELS.items()}[shown[0]])
    intercept.set_value(shown[1])
    bounds.set_value(shown[2])
    at.run()
    assert at.query_params.get("prep") in ("bounds:0:10+intercept", ["bounds:0:10+intercept"]), at.query_params
    assert "SPEC bounds:0:10+intercept" in " ".join(m.value for m in at.markdown)
