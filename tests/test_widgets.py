"""ui.widgets: user text shown as text, uploads stored atomically by content hash, N from the URL checked."""

from __future__ import annotations

import hashlib
import os
import string
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from ui import widgets  # noqa: E402
from ui.text import escape_markdown  # noqa: E402

INJECTION = "![x](http://host/x.png) [click](http://evil) <img src=x> $x^2$ :red[hi] **b** http://bare.example"


@pytest.fixture()
def uploads(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    folder = tmp_path / "uploads"
    folder.mkdir()
    return folder


def _unescaped(markdown: str) -> list[str]:
    """Punctuation characters of ``markdown`` that are not backslash-escaped (would be syntax)."""
    out, i = [], 0
    while i < len(markdown):
        ch = markdown[i]
        if ch == "\\" and i + 1 < len(markdown):
            i += 2
            continue
        if ch in string.punctuation:
            out.append(ch)
        i += 1
    return out


def test_escape_markdown_leaves_no_markdown_syntax():
    escaped = escape_markdown(INJECTION)
    assert _unescaped(escaped) == []
    assert escaped.replace("\\", "") == INJECTION.replace("\\", "")


_SIDEBAR = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from ui import widgets
widgets.epsilon_slider()   # reads eps from the URL (and records the bad value)
widgets.sidebar()          # reports URL problems
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


def test_a_data_file_outside_uploads_from_the_url_is_ignored(uploads, tmp_path):
    outside = tmp_path / "secret.csv"
    outside.write_text("a,label\n" + "".join(f"{i},{i % 2}\n" for i in range(20)))
    assert widgets._inside_uploads(str(outside)) is None
    assert widgets._inside_uploads("../secret.csv") is None


def test_uploads_are_content_addressed_and_a_mismatched_file_is_never_used(uploads):
    class Upload:
        name = "my data [1].csv"

        def getvalue(self) -> bytes:
            return b"a,label\n" + b"".join(f"{i},{i % 2}\n".encode() for i in range(20))

    import streamlit as st

    st.session_state.clear() if hasattr(st.session_state, "clear") else None
    data = Upload().getvalue()
    digest = hashlib.sha256(data).hexdigest()
    half = uploads / f"{digest}.csv"
    half.write_bytes(data[: len(data) // 2])                       # an interrupted write of the same upload
    assert widgets._inside_uploads(half.name) is None              # never used
    try:
        path = widgets._save_upload(Upload())
    except Exception:  # noqa: BLE001 - outside a Streamlit run, session_state may be unavailable
        path = None
    if path is None:                                               # store directly, as _save_upload does
        widgets._atomic_write(half, data)
        path = str(half)
    assert Path(path).name == f"{digest}.csv" and Path(path).read_bytes() == data
    assert widgets._inside_uploads(Path(path).name) == str(Path(path).resolve())
    assert not list(uploads.glob(".part-*"))                       # no temporary file left
    assert widgets.delete_upload(Path(path).name) and not Path(path).exists()


def test_atomic_write_leaves_nothing_when_it_fails(uploads, monkeypatch):
    target = uploads / ("0" * 64 + ".csv")

    def boom(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        widgets._atomic_write(target, b"abc")
    assert not target.exists() and not list(uploads.iterdir())


def test_stale_upload_leftovers_are_cleaned(uploads):
    stale = uploads / ".part-abc.csv"
    stale.write_text("x")
    os.utime(stale, (1, 1))
    fresh = uploads / ".part-def.csv"
    fresh.write_text("x")
    widgets._clean_leftovers(uploads)
    assert not stale.exists() and fresh.exists()


def test_checked_n_snaps_like_the_n_slider():
    info = widgets.DataInfo("digits", 1437, 360, 64, 10)
    assert widgets.checked_n(info, None) == (None, None)
    assert widgets.checked_n(info, 1000) == (1000, None)
    n, note = widgets.checked_n(info, 10_000_000)
    assert n is None and "10,000,000" in note and "1,437" in note
    n, note = widgets.checked_n(info, 1001)
    assert n == 1000 and note


def test_who_wins_clamps_n_from_the_url(uploads):
    from streamlit.runtime.pages_manager import PagesManager

    at = AppTest.from_file(str(ROOT / "pages" / "2_Who_wins.py"), default_timeout=240)
    PagesManager.uses_pages_directory = False
    at.query_params.update({"dataset": '"digits"', "repeats": "2", "n": "10000000",
                            "methods": '["prediction_sensitivity"]', "map_eps": "[1.0]"})
    at.run()
    assert not at.exception, at.exception
    assert any("N = 10,000,000 is not available" in w.value for w in at.warning)
