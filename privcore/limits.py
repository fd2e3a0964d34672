"""Resource limits: every size that sets the cost of a command or a page, checked before any work starts.

One place for the sweep, the leakage measurement, the deep models, the dashboard and the data
downloads (docs/limits.md lists them all). Each limit has a default that fits this project's
2-core, few-GB machines and can be changed with an environment variable (named in every message
that reports the limit):

=========================  ===========  ==================================================================
environment variable       default      what it bounds
=========================  ===========  ==================================================================
PRIVCORE_MAX_FILE_MB       200          size of a data file (CSV or NPZ) on disk
PRIVCORE_MAX_DATA_MB       1024         rows x columns x 8 bytes of a data file's matrix
PRIVCORE_MAX_COLUMNS       100000       columns of a CSV file / features of an NPZ
PRIVCORE_MAX_FEATURES      2048         features D trained on, by sweep, leakage and the dashboard (the
                                        solver diagonalises a D x D matrix); above it, reduce D with PCA
PRIVCORE_MAX_N             10000000     training-set size N (augmented or not; calibrate's --n too)
PRIVCORE_MAX_EPOCHS        1000         passes over the data: DP-SGD epochs, a deep model's teacher epochs
PRIVCORE_MAX_STEPS         1000000      optimisation steps of one training: DP-SGD's ceil(epochs N / batch)
                                        (what its accountant composes), a deep model's teachers together
PRIVCORE_MAX_POINTS        10000        points of one sweep or deep run: methods x epsilons x values (B)
PRIVCORE_MAX_UPLOAD_CELLS  20000000     rows x columns of a file uploaded to the dashboard
PRIVCORE_MAX_UPLOADS_MB    2048         all uploads kept on the server's disk together (oldest removed first)
PRIVCORE_UPLOAD_DAYS       7            days an upload is kept on the server's disk
=========================  ===========  ==================================================================

Fixed bounds (not settings): repetitions R <= 10,000 (:mod:`privcore.knobs`); the leakage
measurement's worlds <= 64, releases per world <= 1,000, reference models <= 1,024, canaries
<= 1,000 and audit trials <= 100,000 (:class:`privcore.leakage.spec.LeakageSpec`); a download
stops at its file's published size (:mod:`privcore.data.fetch`).
"""

from __future__ import annotations

import os

__all__ = ["max_file_bytes", "max_data_bytes", "max_columns", "max_features", "max_n", "max_epochs", "max_steps",
           "max_points", "max_upload_cells", "max_uploads_bytes", "upload_max_age_s", "limit_hint", "physical_memory",
           "check_features", "check_n", "check_epochs", "check_steps", "check_compositions", "check_points",
           "check_upload_cells",
           "MAX_ZIP_RATIO", "DEFAULTS"]

_DEFAULTS = {
    "PRIVCORE_MAX_FILE_MB": 200,
    "PRIVCORE_MAX_DATA_MB": 1024,
    "PRIVCORE_MAX_COLUMNS": 100_000,
    "PRIVCORE_MAX_FEATURES": 2048,
    "PRIVCORE_MAX_N": 10_000_000,
    # DP-SGD's calibration at 1e6 steps takes about 6 s (2 cores), at 1e7 about a minute.
    "PRIVCORE_MAX_EPOCHS": 1000,
    "PRIVCORE_MAX_STEPS": 1_000_000,
    "PRIVCORE_MAX_POINTS": 10_000,
    # An upload is parsed as float64 (8 bytes a value) and kept as float32 twice (the parsed file
    # and the split data set) while a session uses it: bench/bench_upload_memory.py measures the
    # peak and what is left after the session closes.
    "PRIVCORE_MAX_UPLOAD_CELLS": 20_000_000,
    "PRIVCORE_MAX_UPLOADS_MB": 2048,
    "PRIVCORE_UPLOAD_DAYS": 7,
}
#: The defaults, for documentation and tests (read a limit through its function: the environment may change it).
DEFAULTS = dict(_DEFAULTS)
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


def max_epochs() -> int:
    """Most passes over the data of one training (``PRIVCORE_MAX_EPOCHS``)."""
    return _read("PRIVCORE_MAX_EPOCHS")


