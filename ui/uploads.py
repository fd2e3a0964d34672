"""Uploaded data files: stored by content hash, written atomically, read back only from the uploads folder;
bounded in size, on disk and in memory.

A file name in the URL is never trusted: :func:`inside_uploads` accepts only a complete file inside
``<cache>/uploads`` whose name is the SHA-256 of its bytes. :func:`save_upload` and
:func:`display_name` keep the user's own file name in Session State (for the caption only).

Bounds (:mod:`privcore.limits`): an upload of more than ``max_upload_cells`` values (rows x
columns) is refused before it is stored; all uploads together keep to ``max_uploads_bytes`` on
disk and each at most ``upload_max_age_s``, the oldest removed first (never one a live session
is using). In memory, what the server keeps of an upload (its parsed matrix, the data sets built
from it, their training contexts) is released when the upload is deleted or the last session
using it ends (:func:`use_upload`, :func:`sweep_sessions`; a background thread checks every
:data:`SWEEP_INTERVAL_S` seconds).
"""

from __future__ import annotations

import hashlib
import atexit
import os
import threading
import time
from pathlib import Path

import streamlit as st

from privcore import limits
from privcore.atomic import atomic_write as _atomic_write

__all__ = ["inside_uploads", "uploads_dir", "content_matches_name", "atomic_write", "clean_leftovers",
           "display_name", "save_upload", "delete_upload", "load_error_text", "size_problem", "expire_uploads",
           "use_upload", "sweep_sessions", "in_use", "SWEEP_INTERVAL_S"]

#: Seconds between two checks for ended sessions (their uploads' memory is then released).
SWEEP_INTERVAL_S = 15.0


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


def _name_file(path: str | Path) -> Path:
    """Where the name an upload was sent under is kept beside it (``<sha256>.csv.name``)."""
    return Path(str(path) + ".name")


def display_name(path: str) -> str:
    """The name the user uploaded ``path`` under: this session's, else the one kept beside the file (a
    shared link showed "Using 9c7079aa....csv"), else its file name."""
    names = st.session_state.get("_upload_names", {})
    known = names.get(os.path.basename(path))
    if known is not None:
        return known
    try:
        kept = _name_file(path).read_text(encoding="utf-8")[:120]
    except (OSError, UnicodeDecodeError):
        return os.path.basename(path)
    kept = "".join(c for c in kept if c.isprintable()).strip()
    return kept or os.path.basename(path)


def save_upload(upload) -> str:  # noqa: ANN001 - UploadedFile
    """Store an upload as ``uploads/<sha256>.<ext>`` (atomically) and return that path.

    The name is the content hash, so equal uploads share one file, and a file whose bytes do not
    match its name (an interrupted write of an older version) is rewritten, never used. Refused
    before anything is written (ValueError naming the limit): more than ``max_upload_cells``
    values, or no room left among the uploads on disk once the oldest unused ones are removed.
    """
    data = upload.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    suffix = os.path.splitext(upload.name)[1].lower()
    if suffix not in _UPLOAD_SUFFIXES:
        raise ValueError(f"uploads must be .csv or .npz files, got {suffix or 'no extension'}")
    shown = os.path.basename(upload.name)[-120:]
    folder = uploads_dir()
    path = folder / f"{digest}{suffix}"
    if folder.is_dir():  # every upload (a repeated one too) removes old leftovers of interrupted writes
        clean_leftovers(folder)
    # The uploader hands its file over at every rerun: checked and written only the first time.
    if not (path.is_file() and content_matches_name(path)):
        if len(data) > limits.max_file_bytes():
            raise ValueError(f"{shown} is {len(data) / 2**20:,.1f} MB, above the limit of "
                             f"{limits.max_file_bytes() / 2**20:,.0f} MB ({limits.limit_hint('PRIVCORE_MAX_FILE_MB')})")
        shape = _shape(data, suffix)
        if shape is not None:  # an unreadable file is stored: the reader then says what is wrong with it
            limits.check_upload_cells(*shape, shown)
        folder.mkdir(parents=True, exist_ok=True)
        expire_uploads(folder, incoming=len(data))
        atomic_write(path, data)
    with _SESSIONS_LOCK:
        _LAST_USED[str(path.resolve())] = time.time()  # used again: the last to expire (its mtime is kept)
    st.session_state.setdefault("_upload_names", {})[path.name] = shown
    try:  # the first sender's name, for a link opened in another session
        if not _name_file(path).is_file():
            atomic_write(_name_file(path), shown.encode("utf-8"))
    except OSError:
        pass  # only the name shown is lost
    return str(path)


