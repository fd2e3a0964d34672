"""The full 70,000-digit MNIST: fetched once into a cache folder, checksummed, parsed from idx.

Nothing here touches the network unless a file is missing. Downloads go through
:func:`privcore.data.fetch.download_verified` (a temporary file in the target folder, moved into
place only after the checksum matches), so an interrupted or corrupted download never leaves a file
that a later run would trust.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import logging
import os
import time
from pathlib import Path

import numpy as np

from .errors import DataFileError, DataUnavailableError
from .fetch import download_verified as _download  # a module name of its own: tests replace it
from .fetch import file_md5, read_idx_split
from .sources import RawSource, readonly

__all__ = [
    "MNIST_FILES",
    "MNIST_SIZES",
    "MNIST_MIRRORS",
    "default_cache_dir",
    "mnist_folder",
    "ensure_mnist_files",
    "load_mnist",
    "clear_cache",
]

log = logging.getLogger(__name__)

# The well-known MD5 sums of the original LeCun release, which every mirror below serves unchanged.
MNIST_FILES: dict[str, str] = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
#: Their sizes in bytes: a download stops there (privcore.data.fetch.download_verified).
MNIST_SIZES: dict[str, int] = {
    "train-images-idx3-ubyte.gz": 9_912_422,
    "train-labels-idx1-ubyte.gz": 28_881,
    "t10k-images-idx3-ubyte.gz": 1_648_877,
    "t10k-labels-idx1-ubyte.gz": 4_542,
}
MNIST_MIRRORS: tuple[str, ...] = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)


def default_cache_dir() -> Path:
    """The cache folder: :func:`privcore.paths.cache_dir`."""
    from ..paths import cache_dir

    return cache_dir()


def mnist_folder(cache_dir: str | os.PathLike[str] | None) -> Path:
    """The folder holding the four MNIST files: ``<cache_dir or default>/mnist``, made absolute."""
    base = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    return (base / "mnist").resolve()


@functools.lru_cache(maxsize=16)
def _md5(path: str, mtime_ns: int, size: int) -> str:
    # Keyed by mtime and size so a replaced file is hashed again; hashing 55 MB costs ~0.1 s.
    del mtime_ns, size
    return file_md5(path)


def _file_md5(path: Path) -> str:
    st = path.stat()
    return _md5(str(path), st.st_mtime_ns, st.st_size)


def _unavailable_message(folder: Path, reason: str) -> str:
    names = "\n".join(f"  {name}  (md5 {md5})" for name, md5 in MNIST_FILES.items())
    return (
        f"the full MNIST data set is not available: {reason}.\n"
        f"Place these 4 files (the original gzipped idx files) in the folder {folder}:\n{names}\n"
        f"or run once with network access; mirrors tried: {', '.join(MNIST_MIRRORS)}. "
        f"The offline default 'mnist-5k' needs no download."
    )


#: A ``.part`` file untouched for this long belongs to a download that was killed (an active one
#: writes every block, so its modification time stays fresh).
STALE_PART_S = 600.0


def _remove_stale_parts(folder: Path) -> None:
    """Delete the temporary files of downloads that were killed (``kill -9`` skips every cleanup)."""
    now = time.time()
    try:
        candidates = list(folder.glob(".*.part"))
    except OSError:
        return
    for part in candidates:
        try:
            if part.is_file() and now - part.stat().st_mtime > STALE_PART_S:
                part.unlink()
        except OSError:
            pass


def ensure_mnist_files(folder: Path) -> dict[str, Path]:
    """Make sure the four MNIST files are in ``folder`` and match their MD5; return their paths.

    Present files are verified and used without any network access; a present file with the
    wrong checksum raises :class:`DataUnavailableError` (it is not overwritten: a user put it
    there). Missing files are downloaded; if that fails, :class:`DataUnavailableError` says which
    files to place where, and any folder this call created is removed again if left empty.
    """
    paths = {name: folder / name for name in MNIST_FILES}
    for name, path in paths.items():
        if path.is_file() and _file_md5(path) != MNIST_FILES[name]:
            raise DataUnavailableError(
                f"MNIST file {path} failed its checksum (md5 {_file_md5(path)}, expected {MNIST_FILES[name]}): "
                f"it is corrupt or not the original file. Delete it to download it again, or replace it."
            )
    missing = [name for name, path in paths.items() if not path.is_file()]
    _remove_stale_parts(folder)
    if not missing:
        return paths
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataUnavailableError(_unavailable_message(folder, f"cannot create the folder ({exc})")) from exc
    try:
        for name in missing:
            _fetch_one(name, paths[name])
    except BaseException:  # also Ctrl-C: a folder this call made and left empty goes again
        if created:
            with contextlib.suppress(OSError):
                if not any(folder.iterdir()):
                    folder.rmdir()
        raise
    return paths


def _why(exc: BaseException) -> str:
    """A download failure in words: the OS's reason without Python's ``<urlopen error [Errno -2] ...>`` wrapping."""
    reason = getattr(exc, "reason", None) or exc
    text = getattr(reason, "strerror", None) or str(reason)
    return " ".join(str(text).split())[:200]


def _fetch_one(name: str, target: Path) -> None:
    errors: list[str] = []
    for mirror in MNIST_MIRRORS:
        log.info("downloading %s%s to %s", mirror, name, target)
        try:
            _download(mirror + name, target, MNIST_FILES[name], size=MNIST_SIZES[name])
            return
        except (OSError, ValueError, http.client.HTTPException) as exc:  # URLError, timeouts are OSError
            errors.append(f"{mirror}{name}: {_why(exc)}")
    raise DataUnavailableError(_unavailable_message(target.parent, f"could not download {name} ({'; '.join(errors)})"))


@functools.lru_cache(maxsize=2)
def _parse(folder: str, stamp: tuple[tuple[int, int], ...]) -> RawSource:
    # ``stamp`` (mtime, size of each file) is only a cache key: replaced files are parsed afresh.
    del stamp
    base = Path(folder)
    parts = []
    shapes = []
    for split in ("train", "t10k"):
        images, labels = read_idx_split(base, split, "MNIST")
        parts.append((images.reshape(images.shape[0], -1).astype(np.float32), labels.astype(np.int64)))
        shapes.append(images.shape[1:])
    if shapes[0] != shapes[1]:
        raise DataFileError(f"MNIST train images are {shapes[0]} but test images are {shapes[1]}")
    (x, y), (xt, yt) = parts
    h, w = shapes[0]
    return RawSource(
        x=readonly(x),
        y=readonly(y),
        classes=10,
        pixel_scale=255.0,
        image_shape=(int(h), int(w)),
        notes=("mnist uses the official MNIST train/test split; test_fraction is ignored",),
        test=(readonly(xt), readonly(yt)),
    )


def clear_cache() -> None:
    """Forget parsed MNIST arrays and memoised file checksums."""
    _parse.cache_clear()
    _md5.cache_clear()


def load_mnist(cache_dir: str | os.PathLike[str] | None = None) -> RawSource:
    """Full MNIST as a :class:`RawSource`: x ``[60000, 784]`` (0..255) plus the official test split.

    Downloads the four files into ``mnist_folder(cache_dir)`` if needed (see
    :func:`ensure_mnist_files`); parsed arrays are memoised per folder and file version.
    """
    folder = mnist_folder(cache_dir)
    paths = ensure_mnist_files(folder)
    stamp = tuple((p.stat().st_mtime_ns, p.stat().st_size) for p in paths.values())
    return _parse(str(folder), stamp)
