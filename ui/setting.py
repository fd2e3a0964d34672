"""The setting of every knob, what can run at it, and its sweep spec: plain Python, no Streamlit.

:class:`SidebarSettings` (data set, repetitions, accounting, device) and :class:`Setting` (every
other knob) describe what the user chose; :func:`setting_problems` says in plain words what is
wrong or extreme about it before anything runs; :func:`make_spec` turns it into privcore's
:class:`~privcore.engine.specs.SweepSpec` and :func:`setting_problem` into a
:class:`~privcore.types.Problem`. Defaults come from :mod:`privcore.knobs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from privcore.knobs import curve_epsilons, knob
from privcore.methods import get_method

from .figures import format_number

if TYPE_CHECKING:  # imported where used: a page that only reads the setting loads no engine
    from privcore.engine.specs import DataSpec, SweepSpec
    from privcore.types import Problem

__all__ = [
    "DataInfo", "build_data_info", "SidebarSettings", "Setting", "setting_from_values", "method_knobs",
    "available_methods", "min_train_size", "setting_problems", "setting_caveats", "augmentation_caveat", "make_spec", "explore_specs",
    "setting_problem", "curve_epsilons", "n_options", "checked_n", "nearest", "with_value", "NEIGHBOURS_NOTE",
    "RELEASE_MODE_NOTE", "DATASET_LABELS",
]

NEIGHBOURS_NOTE = ("Neighbouring datasets differ by replacing one example; λ is the average-form L2 weight, "
                   "the same for every method that regularises (DP-SGD trains without it). The teacher-vote "
                   "methods train each teacher on its own part alone (its own basis, nothing shared), so one "
                   "changed example changes one teacher.")
#: The release mode, said on the pages that teach and calibrate (docs/spec.md, "Release mode").
RELEASE_MODE_NOTE = ("The dashboard draws its noise from a public seed, so every result can be reproduced: right for "
                     "exploring, not for publishing, since anyone who knows the seed can recompute the noise. A release "
                     "you publish needs secure noise (sweep --secure-noise, SweepSpec(secure_noise=True); Copy as code "
                     "writes it): its noise comes from the operating system's entropy, and its seed is never shown or "
                     "stored.")
DATASET_LABELS = {
    "mnist-5k": "MNIST 5k (bundled, 4,000 train)",
    "digits": "Digits 8x8 (scikit-learn)",
    "synthetic": "Synthetic (10-class Gaussian mixture)",
    "mnist": "MNIST full (downloaded once)",
    "file": "Your file (CSV/NPZ upload)",
}


@dataclass(frozen=True)
class DataInfo:
    """What the controls need to know about the selected data set (full training split)."""

    name: str
    n_train: int
    n_test: int
    dim: int
    classes: int
    notes: tuple[str, ...] = ()
    image: bool = False
    #: Training rows of each class 0..C-1 (full split), so that N under a class filter is the true one.
    class_counts: tuple[int, ...] = ()

    def train_rows(self, classes: int | None = None) -> int:
        """Training rows the loader keeps with labels ``0..classes-1`` (all of them for None)."""
        if classes is None or not self.class_counts or classes >= len(self.class_counts):
            return self.n_train
        return int(sum(self.class_counts[: max(int(classes), 0)]))


def build_data_info(name: str, data_file: str | None = None, preprocess: str = "none",
                    label_column: str | None = None, labels: str | None = None) -> DataInfo:
    """Sizes of a data set, uncached (the sidebar caches it per process)."""
    from privcore.data import load_dataset

    extra = dict(preprocess=preprocess, label_column=label_column, labels=labels) if name == "file" else {}
    ds = load_dataset(name, data_file=data_file, **extra)
    import numpy as np

    counts = tuple(int(c) for c in np.bincount(np.asarray(ds.y_train), minlength=int(ds.classes)))
    return DataInfo(name, int(ds.n), int(ds.x_test.shape[0]), int(ds.dim), int(ds.classes), tuple(ds.notes),
                    name in ("mnist-5k", "mnist", "digits"), counts)


@dataclass(frozen=True)
class SidebarSettings:
    """The shared sidebar's choices. ``info`` is None (and ``error`` set) when the data failed to load."""

    dataset: str
    data_file: str | None
    repeats: int
    accounting: str
    device: str
    info: DataInfo | None
    error: str | None = None
    #: A user file's declared preprocessing (privcore.data.preprocess text form) and label column.
    preprocess: str = "none"
    label_column: str | None = None
    #: How each method's knobs are set: "configured", "held-out" or "private" (privcore.engine.tuned).
    tuning: str = "configured"
    #: A user file's declared label set (comma-separated; privcore.data.labels), None: read off the file.
    labels: str | None = None

    def data_spec(self, *, n: int | None = None, dim: int | None = None, classes: int | None = None,
                  augment: bool = False) -> DataSpec:
        """A :class:`privcore.engine.specs.DataSpec` for this data set with optional transforms."""
        from privcore.engine.specs import DataSpec

        own = self.dataset == "file"
        return DataSpec(name=self.dataset, data_file=self.data_file if own else None,
                        n=n, dim=dim, classes=classes, augment=augment, preprocess=self.preprocess if own else "none",
                        label_column=self.label_column if own else None, labels=self.labels if own else None)


def _first(name: str) -> Any:
    return knob(name).first_view


@dataclass(frozen=True)
class Setting:
    """One setting of every knob besides the data set and the sidebar (defaults: the first view)."""

    eps: float = _first("epsilon")
    delta: float = _first("delta")
    budget: int = _first("budget")
    n: int | None = _first("n")
    teachers: int = _first("teachers")
    lam: float | str = _first("lam")
    dim: int | None = _first("dim")
    classes: int | None = _first("classes")
    clip: float = _first("clip")
    epochs: int = _first("epochs")
    batch_size: int = _first("batch_size")
    learning_rate: float = _first("learning_rate")
    methods: tuple[str, ...] = ()
    augment: bool = False

    def effective_n(self, info: DataInfo | None) -> int | None:
        """The N the training set will have: the chosen N, else every training row of the kept classes."""
        if self.n is not None:
            return self.n
        return info.train_rows(self.classes) if info is not None else None


def setting_from_values(v: Mapping[str, Any]) -> Setting:
    """The :class:`Setting` of URL-state values (:data:`ui.state.FIELDS` names)."""
    return Setting(eps=float(v["eps"]), delta=float(v["delta"]), budget=int(v["budget"]), n=v["n"],
                   teachers=int(v["teachers"]), lam=v["lam"], dim=v["dim"], classes=v["classes"], clip=float(v["clip"]),
                   epochs=int(v["epochs"]), batch_size=int(v["batch_size"]), learning_rate=float(v["lr"]),
                   methods=tuple(v["methods"]),
                   augment=bool(v["augment"]))


# ---------------------------------------------------------------- what can run

def method_knobs(s: Setting) -> dict[str, Any]:
    """The setting's values that methods' rules read (keys as in privcore's Problem, plus delta)."""
    return {"delta": float(s.delta), "teachers": int(s.teachers), "batch_size": int(s.batch_size)}


def available_methods(s: Setting, n: int | None, methods: Sequence[str] | None = None) -> tuple[str, ...]:
    """The chosen methods that can run at this setting (each method's ``unavailable`` rule)."""
    knobs = method_knobs(s)
    return tuple(m for m in (methods if methods is not None else s.methods) if get_method(m).unavailable(knobs, n) is None)


def min_train_size(s: Setting) -> int:
    """The smallest N every chosen method can be trained on (at least 10)."""
    knobs = method_knobs(s)
    return max([10] + [get_method(m).min_train_size(knobs) for m in s.methods])


def needs_delta_text(labels: Sequence[str]) -> str:
    """One sentence for the methods (their labels) that have no guarantee at δ = 0."""
    one = len(labels) == 1
    return (f"{and_list(list(labels))} {'needs' if one else 'need'} δ > 0 and {'is' if one else 'are'} left out at δ = 0 "
            f"(pure ε-DP); δ = 1e-5, for example, brings {'it' if one else 'them'} back.")


def setting_problems(side: SidebarSettings, s: Setting) -> tuple[list[str], list[str]]:
    """(errors, warnings) about a setting, in plain words, before anything runs.

    Errors make the spec invalid (no method, or none that can run); warnings flag extreme choices
    and the methods left out by their own rules (e.g. a method needing δ > 0, T > N, batch > N).
    """
    errors: list[str] = []
    warnings: list[str] = []
    n = s.effective_n(side.info)
    if not s.methods:
        errors.append("Choose at least one method.")
    knobs = method_knobs(s)
    need_delta = []  # one line for every method that needs δ > 0 (in words, not the CLI's message)
    for name in s.methods:  # each method's own rules: it is left out, the others still run
        entry = get_method(name)
        if not entry.supports(s.delta):
            need_delta.append(entry.label)
            continue
        why = entry.unavailable(knobs, n)
        if why:
            warnings.append(f"{entry.label} is left out at this setting: {why}.")
        else:  # warnings about a method that runs, at this setting (none for one left out)
            warnings.extend(entry.setting_warnings(knobs, n))
    if need_delta:
        warnings.insert(0, needs_delta_text(need_delta))
    if s.methods and not available_methods(s, n):
        errors.append("None of the chosen methods can run at this setting (see the notes above).")
    if n is not None and s.delta > 0 and s.delta >= 1.0 / n:
        smaller = 10.0 ** math.floor(math.log10(0.01 / n))  # a power of ten at most 1/(100 N)
        warnings.append(f"δ = {format_number(s.delta)} is not small compared with 1/N = {format_number(1.0 / n)}: "
                        f"such a δ allows releasing a few training examples outright. Use δ ≪ 1/N (e.g. "
                        f"{format_number(smaller)}).")
    if s.eps < 0.05:
        warnings.append(f"ε = {format_number(s.eps)} is extremely small: expect every method near chance level.")
    if s.eps > 100:
        power = (format_number(math.exp(s.eps), 2) if s.eps <= 700
                 else f"10^{math.floor(s.eps / math.log(10)):,}")  # exp(5000) overflows: its power of ten
        warnings.append(f"ε = {format_number(s.eps)} is extreme: e^ε ≈ {power}, the guarantee means little at this level.")
    if s.lam == "auto":
        warnings.append("λ = auto chooses λ privately: 10 % of ε (and δ) pays for a noisy choice among 6 candidates "
                        "trained on 80 % of the data and scored on the rest; the release gets the other 90 %. It is "
                        "about 6× slower.")
    warnings.extend(data_caveats(side, s))
    return errors, warnings


def data_caveats(side: SidebarSettings, s: Setting) -> list[str]:
    """Where the data, not the method, make the guarantee differ from the header: augmentation (group
    privacy: about k epsilon for a real example shaping k rows) and PCA fitted on the private training split."""
    out: list[str] = []
    if s.n is not None and side.info is not None and s.n > side.info.train_rows(s.classes):
        out.append(augmentation_caveat(side.info.train_rows(s.classes), s.n, s.eps))
    if s.dim is not None and side.info is not None and s.dim < side.info.dim:
        out.append(f"D = {s.dim} uses PCA fitted on the training split: a data-dependent step that the privacy "
                   "guarantee does not cover (fit it on public data to include it).")
    # the loader's notes say so too, but with a server path; a settings stand-in may lack dataset and labels
    if getattr(side, "dataset", None) == "file" and side.info is not None:
        if not getattr(side, "labels", None):
            out.append("The label set was read off your file: a data-dependent step (a label no other row has adds a "
                       "class) that the privacy guarantee does not cover; declare the labels in the sidebar to "
                       "include it.")
    if s.classes is not None and side.info is not None and s.classes < side.info.classes:
        out.append(f"C = {s.classes} drops rows by their label, so N depends on the labels: a step that the "
                   "privacy guarantee does not cover (it covers the data set of the classes kept).")
    return out


def setting_caveats(side: SidebarSettings, s: Setting) -> list[str]:
    """The standing caveats (each method's ``caveats``: true whatever the setting) of the chosen
    methods that run at this setting, once each; :func:`setting_problems` has the warnings."""
    knobs = method_knobs(s)
    n = s.effective_n(side.info)
    out: list[str] = []
    for name in s.methods:
        entry = get_method(name)
        if entry.supports(s.delta) and entry.unavailable(knobs, n) is None:
            out.extend(c for c in entry.caveats if c not in out)
    return out


def data_words(side: SidebarSettings) -> str:
    """The data set in words for a privacy statement: its name, or an uploaded file's name as it was sent."""
    if side.dataset == "file" and side.data_file:
        from .uploads import display_name

        return f"of the uploaded file {display_name(side.data_file)}"
    return f"of the {side.dataset} data set"


def and_list(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def augmentation_caveat(n_real: int, n: int, eps: float) -> str:
    """What growing N = ``n`` from ``n_real`` real examples by deformed copies means for privacy."""
    from privcore.data.augment import rows_per_original

    k = rows_per_original(n_real, n)
    return (f"N = {n:,} exceeds the {n_real:,} real training examples: the rest are deformed copies "
            f"(augmentation), slow to build and not independent. Each real image shapes up to k = {k} rows, and "
            f"the guarantee is per row: for the person behind an image it holds only by group privacy, at "
            f"ε = {format_number(k * eps)} instead of {format_number(eps)} (k rows cost kε, and δ grows to "
            "k·e^((k−1)ε)·δ). The paper's InfiMNIST study shares this caveat.")


# ---------------------------------------------------------------- specs and problems

#: What a tuned comparison's rows are, said once above its results (privcore.engine.tuned).
TUNING_NOTES = {
    "held-out": ("Each method at the best point of its own knob grid, picked on the test queries: an optimistic, "
                 "non-private upper bound of what tuning gives (no privacy guarantee covers the choice). The dashed "
                 "non-private line is the best over its own λ grid, picked the same way."),
    "private": ("Each method at the point of its own knob grid that a private selection picked (report noisy max "
                "over one private release per candidate on 80 % of the training data, scored on the other 20 %); "
                "the selection spends 10 % of ε and δ, the release the rest: ε and δ are the totals. Sparse vector and "
                "the PATE student run as configured: their answers couple queries, so no private selection covers "
                "them. For the prediction methods each candidate answers every validation query on its share of "
                "the selection's budget (ε / 10 split over the grid), so the scores are mostly noise and the pick "
                "is close to random: a privately tuned prediction method can land below its configured knobs. "
                "The training methods' candidates are each released at ε / 10 split over the grid too (ε / 60 for "
                "six λ values), a budget at which strong regularisation wins: the pick suits that budget, not the "
                "release's 0.9 ε, so at large ε a privately tuned curve can stay below the configured one. Private "
                "tuning costs this much; the choice on the test queries shows what the knobs could give. The dashed "
                "non-private line is the best over its own λ grid, picked on the test queries (it is no private "
                "result, only the ceiling)."),
}


def make_spec(side: SidebarSettings, s: Setting, *, epsilons: Sequence[float], vary: str | None = None,
              values: Sequence[Any] = (), methods: Sequence[str] | None = None, baseline: bool = True,
              seed: int = 0) -> SweepSpec:
    """The :class:`SweepSpec` of a setting. Raises ``ValueError``/``TypeError`` like privcore does."""
    from privcore.engine.specs import SweepSpec

    meths = tuple(methods if methods is not None else s.methods)
    if vary not in ("delta", "n"):  # methods that cannot run here are left out (setting_problems says why)
        meths = available_methods(s, s.effective_n(side.info), meths) or meths
    elif vary == "n":  # N varies, delta does not: methods without a guarantee at this delta are left out too
        from privcore.methods import get_method

        meths = tuple(m for m in meths if get_method(m).supports(float(s.delta))) or meths
    augment = bool(s.augment or (s.n is not None and side.info is not None and s.n > side.info.train_rows(s.classes)))
    return SweepSpec(
        data=side.data_spec(n=s.n, dim=s.dim, classes=s.classes, augment=augment),
        methods=meths, epsilons=tuple(float(e) for e in epsilons), delta=float(s.delta), budget=int(s.budget),
        lam=s.lam, teachers=int(s.teachers), batch_size=int(s.batch_size), epochs=int(s.epochs), clip=float(s.clip),
        learning_rate=float(s.learning_rate), accounting=side.accounting, repeats=int(side.repeats), seed=seed, device=side.device, vary=vary,
        values=tuple(values), baseline=baseline, tuning=side.tuning)


def explore_specs(info: DataInfo, values: dict[str, Any] | None = None) -> list[SweepSpec]:
    """What the Explore page computes first for these control values (default: every default):
    the current setting, then the accuracy-vs-ε curve."""
    from .state import DEFAULTS

    v = {**DEFAULTS, **(values or {})}
    side = SidebarSettings(v["dataset"], None, int(v["repeats"]), v["accounting"], v["device"], info)
    s = setting_from_values(v)
    return [make_spec(side, s, epsilons=(s.eps,)),
            make_spec(side, s, epsilons=curve_epsilons(float(v["eps_min"]), float(v["eps_max"]), current=s.eps))]


#: The Who wins page's axes: B of its ε x B map, and the N of its ε x N map (those up to the real rows, and N itself).
WHO_WINS_B = (1, 10, 100, 1000, 10000)
WHO_WINS_N = (500, 1000, 2000, 4000)


def who_wins_specs(info: DataInfo, values: dict[str, Any] | None = None) -> list[tuple[str, SweepSpec]]:
    """What the Who wins page computes for these control values (default: every default), named as its
    maps' keys: the ε x B map at the setting's N, then the ε x N map."""
    from dataclasses import replace

    from .state import DEFAULTS

    v = {**DEFAULTS, **(values or {})}
    side = SidebarSettings(v["dataset"], None, int(v["repeats"]), v["accounting"], v["device"], info)
    s = setting_from_values(v)
    eps = sorted(v["map_eps"])
    n_values = sorted({x for x in WHO_WINS_N if x <= info.n_train} | {info.n_train})
    n_values = [x for x in n_values if x >= min_train_size(s)]
    return [("map_b", make_spec(side, s, epsilons=eps, vary="budget", values=WHO_WINS_B)),
            ("map_n", make_spec(side, replace(s, n=None), epsilons=eps, vary="n", values=tuple(n_values)))]


def quick_subset(spec: SweepSpec) -> SweepSpec | None:
    """The methods of ``spec`` that train nothing per release, as a spec of their own (a curve draws
    them first while loss perturbation and DP-SGD compute); None when all or none are of that kind."""
    from dataclasses import replace

    from privcore.methods import REGISTRY

    quick = tuple(m for m in spec.methods if not REGISTRY[m].trains_per_release)
    if not quick or len(quick) == len(spec.methods):
        return None
    return replace(spec, methods=quick)


def explore_plan(info: DataInfo, values: dict[str, Any] | None = None) -> list[SweepSpec]:
    """The specs the Explore page runs on a first visit, in its order: the current setting, the
    curve's quick methods (:func:`quick_subset`), then the whole curve (its quick points cached)."""
    point, curve = explore_specs(info, values)
    quick = quick_subset(curve)
    return [point, curve] if quick is None else [point, quick, curve]


def setting_problem(info: DataInfo, s: Setting, *, n: int | None = None, fit_n: bool = False) -> Problem:
    """privcore's :class:`~privcore.types.Problem` at this setting on this data set (lambda = auto
    stands in as :data:`privcore.knobs.LAM_AUTO_STANDIN`). ``fit_n`` caps T and the batch at N.
    Raises privcore's ``ValueError``/``TypeError``."""
    from privcore.knobs import fixed_lam
    from privcore.types import Problem

    n = int(n if n is not None else (s.effective_n(info) or info.n_train))
    teachers, batch = int(s.teachers), int(s.batch_size)
    if fit_n:
        teachers, batch = min(teachers, n), min(batch, n)
    return Problem(n=n, dim=int(s.dim or info.dim), classes=int(s.classes or info.classes), lam=fixed_lam(s.lam),
                   budget=int(s.budget), teachers=teachers, batch_size=batch, epochs=int(s.epochs), clip=float(s.clip),
                   learning_rate=float(s.learning_rate))


# ---------------------------------------------------------------- option grids

def with_value(options: Iterable[Any], value: Any) -> list[Any]:
    """Options plus ``value`` (sorted, numbers only; strings such as 'auto' stay first)."""
    opts = list(options)
    if value is not None and value not in opts:
        opts.append(value)
    words = [o for o in opts if isinstance(o, str) or o is None]
    nums = sorted(o for o in opts if not (isinstance(o, str) or o is None))
    return words + nums


def nearest(options: Sequence[Any], value: Any) -> Any:
    """The option closest to ``value`` on a log scale (the first option for a non-number)."""
    if value in options:
        return value
    nums = [o for o in options if isinstance(o, (int, float)) and not isinstance(o, bool) and o > 0]
    if not nums or not isinstance(value, (int, float)) or value <= 0:
        return options[0]
    return min(nums, key=lambda o: abs(math.log(o) - math.log(value)))


def n_options(info: DataInfo) -> list[int]:
    """The N values the N slider offers for a data set (no augmentation): the grid below the full
    training split, then the full split."""
    full = info.n_train
    return [v for v in knob("n").grid if v < full] + [full]


def checked_n(info: DataInfo | None, n: int | None) -> tuple[int | None, str | None]:
    """N as the N slider would take it, for pages that read N from the URL without drawing the
    slider: snapped to :func:`n_options` (None = the full split), plus a message when it moved."""
    if n is None or info is None:
        return n, None
    options = n_options(info)
    snapped = nearest(options, n)
    if snapped == n:
        return (None if n == info.n_train else n), None
    note = (f"N = {n:,} is not available for this data set (it has {info.n_train:,} training examples): "
            f"using N = {snapped:,}, as the N slider on the Explore page would.")
    return (None if snapped == info.n_train else int(snapped)), note
