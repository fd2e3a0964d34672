"""Explore's honest-scoring toggle and its inverse view (which epsilon reaches a target accuracy).

The logic is :mod:`privcore.inverse`; this module only draws it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import streamlit as st

from privcore.inverse import epsilon_for_accuracy, risk_sentence
from privcore.methods import ENTRIES

from . import state
from .figures import format_number, method_label

__all__ = ["answered_only_toggle", "target_section", "risk_caption"]


def answered_only_toggle() -> bool:
    """The toggle (bound to the URL): False, the default, counts abstentions as wrong answers."""
    abstaining = [m.short_label or m.label for m in ENTRIES.values() if m.abstains]
    if not abstaining:
        return False
    value = st.toggle("Score abstaining methods on answered queries only", key=state.bind("answered_only"),
                      help=f"{', '.join(abstaining)} may abstain. Off (the default): an abstention counts as a "
                           "wrong answer. On: their accuracy is over the queries they answered; the answered "
                           "fraction is in the noise table, and the comparison is then no longer like for like.")
    return bool(state.commit("answered_only", value))


def risk_caption(eps: float, delta: float) -> str:
    """The plain-words risk line of the current budget (hypothesis-testing bound)."""
    return risk_sentence(eps, delta)


def _eps_text(value: float | None, at_smallest: bool, eps_range: tuple[float, float]) -> str:
    if value is None:
        return f"> {format_number(eps_range[1])}"
    return f"≤ {format_number(value)}" if at_smallest else format_number(value)


def unreachable_text(target: float, best: float | None, largest_eps: float, baseline: float | None) -> str:
    """What the table says where a method's mean never reaches ``target`` on the curve: that it is
    unreachable, and why in a few words (above the non-private model, or the method's best, at the
    largest swept epsilon, is below it). A larger epsilon may still reach it unless it is above the
    non-private model's accuracy, which no private version beats on average."""
    # Short enough for the table cell at 800 px (the longer "unreachable up to ε = 100 (the largest swept;
    # at most 0.812)" was cut off); the caption under the table says what "unreachable" means.
    if baseline is not None and target > baseline:
        return f"above non-private ({baseline:.2f})"
    best_text = "" if best is None else f" (best {best:.2f})"
    return f"not by ε = {format_number(largest_eps)}{best_text}"


def _best_means(rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, float], float | None]:
    """(each method's best mean accuracy on the curve, the non-private model's accuracy or None)."""
    from privcore.methods import methods_of_family

    base_names = set(methods_of_family("baseline"))
    best: dict[str, float] = {}
    baseline = None
    for r in rows:
        try:
            method, acc = r["method"], float(r["accuracy_mean"])
        except (KeyError, TypeError, ValueError):
            continue
        if method in base_names:
            baseline = acc if baseline is None else max(baseline, acc)
        else:
            best[method] = max(best.get(method, acc), acc)
    return best, baseline


def target_section(rows: Sequence[Mapping[str, Any]], budget: int, n: int, answered_only: bool) -> None:
    """For a target accuracy, the smallest swept epsilon at which each method reaches it (with its band)."""
    st.subheader("Which ε reaches a target accuracy?")
    target = st.number_input("Target accuracy", min_value=0.0, max_value=1.0, step=0.05, format="%.2f",
                             key=state.bind("target"),
                             help="A fraction of the test examples classified right, from 0 to 1 (0.8 = 80 %). The "
                                  "browser does not send a value outside that range: the table keeps the last valid one.")
    target = float(state.commit("target", target))
    results = epsilon_for_accuracy(rows, target)
    if not results:
        st.caption("No private method on this curve.")
        return
    import pandas as pd

    best, baseline = _best_means(rows)
    table = pd.DataFrame([{
        "Method": method_label(r.method),
        "Smallest ε": (unreachable_text(target, best.get(r.method), r.eps_range[1], baseline) if r.epsilon is None
                       else _eps_text(r.epsilon, r.at_smallest, r.eps_range)),
        "Band (mean ± std crosses)": ("not reached" if r.low is None else
                                      f"{_eps_text(r.low, False, r.eps_range)} to "
                                      f"{_eps_text(r.high, False, r.eps_range)}"),
    } for r in sorted(results, key=lambda r: (r.epsilon is None, r.epsilon or 0.0))])
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={"Smallest ε": st.column_config.TextColumn("Smallest ε", width="medium")})
    scoring = ("abstaining methods scored on answered queries only" if answered_only
               else "abstentions count as wrong")
    st.caption(f"Target accuracy {target:.2f}, at B = {budget:,} and N = {n:,}, on the ε curve (linear in log ε between swept points; "
               f"'not by ε = …': the mean stays below the target up to the largest ε swept, its best mean in brackets; 'above non-private': no private method beats the non-private model on average; {scoring}). The band is where mean + std and "
               "mean − std over the repetitions reach the target.")
