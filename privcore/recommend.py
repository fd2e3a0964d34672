"""Which method to use at one setting: winner, margin, whether the margin is real, and why.

No Streamlit: works on the plain result rows of
:func:`privcore.engine.runner.run_sweep` (one row per method at the same setting).

Significance. Each row's ``accuracy_std`` is the standard deviation of test accuracy over its
``repeats`` = R independent private releases, so the standard error of the difference of two
means is sqrt(s1^2 + s2^2) / sqrt(R). The margin counts as significant when it exceeds twice that
(about a 95 % two-sided test for independent repetitions):

    significant  <=>  margin > 2 * sqrt(s_winner^2 + s_runner_up^2) / sqrt(R)

privcore uses common random numbers (every method sees the same split per seed), which makes real
differences *easier* to detect than this bound says, so the test is conservative. With R < 2
there is no spread to judge by and nothing is called significant. This is about the noise of the
private mechanisms only; it says nothing about another train/test split or data set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .methods import ENTRIES, methods_of_family
from .methods.base import WinContext
from .validation import epsilon_up
from .validation import format_value as _fmt

__all__ = ["Recommendation", "recommend", "significance_threshold", "near_chance", "TRAINING_METHODS", "PREDICTION_METHODS"]

TRAINING_METHODS = methods_of_family("training")
PREDICTION_METHODS = methods_of_family("prediction")


def _label(name: str | None) -> str:
    entry = ENTRIES.get(name) if name is not None else None
    return (entry.sentence_label or entry.label) if entry is not None else str(name)


@dataclass(frozen=True)
class Recommendation:
    """The outcome of :func:`recommend`.

    winner / runner_up: method names (None when there is no private row / only one).
    margin: winner's mean accuracy minus the runner-up's (0 with no runner-up).
    threshold: 2 sqrt(s1^2 + s2^2) / sqrt(R), the noise level the margin is compared with.
    significant: margin > threshold (False with R < 2 or no runner-up).
    reason: one plain-English sentence explaining the result from the setting.
    accuracies: {method: (mean, std)} of the private rows considered.
    useful: whether the winner is clearly above chance (see :func:`near_chance`).
    """

    winner: str | None
    runner_up: str | None
    margin: float
    significant: bool
    reason: str
    threshold: float = 0.0
    accuracies: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: False when even the best method is close to chance (within a tenth of the way from chance to
    #: perfect): then no method is useful here, and the reason says what would change that.
    useful: bool = True

    @property
    def summary(self) -> str:
        """A one-line summary: winner, margin and whether it is beyond the repetition noise."""
        if self.winner is None:
            return "No private result to compare."
        if self.runner_up is None:
            return f"{_label(self.winner)} is the only private method shown."
        verdict = "beyond" if self.significant else "within"
        return (f"{_label(self.winner)} wins by {self.margin:.3f} accuracy over "
                f"{_label(self.runner_up)} ({verdict} the repetition noise, "
                f"±{self.threshold:.3f}).")


def significance_threshold(std_a: float, std_b: float, repeats: int) -> float:
    """2 * sqrt(std_a^2 + std_b^2) / sqrt(repeats): two standard errors of a difference of means."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for name, std in (("std_a", std_a), ("std_b", std_b)):
        if isinstance(std, bool) or not isinstance(std, (int, float)) or not math.isfinite(std) or std < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {std!r}")
    return 2.0 * math.sqrt(float(std_a) ** 2 + float(std_b) ** 2) / math.sqrt(repeats)


