"""CIFAR-10 (Krizhevsky 2009): the python archive, downloaded with a checksum or placed by the user.

Where it lives: ``directory``, else ``$PRIVCORE_CIFAR10_DIR``, else ``<PRIVCORE_CACHE or repo
cache>/cifar-10``; the file is ``cifar-10-python.tar.gz`` (md5 ``c58f30108f718f92721af3b95e74349a``).
A download (:func:`privcore.data.fetch.download_verified`) goes to a temporary file in that folder
and is moved into place (``os.replace``) only after its md5 matches, so an interrupted or corrupted
download leaves nothing behind. Offline,
:class:`~privcore.data.errors.DataUnavailableError` says where to put the archive.

The batches inside are Python pickles. They are read with :class:`RestrictedUnpickler`, which
resolves only an allow-list of globals (numpy's array reconstruction, ``numpy.ndarray``,
``numpy.dtype`` and ``_codecs.encode`` for bytes in protocol-2 pickles) and refuses every other
one, so a tampered archive cannot run code; the arrays read are then checked (uint8, N x 3072,
labels 0..9). Only the six expected members of the archive are read, never extracted to disk.
"""

from __future__ import annotations

import functools
import http.client
import importlib
import io
import os
import pickle
import tarfile
from pathlib import Path
from typing import Any

import numpy as np

from ..data.errors import DataFileError, DataUnavailableError
from ..data.fetch import FolderNotWritable, download_verified, file_md5
from .images import ImageData

__all__ = ["CIFAR_URL", "CIFAR_MD5", "CIFAR_BYTES", "CIFAR_ARCHIVE", "CIFAR_ENV", "cifar_dir", "ensure_cifar_archive",
           "read_cifar_archive", "load_cifar10", "RestrictedUnpickler", "restricted_loads"]

CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR_MD5 = "c58f30108f718f92721af3b95e74349a"
#: Its size in bytes: a download stops there (privcore.data.fetch.download_verified).
CIFAR_BYTES = 170_498_071
CIFAR_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR_ENV = "PRIVCORE_CIFAR10_DIR"
CIFAR_MEMBERS = tuple(f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6)) + ("cifar-10-batches-py/test_batch",)
#: Published per-channel statistics of the CIFAR-10 training images (fixed constants).
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
_MAX_MEMBER_BYTES = 64 << 20  # a real batch is ~31 MB
_TIMEOUT_S = 60.0

#: (module, name) pairs the unpickler may resolve, and where each really comes from.
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "numpy.core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"): ("numpy", "numpy", "ndarray"),
    ("numpy", "dtype"): ("numpy", "numpy", "dtype"),
    ("_codecs", "encode"): ("_codecs", "_codecs", "encode"),
}


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals a CIFAR batch needs; anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        where = _ALLOWED.get((module, name))
        if where is None:
            raise pickle.UnpicklingError(f"refused to load global {module}.{name} from a CIFAR batch "
                                         "(only numpy arrays, lists, dicts, numbers and strings are allowed)")
        first, second, attr = where
        try:
            return getattr(importlib.import_module(first), attr)
        except (ImportError, AttributeError):
            return getattr(importlib.import_module(second), attr)


def restricted_loads(data: bytes) -> Any:
    """Unpickle ``data`` with :class:`RestrictedUnpickler` (``encoding="bytes"``, as CIFAR needs)."""
    return RestrictedUnpickler(io.BytesIO(data), encoding="bytes").load()


def cifar_dir(directory: str | os.PathLike[str] | None = None) -> Path:
    """``directory``, else ``$PRIVCORE_CIFAR10_DIR``, else ``<cache>/cifar-10``."""
    if directory is not None:
        return Path(directory).expanduser()
    env = os.environ.get(CIFAR_ENV)
    if env:
        return Path(env).expanduser()
    from ..data.mnist_download import default_cache_dir

    return default_cache_dir() / "cifar-10"


def _offline_message(folder: Path, reason: str) -> str:
    return (f"CIFAR-10 is not available: {reason}. Download {CIFAR_URL} (md5 {CIFAR_MD5}) and put "
            f"{CIFAR_ARCHIVE} in {folder} (or set {CIFAR_ENV} to the folder holding it), or run once with "
            "network access.")


