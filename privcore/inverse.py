"""The inverse question (opendp/dp-wizard#521) and honest scoring of methods that abstain.

Pure functions over result rows (plain mappings with ``method``, ``epsilon``, ``accuracy_mean``,
``accuracy_std``; :class:`privcore.engine.rows.ResultRow` is one); no Streamlit.

* :func:`score_rows` - by default an abstention counts as a wrong answer (``accuracy_mean``); with
  ``answered_only`` the rows of methods that abstain are scored on the queries they answered
  (``accuracy_answered``), and their answered fraction must be shown beside them.
* :func:`epsilon_for_accuracy` - for a target accuracy, the smallest epsilon at which each method
  reaches it on an epsilon sweep at fixed B and N: the first crossing of its mean curve, linear in
  log epsilon between swept points, with the band where mean + std and mean - std cross.
* :func:`max_true_positive_rate` / :func:`risk_sentence` - what (epsilon, delta)-DP means for a
  membership test: no test has TPR > e^eps FPR + delta (nor 1 - e^-eps (1 - delta - FPR)); Kairouz,
  Oh, Viswanath (2015), Wasserman and Zhou (2010).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .methods import methods_of_family
from .methods.fields import ACCURACY_ANSWERED, ACCURACY_ANSWERED_STD
from .validation import check_real, epsilon_up, fmt_value

__all__ = ["score_rows", "TargetEpsilon", "epsilon_for_accuracy", "max_true_positive_rate", "risk_sentence"]


def _rows(rows: Any) -> list[Mapping[str, Any]]:
    """``rows`` as a list after checking it is a sequence of mappings (result rows or dicts)."""
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Sequence):
        raise TypeError(f"rows must be a sequence of result rows, got {fmt_value(rows)} ({type(rows).__name__})")
    for i, r in enumerate(rows):
        if not (isinstance(r, Mapping) or hasattr(r, "get")):
            raise ValueError(f"rows[{i}] must be a result row (a mapping), got {fmt_value(r)} ({type(r).__name__})")
    return list(rows)


def score_rows(rows: Sequence[Mapping[str, Any]], answered_only: bool = False) -> list[Mapping[str, Any]]:
    """The rows, with methods that abstain scored on their answered queries when ``answered_only``.

    Default (False): unchanged, abstentions count as wrong. True: ``accuracy_mean`` and
    ``accuracy_std`` of rows with an ``accuracy_answered`` become the accuracy among answered
    queries (and its spread; the all-queries spread where a cached row has none). Other rows are
    returned as they are. ResultRows stay ResultRows; other mappings become dicts.
    """
    rows = _rows(rows)
    if not answered_only:
        return list(rows)
    out: list[Mapping[str, Any]] = []
    for r in rows:
        among = r.get(ACCURACY_ANSWERED.name)  # the abstention summary every abstaining method declares
        if among is None:
            out.append(r)
            continue
        std = r.get(ACCURACY_ANSWERED_STD.name)
        change = {"accuracy_mean": float(among), "accuracy_std": float(std if std is not None else r["accuracy_std"])}
        out.append(dataclasses.replace(r, **change) if dataclasses.is_dataclass(r) else {**r, **change})
    return out


@dataclass(frozen=True)
class TargetEpsilon:
    """Where one method reaches a target accuracy on an epsilon sweep (epsilons in the swept range).

    epsilon: the first epsilon where the mean reaches the target (None: not within the sweep).
    low / high: where mean + std / mean - std first reach it (the error band; None: not within the
    sweep). at_smallest: the target is already met at the smallest swept epsilon (the answer is
    "at most" that). eps_range: the (smallest, largest) swept epsilon.
    """

    method: str
    epsilon: float | None
    low: float | None
    high: float | None
    at_smallest: bool
    eps_range: tuple[float, float]


def _first_crossing(eps: Sequence[float], ys: Sequence[float], target: float) -> float | None:
    """The smallest epsilon where the piecewise-linear (in log epsilon) curve reaches ``target``."""
    if ys[0] >= target:
        return eps[0]
    for (e0, y0), (e1, y1) in zip(zip(eps, ys), zip(eps[1:], ys[1:])):
        if y1 >= target > y0:
            t = (target - y0) / (y1 - y0)
            return math.exp(math.log(e0) + t * (math.log(e1) - math.log(e0)))
    return None


def epsilon_for_accuracy(rows: Sequence[Mapping[str, Any]], target: float) -> list[TargetEpsilon]:
    """For each private method in ``rows``, where its accuracy curve over epsilon reaches ``target``.

    rows: an epsilon sweep (one row per method and epsilon, the other settings fixed); rows at
    epsilon = inf and the non-private baseline are left out; a method with one swept point gives
    an answer only if it meets the target there. Methods keep the order of their first row.
    """
    target = check_real("target accuracy", target, low=0.0, high=1.0)
    rows = _rows(rows)
    baseline = set(methods_of_family("baseline"))
    curves: dict[str, list[tuple[float, float, float]]] = {}
    for i, r in enumerate(rows):
        try:
            eps, method = float(r["epsilon"]), r["method"]
            point = (eps, float(r["accuracy_mean"]), float(r.get("accuracy_std") or 0.0))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError(f"rows[{i}] must be a result row with numeric epsilon and accuracy_mean and a method, "
                             f"got {fmt_value(r)}") from None
        if method in baseline or not math.isfinite(eps) or eps <= 0:
            continue
        curves.setdefault(method, []).append(point)
    out = []
    for method, pts in curves.items():
        pts.sort()
        eps = [p[0] for p in pts]
        mean = [p[1] for p in pts]
        at = _first_crossing(eps, mean, target)
        out.append(TargetEpsilon(
            method=method, epsilon=at,
            low=_first_crossing(eps, [m + s for _, m, s in pts], target),
            high=_first_crossing(eps, [m - s for _, m, s in pts], target),
            at_smallest=at is not None and mean[0] >= target, eps_range=(eps[0], eps[-1])))
    return out


def max_true_positive_rate(epsilon: float, delta: float, fpr: float) -> float:
    """The most a membership test can catch at false-positive rate ``fpr`` against (epsilon, delta)-DP.

    min(1, e^eps fpr + delta, 1 - e^-eps (1 - delta - fpr)): the upper edge of the hypothesis-testing
    region of (epsilon, delta)-DP (:func:`privcore.tradeoff.dp_region`; the second bound is the first
    applied to the complementary test).
    """
    from .tradeoff import dp_max_tpr

    a = check_real("false-positive rate", fpr, low=0.0, high=1.0)
    return float(dp_max_tpr(epsilon, delta, a)[()])


def risk_sentence(epsilon: float, delta: float, fpr: float = 0.05) -> str:
    """One plain-words line: how much a membership attacker can catch at ``fpr`` false positives."""
    tpr = max_true_positive_rate(epsilon, delta, fpr)
    if math.isinf(float(epsilon)):
        return "Without privacy (ε = ∞) nothing bounds what a membership attacker can learn."
    delta_text = f"{delta:g}".replace("e-0", "e-")  # 1e-5, as every chart and title writes it (not 1e-05)
    return (f"At ε = {epsilon_up(epsilon):g}, δ = {delta_text}: an attacker who wrongly accuses at most {fpr:.0%} of non-members "
            f"catches at most {tpr:.1%} of members (no test beats TPR ≤ e^ε·FPR + δ, nor its mirror "
            f"TPR ≤ 1 - e^-ε·(1 - δ - FPR); guessing catches {fpr:.0%}).")