def _setting(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The shared setting of the rows (first non-None value of each field)."""
    out: dict[str, Any] = {}
    for key in ("epsilon", "delta", "budget", "n", "lam", "teachers", "classes", "dim", "repeats"):
        for r in rows:
            if r.get(key) is not None and not (key == "epsilon" and math.isinf(float(r[key]))):
                out[key] = r[key]
                break
    return out


def recommend(rows: Sequence[Mapping[str, Any]], *, chance: float | None = None) -> Recommendation:
    """Recommend a method from result rows at ONE setting (one row per method).

    rows: dicts with at least ``method``, ``accuracy_mean``, ``accuracy_std``, ``repeats`` and,
    for the reason, ``epsilon``, ``delta``, ``budget``, ``n``, ``lam``, ``teachers``, ``classes``.
    ``non_private`` rows are a reference and never win. Raises ``ValueError`` if a method appears
    twice (the rows mix several settings: filter them first).
    chance: accuracy of random guessing (default 1/classes when the rows have ``classes``).
    """
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise TypeError(f"rows must be a list of result rows (mappings), got {type(rows).__name__}")
    private: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        if not isinstance(r, Mapping):
            raise TypeError(f"rows must be a list of result rows (mappings), got an element {type(r).__name__}")
        m = r.get("method")
        entry = ENTRIES.get(m) if isinstance(m, str) else None
        if m is None or (entry is not None and entry.family == "baseline") or r.get("accuracy_mean") is None:
            continue
        acc = r.get("accuracy_mean")
        if isinstance(acc, bool) or not isinstance(acc, (int, float)) or not 0.0 <= acc <= 1.0:  # NaN won, margin NaN
            raise ValueError(f"accuracy_mean of {m!r} must be a number in [0, 1], got {acc!r}")
        if m in private:
            raise ValueError(f"method {m!r} appears more than once: pass the rows of a single setting")
        private[m] = r
    setting = _setting(rows)
    if not private:
        return Recommendation(None, None, 0.0, False, "No private method has a result at this setting.")
    ranked = sorted(private, key=lambda m: (-float(private[m]["accuracy_mean"]), m))
    accs = {m: (float(private[m]["accuracy_mean"]), float(private[m].get("accuracy_std") or 0.0)) for m in ranked}
    winner = ranked[0]
    runner = ranked[1] if len(ranked) > 1 else None
    useful = not near_chance(accs[winner][0], _chance(setting, chance))
    if runner is None:
        reason = _reason(winner, None, setting, accs, chance, True) + _real_note(private[winner])
        return Recommendation(winner, None, 0.0, False, reason, 0.0, accs, useful)
    margin = accs[winner][0] - accs[runner][0]
    reps = min(int(private[winner].get("repeats") or 0), int(private[runner].get("repeats") or 0))
    if reps >= 2:
        threshold = significance_threshold(accs[winner][1], accs[runner][1], reps)
        significant = margin > threshold
    else:
        threshold, significant = 0.0, False
    # The winner's own knobs (a tuned comparison runs each method at its own lambda and T): the reason
    # explained "a vote over T = 16 teachers" for a row that ran at T = 64
    own = {k: private[winner][k] for k in ("lam", "teachers") if private[winner].get(k) is not None}
    reason = _reason(winner, runner, {**setting, **own}, accs, chance, significant) + _real_note(private[winner])
    return Recommendation(winner, runner, margin, significant, reason, threshold, accs, useful)


def _real_note(row: Mapping[str, Any]) -> str:
    """What the winner's row really guarantees when its accounting claims more (``real_epsilon``), else ""."""
    real = row.get("real_epsilon")
    if real is None:
        return ""
    why = ("its accounting is as published (paper)" if row.get("accounting") == "paper"
           else "its tight accounting assumes the queries are fixed in advance")
    return (f" Note: {why}; under replace-one neighbours{'' if row.get('accounting') == 'paper' else ' with adaptive queries'}"
            f" its noise really guarantees ε = {_fmt(epsilon_up(real))} at δ = {_fmt(row.get('delta'))}, "
            f"not the ε = {_fmt(row.get('epsilon'))} of the header.")


def _chance(setting: Mapping[str, Any], chance: float | None) -> float | None:
    if chance is None and setting.get("classes"):
        return 1.0 / float(setting["classes"])
    return chance


def near_chance(accuracy: float, chance: float | None) -> bool:
    """Whether ``accuracy`` is within a tenth of the way from chance to 1 (no method is useful)."""
    return chance is not None and accuracy < chance + 0.1 * (1.0 - chance)


def _reason(winner: str, runner: str | None, s: Mapping[str, Any], accs: Mapping[str, tuple[float, float]],
            chance: float | None, significant: bool) -> str:
    """One sentence tying the winner to the setting (the paper's findings, Sections 5-6)."""
    eps, delta, b, n, lam, t = (s.get(k) for k in ("epsilon", "delta", "budget", "n", "lam", "teachers"))
    chance = _chance(s, chance)
    best = accs[winner][0]
    label = _label(winner)
    if near_chance(best, chance):
        fewer = f", or answer fewer predictions than B = {_fmt(b)}" if b is not None and int(b) > 1 else ""
        return (f"No method is useful here: at ε = {_fmt(eps)} every method is close to chance ({chance:.2f}); the "
                f"noise needed for this privacy level swamps what N = {_fmt(n)} examples can teach. Raise ε or N"
                f"{fewer}.")
    entry = ENTRIES.get(winner)
    win = WinContext(eps, delta, b, n, lam, t)
    core = entry.win_reason(win) if entry is not None else f"{label} has the best accuracy at this setting"
    if runner is not None and not significant:
        core += f", though its lead over {_label(runner)} is within the repetition noise"
    if core[0].isascii():  # never turn a Greek symbol into another one (δ -> Δ)
        core = core[0].upper() + core[1:]
    return core + "."