def ensure_cifar_archive(directory: str | os.PathLike[str] | None = None, *, download: bool = True,
                         url: str = CIFAR_URL, md5: str = CIFAR_MD5, size: int = CIFAR_BYTES) -> Path:
    """The verified archive's path: a present file is checked (never overwritten), a missing one is
    downloaded atomically when ``download`` is true. Raises :class:`DataUnavailableError`."""
    folder = cifar_dir(directory)
    target = folder / CIFAR_ARCHIVE
    if target.is_file():
        got = file_md5(target)
        if got != md5:
            raise DataUnavailableError(f"CIFAR-10 archive {target} failed its checksum (md5 {got}, expected {md5}): "
                                       "it is corrupt or not the original file; delete or replace it")
        return target
    if not download:
        raise DataUnavailableError(_offline_message(folder, f"{CIFAR_ARCHIVE} not found in {folder}"))
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataUnavailableError(_offline_message(folder, f"cannot write to the folder ({exc})")) from None
    try:
        download_verified(url, target, md5, size=size, timeout=_TIMEOUT_S)
    except BaseException as exc:  # also KeyboardInterrupt (download_verified has removed its temporary file)
        if created:
            try:
                folder.rmdir()
            except OSError:
                pass
        if isinstance(exc, FolderNotWritable):
            raise DataUnavailableError(_offline_message(folder, f"cannot write to the folder ({exc})")) from None
        if isinstance(exc, (OSError, ValueError, http.client.HTTPException)):
            reason = getattr(exc, "reason", None) or exc  # the OS's words, not "<urlopen error [Errno -2] ...>"
            why = " ".join(str(getattr(reason, "strerror", None) or reason).split())[:200]
            raise DataUnavailableError(_offline_message(folder, f"could not download {url} ({why})")) from None
        raise
    return target


def _batch(tar: tarfile.TarFile, name: str, path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        member = tar.getmember(name)
    except KeyError:
        raise DataFileError(f"CIFAR-10 archive {path} has no member {name}") from None
    if not member.isfile() or member.size > _MAX_MEMBER_BYTES:
        raise DataFileError(f"CIFAR-10 archive {path}: {name} is not a regular file of at most "
                            f"{_MAX_MEMBER_BYTES >> 20} MB")
    fh = tar.extractfile(member)
    assert fh is not None  # a regular file
    try:
        d = restricted_loads(fh.read())
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as exc:
        raise DataFileError(f"CIFAR-10 archive {path}: {name} is not a CIFAR batch ({exc})") from None
    if not isinstance(d, dict):
        raise DataFileError(f"CIFAR-10 archive {path}: {name} is not a dict")
    d = {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in d.items()}
    x, y = d.get("data"), d.get("labels")
    if not isinstance(x, np.ndarray) or x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3072:
        raise DataFileError(f"CIFAR-10 archive {path}: {name} data must be a uint8 array N x 3072")
    if not isinstance(y, list) or len(y) != x.shape[0] or not all(type(v) is int and 0 <= v <= 9 for v in y):
        raise DataFileError(f"CIFAR-10 archive {path}: {name} labels must be {x.shape[0]} integers in 0..9")
    return x.reshape(-1, 3, 32, 32), np.asarray(y, dtype=np.int64)


def read_cifar_archive(path: str | os.PathLike[str]) -> ImageData:
    """Parse a ``cifar-10-python.tar.gz``-format archive (five training batches, one test batch)."""
    path = Path(path)
    try:
        with tarfile.open(path, "r:gz") as tar:
            parts = [_batch(tar, name, path) for name in CIFAR_MEMBERS]
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DataFileError(f"CIFAR-10 archive {path} is not a readable tar.gz file: {exc}") from None
    x = np.concatenate([p[0] for p in parts[:5]])
    y = np.concatenate([p[1] for p in parts[:5]])
    return ImageData("cifar-10", x, y, parts[5][0], parts[5][1], 10, CIFAR_MEAN, CIFAR_STD,
                     ("CIFAR-10, official 50,000/10,000 split",))


@functools.lru_cache(maxsize=1)
def _load(path: str, stamp: int) -> ImageData:
    del stamp
    return read_cifar_archive(path)


def load_cifar10(directory: str | os.PathLike[str] | None = None, *, download: bool = True) -> ImageData:
    """CIFAR-10 as :class:`ImageData` (x uint8 ``[N, 3, 32, 32]``), fetched once if needed."""
    path = ensure_cifar_archive(directory, download=download)
    return _load(str(path.resolve()), path.stat().st_mtime_ns)
