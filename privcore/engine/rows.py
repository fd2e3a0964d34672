"""The typed result row: one (method, setting) point of a sweep, plain numbers only.

Frozen and checked once; it travels from the runner to the recommendation, the charts and the
exports unchanged. ``to_dict()`` gives the CSV/JSON record. It is also a read-only
``Mapping`` over its columns (``row["accuracy_mean"]``, ``row.get("sigma")``), the view that
tabular consumers (pandas, plotly hover tables, the exports) read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:  # pragma: no cover
    from .specs import SweepSpec

__all__ = ["ResultRow", "RESULT_COLUMNS", "SweepResult", "knobs_picked"]


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
    #: Methods that test before answering (Confident-GNMax, sparse vector): the test's threshold;
    #: methods that may abstain: the fraction of queries answered and the accuracy among them
    #: (``accuracy_mean`` counts abstentions as wrong). None elsewhere.
    threshold: float | None = None
    answered_fraction: float | None = None
    accuracy_answered: float | None = None
    accuracy_answered_std: float | None = None  # its spread over the repetitions
    #: Confident-GNMax: PATE's data-dependent epsilon of B queries like the test set's (NOT a
    #: guarantee: a function of the private votes, so showing it is itself a release of private
    #: information; ``epsilon`` is the guarantee) and the epsilon of publishing it with
    #: smooth-sensitivity noise (privcore.accounting.pate_dd). None elsewhere.
    epsilon_data_dependent: float | None = None
    epsilon_dd_published: float | None = None
    #: Where the row's accounting claims more than this project's sound accountant gives (``paper``
    #: mode; tight subsample-and-aggregate's non-adaptive assumption): the epsilon its noise really
    #: reaches at ``delta`` under replace-one neighbours, and a sentence saying so
    #: (:func:`privcore.accounting.forward.real_guarantee`). None elsewhere.
    real_epsilon: float | None = None
    guarantee: str | None = None
    #: A tuned comparison's row (:mod:`privcore.engine.tuned`): the variant ("held-out: ..." or
    #: "private: ...") and the knobs it picked. None in a comparison as configured.
    tuned: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.method, str) or not self.method:
            raise TypeError(f"method must be a non-empty string, got {self.method!r}")
        for name in ("accuracy_mean", "accuracy_std"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a finite number in [0, 1], got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        """The plain record, columns in :data:`RESULT_COLUMNS` order."""
        return asdict(self)

    # Read-only Mapping view over the columns.
    def __getitem__(self, key: str) -> Any:
        if key not in _COLUMN_SET:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(RESULT_COLUMNS)

    def __len__(self) -> int:
        return len(RESULT_COLUMNS)


#: Columns of every result row, in the order of CSV exports.
RESULT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ResultRow))
_COLUMN_SET = frozenset(RESULT_COLUMNS)


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
        """The rows as a pandas DataFrame with :data:`RESULT_COLUMNS`."""
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.rows], columns=list(RESULT_COLUMNS))


def knobs_picked(tuned: str | None) -> str:
    """The knobs of a row's ``tuned`` text (``"held-out: lam=0.1"`` -> ``"lam=0.1"``; a private
    row's selection terms in brackets dropped), or "" for a row as configured."""
    knobs = str(tuned).split(": ", 1)[-1].split(" (chosen")[0] if tuned else ""
    return knobs if "=" in knobs else ""  # "private: as configured (...)": no knobs were picked