def _shape(data: bytes, suffix: str) -> tuple[int, int] | None:
    from privcore.data.userfile import data_shape

    return data_shape(data, suffix)


def size_problem(path: str) -> str | None:
    """Why a stored upload is not read (more values than an upload may have, e.g. stored before the
    limit was lowered), or None. The shape is read once per file version."""
    from privcore.data.userfile import data_shape

    try:
        key = _stat_key(Path(path))
    except OSError:
        return None
    if key not in _SHAPES:
        if len(_SHAPES) > 256:
            _SHAPES.clear()
        _SHAPES[key] = data_shape(path)
    shape = _SHAPES[key]
    if shape is None:
        return None
    try:
        limits.check_upload_cells(*shape, f"'{display_name(path)}'")
    except ValueError as err:
        return str(err)
    return None


_SHAPES: dict[tuple[str, int, int], tuple[int, int] | None] = {}


def _stat_key(path: Path) -> tuple[str, int, int]:
    st_ = path.stat()
    return str(path), st_.st_mtime_ns, st_.st_size


def expire_uploads(folder: Path | None = None, *, incoming: int = 0, now: float | None = None) -> list[str]:
    """Remove uploads older than ``upload_max_age_s`` and, oldest first, as many as it takes for all of
    them plus ``incoming`` new bytes to keep within ``max_uploads_bytes``; an upload a live session
    uses is never removed. Returns the names removed; ValueError when ``incoming`` still does not fit."""
    folder = folder or uploads_dir()
    now = time.time() if now is None else now
    keep = in_use()
    files = []
    try:
        for p in folder.iterdir():
            if p.suffix.lower() in _UPLOAD_SUFFIXES and len(p.stem) == 64 and p.is_file():
                st_ = p.stat()
                files.append((st_.st_mtime, st_.st_size, p))
    except OSError:
        return []
    with _SESSIONS_LOCK:
        used = dict(_LAST_USED)
    # Oldest first, by the last time this server saw the upload used, else its modification time.
    files = sorted((max(mtime, used.get(str(p.resolve()), 0.0)), size, p) for mtime, size, p in files)
    unused = [(mtime, size, p) for mtime, size, p in files if str(p.resolve()) not in keep]
    total = sum(size for _, size, _ in files) + incoming
    most = limits.max_uploads_bytes()
    if total - sum(size for _, size, _ in unused) > most:  # removing every unused upload would not do
        raise ValueError(f"no room for this upload: the uploads in use on this server take "
                         f"{(total - incoming - sum(s for _, s, _ in unused)) / 2**20:,.1f} of {most / 2**20:,.0f} MB; "
                         f"try again later or a smaller file ({limits.limit_hint('PRIVCORE_MAX_UPLOADS_MB')})")
    removed: list[str] = []
    for mtime, size, p in unused:
        if now - mtime > limits.upload_max_age_s() or total > most:
            try:
                p.unlink()
            except OSError:
                continue
            try:
                _name_file(p).unlink(missing_ok=True)
            except OSError:
                pass
            _release(str(p.resolve()))
            with _SESSIONS_LOCK:
                _LAST_USED.pop(str(p.resolve()), None)
            removed.append(p.name)
            total -= size
    return removed


def delete_upload(path: str | None) -> bool:
    """Delete an uploaded file (only one inside the uploads folder) and release what the server keeps
    of it in memory; True when it was removed."""
    inside = inside_uploads(path)
    if inside is None:
        return False
    try:
        os.unlink(inside)
    except OSError:
        return False
    _name_file(inside).unlink(missing_ok=True)
    with _SESSIONS_LOCK:
        _IN_USE.pop(inside, None)
        _LAST_USED.pop(inside, None)
    _release(inside)
    return True


# ---------------------------------------------------------------- memory: who uses which upload

_SESSIONS_LOCK = threading.Lock()
_IN_USE: dict[str, dict[str, float]] = {}  # upload path -> {session id: last run}
_LAST_USED: dict[str, float] = {}  # upload path -> when a session last used it (for expiry, oldest first)
_SWEEPER: list[threading.Thread] = []
_SWEEPER_STOP = threading.Event()
_STOP_REGISTERED: list[bool] = []


def _session_id() -> str | None:
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx(suppress_warning=True)
    except Exception:  # noqa: BLE001 - outside a Streamlit run
        return None
    return getattr(ctx, "session_id", None)


def _session_alive(session_id: str) -> bool:
    """Whether the browser session ``session_id`` is still connected (True without a Streamlit server:
    tests and bare runs end no session)."""
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return True
        return bool(Runtime.instance().is_active_session(session_id))
    except Exception:  # noqa: BLE001 - never release on doubt
        return True


def in_use() -> set[str]:
    """The uploads (resolved paths) some live session is using."""
    with _SESSIONS_LOCK:
        return set(_IN_USE)


def _release(path: str) -> None:
    from privcore.engine.release import release_data_file

    release_data_file(path)


def use_upload(path: str | None) -> None:
    """This session uses the upload ``path`` now (None: none); an upload that no session uses any
    more is released from memory at once."""
    sid = _session_id()
    if sid is None:
        return
    path = str(Path(path).resolve()) if path else None
    dropped = []
    with _SESSIONS_LOCK:
        for p, sessions in list(_IN_USE.items()):
            if p != path and sessions.pop(sid, None) is not None and not sessions:
                del _IN_USE[p]
                dropped.append(p)
        if path:
            _IN_USE.setdefault(path, {})[sid] = _LAST_USED[path] = time.time()
    for p in dropped:
        _release(p)
    _start_sweeper()


def sweep_sessions() -> list[str]:
    """Forget ended sessions; release (and return) the uploads no live session uses any more."""
    with _SESSIONS_LOCK:
        sessions = {sid for users in _IN_USE.values() for sid in users}
    ended = {sid for sid in sessions if not _session_alive(sid)}
    dropped = []
    with _SESSIONS_LOCK:
        for p, users in list(_IN_USE.items()):
            for sid in ended & set(users):
                del users[sid]
            if not users:
                del _IN_USE[p]
                dropped.append(p)
    for p in dropped:
        _release(p)
    return dropped


def _start_sweeper() -> None:
    with _SESSIONS_LOCK:
        if _SWEEPER and _SWEEPER[0].is_alive():
            return

        def loop() -> None:
            from privcore.engine.release import trim_heap

            while not _SWEEPER_STOP.wait(SWEEP_INTERVAL_S):
                try:
                    sweep_sessions()
                    # Streamlit frees a closed session's state up to 2 minutes later (it may reconnect):
                    # hand the freed heap back then too.
                    trim_heap()
                except Exception:  # noqa: BLE001 - a check that fails is tried again
                    pass

        thread = threading.Thread(target=loop, name="privcore-upload-sweeper", daemon=True)
        _SWEEPER[:] = [thread]
        _SWEEPER_STOP.clear()
        thread.start()
        if not _STOP_REGISTERED:
            # Stopped before the interpreter finalises: a daemon thread still inside native code
            # (the heap trim) while Python shuts down aborts the process ("terminate called ...").
            atexit.register(_stop_sweeper)
            _STOP_REGISTERED.append(True)


def _stop_sweeper() -> None:
    _SWEEPER_STOP.set()
    for thread in list(_SWEEPER):
        thread.join(timeout=5.0)


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
