"""Preprocessing of a user's own features that is part of the privacy statement.

The privacy guarantee of every method holds for rows in the unit L2 ball mapped there by a rule
that is the *same for every possible data set*. A scaling computed from the private data (the
mean and standard deviation of each column, or its observed min/max) is not: replacing one row
changes the scaling of every other row, so the released model leaks about the replaced row
through the scaling itself, outside any accounting. The choices here use only numbers the user
declares in advance (public knowledge, e.g. a sensor's range), so the map is fixed:

* ``none``: features as given, then the fixed clip ``x / max(1, ||x||)``;
* ``bounds``: each feature clipped to a declared ``[low, high]`` (one global range or one per
  feature) and mapped to ``[-1, 1]``, then the row divided by ``sqrt(D')`` (``D'`` counts the
  intercept): every row lies in the unit ball without any data-dependent clip;
* ``norm``: each row clipped to the declared L2 norm ``R`` (``x / max(1, ||x|| / R)``) and divided
  by ``R`` (divided by ``sqrt(2)`` more with an intercept).

``intercept`` appends a constant feature (value 1 before the final scaling), so that a linear
model without a bias term can learn one; it is inside the unit-ball scaling above.

The text form (URL, CLI ``--preprocess``, the spec's key) is ``none``, ``bounds:LOW:HIGH``,
``bounds:L1:H1,L2:H2,...`` or ``norm:R``, with ``+intercept`` appended for the constant feature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..validation import fmt_value

__all__ = ["Preprocess", "parse_preprocess", "LEAK_EXPLANATION", "MODES"]

MODES: tuple[str, ...] = ("none", "bounds", "norm")
#: Bounds and norms beyond this (or a span or norm below its inverse) overflow the maps' float64
#: arithmetic: bounds:-1e308:1e308 gave NaN rows, norm:1e-320 zeroed every feature.
SCALE_LIMIT = 1e30

#: Why data-dependent scaling is not offered (shown by the dashboard, repeated in the data notes).
LEAK_EXPLANATION = (
    "Scaling computed from the private data (each column's mean and standard deviation, or its observed "
    "min and max) would leak: replacing one person's row moves the statistics and so changes how every other "
    "row is scaled, and the released model carries that change, outside the privacy accounting. Declared "
    "public bounds or a stated norm are the same map for every possible data set, so the guarantee covers them.")


@dataclass(frozen=True)
class Preprocess:
    """A fixed, data-independent feature map into the unit L2 ball (see the module text)."""

    mode: str = "none"
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()
    norm: float | None = None
    intercept: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"preprocess mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not isinstance(self.intercept, bool):
            raise TypeError(f"preprocess intercept must be True or False, got {self.intercept!r}")
        if self.mode == "bounds":
            low, high = tuple(float(v) for v in self.low), tuple(float(v) for v in self.high)
            if not low or len(low) != len(high):
                raise ValueError("preprocess bounds need as many lows as highs (one global pair, or one per feature), "
                                 f"got {len(low)} lows and {len(high)} highs")
            for k, (lo, hi) in enumerate(zip(low, high)):
                where = "" if len(low) == 1 else f" of feature {k + 1}"
                if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
                    raise ValueError(f"preprocess bounds{where} must be finite with low < high, got low={lo:g}, "
                                     f"high={hi:g}")
                if max(abs(lo), abs(hi)) > SCALE_LIMIT or hi - lo < 1.0 / SCALE_LIMIT:  # the map's arithmetic overflows
                    raise ValueError(f"preprocess bounds{where} must lie within ±{SCALE_LIMIT:g} and span at least "
                                     f"{1.0 / SCALE_LIMIT:g}, got low={lo:g}, high={hi:g}")
            object.__setattr__(self, "low", low)
            object.__setattr__(self, "high", high)
        elif self.low or self.high:
            raise ValueError(f"preprocess bounds are only used with mode 'bounds', got mode {self.mode!r}")
        if self.mode == "norm":
            if self.norm is None or isinstance(self.norm, bool) or not math.isfinite(float(self.norm)) \
                    or float(self.norm) <= 0:
                raise ValueError(f"preprocess norm R must be a finite number > 0, got {self.norm!r}")
            if not 1.0 / SCALE_LIMIT <= float(self.norm) <= SCALE_LIMIT:  # x / R overflowed and zeroed every row
                raise ValueError(f"preprocess norm R must be in [{1.0 / SCALE_LIMIT:g}, {SCALE_LIMIT:g}], got {self.norm!r}")
            object.__setattr__(self, "norm", float(self.norm))
        elif self.norm is not None:
            raise ValueError(f"preprocess norm is only used with mode 'norm', got mode {self.mode!r}")

    # ------------------------------------------------------------ text form

    @property
    def text(self) -> str:
        """The canonical text form (inverse of :func:`parse_preprocess`)."""
        if self.mode == "bounds":
            body = "bounds:" + ",".join(f"{_g(lo)}:{_g(hi)}" for lo, hi in zip(self.low, self.high))
        elif self.mode == "norm":
            body = f"norm:{_g(self.norm)}"
        else:
            body = "none"
        return body + ("+intercept" if self.intercept else "")

    def describe(self, dim: int | None = None) -> str:
        """One sentence for the data notes and the privacy statement."""
        if self.mode == "bounds":
            if len(self.low) == 1:
                rng = f"the declared public range [{_g(self.low[0])}, {_g(self.high[0])}]"
            else:
                rng = f"{len(self.low)} declared public per-feature ranges"
            d = "" if dim is None else f" = {self.out_dim(dim)}"
            text = (f"each feature clipped to {rng} and mapped to [-1, 1], each row divided by sqrt(D'{d})"
                    + (" including the intercept" if self.intercept else "") + ": rows lie in the unit ball by "
                    "construction (a fixed map, covered by the guarantee)")
        elif self.mode == "norm":
            text = (f"each row clipped to the declared L2 norm R = {_g(self.norm)} and divided by R"
                    + (" (and by sqrt(2) for the intercept)" if self.intercept else "")
                    + " (a fixed map, covered by the guarantee)")
        else:
            text = "features used as given (no standardisation), then the fixed clip x / max(1, ||x||)"
            if self.intercept:
                text += ", an intercept appended and the row divided by sqrt(2)"
        if self.intercept:
            text += "; a constant intercept feature is appended"
        return text

    def out_dim(self, dim: int) -> int:
        """Feature count after the map (one more with the intercept)."""
        return int(dim) + (1 if self.intercept else 0)

    # ------------------------------------------------------------ the map

    def check_dim(self, dim: int, where: str = "the data") -> None:
        """Raise ``ValueError`` when per-feature bounds do not match ``dim`` features."""
        if self.mode == "bounds" and len(self.low) not in (1, dim):
            raise ValueError(f"preprocess gives {len(self.low)} per-feature bounds but {where} has {dim} feature "
                             "columns: give one global low:high pair or one pair per feature")

    def apply(self, x: np.ndarray) -> tuple[np.ndarray, int]:
        """The mapped rows (float32 ``[M, D']``, each of L2 norm <= 1) and how many values/rows were clipped.

        ``x`` is float ``[M, D]``; the result is a new array. For ``bounds`` the count is the number of
        feature values outside their range; for ``norm``/``none`` the number of rows rescaled.
        """
        x = np.asarray(x, dtype=np.float64)
        m, d = x.shape
        self.check_dim(d)
        if self.mode == "bounds":
            lo = np.broadcast_to(np.asarray(self.low), (d,))
            hi = np.broadcast_to(np.asarray(self.high), (d,))
            clipped = int(((x < lo) | (x > hi)).sum())
            z = 2.0 * (np.clip(x, lo, hi) - lo) / (hi - lo) - 1.0
            scale = math.sqrt(self.out_dim(d))
        else:
            radius = self.norm if self.mode == "norm" else 1.0
            norms = np.linalg.norm(x, axis=1)
            over = norms > radius
            clipped = int(over.sum())
            z = x / np.maximum(1.0, norms / radius)[:, None] / radius
            scale = math.sqrt(2.0) if self.intercept else 1.0
        if self.intercept:
            z = np.hstack([z, np.ones((m, 1))])
        out = (z / scale).astype(np.float32)
        # float32 rounding may push a norm a hair above 1: the loader's fixed clip removes that.
        return out, clipped


def parse_preprocess(text: "str | Preprocess | None") -> Preprocess:
    """A :class:`Preprocess` from its text form; ``ValueError`` naming the problem otherwise."""
    if isinstance(text, Preprocess):
        return text
    if text is None:
        return Preprocess()
    if not isinstance(text, str):
        raise TypeError(f"preprocess must be a string such as 'bounds:-5:5+intercept', got {fmt_value(text)}")
    raw = text.strip().lower().replace(" ", "")
    intercept = False
    if raw.endswith("+intercept"):
        raw, intercept = raw[: -len("+intercept")], True
    if raw in ("", "none"):
        return Preprocess(intercept=intercept)
    mode, _, rest = raw.partition(":")
    try:
        if mode == "norm":
            return Preprocess("norm", norm=float(rest), intercept=intercept)
        if mode == "bounds":
            lows, highs = [], []
            for pair in rest.split(","):
                lo, sep, hi = pair.partition(":")
                if not sep:
                    raise ValueError(pair)
                lows.append(float(lo))
                highs.append(float(hi))
            return Preprocess("bounds", tuple(lows), tuple(highs), intercept=intercept)
    except ValueError as err:
        if str(err).startswith("preprocess"):
            raise
        raise ValueError(f"preprocess {text!r} is not readable: write bounds:LOW:HIGH (or one LOW:HIGH per feature, "
                         "comma-separated), norm:R or none, optionally followed by +intercept") from None
    raise ValueError(f"preprocess mode must be none, bounds:LOW:HIGH or norm:R (optionally +intercept), got {text!r}")


def _g(v: float | None) -> str:
    return "" if v is None else f"{float(v):g}"
