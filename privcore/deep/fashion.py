"""Fashion-MNIST (Xiao et al. 2017) from the gzipped idx files, without torchvision.

Default folder: ``/usr/share/datasets/fashion-mnist``, where Debian's ``dataset-fashion-mnist``
package installs the four files (60,000 training and 10,000 test images of 28 x 28). Another
folder can be named with the ``directory`` argument or the ``PRIVCORE_FASHION_MNIST_DIR``
environment variable. Nothing is downloaded; a missing file raises
:class:`~privcore.data.errors.DataUnavailableError` naming the package and the folder.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

from ..data.errors import DataUnavailableError
from ..data.fetch import read_idx_split
from .images import ImageData

__all__ = ["FASHION_ENV", "FASHION_DEFAULT_DIR", "FASHION_FILES", "fashion_dir", "load_fashion_mnist"]

FASHION_ENV = "PRIVCORE_FASHION_MNIST_DIR"
FASHION_DEFAULT_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                 "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
#: Published per-channel statistics of the Fashion-MNIST training images (fixed constants).
FASHION_MEAN, FASHION_STD = (0.2860,), (0.3530,)


def fashion_dir(directory: str | os.PathLike[str] | None = None) -> Path:
    """The folder read: ``directory``, else ``$PRIVCORE_FASHION_MNIST_DIR``, else the Debian one."""
    if directory is not None:
        return Path(directory).expanduser()
    env = os.environ.get(FASHION_ENV)
    return Path(env).expanduser() if env else FASHION_DEFAULT_DIR


def load_fashion_mnist(directory: str | os.PathLike[str] | None = None) -> ImageData:
    """Fashion-MNIST as :class:`ImageData` (x uint8 ``[N, 1, 28, 28]``); memoised per file version."""
    folder = fashion_dir(directory)
    missing = [name for name in FASHION_FILES if not (folder / name).is_file()]
    if missing:
        raise DataUnavailableError(
            f"Fashion-MNIST is not available: {', '.join(missing)} not found in {folder}. Install Debian's package "
            f"dataset-fashion-mnist (apt-get install dataset-fashion-mnist, files under {FASHION_DEFAULT_DIR}), "
            f"or put the four gzipped idx files in a folder and set {FASHION_ENV} to it.")
    stamp = tuple((folder / n).stat().st_mtime_ns for n in FASHION_FILES)
    return _parse(str(folder.resolve()), stamp)


@functools.lru_cache(maxsize=2)
def _parse(folder: str, stamp: tuple[int, ...]) -> ImageData:
    del stamp  # cache key only
    base = Path(folder)
    parts = []
    for split in ("train", "t10k"):
        x, y = read_idx_split(base, split, "Fashion-MNIST")
        x = x.reshape(x.shape[0], 1, *x.shape[1:])
        x.setflags(write=False)
        parts.append((x, y.astype(np.int64)))
    (x, y), (xt, yt) = parts
    return ImageData("fashion-mnist", x, y, xt, yt, 10, FASHION_MEAN, FASHION_STD,
                     ("Fashion-MNIST, official 60,000/10,000 split",))