def max_steps() -> int:
    """Most optimisation steps of one training (``PRIVCORE_MAX_STEPS``)."""
    return _read("PRIVCORE_MAX_STEPS")


def max_points() -> int:
    """Most points (method x epsilon x value) of one sweep or deep run (``PRIVCORE_MAX_POINTS``)."""
    return _read("PRIVCORE_MAX_POINTS")


def max_upload_cells() -> int:
    """Most values (rows x columns) of a file uploaded to the dashboard (``PRIVCORE_MAX_UPLOAD_CELLS``)."""
    return _read("PRIVCORE_MAX_UPLOAD_CELLS")


def max_uploads_bytes() -> int:
    """Most bytes of all uploads on the server's disk together (``PRIVCORE_MAX_UPLOADS_MB``)."""
    return _read("PRIVCORE_MAX_UPLOADS_MB") * 1024 * 1024


def upload_max_age_s() -> float:
    """Seconds an upload is kept on the server's disk (``PRIVCORE_UPLOAD_DAYS``)."""
    return _read("PRIVCORE_UPLOAD_DAYS") * 86400.0


def _at_most(name: str, value: int, most: int, unit: str, env: str, advice: str = "") -> int:
    if value > most:
        raise ValueError(f"{name} must be at most {most:,}{unit}, got {value:,}{advice} ({limit_hint(env)})")
    return value


def check_features(dim: int, what: str = "the data") -> int:
    """``dim`` unless it exceeds :func:`max_features` (ValueError saying to reduce D with PCA)."""
    if dim > max_features():
        raise ValueError(
            f"{what} have D = {dim:,} features, above the limit of {max_features():,} for training (the solver "
            f"diagonalises a D x D matrix, which is slow and cannot be cancelled): reduce D with PCA (the D control, "
            f"or --dim, e.g. 100) ({limit_hint('PRIVCORE_MAX_FEATURES')})")
    return dim


def check_n(name: str, value: int) -> int:
    """``value`` (a training-set size) unless it exceeds :func:`max_n`."""
    return _at_most(name, value, max_n(), " training rows", "PRIVCORE_MAX_N")


def check_epochs(name: str, value: int) -> int:
    """``value`` (passes over the data) unless it exceeds :func:`max_epochs`."""
    return _at_most(name, value, max_epochs(), " passes over the data", "PRIVCORE_MAX_EPOCHS")


def check_steps(what: str, steps: int, advice: str = "use fewer epochs or a larger batch") -> int:
    """``steps`` (of the training named by ``what``) unless it exceeds :func:`max_steps`."""
    if steps > max_steps():
        raise ValueError(f"{what} has {steps:,} steps, above the limit of {max_steps():,}: {advice} "
                         f"({limit_hint('PRIVCORE_MAX_STEPS')})")
    return steps


def check_points(count: int, what: str) -> int:
    """``count`` points (``what`` says how they multiply) unless it exceeds :func:`max_points`."""
    if count > max_points():
        raise ValueError(f"{what} make {count:,} points, above the limit of {max_points():,} for one run: split it "
                         f"into several ({limit_hint('PRIVCORE_MAX_POINTS')})")
    return count


def check_compositions(what: str, steps: int, advice: str) -> int:
    """``steps`` compositions of a subsampled Gaussian (DP-SGD's steps, Private-kNN's queries) unless
    they exceed :func:`max_steps`: the PLD and RDP accountants' time grows with them (about 6 s at
    1e6 on two cores, a minute at 1e7). Raises :class:`privcore.types.CalibrationError`."""
    from .types import CalibrationError

    try:
        return check_steps(what, steps, advice=f"its accountant would take minutes to hours; {advice}")
    except ValueError as exc:
        raise CalibrationError(str(exc)) from None


def check_upload_cells(rows: int, columns: int, name: str) -> None:
    """Refuse an upload of more than :func:`max_upload_cells` values (rows x columns), naming ``name``."""
    most = max_upload_cells()
    if rows * columns > most:
        raise ValueError(
            f"{name} has {rows:,} rows x {columns:,} columns = {rows * columns:,} values, above the limit of {most:,} "
            f"for an upload to the dashboard: use fewer rows or columns, or the command line "
            f"({limit_hint('PRIVCORE_MAX_UPLOAD_CELLS')})")
