"""Frozen, validated descriptions of a leakage measurement and its result rows (plain numbers).

A :class:`LeakageSpec` is one method (or the registry's non-private baseline, the reference) at one
setting, plus the attack's own knobs: how many target worlds and releases per world, how many LiRA reference models,
how many canaries and audit trials. A :class:`LeakageResult` holds one :class:`AttackResult` per
attack (``loss``, ``lira``, ``canary``) and the audit's :class:`~privcore.leakage.stats.EpsilonBound`.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .. import knobs
from ..knobs import DEVICE_CHOICES
from ..engine.specs import DataSpec, compact_data
from ..methods import BASELINE, METHOD_NAMES, get_method
from ..types import ACCOUNTING_MODES, PrivacyBudget, Problem
from ..validation import check_choice, check_int, check_real
from .stats import EpsilonBound, Roc

__all__ = ["LeakageSpec", "AttackResult", "LeakageResult", "ATTACKS", "NON_PRIVATE", "TARGETS", "audit_trials_for",
           "QUICK_AUDIT_FACTOR"]

#: The registry's non-private baseline (epsilon = infinity), attacked as the reference.
NON_PRIVATE = BASELINE.name
#: Attacks reported for every method: loss threshold (Yeom et al. 2018) and offline LiRA (Carlini
#: et al. 2022) on ordinary training examples, and LiRA on the inserted canaries (worst case).
ATTACKS: tuple[str, ...] = ("loss", "lira", "canary")
TARGETS: tuple[str, ...] = (NON_PRIVATE,) + METHOD_NAMES
#: Methods that train once and draw fresh noise for every release audit this many times more trials.
QUICK_AUDIT_FACTOR = 8


def audit_trials_for(method: str, trials: int) -> int:
    """Audit trials for ``method`` when the slow methods (one training per release) get ``trials``:
    the quick ones (and the deterministic non-private model) get QUICK_AUDIT_FACTOR times more, at
    most 1024, so their bound is not limited by the number of trials."""
    slow = get_method(method).trains_per_release
    return int(trials) if slow else max(int(trials), min(1024, QUICK_AUDIT_FACTOR * int(trials)))


@dataclass(frozen=True)
class LeakageSpec:
    """One method at one setting, and the attack's settings.

    The training set of every release has ``n_train = (N + canaries) // 2`` rows: a random half of
    the population (the data set's N training rows plus the canaries); the other half are the
    non-members. ``worlds`` such halves are released ``repeats`` times each (prediction methods
    answer B queries per target per release). ``references`` non-private models on random halves
    (independent of the worlds) serve offline LiRA. The audit releases ``audit_trials`` times on
    each of two neighbouring data sets that differ only in the label of one out-of-distribution canary.
    """

    method: str = METHOD_NAMES[0]
    data: DataSpec = field(default_factory=lambda: DataSpec(augment=False))
    epsilon: float = knobs.default("epsilon")
    delta: float = knobs.default("delta")
    budget: int = knobs.default("budget")
    lam: float = knobs.default("lam")
    teachers: int = knobs.default("teachers")
    batch_size: int = knobs.default("batch_size")
    epochs: int = knobs.default("epochs")
    clip: float = knobs.default("clip")
    learning_rate: float = knobs.default("learning_rate")
    accounting: str = knobs.default("accounting")
    seed: int = knobs.default("seed")
    worlds: int = 2
    repeats: int = 4
    references: int = 16
    canaries: int = 32
    audit_trials: int = 128
    alpha: float = 0.05
    device: str = knobs.default("device")

    def __post_init__(self) -> None:
        check_choice("method", self.method, TARGETS)
        if not isinstance(self.data, DataSpec):
            raise TypeError(f"data must be a DataSpec, got {type(self.data).__name__}")
        budget = PrivacyBudget(self.epsilon, self.delta)
        object.__setattr__(self, "epsilon", budget.epsilon)
        object.__setattr__(self, "delta", budget.delta)
        if self.method == NON_PRIVATE:
            object.__setattr__(self, "epsilon", math.inf)
        object.__setattr__(self, "lam", check_real("lam", self.lam, low=0.0, low_open=True))
        check_choice("accounting", self.accounting, ACCOUNTING_MODES)
        check_choice("device", self.device, DEVICE_CHOICES)
        for name, low, high in (("seed", 0, None), ("worlds", 1, 64), ("repeats", 1, 1000), ("references", 2, 1024),
                                ("canaries", 2, 1000), ("audit_trials", 4, 100_000)):
            value = check_int(name, getattr(self, name), low=low, high=high)
            if type(getattr(self, name)) is not int:  # a NumPy integer: its JSON (the cache key) would fail
                object.__setattr__(self, name, value)
        object.__setattr__(self, "alpha", check_real("alpha", self.alpha, low=0.0, high=1.0, low_open=True,
                                                     high_open=True))
        for name in ("teachers", "batch_size"):  # named themselves, not as Problem's n = max(T, batch)
            knobs.check(name, getattr(self, name))
        checked = Problem(n=max(self.teachers, self.batch_size), lam=self.lam, budget=self.budget,
                          teachers=self.teachers, batch_size=self.batch_size, epochs=self.epochs, clip=self.clip,
                          learning_rate=self.learning_rate)
        for name in ("budget", "teachers", "batch_size", "epochs", "clip", "learning_rate"):
            if type(getattr(self, name)) not in (int, float):
                object.__setattr__(self, name, getattr(checked, name))

    def problem(self, n_train: int, dim: int, classes: int) -> Problem:
        """The Problem every release of this spec is calibrated for (n = the worlds' size).

        T and the DP-SGD batch are clipped to n_train for the methods that do not use them (the
        runner rejects a method that uses them beyond n_train with a clear message).
        """
        return Problem(n=n_train, dim=dim, classes=classes, lam=self.lam, budget=self.budget,
                       teachers=min(self.teachers, n_train), batch_size=min(self.batch_size, n_train),
                       epochs=self.epochs, clip=self.clip,
                       learning_rate=self.learning_rate)

    def point(self) -> dict[str, Any]:
        """The cache identity (everything but the device; a result is reused on any device)."""
        d = asdict(self)
        d["data"] = compact_data(d["data"])
        d.pop("device")
        d["epsilon"] = "inf" if math.isinf(self.epsilon) else self.epsilon
        d["kind"] = "leakage-v2"  # v2: one audit trial is one release (v1 grouped B streams or students)
        d["code"] = get_method(self.method).code_version  # editing the method re-keys its audits
        return d

    def to_json(self) -> str:
        d = asdict(self)
        d["data"] = compact_data(d["data"])
        d["epsilon"] = "inf" if math.isinf(self.epsilon) else self.epsilon
        return json.dumps(d, sort_keys=True)


@dataclass(frozen=True)
class AttackResult:
    """One attack on one method: its ROC and summaries (see :class:`~privcore.leakage.stats.Roc`)."""

    attack: str
    method: str
    roc: Roc

    @property
    def auc(self) -> float:
        return self.roc.auc

    def to_dict(self) -> dict[str, Any]:
        return {"attack": self.attack, "method": self.method, "roc": self.roc.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AttackResult":
        return cls(d["attack"], d["method"], Roc.from_dict(d["roc"]))


def _num(v: Any) -> Any:
    return "inf" if isinstance(v, float) and math.isinf(v) else v


def _unnum(v: Any) -> Any:
    return math.inf if v == "inf" else v


@dataclass(frozen=True)
class LeakageResult:
    """Accuracy, claimed (eps, delta), every attack's ROC and the audit's epsilon bound for one method."""

    method: str
    label: str
    family: str
    releases: str
    epsilon: float
    delta: float
    accounting: str
    accuracy: float
    n_train: int
    attacks: tuple[AttackResult, ...]
    audit: EpsilonBound | None
    noise: dict[str, Any]
    seconds: float
    device: str
    cached: bool = False
    notes: tuple[str, ...] = ()

    def attack(self, name: str) -> AttackResult:
        """The result of attack ``name`` (one of :data:`ATTACKS`)."""
        for a in self.attacks:
            if a.attack == name:
                return a
        raise KeyError(f"no attack {name!r}; have {[a.attack for a in self.attacks]}")

    def summary(self) -> dict[str, Any]:
        """One flat row (CSV/JSON/table): accuracy, claimed eps, eps lower bound, AUC and TPR per attack."""
        row: dict[str, Any] = {"method": self.method, "accuracy": self.accuracy, "epsilon": _num(self.epsilon),
                               "delta": self.delta, "accounting": self.accounting, "n_train": self.n_train}
        if self.audit is not None:
            row.update(eps_lower=_num(self.audit.lower), eps_estimate=_num(self.audit.estimate),
                       eps_upper=_num(self.audit.upper), eps_confidence=self.audit.confidence)
        for a in self.attacks:
            row[f"{a.attack}_auc"] = a.roc.auc
            row[f"{a.attack}_tpr_at_0.1%"] = a.roc.tpr_at_0_1
            row[f"{a.attack}_tpr_at_1%"] = a.roc.tpr_at_1
            row[f"{a.attack}_advantage"] = a.roc.advantage
        row["seconds"] = self.seconds
        row["cached"] = self.cached
        return row

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["attacks"] = [a.to_dict() for a in self.attacks]
        out["audit"] = None if self.audit is None else self.audit.to_dict()
        out["notes"] = list(self.notes)
        out["epsilon"] = _num(self.epsilon)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any], cached: bool | None = None) -> "LeakageResult":
        kw = dict(d)
        kw["attacks"] = tuple(AttackResult.from_dict(a) for a in d["attacks"])
        kw["audit"] = None if d.get("audit") is None else EpsilonBound.from_dict(d["audit"])
        kw["notes"] = tuple(d.get("notes", ()))
        kw["epsilon"] = _unnum(d["epsilon"])
        if cached is not None:
            kw["cached"] = cached
        return cls(**kw)
