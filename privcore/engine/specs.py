"""Frozen, validated, JSON-serialisable descriptions of what to compute.

A :class:`SweepSpec` is a data set, a set of methods, a list of epsilons and one setting for every
other knob, optionally varied along one axis (``vary`` in :data:`VARY_AXES` over ``values``): the
paper's figures are all of that form. It expands into points (method, epsilon, axis value); each
point is cached on its own.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from typing import Any

from .. import knobs
from ..methods import METHOD_NAMES, REGISTRY, check_method_name
from ..types import PrivacyBudget, Problem
from ..validation import check_choice, check_int, fmt_value

__all__ = ["compact_data", "DataSpec", "SweepSpec", "VARY_AXES", "LAM_AUTO_GRID", "TUNING_MODES", "TUNING_LABELS"]

#: Axes a sweep may vary besides epsilon (the paper's Figures 2-6).
VARY_AXES: tuple[str, ...] = ("budget", "delta", "n", "dim", "classes", "lam", "teachers")
#: lambda candidates for ``lam="auto"`` (the paper cross-validated in [1e-5, 0.5]).
#: How a sweep sets each method's knobs (:mod:`privcore.engine.tuned`).
TUNING_MODES: tuple[str, ...] = ("configured", "held-out", "private")
TUNING_LABELS: dict[str, str] = {
    "configured": "as configured",
    "held-out": "tuned: best on the test queries (optimistic, not private)",
    "private": "tuned: selected privately (its cost counted in ε)",
}
LAM_AUTO_GRID: tuple[float, ...] = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 0.5)


@dataclass(frozen=True)
class DataSpec:
    """Which data: a name from :data:`privcore.data.DATASET_NAMES` and its transforms."""

    name: str = knobs.default("dataset")
    data_file: str | None = None
    n: int | None = None
    dim: int | None = None
    classes: int | None = None
    augment: bool = True
    #: A user file's declared feature map (:mod:`privcore.data.preprocess` text form) and label column.
    preprocess: str = "none"
    label_column: str | None = None
    #: A user file's declared label set, comma-separated (:mod:`privcore.data.labels`); None: read off the file.
    labels: str | None = None

    def __post_init__(self) -> None:
        knobs.check("dataset", self.name)
        from ..data.labels import labels_text, parse_labels
        from ..data.preprocess import parse_preprocess

        object.__setattr__(self, "preprocess", parse_preprocess(self.preprocess).text)
        object.__setattr__(self, "labels", labels_text(parse_labels(self.labels)))
        if self.name != "file" and self.labels is not None:
            raise ValueError(f"labels apply to dataset 'file' only, got dataset {self.name!r}")
        if self.name != "file" and (self.preprocess != "none" or self.label_column is not None):
            raise ValueError(f"preprocess and label_column apply to dataset 'file' only, got dataset {self.name!r}")
        if self.label_column is not None and (not isinstance(self.label_column, str) or not self.label_column.strip()):
            raise TypeError(f"label_column must be a column name or None, got {self.label_column!r}")
        if self.name == "file" and not self.data_file:
            raise ValueError("data_file is required for dataset 'file' (a CSV or NPZ path)")
        if self.data_file is not None and not isinstance(self.data_file, str):
            raise TypeError(f"data_file must be a path string, got {fmt_value(self.data_file)}")
        if self.n is not None:
            from .. import limits

            object.__setattr__(self, "n", check_int("n", self.n, low=10))
            if self.n > limits.max_n():
                raise ValueError(f"n must be at most {limits.max_n():,} training rows, got {self.n:,} "
                                 f"({limits.limit_hint('PRIVCORE_MAX_N')})")
        for name in ("dim", "classes"):  # stored as checked (a NumPy integer would break the spec's JSON key)
            if getattr(self, name) is not None:
                object.__setattr__(self, name, knobs.check(name, getattr(self, name)))
        if not isinstance(self.augment, bool):
            raise TypeError(f"augment must be True or False, got {fmt_value(self.augment)}")


    def load_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`privcore.data.load_dataset` for this data (seed excluded)."""
        return dict(data_file=self.data_file, n=self.n, dim=self.dim, classes=self.classes, augment=self.augment,
                    preprocess=self.preprocess, label_column=self.label_column, labels=self.labels)


