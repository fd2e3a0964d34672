"""Files that are either absent or complete: write to a temporary file in the target's folder, then
``os.replace`` it into place (atomic on one file system). Used by exports, uploads and checkpoints."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

__all__ = ["atomic_write"]


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], object], *, prefix: str | None = None,
                 suffix: str = ".part", fsync: bool = False) -> Path:
    """Call ``write(fh)`` on a temporary binary file next to ``path``, then move it to ``path``.

    On any failure (KeyboardInterrupt included) the temporary file is removed and ``path`` keeps
    what it had. ``prefix`` defaults to ``.<name>.``; ``fsync`` flushes the data to disk first.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=prefix if prefix is not None else f".{path.name}.", suffix=suffix, dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
