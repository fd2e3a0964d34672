"""Files that are either absent or complete: write to a temporary file in the target's folder, then
``os.replace`` it into place (atomic on one file system). Used by exports, uploads and checkpoints."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

__all__ = ["atomic_write"]


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], object], *, prefix: str | None = None,
                 suffix: str = ".part", fsync: bool = False, shared: bool = False) -> Path:
    """Call ``write(fh)`` on a temporary binary file next to ``path``, then move it to ``path``.

    On any failure (KeyboardInterrupt included) the temporary file is removed and ``path`` keeps
    what it had. ``prefix`` defaults to ``.<name>.``; ``fsync`` flushes the data to disk first.
    The temporary file is readable by its owner only (uploads and checkpoints stay so); with ``shared`` (a
    file the user asked for: an export) the result gets the mode of the file it replaces, or the mode a
    new file gets under the umask (exports were 0600, and a replaced 0644 file became 0600).
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    mode = (stat.S_IMODE(path.stat().st_mode) if path.is_file() else 0o666 & ~_umask()) if shared else None
    fd, tmp = tempfile.mkstemp(prefix=prefix if prefix is not None else f".{path.name}.", suffix=suffix, dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    """The process's umask, read without changing it (os.umask sets it to read it: not thread-safe)."""
    try:
        found = re.search(r"^Umask:\s*([0-7]+)", Path("/proc/self/status").read_text(), re.MULTILINE)
    except OSError:
        found = None
    return int(found.group(1), 8) if found else 0o022
