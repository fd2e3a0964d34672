"""The :class:`Dataset` value type: final, normalised, read-only train/test arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..validation import check_int
from .transforms import max_row_norm

__all__ = ["Dataset", "NORM_TOLERANCE"]

NORM_TOLERANCE = 1e-6  # float32 rounding after dividing by the norm can overshoot 1 by ~1e-7


def _frozen_view(a: np.ndarray) -> np.ndarray:
    # A read-only view: the caller's array keeps its flags, but nobody can write through this one.
    v = a.view()
    v.setflags(write=False)
    return v


@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """A ready-to-train data set.

    ``x_train`` float32 ``[n_train, D]`` and ``x_test`` float32 ``[n_test, D]`` have every row in the
    unit L2 ball (checked at construction); ``y_train`` int64 ``[n_train]`` and ``y_test`` int64
    ``[n_test]`` hold labels ``0..classes-1``. Arrays are stored as read-only views, because data
    sets are memoised and shared between callers. ``fingerprint`` identifies the exact arrays and
    the parameters that produced them; ``notes`` lists caveats a report should repeat. Equality is
    identity; compare ``fingerprint`` to compare contents.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int
    fingerprint: str
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for field in ("x_train", "x_test"):
            a = getattr(self, field)
            if not isinstance(a, np.ndarray) or a.dtype != np.float32 or a.ndim != 2:
                raise ValueError(f"{field} must be a float32 array [rows, features], got {_describe(a)}")
        for field in ("y_train", "y_test"):
            a = getattr(self, field)
            if not isinstance(a, np.ndarray) or a.dtype != np.int64 or a.ndim != 1:
                raise ValueError(f"{field} must be an int64 array [rows], got {_describe(a)}")
        if self.x_train.shape[1] != self.x_test.shape[1]:
            raise ValueError(f"x_train has {self.x_train.shape[1]} features but x_test has {self.x_test.shape[1]}")
        if self.x_train.shape[0] != self.y_train.shape[0] or self.x_test.shape[0] != self.y_test.shape[0]:
            raise ValueError(
                f"row counts differ: x_train {self.x_train.shape[0]} vs y_train {self.y_train.shape[0]}, "
                f"x_test {self.x_test.shape[0]} vs y_test {self.y_test.shape[0]}"
            )
        object.__setattr__(self, "classes", check_int("classes", self.classes, low=2))
        for field in ("y_train", "y_test"):
            y = getattr(self, field)
            if y.size and (y.min() < 0 or y.max() >= self.classes):
                raise ValueError(f"{field} must hold labels in [0, {self.classes - 1}], found {y.min()}..{y.max()}")
        for field in ("x_train", "x_test"):
            norm = max_row_norm(getattr(self, field))
            if not norm <= 1.0 + NORM_TOLERANCE:  # also catches NaN
                raise ValueError(f"every row of {field} must have L2 norm <= 1, found {norm}")
            object.__setattr__(self, field, _frozen_view(getattr(self, field)))
        for field in ("y_train", "y_test"):
            object.__setattr__(self, field, _frozen_view(getattr(self, field)))
        object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def n(self) -> int:
        """Number of training rows."""
        return int(self.x_train.shape[0])

    @property
    def dim(self) -> int:
        """Number of features per row (after PCA, if any)."""
        return int(self.x_train.shape[1])

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, n={self.n}, n_test={self.x_test.shape[0]}, dim={self.dim}, "
            f"classes={self.classes}, fingerprint={self.fingerprint[:12]!r}..., notes={len(self.notes)})"
        )


def _describe(a: object) -> str:
    if isinstance(a, np.ndarray):
        return f"{a.dtype} array of shape {a.shape}"
    return type(a).__name__
