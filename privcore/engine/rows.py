"""The typed result row: one (method, setting) point of a sweep, plain numbers only.

Frozen and checked once; it travels from the runner to the recommendation, the charts and the
exports unchanged. ``to_dict()`` gives the CSV/JSON record. It is also a read-only
``Mapping`` over its columns (``row["accuracy_mean"]``, ``row.get("sigma")``), the view that
tabular consumers (pandas, plotly hover tables, the exports) read.

Its columns are the engine's core columns and, in their place among them, every registered method's
own result fields (:attr:`privcore.methods.base.Method.result_fields`): a row carries its method's
values in ``extras`` and reads as None in the other methods' columns (:func:`result_columns`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Iterator

from ..types import Extras

if TYPE_CHECKING:  # pragma: no cover
    from .specs import SweepSpec

__all__ = ["ResultRow", "CORE_COLUMNS", "result_columns", "SweepResult", "knobs_picked", "tuned_knobs"]


@dataclass(frozen=True)
class ResultRow(Mapping):
    """Accuracy of one method at one setting, with the noise it used and how it was certified.

    epsilon/delta: the row's total budget (lam = "auto" spends part of it on choosing lambda: see
    ``note``). vary/value: the swept axis of the sweep and this row's value on it. sigma, beta,
    rho, noise_multiplier, per_query_epsilon, formula: the calibrated noise (None where it does
    not apply). sensitivity: the certified sensitivity the noise was calibrated for;
    solver_tolerance: the gradient-norm bound it includes; solver_grad_norm: the norm reached.
    """

    method: str
    epsilon: float
    delta: float
    budget: int
    n: int
    dim: int
    classes: int
    lam: float | str
    teachers: int
    accounting: str
    vary: str | None
    value: Any
    accuracy_mean: float
    accuracy_std: float
    repeats: int
    seconds: float
    device: str
    cached: bool
    noise: str | None = None
    sigma: float | None = None
    beta: float | None = None
    rho: float | None = None
    noise_multiplier: float | None = None
    per_query_epsilon: float | None = None
    formula: str | None = None
    note: str | None = None
    solver_grad_norm: float | None = None
    solver_tolerance: float | None = None
    sensitivity: float | None = None
    #: Where the row's accounting claims more than this project's sound accountant gives (``paper``
    #: mode; tight subsample-and-aggregate's non-adaptive assumption): the epsilon its noise really
    #: reaches at ``delta`` under replace-one neighbours, and a sentence saying so
    #: (:func:`privcore.accounting.forward.real_guarantee`). None elsewhere.
    real_epsilon: float | None = None
    guarantee: str | None = None
    #: A tuned comparison's row (:mod:`privcore.engine.tuned`): the variant ("held-out: ..." or
    #: "private: ...") and the knobs it picked. None in a comparison as configured.
    tuned: str | None = None
    #: The method's own result fields (its ``result_fields``: e.g. the answered share of a method that
    #: may abstain, PATE's data-dependent epsilon), plain numbers by name; columns of their own in the
    #: Mapping view and :meth:`to_dict`.
    extras: Mapping[str, float | int | None] = field(default_factory=Extras)  # stored as an Extras

    def __post_init__(self) -> None:
        if not isinstance(self.method, str) or not self.method:
            raise TypeError(f"method must be a non-empty string, got {self.method!r}")
        object.__setattr__(self, "extras", self.extras if isinstance(self.extras, Extras) else Extras(self.extras))
        clash = sorted(set(self.extras) & _CORE_SET)
        if clash:
            raise ValueError(f"extras may not name core columns, got {', '.join(clash)}")
        for name in ("accuracy_mean", "accuracy_std"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a finite number in [0, 1], got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        """The plain record, columns in :func:`result_columns` order (the extras of methods registered
        since a row was made come last)."""
        return {key: self[key] for key in self}

    # Read-only Mapping view over the columns.
    def __getitem__(self, key: str) -> Any:
        if key in _CORE_SET:
            return getattr(self, key)
        if key in self.extras:
            return self.extras[key]
        if key in _extra_columns():
            return None
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        columns = result_columns()
        own = tuple(k for k in self.extras if k not in columns)  # a method unregistered since the row was made
        return iter(columns + own if own else columns)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __getattr__(self, name: str) -> Any:
        # Thin read-only alias: ``row.answered_fraction`` for a declared result field (None where absent).
        if not name.startswith("_") and name != "extras" and name in _extra_columns():
            return self.extras.get(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


#: The engine's own columns, the same for every method (the dataclass fields but ``extras``).
CORE_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ResultRow) if f.name != "extras")
_CORE_SET = frozenset(CORE_COLUMNS)
#: The registered methods' own columns stand where the first methods' stood before they were declared
#: by the methods (issue 31), so the exports keep their column order: after this core column.
_EXTRAS_AFTER = "sensitivity"


#: (the registry's declared fields, their names, the columns) of the last call: rows read them per cell.
_COLUMNS_MEMO: tuple[Any, tuple[str, ...], tuple[str, ...]] = (None, (), CORE_COLUMNS)


def _columns() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the registered methods' own column names, every column), kept while the registry's are the same."""
    global _COLUMNS_MEMO
    from ..methods.fields import declared_result_fields

    memo = _COLUMNS_MEMO
    declared = declared_result_fields()
    if declared is not memo[0]:
        names = tuple(f.name for f in declared)
        clash = sorted(set(names) & _CORE_SET)
        if clash:
            raise ValueError(f"a registered method declares result fields named like core columns: {', '.join(clash)}")
        cut = CORE_COLUMNS.index(_EXTRAS_AFTER) + 1
        memo = _COLUMNS_MEMO = (declared, names, CORE_COLUMNS[:cut] + names + CORE_COLUMNS[cut:])
    return memo[1], memo[2]


def _extra_columns() -> tuple[str, ...]:
    return _columns()[0]


def result_columns() -> tuple[str, ...]:
    """Columns of every result row, in the order of CSV exports: the core columns with the registered
    methods' result fields (registry order) after ``sensitivity``."""
    return _columns()[1]


def __getattr__(name: str) -> Any:
    if name == "RESULT_COLUMNS":  # the registry's columns now (a method registered later adds its own)
        return result_columns()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class SweepResult:
    """A sweep's rows (typed :class:`ResultRow` values), warnings, timing and cache statistics."""

    spec: "SweepSpec"
    rows: list[ResultRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    device: str = "cpu"
    computed: int = 0
    cached: int = 0

    def to_frame(self):  # noqa: ANN201 - pandas is optional for the library
        """The rows as a pandas DataFrame with :func:`result_columns`."""
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.rows], columns=list(result_columns()))


def knobs_picked(tuned: str | None) -> str:
    """The knobs of a row's ``tuned`` text (``"held-out: lam=0.1"`` -> ``"lam=0.1"``; a private
    row's selection terms in brackets dropped), or "" for a row as configured."""
    knobs = str(tuned).split(": ", 1)[-1].split(" (chosen")[0] if tuned else ""
    return knobs if "=" in knobs else ""  # "private: as configured (...)": no knobs were picked


def tuned_knobs(tuned: str | None) -> dict[str, float | int]:
    """The numeric knobs a tuned row ran at ({"clip": 2.0, "learning_rate": 10.0}), read from its ``tuned``
    text (:func:`knobs_picked`; values written with repr); {} for a row as configured. Used where a row's
    spec-level knob columns would otherwise show the configured value."""
    import ast

    out: dict[str, float | int] = {}
    for item in knobs_picked(tuned).split(", "):
        name, _, text = item.partition("=")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            continue
        if name.isidentifier() and isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = value
    return out
