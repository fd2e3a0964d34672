"""A method's forward direction: "what epsilon does this noise give?", declared where the method lives.

The calibration goes from (epsilon, delta) to noise; the forward direction goes back, like TF Privacy's
``compute_dp_sgd_privacy``. A method declares, next to its ``_calibrate``:

* its **noise inputs** (:attr:`ForwardAccounting.noise_inputs`, :class:`NoiseInput` values): the numbers
  of its noise scale that the forward direction asks for, with a label, a help line and a range;
* its **accountant** in words (:attr:`ForwardAccounting.accountant`) and the hook
  :meth:`ForwardAccounting.spent_epsilon`, the epsilon at delta that its accountant certifies for the
  given noise under replace-one neighbours (an upper bound: never less than the accountant's);
* where it differs, :meth:`ForwardAccounting.judging_accounting` (which sound accountant judges a scale
  calibrated under a mode) and :meth:`ForwardAccounting.forward_noise` (the numbers it derives from the
  given ones, e.g. a default check noise).

``privcore epsilon`` (its flags), the Calibrate page's "What ε does this noise give?" (its inputs) and
:mod:`privcore.accounting.forward` (the real epsilon of ``paper`` rows, the privacy statement) read these
declarations; none of them names a method. The accountants' math stays in :mod:`privcore.accounting`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Mapping

from ..validation import check_choice, check_int, check_real, fmt_value
from .fields import TEST_NOISE, ResultField

__all__ = ["NoiseInput", "ForwardAccounting", "noise_value", "declared_noise_inputs", "SENSITIVITY_INPUTS",
           "VOTE_SIGMA", "CHECK_NOISE", "NOISE_KINDS_GIVEN"]

#: The noise kinds a :class:`NoiseInput` may stand for (a scale's ``noise``).
NOISE_KINDS_GIVEN: tuple[str, ...] = ("gaussian", "laplace_like", "exponential_mechanism")


@dataclass(frozen=True)
class NoiseInput:
    """One number of a method's noise that the forward direction asks for.

    name: its key in the noise scale (:meth:`~privcore.types.NoiseScale.to_dict`) and the CLI's flag
    ``--name`` (underscores as hyphens); label: the Calibrate page's input label; help: the CLI flag's help,
    one line. kind: the noise kind it is the scale of ("gaussian", "laplace_like", "exponential_mechanism"):
    asked for only for a scale of that kind, and giving it picks that kind; None: any kind. low/low_open/high:
    its range (a value > low, or >= low when not low_open, and <= high). integer: a count. shown: an input
    of the Calibrate page (False: the page passes the calibrated value on unedited, e.g. a cap). absent:
    what is assumed when it is not given (the CLI prints it as a note). aliases: further CLI flags for it.
    """

    name: str
    label: str
    help: str
    kind: str | None = None
    low: float = 0.0
    low_open: bool = True
    high: float | None = None
    integer: bool = False
    shown: bool = True
    absent: str = ""
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in (self.name, *self.aliases):
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"NoiseInput name and aliases must be Python identifiers, got {fmt_value(name)}")
        for attr in ("label", "help"):
            if not isinstance(getattr(self, attr), str) or not getattr(self, attr):
                raise ValueError(f"NoiseInput {self.name}: {attr} must be a non-empty string, got "
                                 f"{fmt_value(getattr(self, attr))}")
        if self.kind is not None:
            check_choice("kind", self.kind, NOISE_KINDS_GIVEN)

    @classmethod
    def of(cls, field: ResultField, label: str, text: str | None = None, **kwargs: Any) -> "NoiseInput":
        """The input for one of a method's scale fields (:mod:`privcore.methods.fields`): its name, a count
        kept a count, its upper end unless given, and its help unless ``text`` is given."""
        return cls(field.name, label, text or field.help, **{"integer": field.integer, "high": field.high, **kwargs})

    @property
    def flag(self) -> str:
        """The CLI flag, e.g. ``--noise-multiplier``."""
        return "--" + self.name.replace("_", "-")

    def check(self, value: Any) -> float | int:
        """``value`` as a number in this input's range (int for a count); ValueError naming it otherwise."""
        if self.integer:
            return check_int(self.name, value, low=int(self.low) + (1 if self.low_open else 0),
                             high=None if self.high is None else int(self.high))
        return check_real(self.name, value, low=self.low, low_open=self.low_open, high=self.high)


def noise_value(noise: Mapping[str, Any], key: str) -> float:
    """``noise[key]`` as a float, or ValueError saying the method (``noise["method"]``) needs it."""
    value = noise.get(key)
    if value is None:
        raise ValueError(f"{noise.get('method') or 'this method'} needs {key} to compute its epsilon")
    return float(value)


