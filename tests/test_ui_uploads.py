"""ui/uploads.py: uploads stored atomically by content hash; a path from the URL is used only inside the uploads folder."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ui import uploads as uploads_mod


def test_a_data_file_outside_uploads_from_the_url_is_ignored(uploads, tmp_path):
    outside = tmp_path / "secret.csv"
    outside.write_text("a,label\n" + "".join(f"{i},{i % 2}\n" for i in range(20)))
    assert uploads_mod.inside_uploads(str(outside)) is None
    assert uploads_mod.inside_uploads("../secret.csv") is None


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
    assert uploads_mod.inside_uploads(half.name) is None              # never used
    try:
        path = uploads_mod.save_upload(Upload())
    except Exception:  # noqa: BLE001 - outside a Streamlit run, session_state may be unavailable
        path = None
    if path is None:                                               # store directly, as save_upload does
        uploads_mod.atomic_write(half, data)
        path = str(half)
    assert Path(path).name == f"{digest}.csv" and Path(path).read_bytes() == data
    assert uploads_mod.inside_uploads(Path(path).name) == str(Path(path).resolve())
    assert not list(uploads.glob(".part-*"))                       # no temporary file left
    assert uploads_mod.delete_upload(Path(path).name) and not Path(path).exists()


def test_atomic_write_leaves_nothing_when_it_fails(uploads, monkeypatch):
    target = uploads / ("0" * 64 + ".csv")

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        uploads_mod.atomic_write(target, b"abc")
    assert not target.exists() and not list(uploads.iterdir())


def test_stale_upload_leftovers_are_cleaned(uploads):
    stale = uploads / ".part-abc.csv"
    stale.write_text("x")
    os.utime(stale, (1, 1))
    fresh = uploads / ".part-def.csv"
    fresh.write_text("x")
    uploads_mod.clean_leftovers(uploads)
    assert not stale.exists() and fresh.exists()


# ---------------------------------------------------------------- bounds: values, disk, memory

class _Upload:
    def __init__(self, name: str, data: bytes) -> None:
        self.name, self._data = name, data

    def getvalue(self) -> bytes:
        return self._data


def _csv_bytes(rows: int, cols: int) -> bytes:
    lines = [",".join([f"f{j}" for j in range(cols)] + ["label"])]
    lines += [",".join(str((i + j) % 7) for j in range(cols)) + f",{i % 2}" for i in range(rows)]
    return ("\n".join(lines) + "\n").encode()


def test_an_upload_above_the_value_limit_is_refused_before_it_is_stored(uploads, monkeypatch):
    import io

    import numpy as np

    monkeypatch.setenv("PRIVCORE_MAX_UPLOAD_CELLS", "100")
    with pytest.raises(ValueError, match=r"wide\.csv has 30 rows x 5 columns = 150 values, above the limit of 100.*"
                                         "PRIVCORE_MAX_UPLOAD_CELLS"):
        uploads_mod.save_upload(_Upload("wide.csv", _csv_bytes(30, 5)))
    buf = io.BytesIO()  # 2 MB of zeros declared in the header, a few KB on the wire (the amplification)
    np.savez_compressed(buf, x=np.zeros((2000, 1000), dtype=np.uint8), y=np.zeros(2000, dtype=np.int64))
    with pytest.raises(ValueError, match="2,000 rows x 1,000 columns"):
        uploads_mod.save_upload(_Upload("zeros.npz", buf.getvalue()))
    assert list(uploads.iterdir()) == []  # nothing stored: a refused upload takes no disk


def test_uploads_on_disk_keep_to_their_total_and_age_oldest_first_never_one_in_use(uploads, monkeypatch):
    import time

    monkeypatch.setenv("PRIVCORE_MAX_UPLOADS_MB", "1")
    now = time.time()
    files = []
    for k in range(4):  # 300 KB each, oldest first
        p = uploads / f"{k:064x}.csv"
        p.write_bytes(b"x" * 300_000)
        os.utime(p, (now - 1000 + k, now - 1000 + k))
        files.append(p)
    monkeypatch.setitem(uploads_mod._IN_USE, str(files[0].resolve()), {"a live session": now})
    removed = uploads_mod.expire_uploads(uploads, incoming=300_000, now=now)
    # 1.2 MB + 0.3 MB incoming > 1 MB: the two oldest that no session uses go; the one in use stays
    assert removed == [files[1].name, files[2].name]
    assert [p.exists() for p in files] == [True, False, False, True]
    with pytest.raises(ValueError, match="no room for this upload.*PRIVCORE_MAX_UPLOADS_MB"):
        uploads_mod.expire_uploads(uploads, incoming=2_000_000, now=now)
    monkeypatch.setenv("PRIVCORE_UPLOAD_DAYS", "1")
    assert uploads_mod.expire_uploads(uploads, now=now + 2 * 86400) == [files[3].name]  # too old; [0] is in use
    assert files[0].exists()


def _memo_entries(path) -> list:
    """What the process keeps of ``path``: data sets built from it and its parsed versions."""
    from privcore.data import loader, userfile

    target = str(path.resolve())
    return ([k for k in loader._MEMO._items if k[0] == "file" and k[1][0] == target]
            + [k for k in userfile._PARSED if k[0] == target])


def test_an_uploads_memory_is_released_when_its_session_ends_or_it_is_deleted(uploads, monkeypatch):
    import json

    from streamlit.testing.v1 import AppTest

    data = _csv_bytes(60, 4)
    path = uploads / (hashlib.sha256(data).hexdigest() + ".csv")
    path.write_bytes(data)
    script = "from ui import sidebar\nside = sidebar.settings()\n"

    def session() -> AppTest:
        at = AppTest.from_string(script, default_timeout=120)
        at.query_params["dataset"] = '"file"'
        at.query_params["data_file"] = json.dumps(path.name)
        at.run()
        assert not at.exception
        return at

    session()
    assert _memo_entries(path) and str(path.resolve()) in uploads_mod.in_use()
    monkeypatch.setattr(uploads_mod, "_session_alive", lambda sid: False)  # every browser session closed
    assert uploads_mod.sweep_sessions() == [str(path.resolve())]
    assert not _memo_entries(path) and not uploads_mod.in_use()

    monkeypatch.setattr(uploads_mod, "_session_alive", lambda sid: True)
    at = session()
    assert _memo_entries(path)
    at.sidebar.button(key="delete_upload").click().run()
    assert not path.exists() and not _memo_entries(path) and not uploads_mod.in_use()


def test_a_stored_upload_above_a_lowered_limit_is_refused_unread(uploads, monkeypatch):
    import json

    from streamlit.testing.v1 import AppTest

    from apptest import texts

    data = _csv_bytes(60, 4)
    path = uploads / (hashlib.sha256(data).hexdigest() + ".csv")
    path.write_bytes(data)
    monkeypatch.setenv("PRIVCORE_MAX_UPLOAD_CELLS", "100")
    at = AppTest.from_string("from ui import sidebar\nside = sidebar.settings()\n", default_timeout=120)
    at.query_params["dataset"] = '"file"'
    at.query_params["data_file"] = json.dumps(path.name)
    at.run()
    assert not at.exception
    assert any("240 values, above the limit of 100" in t for t in texts(at.error)), texts(at.error)
    assert not _memo_entries(path)


def test_a_malformed_upload_is_reported_once_with_its_line_and_data_row(uploads):
    # The walk-through saw each malformed-file error twice (the sidebar's box and the page's), and
    # "row 7" that was the file's line 7.
    import hashlib

    from apptest import APP, run, texts

    lines = ["a,b,label"] + [f"{i},{'abc' if i == 5 else i},{i % 2}" for i in range(30)]
    data = ("\n".join(lines) + "\n").encode()
    stored = hashlib.sha256(data).hexdigest() + ".csv"
    (uploads / stored).write_bytes(data)
    at = run(APP, {"dataset": '"file"', "data_file": f'"{stored}"'})
    at.session_state["_upload_names"] = {stored: "mine.csv"}
    at.run()
    assert not at.exception
    shown = [t for t in texts(at.error) + texts(at.warning) + texts(at.sidebar.caption) if "abc" in t]
    assert len(shown) == 1, shown
    assert "line 7 (data row 6)" in shown[0] and "'mine.csv'" in shown[0], shown


def test_a_shared_link_shows_the_name_the_file_was_sent_under_and_delete_removes_it(uploads):
    """A link opened in another session showed "Using 9c7079aa....csv": the first sender's name is kept beside
    the upload (plain text, control characters dropped) and removed with it."""
    from streamlit.testing.v1 import AppTest

    script = """
import streamlit as st
from ui import uploads
class Upload:
    name = "mine\\x07 data.csv"
    def getvalue(self):
        return b"a,label\\n" + b"".join(f"{i},{i % 2}\\n".encode() for i in range(20))
path = uploads.save_upload(Upload())
st.session_state["_upload_names"].clear()   # another session: no name of its own
st.write("NAME " + uploads.display_name(path))
"""
    at = AppTest.from_string(script, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    assert [t.value for t in at.markdown if t.value.startswith("NAME ")] == ["NAME mine data.csv"]
    (csv,) = list(uploads.glob("*.csv"))
    assert (uploads / (csv.name + ".name")).is_file()
    assert uploads_mod.delete_upload(csv.name) and not list(uploads.glob("*.name"))
