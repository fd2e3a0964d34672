"""Resource limits, checked before any work starts.

Each limit has a default that fits this project's 2-core, few-GB machines and can be changed with
an environment variable (named in every message that reports the limit):

========================  ===========================  ===============================================
environment variable      default                      what it bounds
========================  ===========================  ===============================================
PRIVCORE_MAX_FILE_MB      200                          size of a data file (CSV or NPZ) on disk
PRIVCORE_MAX_DATA_MB      1024                         rows x columns x 8 bytes of the data matrix
PRIVCORE_MAX_COLUMNS      100000                       columns of a CSV file / features of an NPZ
PRIVCORE_MAX_FEATURES     2048                         features D trained on (the solver diagonalises
                                                       a D x D matrix); above it, reduce D with PCA
PRIVCORE_MAX_N            10000000                     training-set size N (augmented or not)
========================  ===========================  ===============================================
"""

from __future__ import annotations

import os

__all__ = ["max_file_bytes", "max_data_bytes", "max_columns", "max_features", "max_n", "limit_hint", "physical_memory",
           "MAX_ZIP_RATIO"]

_DEFAULTS = {
    "PRIVCORE_MAX_FILE_MB": 200,
    "PRIVCORE_MAX_DATA_MB": 1024,
    "PRIVCORE_MAX_COLUMNS": 100_000,
    "PRIVCORE_MAX_FEATURES": 2048,
    "PRIVCORE_MAX_N": 10_000_000,
}
#: An NPZ entry above 16 MB that inflates more than this many times its compressed size is refused.
MAX_ZIP_RATIO = 200


def _read(name: str) -> int:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return _DEFAULTS[name]
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"environment variable {name} must be a positive whole number, got {text!r}") from None
    if value < 1:
        raise ValueError(f"environment variable {name} must be a positive whole number, got {text!r}")
    return value


def limit_hint(name: str) -> str:
    """``(limit: set NAME to change it)``-style hint for messages."""
    return f"set the environment variable {name} to change this limit"


def max_file_bytes() -> int:
    """Largest data file read, in bytes (``PRIVCORE_MAX_FILE_MB``)."""
    return _read("PRIVCORE_MAX_FILE_MB") * 1024 * 1024


def max_data_bytes() -> int:
    """Largest data matrix, rows x columns x 8 bytes (``PRIVCORE_MAX_DATA_MB``)."""
    return _read("PRIVCORE_MAX_DATA_MB") * 1024 * 1024


def max_columns() -> int:
    """Most columns read from a data file (``PRIVCORE_MAX_COLUMNS``)."""
    return _read("PRIVCORE_MAX_COLUMNS")


def max_features() -> int:
    """Most features D a model is trained on without PCA (``PRIVCORE_MAX_FEATURES``)."""
    return _read("PRIVCORE_MAX_FEATURES")


def physical_memory() -> int | None:
    """This machine's physical memory in bytes, or None when unknown."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def max_n() -> int:
    """Largest training-set size N (``PRIVCORE_MAX_N``)."""
    return _read("PRIVCORE_MAX_N")