#: The released-output methods' noise (model and prediction sensitivity, loss perturbation): a Gaussian
#: std, or at delta = 0 the inverse scale of Laplace-like noise.
SENSITIVITY_INPUTS: tuple[NoiseInput, ...] = (
    NoiseInput("sigma", "σ (or β at δ = 0)", "Gaussian std", kind="gaussian"),
    NoiseInput("beta", "β (Laplace-like inverse scale)", "inverse scale of Laplace-like noise", kind="laplace_like"),
)

#: The Gaussian noisy argmax's vote noise and the noise of its confidence check (Confident-GNMax, Private-kNN).
VOTE_SIGMA = NoiseInput("sigma", "σ₂ (vote noise)", "the Gaussian vote noise's std (noisy argmax)", kind="gaussian")
CHECK_NOISE = NoiseInput.of(TEST_NOISE, "σ₁ (check noise)", "the confidence check's noise std (default: the "
                            "calibration's ratio to --sigma)", aliases=("sigma_check",))


class ForwardAccounting:
    """The forward direction's declarations and hooks, shared by every :class:`~privcore.methods.base.Method`.

    A method without :attr:`noise_inputs` has no forward calculator (:meth:`spent_epsilon` refuses).
    """

    name: ClassVar[str]
    #: The numbers of its noise the forward direction asks for, in the order shown.
    noise_inputs: ClassVar[tuple[NoiseInput, ...]] = ()
    #: Its accountant in words: (at delta = 0, at delta > 0); "" where it has none there.
    accountant: ClassVar[tuple[str, str]] = ("", "")

    def forward_noise(self, given: Mapping[str, Any], problem: Any) -> dict[str, Any]:
        """The noise mapping :meth:`spent_epsilon` reads, from the numbers ``given`` by name (the CLI's
        flags, the page's inputs): each of :attr:`noise_inputs` given, checked against its range, and the
        noise kind (``given["noise"]``, else that of the first given input naming one, else Gaussian).
        A method adds what it derives from them (override, calling this first)."""
        out: dict[str, Any] = {}
        for inp in self.noise_inputs:
            if given.get(inp.name) is not None:
                out[inp.name] = inp.check(given[inp.name])
        kind = given.get("noise") or next((i.kind for i in self.noise_inputs if i.kind and i.name in out), None)
        return {"noise": kind or "gaussian", **out}

    def spent_epsilon(self, noise: Mapping[str, Any], problem: Any, delta: float, accounting: str) -> float:
        """Epsilon at ``delta`` that ``noise`` (a noise scale's fields: ``noise`` kind and the numbers)
        spends on ``problem`` under replace-one neighbours, by this method's accountant under
        ``accounting`` ("corrected" or "tight"): at least what the accountant certifies, never less.
        Called by :func:`privcore.accounting.forward.spent_epsilon` with ``delta`` checked."""
        raise ValueError(f"no forward accountant for method {self.name!r}: it declares no noise_inputs and "
                         "spent_epsilon (privcore.methods.forward)")

    def judging_accounting(self, accounting: str) -> str:
        """The sound accountant that judges a scale of this method calibrated under ``accounting``:
        ``paper`` scales by ``tight`` (exact Gaussian composition and PLD hold for adaptive queries too),
        the others by their own mode. A method whose ``tight`` accountant assumes more overrides it."""
        check_choice("accounting", accounting, ("paper", "corrected", "tight"))
        return "tight" if accounting == "paper" else accounting

    def accountant_text(self, delta: float) -> str:
        """One phrase naming the accountant at ``delta`` (pure or approximate DP)."""
        pure, approx = self.accountant
        return (pure if float(delta) == 0.0 and pure else approx) or "none (no privacy)"


def declared_noise_inputs(methods: Iterable[Any]) -> dict[str, list[tuple[Any, NoiseInput]]]:
    """The noise inputs of ``methods`` by name, in order of first declaration: name -> [(method, input)].
    One name is one number of a noise scale, so its declarations must agree on ``integer`` (one CLI flag)."""
    out: dict[str, list[tuple[Any, NoiseInput]]] = {}
    for m in methods:
        for inp in m.noise_inputs:
            known = out.setdefault(inp.name, [])
            if known and known[0][1].integer != inp.integer:
                raise ValueError(f"{m.name} declares noise input {inp.name!r} unlike {known[0][0].name}: "
                                 "one name is one number (an integer or not)")
            known.append((m, inp))
    return out
