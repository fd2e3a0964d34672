"""Uploaded data files: stored by content hash, written atomically, read back only from the uploads folder.

A file name in the URL is never trusted: :func:`inside_uploads` accepts only a complete file inside
``<cache>/uploads`` whose name is the SHA-256 of its bytes. :func:`save_upload` and
:func:`display_name` keep the user's own file name in Session State (for the caption only).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import streamlit as st

from privcore.atomic import atomic_write as _atomic_write

__all__ = ["inside_uploads", "uploads_dir", "content_matches_name", "atomic_write", "clean_leftovers",
           "display_name", "save_upload", "delete_upload", "load_error_text"]


def inside_uploads(path: str | None) -> str | None:
    """The upload that ``path`` names, only if it is a complete file inside the uploads folder.

    ``path`` arrives from the URL, so anything else (``/etc/...``, ``../``, a name that is not the
    content hash of the file, a half-written temporary file) is ignored rather than read: the server
    only parses complete files that a user uploaded. A bare name is looked up in the uploads folder.
    """
    if not path or not isinstance(path, str):
        return None
    try:
        folder = uploads_dir().resolve()
        candidate = Path(path) if os.path.isabs(path) else folder / path
        resolved = candidate.resolve()
        resolved.relative_to(folder)
        if not resolved.is_file() or not content_matches_name(resolved):
            return None
    except (OSError, ValueError, RuntimeError):
        return None
    return str(resolved)


def uploads_dir() -> Path:
    from privcore.engine.cache import default_results_dir

    return default_results_dir().parent / "uploads"


_UPLOAD_SUFFIXES = (".csv", ".npz")
_VERIFIED: dict[tuple[str, int, int], bool] = {}


def content_matches_name(path: Path) -> bool:
    """True when ``path`` is ``<sha256 of its bytes>.csv|.npz`` (memoised per file version).

    Uploads are content-addressed: a truncated or half-written file cannot carry its own hash.
    """
    stem, suffix = path.stem, path.suffix.lower()
    if suffix not in _UPLOAD_SUFFIXES or len(stem) != 64 or any(c not in "0123456789abcdef" for c in stem):
        return False
    st_ = path.stat()
    key = (str(path), st_.st_mtime_ns, st_.st_size)
    if key not in _VERIFIED:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _VERIFIED[key] = h.hexdigest() == stem
    return _VERIFIED[key]


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` so that ``path`` is either absent or complete, never half-written (flushed to disk)."""
    _atomic_write(path, lambda fh: fh.write(data), prefix=".part-", suffix=path.suffix, fsync=True)


def clean_leftovers(folder: Path, older_than_s: float = 3600.0) -> None:
    """Remove temporary files of interrupted uploads (``.part-*``) older than an hour."""
    now = time.time()
    try:
        for p in folder.glob(".part-*"):
            try:
                if now - p.stat().st_mtime > older_than_s:
                    p.unlink()
            except OSError:
                pass
    except OSError:
        pass


def display_name(path: str) -> str:
    """The name the user uploaded ``path`` under (this session), else its file name."""
    names = st.session_state.get("_upload_names", {})
    return names.get(os.path.basename(path), os.path.basename(path))


def save_upload(upload) -> str:  # noqa: ANN001 - UploadedFile
    """Store an upload as ``uploads/<sha256>.<ext>`` (atomically) and return that path.

    The name is the content hash, so equal uploads share one file, and a file whose bytes do not
    match its name (an interrupted write of an older version) is rewritten, never used.
    """
    data = upload.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    suffix = os.path.splitext(upload.name)[1].lower()
    if suffix not in _UPLOAD_SUFFIXES:
        raise ValueError(f"uploads must be .csv or .npz files, got {suffix or 'no extension'}")
    folder = uploads_dir()
    folder.mkdir(parents=True, exist_ok=True)
    clean_leftovers(folder)
    path = folder / f"{digest}{suffix}"
    if not (path.is_file() and content_matches_name(path)):
        atomic_write(path, data)
    st.session_state.setdefault("_upload_names", {})[path.name] = os.path.basename(upload.name)[-120:]
    return str(path)


def delete_upload(path: str | None) -> bool:
    """Delete an uploaded file (only one inside the uploads folder); True when it was removed."""
    inside = inside_uploads(path)
    if inside is None:
        return False
    try:
        os.unlink(inside)
    except OSError:
        return False
    return True


def load_error_text(err: object, data_file: str | None) -> str:
    """The library's message about an uploaded file, as the dashboard shows it: the file under the
    user's own name (never the server's content-hash name), and, when no label column was found,
    where to choose one (the sidebar's "Label column" box)."""
    text = str(err)
    if data_file:
        stored = os.path.basename(data_file)
        shown = display_name(data_file)
        name = f"'{shown}'" if shown != stored else "the file"
        for quoted in (f"data_file '{stored}'", f'data_file "{stored}"', f"'{stored}'", f'"{stored}"', stored):
            text = text.replace(quoted, name)
    if "no label column" in text or "to use as the label" in text:
        text += '. Choose the column that holds the classes under "Label column" in the sidebar.'
    return text
