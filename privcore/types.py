"""Small frozen value types: a privacy budget, a problem description and a calibrated noise scale.

Every field is validated once, in ``__post_init__``; invalid values raise ``TypeError`` or
``ValueError`` naming the parameter, the allowed range and the value. Downstream code trusts them.

Neighbouring datasets throughout privcore differ by *replacing* one training example (replace-one
adjacency); every sensitivity bound below is for that relation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator

from . import knobs
from .knobs import ACCOUNTING_MODES
from .validation import check_choice, check_real, fmt_value

__all__ = [
    "ACCOUNTING_MODES",
    "NOISE_KINDS",
    "PrivacyBudget",
    "Problem",
    "NoiseScale",
    "Extras",
    "CalibrationError",
    "K_LIPSCHITZ",
    "L_HESSIAN",
    "SOLVER_TOLERANCE_FRACTION",
]

_PROBLEM_KNOBS = ("n", "dim", "classes", "lam", "budget", "teachers", "batch_size", "epochs", "clip", "learning_rate")
NOISE_KINDS: tuple[str, ...] = ("laplace_like", "gaussian", "exponential_mechanism", "none")

#: Lipschitz constant of the softmax cross-entropy w.r.t. the logits: ||p - y||_2 <= sqrt(2).
K_LIPSCHITZ: float = math.sqrt(2.0)
#: Bound on the eigenvalues of the softmax cross-entropy Hessian w.r.t. the logits.
L_HESSIAN: float = 0.5
#: The certified solver residual as a fraction of K / N: with gradient norm g = this * K / N, the
#: residual term 2 g / lam of the sensitivity is this fraction of 2K / (N lam) (see privcore.certify).
SOLVER_TOLERANCE_FRACTION: float = 0.01


class CalibrationError(ValueError):
    """A method cannot meet the requested privacy target (e.g. DP-SGD with delta = 0).

    The message says what would work instead.
    """


@dataclass(frozen=True)
class PrivacyBudget:
    """Target (epsilon, delta) over *all* released outputs (B predictions for prediction methods).

    ``epsilon = math.inf`` is allowed only as the explicit non-private baseline; ``delta`` in [0, 1).
    """

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        eps = check_real("epsilon", self.epsilon, low=0.0, low_open=True, allow_inf=True)
        dlt = check_real("delta", self.delta, low=0.0, high=1.0, high_open=True)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", dlt + 0.0 if dlt == 0 else dlt)  # -0.0 is 0.0

    @property
    def is_private(self) -> bool:
        """False only for the non-private baseline (epsilon = infinity)."""
        return math.isfinite(self.epsilon)

    @property
    def is_pure(self) -> bool:
        """True for pure epsilon-DP (delta = 0)."""
        return self.delta == 0.0


@dataclass(frozen=True)
class Problem:
    """Everything besides (epsilon, delta) that a calibration may depend on.

    n: training-set size N (replace-one neighbours). dim: input dimension D. classes: C.
    lam: L2 weight in the *average* objective J = (1/N) sum loss + lam * 0.5 ||theta||_F^2 (the same
    meaning for every method). budget: inference budget B. teachers: T subsample models.
    batch_size, epochs, clip: DP-SGD's expected batch (Poisson rate q = batch_size / n), passes over
    the data, per-example clipping norm nu and step size (on the mean clipped gradient).
    """

    n: int = knobs.default("n")
    dim: int = knobs.default("dim")
    classes: int = knobs.default("classes")
    lam: float = knobs.default("lam")
    budget: int = knobs.default("budget")
    teachers: int = knobs.default("teachers")
    batch_size: int = knobs.default("batch_size")
    epochs: int = knobs.default("epochs")
    clip: float = knobs.default("clip")
    learning_rate: float = knobs.default("learning_rate")

    def __post_init__(self) -> None:
        # Ranges from privcore.knobs. T <= N and batch <= N are rules of the methods that use them
        # (their ``unavailable`` and calibration say so), so one method's constraint never blocks the others.
        for name in _PROBLEM_KNOBS:
            object.__setattr__(self, name, knobs.check(name, getattr(self, name), allow_auto=False))

    @property
    def sample_rate(self) -> float:
        """DP-SGD Poisson sampling rate q = batch_size / n (> 1 when the batch exceeds N: DP-SGD refuses it)."""
        return self.batch_size / self.n

    @property
    def steps(self) -> int:
        """DP-SGD steps: ceil(epochs * n / batch_size), the number the accountant composes."""
        return math.ceil(self.epochs * self.n / self.batch_size)

    @property
    def sensitivity(self) -> float:
        """L2 sensitivity of the *exact* regularised minimiser (and of its logits): 2K / (N lam).

        The paper's value (Theorem 5, replace-one); it assumes the exact minimiser. Releases of a
        solver's output use :attr:`certified_sensitivity`.
        """
        return 2.0 * K_LIPSCHITZ / (self.n * self.lam)

    @property
    def solver_tolerance(self) -> float:
        """The gradient norm g the solver certifies on every input: SOLVER_TOLERANCE_FRACTION * K / N.

        Fixed before the data are seen (it depends on N only), so the neighbour's solve obeys it too.
        """
        return SOLVER_TOLERANCE_FRACTION * K_LIPSCHITZ / self.n

    @property
    def certified_sensitivity(self) -> float:
        """Sensitivity of the released solver output: 2K / (N lam) + 2 g / lam, g = solver_tolerance.

        Strong convexity gives ||theta_hat - theta*|| <= ||grad J(theta_hat)|| / lam <= g / lam on each
        of the two neighbouring data sets (SPEC, "Inexact solvers").
        """
        return self.sensitivity + 2.0 * self.solver_tolerance / self.lam


class Extras(Mapping):
    """A method's own numbers by name (:mod:`privcore.methods.fields` declares them): read-only, hashable,
    in the order given; every value a number >= 0 (int or float; infinity allowed) or None.

    What a method adds to its :class:`NoiseScale` or its result rows without a column of its own here.
    """

    def __init__(self, items: Mapping[str, Any] | Any = ()) -> None:
        pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
        out: dict[str, float | int | None] = {}
        for key, value in pairs:
            if not isinstance(key, str) or not key.isidentifier():
                raise TypeError(f"extras keys must be identifiers, got {fmt_value(key)}")
            if value is not None and not (isinstance(value, int) and not isinstance(value, bool)):
                value = check_real(key, value, low=0.0, allow_inf=True)
            elif value is not None and value < 0:
                raise ValueError(f"{key} must be >= 0, got {value}")
            out[key] = value
        self._items = tuple(out.items())

    def __getitem__(self, key: str) -> Any:
        for name, value in self._items:
            if name == key:
                return value
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __repr__(self) -> str:
        return f"Extras({dict(self._items)!r})"


@dataclass(frozen=True)
class NoiseScale:
    """The result of calibrating one method at one (epsilon, delta, problem, accounting mode).

    Fields that do not apply to a method are ``None``. ``noise`` is the distribution added:
    ``laplace_like`` (density prop. to exp(-beta ||b||_2), ``beta`` is its inverse scale),
    ``gaussian`` (i.i.d., std ``sigma``), ``exponential_mechanism`` (``beta`` is the inverse
    temperature of the vote) or ``none`` (the non-private baseline).
    """

    method: str
    epsilon: float
    delta: float
    accounting: str
    noise: str
    sigma: float | None = None
    beta: float | None = None
    rho: float | None = None
    noise_multiplier: float | None = None
    per_query_epsilon: float | None = None
    per_query_delta: float | None = None
    sensitivity: float | None = None
    #: The certified solver gradient-norm bound that ``sensitivity`` includes (None: no solver).
    solver_tolerance: float | None = None
    #: Scale of a second, output noise draw of the same kind (sigma, or 1/beta for Laplace-like):
    #: loss perturbation's approximate-minima-perturbation term. None: no output noise.
    output_scale: float | None = None
    #: The method's own calibration outputs, by name (its ``scale_fields``, privcore.methods.fields):
    #: e.g. the threshold of a test before answering, the test's noise scale, a cap on paid answers.
    #: Read as ``scale.extras["threshold"]`` or, for a name some registered method declares,
    #: ``scale.threshold`` (None where this scale has none); flattened into :meth:`to_dict`.
    extras: Mapping[str, float | int | None] = field(default_factory=Extras)  # stored as an Extras
    formula: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not isinstance(self.method, str) or not self.method:
            raise TypeError(f"method must be a non-empty string, got {fmt_value(self.method)}")
        object.__setattr__(self, "epsilon", check_real("epsilon", self.epsilon, low=0.0, low_open=True, allow_inf=True))
        object.__setattr__(self, "delta", check_real("delta", self.delta, low=0.0, high=1.0, high_open=True))
        check_choice("accounting", self.accounting, ACCOUNTING_MODES)
        check_choice("noise", self.noise, NOISE_KINDS)
        if not isinstance(self.formula, str):
            raise TypeError(f"formula must be a string, got {fmt_value(self.formula)}")
        notes = tuple(self.notes) if isinstance(self.notes, (list, tuple)) else None
        if notes is None or not all(isinstance(n, str) for n in notes):
            raise TypeError(f"notes must be a tuple of strings, got {fmt_value(self.notes)}")
        object.__setattr__(self, "notes", notes)
        object.__setattr__(self, "extras", self.extras if isinstance(self.extras, Extras) else Extras(self.extras))
        for name in ("sigma", "beta", "rho", "noise_multiplier", "per_query_epsilon", "per_query_delta", "sensitivity",
                     "solver_tolerance", "output_scale"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, check_real(name, value, low=0.0, allow_inf=True))

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not fields: a declared scale field reads its extra (None if absent).
        if not name.startswith("_"):
            from .methods.fields import declared_scale_fields

            if name in self.extras or any(f.name == name for f in declared_scale_fields()):
                return self.extras.get(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (infinity becomes the string "inf", notes a list), the extras in the
        place of ``extras`` (the stored shape of a scale: the cache reads it back)."""
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if key == "extras":  # every declared entry (None where absent: the stored shape stays the same)
                from .methods.fields import declared_scale_fields

                out.update({f.name: self.extras.get(f.name) for f in declared_scale_fields()})
                out.update(self.extras)
            else:
                out[key] = value
        out["notes"] = list(self.notes)
        for key, value in out.items():
            if isinstance(value, float) and math.isinf(value):
                out[key] = "inf"
        return out
