"""What a deep-model run computes (:class:`DeepSpec`), its presets and its typed rows (:class:`DeepRow`).

A spec is one data set and model, the methods, epsilons and budgets B, and the training settings of
DP-SGD and of the T teachers. It expands into rows (method, epsilon, B). DP-SGD's accuracy does not
depend on B (the model is private), so one DP-SGD training per epsilon serves every B; the teachers
are trained once per spec and every (method, epsilon, B) of the vote methods reuses their votes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from .. import knobs, limits
from ..types import Extras, PrivacyBudget
from ..validation import check_choice, check_int, check_real
from .data import DEEP_DATASETS

if TYPE_CHECKING:  # pragma: no cover
    from ..methods.fields import ResultField

#: Names accepted by :func:`privcore.deep.models.build_model` (and the CLI's ``--model``).
MODEL_NAMES: tuple[str, ...] = ("small-cnn", "resnet20")

__all__ = ["DeepSpec", "DeepRow", "PRESETS", "FIG7_EPSILONS", "FIG7_BUDGETS", "DEEP_SCHEMA", "NOISE_SAMPLER", "CLIPPED_SUM", "figure7_specs",
           "row_fields", "vote_numbers", "SECURE_FORMULA",
           "SAMPLER_FORMULA"]

#: Bump when a change alters what a stored deep result means.
DEEP_SCHEMA = 1
#: The samplers of the private points (DP-SGD trainings and votes): 2 is privcore.tails (noise whose tails are not
#: cut off, Poisson batches at a rate never above q); points without it came from torch's samplers and are not
#: served (nor is a checkpoint of theirs resumed). The teachers and the reference add no noise: their keys stay.
NOISE_SAMPLER = 2
#: DP-SGD's clipped sum: 2 is the sum whose rounding is bounded (privcore.roundoff: float64 norms, float32 partial
#: sums of at most SUM_CHUNK examples added in float64, each step clipped to C / (1 + eta b)). Trainings without
#: it are not served nor resumed.
CLIPPED_SUM = 2
#: Figure 7 of the paper: (a) accuracy against epsilon at B = 10, (b) against B at epsilon = 1; delta = 1e-5.
FIG7_EPSILONS: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0)
FIG7_BUDGETS: tuple[int, ...] = (1, 3, 10, 30, 100, 300, 1000)
FIG7_B, FIG7_EPS = 10, 1.0
#: The end of a secure row's formula (``DeepSpec.secure_noise``): its numbers cannot be reproduced.
#: Part of every private row's formula since its noise comes from privcore.tails (:data:`NOISE_SAMPLER`): a
#: shipped row without it was drawn with torch's samplers (tails cut off; docs/limits.md).
SAMPLER_FORMULA = "; noise: privcore.tails (tails not cut off)"
SECURE_FORMULA = ("; secure noise: drawn from a fresh secret seed of the operating system's entropy, never shown "
                  "or stored (the seed fixed only the data, the teachers and the initialisation)")


@dataclass(frozen=True)
class DeepSpec:
    """One deep-model experiment. ``n_train``/``n_test`` None: the whole data set."""

    dataset: str = "fashion-mnist"
    model: str = "small-cnn"
    methods: tuple[str, ...] | None = None  # None: every method the deep models support
    epsilons: tuple[float, ...] = FIG7_EPSILONS
    budgets: tuple[int, ...] = (FIG7_B,)
    delta: float = 1e-5
    accounting: str = "corrected"
    n_train: int | None = 5000
    n_test: int | None = 2000
    # DP-SGD
    epochs: int = 4
    batch_size: int = 250
    lr: float = 0.5
    clip: float = 1.0
    # teachers (non-private, on disjoint parts)
    teachers: int = 16
    teacher_epochs: int = 10
    teacher_batch: int = 64
    teacher_lr: float = 0.05
    # shared
    momentum: float = 0.9
    augment: bool = False
    amp: bool = False
    repeats: int = 4
    seed: int = 0
    device: str = "auto"
    #: Most examples per clipping call (a memory bound; the same result up to float rounding). A Poisson
    #: batch larger than it is split, and each call has a fixed cost, most of a GPU step at the paper's
    #: batch (docs/benchmarks.md): a batch of 612 split as 600 + 12 pays it twice. The default covers
    #: the paper's batch of 600 with its Poisson spread (600 + 6 x 24.4 < 1,024).
    physical_batch: int = 1024
    #: Also train one non-private model on all the training images (the teachers' settings): the
    #: dashed reference line of the figures.
    baseline: bool = True
    #: Release mode: DP-SGD's training and the votes' noise draw from a fresh secret seed of the operating
    #: system (:func:`privcore.device.secure_seed`), never shown or stored; their rows are neither read from
    #: nor written to the cache, and DP-SGD keeps no checkpoint (it would hold the secret generators). The
    #: teachers and the non-private reference add no noise: they still come from ``seed`` and the cache.
    secure_noise: bool = False

    def __post_init__(self) -> None:
        from .votes import deep_methods

        check_choice("dataset", self.dataset, DEEP_DATASETS)
        check_choice("model", self.model, MODEL_NAMES)
        for name in ("methods", "epsilons", "budgets"):  # "dpsgd" was read letter by letter, 1.0 failed in tuple()
            value = getattr(self, name)
            if not (value is None and name == "methods") and (isinstance(value, (str, bytes))
                                                                or not isinstance(value, (list, tuple))):
                raise TypeError(f"{name} must be a list or tuple, got {value!r} ({type(value).__name__})")
        methods = deep_methods() if self.methods is None else tuple(self.methods)
        if not methods:
            raise ValueError("methods must name at least one of " + ", ".join(deep_methods()))
        for m in methods:
            check_choice("method", m, deep_methods())
        object.__setattr__(self, "methods", tuple(dict.fromkeys(methods)))  # a repeated name counts once
        eps = tuple(self.epsilons)
        if not eps:
            raise ValueError("epsilons must list at least one value > 0")
        for e in eps:
            try:  # its own type checks; its range "(0, inf]" offered inf, which a deep run refuses
                finite = math.isfinite(PrivacyBudget(e, 0.0).epsilon)
            except ValueError:
                finite = False
            if not finite:
                raise ValueError(f"epsilon must be a finite number > 0, got {e!r}")
        object.__setattr__(self, "epsilons", tuple(dict.fromkeys(float(e) for e in eps)))
        budgets = tuple(self.budgets)
        if not budgets:
            raise ValueError("budgets must list at least one B >= 1")
        object.__setattr__(self, "budgets", tuple(dict.fromkeys(knobs.check("budget", b) for b in budgets)))
        check_real("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_choice("accounting", self.accounting, knobs.ACCOUNTING_MODES)
        for name in ("n_train", "n_test"):
            if getattr(self, name) is not None:
                self._keep(name, check_int(name, getattr(self, name), low=10))
        for name in ("epochs", "batch_size", "teachers", "teacher_epochs", "teacher_batch", "repeats",
                     "physical_batch"):
            self._keep(name, check_int(name, getattr(self, name), low=1))
        # The limits every command shares (privcore.limits): passes over the data, vote samplings, points.
        for name in ("epochs", "teacher_epochs"):
            limits.check_epochs(name, getattr(self, name))
        knobs.check("repeats", self.repeats)
        for name in ("n_train", "n_test"):
            if getattr(self, name) is not None:
                limits.check_n(name, getattr(self, name))
        limits.check_points(len(self.methods) * len(self.epsilons) * len(self.budgets),
                            f"{len(self.methods)} method(s) x {len(self.epsilons)} epsilon(s) x {len(self.budgets)} "
                            "budget(s)")
        self._keep("seed", check_int("seed", self.seed, low=0))
        for name in ("lr", "teacher_lr"):
            self._keep(name, check_real(name, getattr(self, name), low=0.0, low_open=True))
        self._keep("clip", knobs.check("clip", self.clip))  # 1e-8 to 1e6: float32 stays in range (roundoff)
        self._keep("momentum", check_real("momentum", self.momentum, low=0.0, high=1.0, high_open=True))
        knobs.check("device", self.device)
        for name in ("augment", "amp", "baseline", "secure_noise"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")

    def _keep(self, name: str, checked: Any) -> None:
        """Store the checked value in place of a NumPy scalar (whose JSON would fail in the cache keys);
        plain numbers are kept as given, so existing keys do not change."""
        if type(getattr(self, name)) not in (int, float):
            object.__setattr__(self, name, checked)

    def common_point(self) -> dict[str, Any]:
        return {"schema": DEEP_SCHEMA, "dataset": self.dataset, "model": self.model, "n_train": self.n_train,
                "n_test": self.n_test, "momentum": self.momentum, "augment": self.augment, "amp": self.amp,
                "seed": self.seed}

    def dpsgd_point(self, method: str, epsilon: float) -> dict[str, Any]:
        """Identity of one DP-SGD training (no B: the released model serves every prediction)."""
        return {**self.common_point(), "kind": "dpsgd", "method": method, "epsilon": epsilon, "delta": self.delta,
                "accounting": self.accounting, "epochs": self.epochs, "batch_size": self.batch_size, "lr": self.lr,
                "clip": self.clip, "sampler": NOISE_SAMPLER, "clipped_sum": CLIPPED_SUM}

    def teacher_point(self) -> dict[str, Any]:
        """Identity of the T teachers (non-private training, shared by every vote method)."""
        return {**self.common_point(), "kind": "teachers", "teachers": self.teachers, "epochs": self.teacher_epochs,
                "batch_size": self.teacher_batch, "lr": self.teacher_lr}

    def baseline_point(self) -> dict[str, Any]:
        """Identity of the non-private reference model (one model, the teachers' settings, all images)."""
        return {**self.teacher_point(), "kind": "baseline", "teachers": 1}

    def vote_point(self, method: str, epsilon: float, budget: int) -> dict[str, Any]:
        return {**self.teacher_point(), "kind": "votes", "method": method, "epsilon": epsilon, "delta": self.delta,
                "budget": budget, "accounting": self.accounting, "repeats": self.repeats, "sampler": NOISE_SAMPLER}

    def stated(self, formula: str) -> str:
        """A private row's formula, with :data:`SAMPLER_FORMULA`, and :data:`SECURE_FORMULA` when its noise is
        secure."""
        return formula + SAMPLER_FORMULA + (SECURE_FORMULA if self.secure_noise else "")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


#: ``cpu-small``: the small CNN on 5,000 Fashion-MNIST images (about a minute on one CPU core for
#: Figure 7). ``paper``: the paper's Section 4.3 settings (ResNet-20, all images, DP-SGD 100
#: epochs, teachers 500 epochs, batch 600, lr 0.1 divided by 10 three times, flips and crops):
#: a GPU job.
PRESETS: dict[str, dict[str, Any]] = {
    "cpu-small": dict(model="small-cnn", n_train=5000, n_test=2000, epochs=4, batch_size=250, lr=0.5, clip=1.0,
                      teachers=16, teacher_epochs=10, teacher_batch=64, teacher_lr=0.05, augment=False),
    "paper": dict(model="resnet20", n_train=None, n_test=None, epochs=100, batch_size=600, lr=0.1, clip=1.0,
                  teachers=16, teacher_epochs=500, teacher_batch=600, teacher_lr=0.1, augment=True),
}


def figure7_specs(preset: str = "cpu-small", **overrides: Any) -> tuple[DeepSpec, DeepSpec]:
    """The two sweeps of Figure 7: (a) epsilons at B = 10, (b) budgets at epsilon = 1."""
    check_choice("preset", preset, tuple(PRESETS))
    base = DeepSpec(**{**PRESETS[preset], **overrides})
    a = replace(base, epsilons=FIG7_EPSILONS, budgets=(FIG7_B,))
    b = replace(base, epsilons=(FIG7_EPS,), budgets=FIG7_BUDGETS)
    return a, b


def row_fields() -> tuple[ResultField, ...]:
    """The methods' own numbers a deep row carries (:mod:`privcore.methods.fields`), in registry order:
    the answered share where a method the deep models offer may abstain (the votes measure it), and
    the result columns those methods copy from their noise scale (``on_scale``). Fields the deep
    pipeline does not measure (e.g. PATE's data-dependent epsilon) are not columns of its rows."""
    from ..methods import get_method
    from ..methods.fields import ANSWERED_FRACTION
    from .votes import deep_methods

    offered = [get_method(m) for m in deep_methods()]
    out = {ANSWERED_FRACTION.name: ANSWERED_FRACTION} if any(m.abstains for m in offered) else {}
    for m in offered:
        for f in m.result_fields:
            if f.on_scale:
                out.setdefault(f.name, f)
    return tuple(out.values())


def vote_numbers(method: Any, scale: Any, answered: float) -> dict[str, float | int]:
    """A vote row's own numbers (keys of :func:`row_fields`): ``answered`` (the share of queries answered)
    where ``method`` may abstain, and its ``on_scale`` result columns read from ``scale``."""
    from ..methods.fields import ANSWERED_FRACTION

    values = scale.to_dict()
    out = {f.name: values.get(f.name) for f in method.result_fields if f.on_scale}
    if method.abstains:
        out[ANSWERED_FRACTION.name] = answered
    return {k: v for k, v in out.items() if v is not None}


def _baseline_name() -> str:
    from ..methods import BASELINE

    return BASELINE.name


@dataclass(frozen=True)
class DeepRow:
    """Test accuracy of one method at one (epsilon, B) for one deep model; plain numbers only.

    ``extras``: the method's own numbers (:func:`row_fields`, e.g. the answered share of a method that may
    abstain and the threshold of its test), columns of their own in :meth:`to_dict` (:meth:`columns`): the
    measured ones after ``cached``, those of the noise scale after ``beta``, where the shipped Figure 7
    files have them. Stored and shipped rows are these flat records.
    """

    dataset: str
    model: str
    method: str
    epsilon: float
    delta: float
    budget: int
    teachers: int | None
    accounting: str
    n_train: int
    n_test: int
    accuracy_mean: float
    accuracy_std: float
    repeats: int
    seconds: float
    device: str
    cached: bool = False
    noise_multiplier: float | None = None
    sigma: float | None = None
    beta: float | None = None
    steps: int | None = None
    formula: str = ""
    extras: Mapping[str, float | int | None] = field(default_factory=Extras)  # stored as an Extras

    def __post_init__(self) -> None:
        for name in ("dataset", "model", "method", "accounting", "device", "formula"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a string")
        for name in ("accuracy_mean", "accuracy_std"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
                raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")
        for name in ("epsilon", "delta", "seconds", "noise_multiplier", "sigma", "beta"):
            v = getattr(self, name)
            if name == "epsilon" and v == math.inf and self.method == _baseline_name():
                continue  # the non-private reference's rows: epsilon = inf, as the sweeps' baseline
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                                  or v < 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        for name in ("budget", "n_train", "n_test", "repeats", "teachers", "steps"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        if not isinstance(self.cached, bool):
            raise TypeError("cached must be True or False")
        if not isinstance(self.extras, Mapping):
            raise TypeError(f"extras must be a mapping of the methods' own numbers, got {self.extras!r}")
        own = {f.name: f for f in row_fields()}
        unknown = sorted(set(self.extras) - set(own))
        if unknown:
            raise ValueError(f"unexpected fields {unknown}")
        for name, value in self.extras.items():
            why = own[name].check(value)
            if why:
                raise ValueError(f"{why}, got {value!r}")
        object.__setattr__(self, "extras", Extras({k: v for k, v in self.extras.items() if v is not None}))

    @staticmethod
    def columns() -> tuple[str, ...]:
        """The record's columns: the core fields with :func:`row_fields` in place (measured ones after
        ``cached``, those of the noise scale after ``beta``)."""
        own = row_fields()
        cols: list[str] = []
        for name in _CORE:
            cols.append(name)
            if name == "cached":
                cols += [f.name for f in own if not f.on_scale]
            elif name == "beta":
                cols += [f.name for f in own if f.on_scale]
        return tuple(cols)

    def to_dict(self) -> dict[str, Any]:
        """The flat record (:meth:`columns`; a method's own number it lacks reads None)."""
        core = {name: getattr(self, name) for name in _CORE}
        return {name: core[name] if name in core else self.extras.get(name) for name in self.columns()}

    def __getattr__(self, name: str) -> Any:
        # Thin read-only alias: ``row.<field>`` for one of row_fields() (None where the row has none).
        if not name.startswith("_") and name != "extras" and any(f.name == name for f in row_fields()):
            return self.extras.get(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def from_dict(cls, d: Any, cached: bool = False) -> "DeepRow":
        """A row from its flat record (:meth:`to_dict`, the cache, a shipped CSV's typed columns)."""
        if not isinstance(d, dict):
            raise TypeError("a deep result must be an object")
        own = {f.name for f in row_fields()}
        unknown = set(d) - set(_CORE) - own
        if unknown:
            raise ValueError(f"unexpected fields {sorted(unknown)}")
        core = {k: v for k, v in d.items() if k in _CORE}
        return cls(**{**core, "cached": cached}, extras={k: v for k, v in d.items() if k in own and v is not None})


#: The row's own columns, the same for every method (the dataclass fields but ``extras``).
_CORE: tuple[str, ...] = tuple(f.name for f in fields(DeepRow) if f.name != "extras")


def check_row(value: Any) -> str | None:
    """None when ``value`` reads back as a :class:`DeepRow` (the cache's validator), else why not."""
    try:
        DeepRow.from_dict(value)
    except (TypeError, ValueError) as err:
        return f"not a deep-model result ({str(err)[:100]})"
    return None
