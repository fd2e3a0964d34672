"""Shared pieces of the data-set downloads and readers (full MNIST, CIFAR-10, Fashion-MNIST).

``download_verified`` writes to a temporary ``.part`` file in the target folder and moves it into
place with ``os.replace`` only after the MD5 matches, so an interrupted or corrupted download never
leaves a file that a later run would trust; it reads no more than the file's published size. ``read_idx_gz`` parses the gzipped idx format of the
MNIST family (unsigned bytes only), checking the header against the payload.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import urllib.request
from pathlib import Path

import numpy as np

from .errors import DataFileError

__all__ = ["FolderNotWritable", "file_md5", "download_verified", "read_idx_gz", "read_idx_split"]

_BLOCK = 1 << 20


class FolderNotWritable(OSError):
    """The temporary file of a download could not be created in the target folder."""


def file_md5(path: str | os.PathLike[str]) -> str:
    """Hex MD5 of the file at ``path``, read in 1 MiB blocks."""
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def download_verified(url: str, target: Path, md5: str, *, size: int, timeout: float = 60.0) -> None:
    """Fetch ``url`` into ``target`` atomically, only if its MD5 is ``md5``.

    ``size`` is the file's published size in bytes: a response that announces more, or sends more,
    is abandoned at once (a server that never stops sending filled the disk before the checksum,
    read at the end, could refuse it). Raises :class:`FolderNotWritable` (an ``OSError``) when no
    temporary file can be made next to ``target``, ``ValueError`` on a checksum mismatch or an
    oversized response, and whatever ``urlopen`` raises (``OSError``,
    ``http.client.HTTPException``) otherwise; the temporary file never survives a failure.
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be the file's size in bytes (an integer >= 1), got {size!r}")
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    except OSError as exc:
        raise FolderNotWritable(exc.errno, exc.strerror, exc.filename) from None
    try:
        h = hashlib.md5(usedforsecurity=False)
        got = 0
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            announced = _content_length(resp)
            if announced is not None and announced > size:
                raise ValueError(f"the server announces {announced:,} bytes, more than the {size:,} expected")
            while True:
                block = resp.read(min(_BLOCK, size + 1 - got))  # at most one byte past the size
                if not block:
                    break
                got += len(block)
                if got > size:
                    raise ValueError(f"the download is larger than the {size:,} bytes expected: stopped there")
                h.update(block)
                out.write(block)
        if h.hexdigest() != md5:
            raise ValueError(f"the download has md5 {h.hexdigest()}, expected {md5}")
        os.replace(tmp_name, target)
    except BaseException:
        # Also on KeyboardInterrupt: a half-written file must never survive.
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _content_length(resp) -> int | None:  # noqa: ANN001 - an HTTP response
    headers = getattr(resp, "headers", None)
    text = headers.get("Content-Length") if headers is not None else None
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def read_idx_gz(path: Path, ndim: int, what: str = "idx") -> np.ndarray:
    """One gzipped idx file of unsigned bytes with ``ndim`` dimensions -> uint8 array ``[N, ...]``.

    ``what`` names the data set in the :class:`DataFileError` raised for a file that is not one.
    """
    try:
        with gzip.open(path, "rb") as fh:
            raw = fh.read()
    except (OSError, EOFError) as exc:
        raise DataFileError(f"{what} file {path} is not a valid gzip file: {exc}") from None
    head, magic = 4 + 4 * ndim, 2048 + ndim
    if len(raw) < head or int.from_bytes(raw[:4], "big") != magic:
        raise DataFileError(f"{what} file {path} is not an idx file of bytes with {ndim} dimensions "
                            f"(magic number {magic})")
    shape = tuple(int.from_bytes(raw[4 + 4 * k: 8 + 4 * k], "big") for k in range(ndim))
    if len(raw) - head != int(np.prod(shape)):
        raise DataFileError(f"{what} file {path}: header promises shape {shape} but holds {len(raw) - head} bytes")
    return np.frombuffer(raw, dtype=np.uint8, offset=head).reshape(shape)


def read_idx_split(folder: Path, split: str, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``<split>-images-idx3-ubyte.gz`` and ``<split>-labels-idx1-ubyte.gz`` in ``folder``: uint8 images
    ``[N, H, W]`` and labels ``[N]``, checked to agree in ``N`` and to lie in 0..9."""
    images = read_idx_gz(folder / f"{split}-images-idx3-ubyte.gz", 3, what)
    labels = read_idx_gz(folder / f"{split}-labels-idx1-ubyte.gz", 1, what)
    if images.shape[0] != labels.shape[0]:
        raise DataFileError(f"{what} {split} files disagree: {images.shape[0]} images but {labels.shape[0]} labels")
    if labels.size and int(labels.max()) > 9:
        raise DataFileError(f"{what} {split} labels must be 0..9, found {int(labels.max())}")
    return images, labels
