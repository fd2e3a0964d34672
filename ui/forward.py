"""Calibrate's two questions from users of similar tools: "What ε does this noise give?" (the forward
direction, :mod:`privcore.accounting.forward`) and a privacy statement download (:mod:`privcore.statement`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import streamlit as st

from privcore.accounting.forward import accountant_text, judging_accounting, spent_epsilon
from privcore.methods import METHOD_NAMES, get_method
from privcore.types import NoiseScale, Problem

from .figures import format_number, method_label

__all__ = ["noise_inputs", "forward_section", "statement_buttons", "NOISE_INPUTS"]

#: The noise a method's forward direction needs, as (NoiseScale field, label) pairs; the calibrated
#: value at the current setting is the default of each input.
NOISE_INPUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "model_sensitivity": (("sigma", "σ (or β at δ = 0)"),),
    "prediction_sensitivity": (("sigma", "σ (or β at δ = 0)"),),
    "loss_perturbation": (("sigma", "σ (or β at δ = 0)"), ("rho", "ρ (extra L2)")),
    "dpsgd": (("noise_multiplier", "noise multiplier z"),),
    "subsample_aggregate": (("beta", "β (vote's inverse temperature)"),),
    "confident_gnmax": (("sigma", "σ₂ (vote noise)"), ("test_noise", "σ₁ (check noise)")),
    "sparse_vector": (("beta", "β (fallback votes)"), ("test_noise", "query noise scale"), ("threshold", "threshold w")),
    "pate_student": (("sigma", "σ (vote noise)"),),
    "private_knn": (("sigma", "σ₂ (vote noise)"), ("test_noise", "σ₁ (check noise)")),
}


def noise_inputs(scale: NoiseScale) -> dict[str, Any]:
    """The noise fields of ``scale`` that the forward direction reads (with the kind and fixed extras)."""
    noise = scale.to_dict()
    fields = [f for f, _ in NOISE_INPUTS.get(scale.method, ())]
    if scale.noise == "laplace_like" and "sigma" in fields:
        fields[fields.index("sigma")] = "beta"
    return {"noise": scale.noise, **{f: noise.get(f) for f in fields},
            **{k: noise.get(k) for k in ("cap", "output_scale", "solver_tolerance") if noise.get(k) is not None}}


def forward_section(scales: Mapping[str, Any], problem: Problem, delta: float, accounting: str) -> None:
    """"What ε does this noise give?": pick a method, edit its noise (the calibrated values by default), read
    the epsilon it spends at δ under replace-one neighbours with its accountant."""
    usable = [m for m in METHOD_NAMES if isinstance(scales.get(m), NoiseScale) and scales[m].noise != "none"]
    if not usable:
        return
    with st.expander("What ε does this noise give? (the forward direction)", expanded=False):
        st.caption("Give a method's noise; the ε it really spends at this δ, N, B, T and DP-SGD schedule under "
                   "replace-one neighbours, with its accountant (the other direction of the table above, like TF "
                   "Privacy's compute_dp_sgd_privacy). The calibrated values are filled in.")
        method = st.selectbox("Method", usable, format_func=method_label, key="forward_method")
        scale = scales[method]
        noise = noise_inputs(scale)
        cols = st.columns(max(1, len(noise) - 1))
        i = 0
        for field in list(noise):
            if field in ("noise", "cap", "output_scale", "solver_tolerance") or noise[field] is None:
                continue
            label = dict(NOISE_INPUTS[method]).get(field, field)
            if field == "beta" and scale.noise == "laplace_like":
                label = "β (Laplace-like inverse scale)"
            noise[field] = cols[i % len(cols)].number_input(label, value=float(noise[field]), min_value=0.0,
                                                           format="%.6g", key=f"forward_{method}_{field}")
            i += 1
        judge = judging_accounting(method, accounting)
        try:
            eps = spent_epsilon(method, noise, problem, delta, judge)
        except (ValueError, ArithmeticError) as err:
            st.warning(f"{method_label(method)}: {err}")
            return
        st.markdown(f"**ε = {format_number(eps, 4)}** at δ = {format_number(delta)} (replace-one neighbours; "
                    f"{accountant_text(method, delta)}; {judge} accountant)")


def statement_buttons(methods: Sequence[str], problem: Problem, epsilon: float, delta: float, accounting: str,
                      preprocessing: Sequence[str] = (), *, first: str | None = None,
                      tuned: Mapping[str, str | None] | None = None) -> None:
    """Download buttons for the privacy statement of a chosen method (of ``methods``; ``first`` preselected),
    in Markdown and JSON; ``tuned`` (method -> its row's ``tuned`` text) states a tuned comparison's
    knobs and how they were picked."""
    from privcore.statement import privacy_statement, statement_json, statement_markdown

    usable = [m for m in METHOD_NAMES if m in methods and get_method(m).supports(delta)]
    if not usable:
        return
    if first in usable:
        usable.remove(first)
        usable.insert(0, first)
    row = st.container(horizontal=True, gap="small", key="statement_row")
    method = row.selectbox("Privacy statement for", usable, format_func=method_label, key="statement_method")
    try:
        statement = privacy_statement(method, epsilon, delta, problem, accounting, preprocessing=list(preprocessing),
                                      tuned=(tuned or {}).get(method))
    except (ValueError, ArithmeticError) as err:
        st.warning(f"{method_label(method)}: {err}")
        return
    stem = f"privacy-statement-{method}"
    row.download_button("Statement (Markdown)", data=statement_markdown(statement), file_name=f"{stem}.md",
                        mime="text/markdown", on_click="ignore", key="statement_md", width="content")
    row.download_button("Statement (JSON)", data=statement_json(statement), file_name=f"{stem}.json",
                        mime="application/json", on_click="ignore", key="statement_json", width="content")
    if get_method(method).family != "baseline" and statement["epsilon"] != statement["epsilon_nominal"]:
        st.caption(f"{method_label(method)}: the statement gives ε = {format_number(statement['epsilon'], 4)}, what "
                   f"the noise really guarantees, not the {format_number(epsilon)} of {accounting} accounting.")
