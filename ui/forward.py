"""Calibrate's two questions from users of similar tools: "What ε does this noise give?" (the forward
direction, :mod:`privcore.accounting.forward`; the inputs are each method's declared ``noise_inputs``,
:mod:`privcore.methods.forward`) and a privacy statement download (:mod:`privcore.statement`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import streamlit as st

from privcore.accounting.forward import accountant_text, judging_accounting, spent_epsilon
from privcore import methods as registry  # its METHOD_NAMES read when drawn (a method registered since counts)
from privcore.methods import get_method
from privcore.validation import epsilon_up
from privcore.types import NoiseScale, Problem

from .figures import format_number, method_label

__all__ = ["noise_inputs", "forward_section", "statement_buttons"]


def _inputs(scale: NoiseScale) -> tuple:
    """The method's declared noise inputs that apply to ``scale``'s noise kind (privcore.methods.forward)."""
    return tuple(i for i in get_method(scale.method).noise_inputs if i.kind in (None, scale.noise))


def noise_inputs(scale: NoiseScale) -> dict[str, Any]:
    """The noise of ``scale`` that the forward direction reads: its kind and the values of its method's
    declared noise inputs for that kind (the calibrated values: the defaults of the page's inputs)."""
    noise = scale.to_dict()
    return {"noise": scale.noise, **{i.name: noise.get(i.name) for i in _inputs(scale) if noise.get(i.name) is not None}}


def forward_section(scales: Mapping[str, Any], problem: Problem, delta: float, accounting: str) -> None:
    """"What ε does this noise give?": pick a method, edit its noise (the calibrated values by default), read
    the epsilon it spends at δ under replace-one neighbours with its accountant."""
    usable = [m for m in registry.METHOD_NAMES if isinstance(scales.get(m), NoiseScale) and scales[m].noise != "none"
              and get_method(m).noise_inputs]
    if not usable:
        return
    with st.expander("What ε does this noise give? (the forward direction)", expanded=False):
        st.caption("Give a method's noise; the ε it really spends at this δ, N, B, T and DP-SGD schedule under "
                   "replace-one neighbours, with its accountant (the other direction of the table above, like TF "
                   "Privacy's compute_dp_sgd_privacy). The calibrated values are filled in.")
        method = st.selectbox("Method", usable, format_func=method_label, key="forward_method")
        scale = scales[method]
        noise = noise_inputs(scale)
        shown = [i for i in _inputs(scale) if i.shown and i.name in noise]  # the others keep their calibrated value
        cols = st.columns(max(1, len(shown)))
        for j, inp in enumerate(shown):
            kind = int if inp.integer else float  # a count is asked for as one
            noise[inp.name] = cols[j % len(cols)].number_input(
                inp.label, value=kind(noise[inp.name]), min_value=kind(inp.low),
                max_value=None if inp.high is None else kind(inp.high), format="%d" if inp.integer else "%.6g",
                help=inp.help, key=f"forward_{method}_{inp.name}")
        judge = judging_accounting(method, accounting)
        try:
            eps = spent_epsilon(method, get_method(method).forward_noise(noise, problem), problem, delta, judge)
        except (ValueError, ArithmeticError) as err:
            st.warning(f"{method_label(method)}: {err}")
            return
        st.markdown(f"**ε = {format_number(epsilon_up(eps))}** at δ = {format_number(delta)} (replace-one neighbours; "
                    f"{accountant_text(method, delta)}; {judge} accountant)")


def statement_buttons(methods: Sequence[str], problem: Problem, epsilon: float, delta: float, accounting: str,
                      preprocessing: Sequence[str] = (), *, first: str | None = None,
                      tuned: Mapping[str, str | None] | None = None, data: str | None = None) -> None:
    """Download buttons for the privacy statement of a chosen method (of ``methods``; ``first`` preselected),
    in Markdown and JSON; ``tuned`` (method -> its row's ``tuned`` text) states a tuned comparison's
    knobs and how they were picked."""
    from privcore.statement import privacy_statement, statement_json, statement_markdown

    usable = [m for m in registry.METHOD_NAMES if m in methods and get_method(m).supports(delta)]
    if not usable:
        return
    if first in usable:
        usable.remove(first)
        usable.insert(0, first)
    # The picker follows the recommendation: when it names another method, the choice resets to it (a
    # walk-through saw the old winner kept); a method picked by hand stays while the winner stays.
    if st.session_state.get("_statement_first") != first or st.session_state.get("statement_method") not in usable:
        st.session_state["_statement_first"] = first
        st.session_state["statement_method"] = usable[0]
    row = st.container(horizontal=True, gap="small", key="statement_row")
    method = row.selectbox("Privacy statement for", usable, format_func=method_label, key="statement_method")
    try:
        statement = privacy_statement(method, epsilon, delta, problem, accounting, preprocessing=list(preprocessing),
                                      tuned=(tuned or {}).get(method), data=data)
    except (ValueError, ArithmeticError) as err:
        st.warning(f"{method_label(method)}: {err}")
        return
    stem = f"privacy-statement-{method}"
    row.download_button("Statement (Markdown)", data=statement_markdown(statement), file_name=f"{stem}.md",
                        mime="text/markdown", on_click="ignore", key="statement_md", width="content")
    row.download_button("Statement (JSON)", data=statement_json(statement), file_name=f"{stem}.json",
                        mime="application/json", on_click="ignore", key="statement_json", width="content")
    if get_method(method).family != "baseline" and statement["epsilon"] != statement["epsilon_nominal"]:
        st.caption(f"{method_label(method)}: the statement gives ε = {format_number(epsilon_up(statement['epsilon']))}, what "
                   f"the noise really guarantees, not the {format_number(epsilon)} of {accounting} accounting.")