def compact_data(d: dict[str, Any]) -> dict[str, Any]:
    """A DataSpec's dict without the user-file fields at their defaults (older spec keys stay valid)."""
    out = dict(d)
    if out.get("preprocess") == "none":
        out.pop("preprocess")
    for name in ("label_column", "labels"):
        if out.get(name) is None:
            out.pop(name, None)
    return out


@dataclass(frozen=True)
class SweepSpec:
    """Methods x epsilons (x one varied axis) on one data set, with every other knob fixed.

    ``lam`` is a float (average-form L2 weight, the same for every method that uses it) or ``"auto"``
    (chosen per method and epsilon on a validation split carved from the training set).
    ``repeats`` independent releases per point; ``seed`` fixes the split and every noise draw.
    ``secure_noise``: every noise draw comes instead from a fresh seed from the operating system's
    entropy, never shown or stored, and each epsilon from its own (the mode for a release that may
    be published; ``seed`` then fixes only the data splits). Such a sweep never reads or writes the
    result cache, and its rows cannot be reproduced.
    ``tuning``: "configured" (every method at these knobs), "held-out" or "private" (each method at
    the best point of its declared knob grid, picked on the test queries or by a private selection
    paid for out of each row's epsilon: :mod:`privcore.engine.tuned`).
    """

    data: DataSpec = field(default_factory=DataSpec)
    methods: tuple[str, ...] = METHOD_NAMES
    epsilons: tuple[float, ...] = knobs.EPSILONS
    delta: float = knobs.default("delta")
    budget: int = knobs.default("budget")
    lam: float | str = knobs.default("lam")
    teachers: int = knobs.default("teachers")
    batch_size: int = knobs.default("batch_size")
    epochs: int = knobs.default("epochs")
    clip: float = knobs.default("clip")
    learning_rate: float = knobs.default("learning_rate")
    accounting: str = knobs.default("accounting")
    repeats: int = knobs.default("repeats")
    seed: int = knobs.default("seed")
    device: str = knobs.default("device")
    vary: str | None = None
    values: tuple[Any, ...] = ()
    baseline: bool = True
    secure_noise: bool = False
    tuning: str = "configured"

    def __post_init__(self) -> None:
        if not isinstance(self.data, DataSpec):
            raise TypeError(f"data must be a DataSpec, got {type(self.data).__name__}")
        methods = _sequence("methods", self.methods, "method names such as ('dpsgd',)")
        if not methods:
            raise ValueError("methods must name at least one of " + ", ".join(REGISTRY))
        methods = tuple(check_method_name(m) for m in methods)  # the live registry; variants by canonical name
        object.__setattr__(self, "methods", tuple(dict.fromkeys(methods)))  # a repeated name: once (not twice the rows)
        eps = _sequence("epsilons", self.epsilons, "numbers such as (0.1, 1.0)")
        if not eps:
            raise ValueError("epsilons must contain at least one value > 0")
        object.__setattr__(self, "epsilons", tuple(dict.fromkeys(PrivacyBudget(e, 0.0).epsilon for e in eps)))
        object.__setattr__(self, "delta", knobs.check("delta", self.delta))
        object.__setattr__(self, "lam", knobs.check("lam", self.lam))
        # Each knob is stored as checked (plain int/float/str: a NumPy scalar would break the JSON key),
        # teachers and batch_size before the Problem below, whose n = max(T, batch) would name n instead.
        for name in ("teachers", "batch_size", "budget", "epochs", "clip", "learning_rate", "accounting", "repeats",
                     "seed", "device"):
            value = knobs.check(name, getattr(self, name))
            if type(getattr(self, name)) not in (int, float, str):  # plain values kept as given: same keys as before
                object.__setattr__(self, name, value)
        check_choice("tuning", self.tuning, TUNING_MODES)
        for name in ("baseline", "secure_noise"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {fmt_value(getattr(self, name))}")
        from .. import limits

        points = f"{len(self.methods)} method(s) x {len(self.epsilons)} epsilon(s)"
        limits.check_points(len(self.methods) * len(self.epsilons), points)
        # Validate the fixed knobs once through Problem (n is checked against the data later).
        Problem(n=max(self.teachers, self.batch_size), lam=knobs.fixed_lam(self.lam),
                budget=self.budget, teachers=self.teachers, batch_size=self.batch_size, epochs=self.epochs,
                clip=self.clip, learning_rate=self.learning_rate)
        if self.vary is None:
            if self.values:
                raise ValueError("values given without vary: set vary to one of " + ", ".join(VARY_AXES))
            return
        check_choice("vary", self.vary, VARY_AXES)
        values = _sequence("values", self.values, f"{self.vary} values")
        if not values:
            raise ValueError(f"values must list at least one {self.vary} when vary={self.vary!r}")
        limits.check_points(len(self.methods) * len(self.epsilons) * len(values),
                            f"{points} x {len(values)} {self.vary} value(s)")
        # Each value must make a valid variant; it is kept as that variant checked it (plain numbers).
        checked = [self.variant(v) for v in values]
        holder = "data" if self.vary in ("n", "dim", "classes") else None
        object.__setattr__(self, "values", tuple(dict.fromkeys(v if type(v) in (int, float, str) else
                                                               getattr(c.data if holder else c, self.vary)
                                                               for v, c in zip(values, checked))))

    def variant(self, value: Any) -> "SweepSpec":
        """This spec with the varied axis set to ``value`` (and ``vary`` cleared)."""
        if self.vary is None:
            return self
        if self.vary in ("n", "dim", "classes"):
            data = replace(self.data, **{self.vary: value})
            return replace(self, data=data, vary=None, values=())
        return replace(self, **{self.vary: value, "vary": None, "values": ()})

    def variants(self) -> list[tuple[Any, "SweepSpec"]]:
        """(axis value, spec without a varied axis) pairs; one pair (None, self) if nothing varies."""
        if self.vary is None:
            return [(None, self)]
        return [(v, self.variant(v)) for v in self.values]

    @cached_property
    def key(self) -> str:
        """The spec's identity (its canonical JSON), computed once: memo and in-flight keys use it."""
        return self.to_json()

    def to_json(self) -> str:
        """Canonical JSON (sorted keys; infinity as the string "inf")."""
        raw = asdict(self)
        raw["data"] = compact_data(raw["data"])
        if not raw["secure_noise"]:  # the exploratory mode keeps the keys it always had
            raw.pop("secure_noise")
        if raw["tuning"] == "configured":  # likewise: a comparison as configured keeps its keys
            raw.pop("tuning")
        return json.dumps(_jsonable(raw), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "SweepSpec":
        """Inverse of :meth:`to_json`; validates like the constructor."""
        raw = strict_json(text, "a sweep spec")
        if not isinstance(raw, dict):
            raise ValueError("a sweep spec must be a JSON object")
        data = raw.pop("data", {})
        if not isinstance(data, dict):
            raise TypeError(f"data must be a JSON object, got {fmt_value(data)}")
        unknown = sorted(set(raw) - {f.name for f in fields(cls)} - {"data"})
        if unknown:
            raise ValueError(f"a sweep spec has no field {', '.join(map(repr, unknown))}")
        unknown = sorted(set(data) - {f.name for f in fields(DataSpec)})
        if unknown:  # it was Python's "__init__() got an unexpected keyword argument"
            raise ValueError(f"a data spec has no field {', '.join(map(repr, unknown))}")
        eps = raw.get("epsilons", ())
        if isinstance(eps, list):  # anything else is refused by the constructor, by name
            raw["epsilons"] = tuple(math.inf if e == "inf" else e for e in eps)
        for key in ("methods", "values"):
            if isinstance(raw.get(key), list):
                raw[key] = tuple(raw[key])
        return cls(data=DataSpec(**data), **raw)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 overflows to inf: infinity is written "inf" on purpose only
        raise ValueError(f"a number in the JSON overflows a float: {text[:40]}")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"the JSON holds {name}, which is not a number JSON allows (write infinity as \"inf\")")


def strict_json(text: str | bytes, what: str) -> Any:
    """``json.loads`` that refuses NaN, Infinity, numbers overflowing a float and deep nesting, by name."""
    try:
        return json.loads(text, parse_float=_finite_float, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply to be read") from None


def _sequence(name: str, value: Any, what: str) -> tuple:
    """``value`` as a tuple; a TypeError naming ``name`` for a string or a single value."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__") or getattr(value, "ndim", 1) == 0:
        raise TypeError(f"{name} must be a list or tuple of {what}, got {fmt_value(value)}")
    return tuple(value)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, float) and math.isinf(obj):
        return "inf"
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj
