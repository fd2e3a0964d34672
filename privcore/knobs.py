"""The one declaration of every knob: name, type, default, range, scale, help, CLI flag and URL field.

Everything else is derived from :data:`KNOBS`:

* the defaults and validation of :class:`privcore.types.Problem` and
  :class:`privcore.engine.specs.SweepSpec` (``default``, ``low``/``high``; errors name the
  parameter, the range and the value, through :mod:`privcore.validation`);
* the command-line flags of ``calibrate`` and ``sweep`` (:func:`add_argument`: ``flag``, ``help``,
  ``default``, ``choices``);
* the dashboard's URL state fields (``url``; ``url_low``/``url_high`` clamp what a pasted link may
  ask for, which is stricter than what the library accepts) and its controls (``label``, ``grid``,
  ``help``).

One set of defaults: a knob's ``default`` is the library's, the CLI's and the dashboard's first
view alike (chosen to teach: delta = 1e-5, B = 10, epsilon = 3), so ``privcore sweep`` with no flags
computes the dashboard's default curve (:data:`EPSILONS`) with the same spec, cache key and
numbers (tests/test_defaults.py). The data-set sizes N, D and C are the one exception: unset (None)
they mean the data set's own, in the dashboard and ``sweep``; their ``default`` is the default data
set's (mnist-5k: N = 4,000, D = 784, C = 10), what :class:`privcore.types.Problem` and ``calibrate``
use without a data set.

privcore never imports Streamlit; this module imports nothing heavy (choices that live elsewhere,
the data sets and the methods, are named by ``choices_from`` and read on first use).
"""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from .validation import check_choice, check_int, check_real

__all__ = ["Knob", "KNOBS", "knob", "check", "default", "fixed_lam", "add_argument", "LAM_AUTO_STANDIN",
           "ACCOUNTING_MODES", "DEVICE_CHOICES", "KINDS", "EPSILON_RANGE", "EPSILONS", "curve_epsilons"]

ACCOUNTING_MODES: tuple[str, ...] = ("paper", "corrected", "tight")
DEVICE_CHOICES: tuple[str, ...] = ("auto", "cpu", "cuda")
#: int, float, float_or_auto (a float or the word "auto"), choice (one string), choices (a list of strings)
KINDS: tuple[str, ...] = ("int", "float", "float_or_auto", "choice", "choices")

#: Where ``lam = "auto"`` needs one number before lambda is chosen (calibration tables, leakage
#: attacks, the spec's own validation of the other knobs): lambda = 1e-3. Stated here only.
LAM_AUTO_STANDIN: float = 1e-3

_SAME = object()


@dataclass(frozen=True)
class Knob:
    """One knob. ``default`` is everyone's: the library's, the CLI's and the dashboard's first view;
    ``per_dataset``: the dashboard and ``sweep`` leave it unset (the data set's own), see the module."""

    name: str
    kind: str
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices_: tuple[str, ...] | None = None
    choices_from: str | None = None
    log: bool = False
    flag: str | None = None
    url: str | None = None
    per_dataset: bool = False
    url_low: float | None = None
    url_high: float | None = None
    url_zero: bool = False
    label: str = ""
    grid: tuple[Any, ...] = ()
    ui_help: str = ""
    #: A :mod:`privcore.limits` check (``check_n``, ``check_epochs``): an upper bound read when the
    #: value is checked, so that its environment variable applies.
    limit: str | None = None

    @property
    def tooltip(self) -> str:
        """The dashboard's help for the control: ``ui_help`` (longer, for a reader of the chart), else ``help``."""
        return self.ui_help or self.help[:1].upper() + self.help[1:] + "."

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The allowed strings of a choice knob (read from ``choices_from`` on first use)."""
        if self.choices_ is not None:
            return self.choices_
        if self.choices_from is None:
            return None
        module, attr = self.choices_from.split(":")
        return tuple(getattr(importlib.import_module(module), attr))

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def first_view(self) -> Any:
        """The dashboard's default: ``default``, or None (the data set's own) for a ``per_dataset`` knob."""
        return None if self.per_dataset else self.default

    def check(self, value: Any, *, allow_auto: bool = True) -> Any:
        """``value`` validated and normalised (float for float knobs), or an error naming the knob,
        its range and the value. ``allow_auto=False``: lambda must be a number here."""
        nm = self.name
        if self.kind == "int":
            v = check_int(nm, value, low=None if self.low is None else int(self.low),
                          high=None if self.high is None else int(self.high))
            if self.limit is not None:
                from . import limits

                getattr(limits, self.limit)(nm, v)
            return v
        if self.kind == "float_or_auto" and allow_auto and isinstance(value, str) and value == "auto":
            return "auto"
        if self.kind == "float_or_auto" and allow_auto and isinstance(value, str):  # "AUTO", "autox": name it
            raise ValueError(f"{nm} must be a real number or 'auto', got {value!r}")
        if self.kind in ("float", "float_or_auto"):
            v = check_real(nm, value, low=self.low, high=self.high, low_open=self.low_open, high_open=self.high_open)
            return v + 0.0 if v == 0 else v  # -0.0 is 0.0 (it printed as -0.0 and keyed its own cache entry)
        if self.kind == "choice":
            return check_choice(nm, value, self.choices or ())
        for v in value:
            check_choice(nm, v, self.choices or ())
        return tuple(value)


_K = Knob
#: Every knob, in the order the CLI's help lists them.
KNOBS: dict[str, Knob] = {k.name: k for k in (
    _K("epsilon", "float", 3.0, "total privacy loss over everything released (all B predictions)",
       low=0.0, low_open=True, log=True, url="eps", url_low=1e-3, url_high=1e4,
       label="Privacy loss ε", ui_help="Total privacy loss over everything released (all B predictions for the prediction "
               "methods). Smaller = more private = more noise.",
       grid=(0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 50.0, 100.0, 200.0,
             300.0, 500.0, 1000.0)),
    _K("delta", "float", 1e-5, "probability mass allowed to exceed e^epsilon; 0 = pure DP",
       low=0.0, high=1.0, high_open=True, log=True, url="delta", url_low=1e-12, url_high=0.1,
       url_zero=True, label="δ (0 = pure ε-DP)",
       ui_help="Probability mass allowed to exceed e^ε. δ = 0 rules out DP-SGD; keep δ ≪ 1/N.",
       grid=(0.0, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)),
    _K("budget", "int", 10, "inference budget B: predictions released under (epsilon, delta)",
       low=1, log=True, url="budget", url_low=1, url_high=1_000_000,
       label="Inference budget B (private predictions)",
       ui_help="How many predictions the prediction methods may release under (ε, δ). The training "
               "methods (model/loss perturbation, DP-SGD) do not depend on B.",
       grid=(1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 300, 500, 1000, 2000, 5000, 10000)),
    _K("n", "int", 4000, "training-set size N", low=1, log=True, url="n", per_dataset=True, url_low=10,
       url_high=10_000_000, label="Training examples N", limit="check_n",
       ui_help="A random subsample of the training split, drawn from the seed, never from the labels (the test set is unchanged).",
       grid=(100, 200, 300, 500, 1000, 1500, 2000, 3000, 4000, 6000, 8000, 10000, 20000, 40000, 60000)),
    _K("dim", "int", 784, "input dimension D", low=1, log=True, url="dim", per_dataset=True, url_low=1,
       url_high=100_000, label="Input dimension D (PCA)",
       ui_help="Project the inputs on their first D principal components, fitted on the training split: a "
               "data-dependent step that the privacy guarantee does not cover.", grid=(5, 10, 20, 30, 50, 100, 200, 300, 500)),
    _K("classes", "int", 10, "number of classes C", low=2, url="classes", per_dataset=True, url_low=2, url_high=10,
       label="Classes C", ui_help="Keep only the first C classes (labels 0..C-1)."),
    _K("lam", "float_or_auto", 1e-3, "L2 weight lambda of the average-form objective, same for every method",
       low=1e-12, log=True, url="lam", url_low=1e-8, url_high=10.0, label="L2 weight λ (average form)",
       ui_help="Weight of 0.5||θ||² in the average-form objective, for every method that has one (DP-SGD has "
               "none). Larger λ shrinks the sensitivity 2K/(Nλ) but biases the model. 'auto' chooses λ per method "
               "and ε by a private selection paid from ε (10 % of ε and δ; slower).",
       grid=("auto", 1e-6, 1e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.5, 1.0)),
    _K("teachers", "int", 16, "subsample models T (subsample-and-aggregate and the teacher-vote methods)",
       low=1, log=True, url="teachers", url_low=1, url_high=100_000, label="Teachers T (subsample-and-aggregate)",
       ui_help="Subsample-and-aggregate trains T models on disjoint parts of N/T examples each.",
       grid=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)),
    _K("batch_size", "int", 256, "DP-SGD expected (Poisson) batch size; sampling rate q = batch / N",
       low=1, log=True, url="batch_size", url_low=1, url_high=1_000_000, label="DP-SGD batch size",
       ui_help="Expected (Poisson) batch size; sampling rate q = batch / N.",
       grid=(16, 32, 64, 128, 256, 512, 1024, 2048)),
    _K("epochs", "int", 5, "DP-SGD passes over the data", low=1, log=True, url="epochs", url_low=1, url_high=200,
       label="DP-SGD epochs", limit="check_epochs",
       ui_help="Passes over the data; more steps need a larger noise multiplier for the same ε.", grid=(1, 2, 3, 5, 10, 20, 30, 50)),
    # Bounded so that float32 arithmetic stays in range: below 1e-8 underflowed squares could matter, above
    # 1e6 a batch's clipped sum could overflow (privcore.roundoff).
    _K("clip", "float", 0.5, "DP-SGD per-example clipping norm nu", low=1e-8, high=1e6, log=True, url="clip",
       url_low=1e-4, url_high=100.0, label="DP-SGD clip ν",
       ui_help="Per-example gradient norm bound. Noise std = noise multiplier × ν.",
       grid=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)),
    _K("learning_rate", "float", 10.0, "DP-SGD step size on the mean clipped gradient", low=0.0, low_open=True,
       log=True, flag="--lr", url="lr", url_low=1e-4, url_high=1e4, label="DP-SGD learning rate",
       ui_help="Step size on the mean clipped, noised gradient. It changes accuracy, not the privacy guarantee.",
       grid=(0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)),
    _K("accounting", "choice", "corrected", "paper (as published), corrected or tight",
       choices_=ACCOUNTING_MODES, url="accounting", label="Accounting",
       ui_help="paper: the published calibrations (some are too optimistic). corrected: fixed proofs. tight: exact "
               "Gaussian / optimal bounded-range composition, finer replace-one PLD grid for DP-SGD."),
    _K("tuning", "choice", "configured", "configured, held-out (best on the test queries: optimistic, not private) "
       "or private (a private selection paid for out of each row's epsilon)",
       choices_=("configured", "held-out", "private"), url="tuning", label="Each method's knobs",
       ui_help="as configured: every method at the knobs on the page. Tuned: each method at the best point of its "
               "own small grid (λ; T; threshold and noise ratio; k and sampling rate; clip and step size), "
               "picked on the test queries (an optimistic upper bound, not private) or by a private selection "
               "whose cost is taken out of each row's ε."),
    _K("repeats", "int", 20, "independent releases (noise draws) per point", low=1, high=10_000, log=True,
       url="repeats", url_low=2, url_high=200, label="Repetitions R (noise draws per point)",
       grid=(2, 3, 5, 10, 20, 50, 100),
       ui_help="Mean and standard deviation over R independent private releases. More = smoother, slower."),
    _K("seed", "int", 0, "fixes the data split and every noise draw", low=0),
    _K("device", "choice", "auto", "auto uses the GPU when there is one", choices_=DEVICE_CHOICES, url="device",
       label="Device", ui_help="auto uses the GPU when there is one. Cached results are reused on any device."),
    _K("dataset", "choice", "mnist-5k", "data set", choices_from="privcore.data:DATASET_NAMES", url="dataset",
       label="Data set", ui_help="Every row is scaled into the unit L2 ball; 20 % of the rows are held out as the test set."),
    _K("methods", "choices", None, "methods to compare (default: every method of the registry)",
       choices_from="privcore.methods:METHOD_NAMES", url="methods", label="Methods",
       ui_help="Private training: model sensitivity, loss perturbation, DP-SGD. Private prediction: prediction "
               "sensitivity, subsample-and-aggregate. The non-private model is always shown for reference."),
)}


def knob(name: str) -> Knob:
    """The knob called ``name`` (its Python name, as in Problem and SweepSpec)."""
    return KNOBS[name]


def default(name: str) -> Any:
    """The library's (and the CLI's) default of a knob."""
    return KNOBS[name].default


#: The epsilon range of the dashboard's default curve and so of a sweep's default epsilons.
EPSILON_RANGE: tuple[float, float] = (0.1, 100.0)


def curve_epsilons(eps_min: float, eps_max: float, current: float | None = None,
                   per_decade: int = 2) -> tuple[float, ...]:
    """Log-spaced epsilons 1-3-10 (per_decade=2) between the bounds, plus ``current`` (the range
    grows to include it: eps = 0.01 or 1000 extends the curve)."""
    steps = {1: (1.0,), 2: (1.0, 3.0), 3: (1.0, 2.0, 5.0)}.get(per_decade, (1.0, 3.0))
    out = set()
    lo, hi = min(eps_min, eps_max), max(eps_min, eps_max)
    if current is not None and current > 0 and math.isfinite(current):  # the curve always covers the current epsilon
        lo, hi = min(lo, float(current)), max(hi, float(current))
    for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        for s in steps:
            v = round(s * 10.0 ** k, 10)
            if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                out.add(v)
    out.update((lo, hi))
    if current is not None and lo <= current <= hi:
        out.add(float(current))
    return tuple(sorted(out))


#: A sweep's default epsilons: the dashboard's default curve (0.1, 0.3, 1, 3, 10, 30, 100).
EPSILONS: tuple[float, ...] = curve_epsilons(*EPSILON_RANGE, current=KNOBS["epsilon"].default)


def check(name: str, value: Any, *, allow_auto: bool = True) -> Any:
    """``value`` validated against knob ``name`` (see :meth:`Knob.check`)."""
    return KNOBS[name].check(value, allow_auto=allow_auto)


def fixed_lam(lam: float | str) -> float:
    """lambda as a number: ``"auto"`` stands for :data:`LAM_AUTO_STANDIN` until lambda is chosen."""
    return LAM_AUTO_STANDIN if lam == "auto" else float(lam)


# ---------------------------------------------------------------- command line

#: Numbers as the command line and the URL take them: ASCII digits, sign, decimals and exponent.
INTEGER_TEXT = re.compile(r"[+-]?\d+", re.ASCII)
DECIMAL_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)


def _cli_number(kind: type, *, allow_inf: bool = False):  # noqa: ANN202 - argparse type
    """argparse ``type`` for an int or a finite float (``inf`` only with ``allow_inf``); its error
    names the expected kind and quotes the text (shortened)."""
    import argparse

    what = "an integer" if kind is int else "a number"

    def parse(text: str) -> object:
        shown = text if len(text) <= 40 else text[:37] + "..."
        if allow_inf and text.strip().lower() in ("inf", "infinity"):
            return math.inf
        # ASCII digits only: int() and float() also read "1_0" and other scripts' digits
        if not (INTEGER_TEXT if kind is int else DECIMAL_TEXT).fullmatch(text.strip()):
            if kind is float and text.strip().lower() in ("nan", "-inf", "+inf", "-infinity", "+infinity"):
                extra = " (or 'inf' for the non-private baseline)" if allow_inf else ""
                raise argparse.ArgumentTypeError(f"must be a finite number{extra}, got {shown!r}")
            raise argparse.ArgumentTypeError(f"must be {what}, got {shown!r}")
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"must be {what}, got {shown!r}") from None
        if kind is float and not math.isfinite(value):
            extra = " (or 'inf' for the non-private baseline)" if allow_inf else ""
            raise argparse.ArgumentTypeError(f"must be a finite number{extra}, got {shown!r}")
        return value
    parse.__name__ = "integer" if kind is int else "number"
    return parse


def _cli_lam(text: str) -> float | str:
    import argparse

    if text == "auto":
        return "auto"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number or 'auto', got {text!r}") from None


def cli_type(name: str, *, allow_auto: bool = True, allow_inf: bool = False) -> Callable[[str], Any]:
    """The argparse ``type`` of a knob's flag (int, float, float or 'auto')."""
    k = KNOBS[name]
    if k.kind == "int":
        return _cli_number(int)
    if k.kind == "float_or_auto" and allow_auto:
        return _cli_lam
    return _cli_number(float, allow_inf=allow_inf)


def add_argument(parser, name: str, *, default: Any = _SAME, help: str | None = None,  # noqa: A002, ANN001
                 allow_auto: bool = True, **kwargs: Any) -> None:
    """Add knob ``name``'s flag to an argparse parser: its flag, type, choices, default and help.

    ``default`` overrides the knob's (e.g. ``--n`` of a sweep defaults to the whole training split,
    None); ``help`` adds to the knob's help text.
    """
    k = KNOBS[name]
    value = k.default if default is _SAME else default
    text = k.help + (f"; {help}" if help else "") + (" (default %(default)s)" if value is not None else "")
    if k.kind == "choice":
        parser.add_argument(k.cli_flag, choices=k.choices, default=value, help=text, **kwargs)
    else:
        parser.add_argument(k.cli_flag, type=kwargs.pop("type", None) or cli_type(name, allow_auto=allow_auto),
                            default=value, help=text, **kwargs)
