"""Learn: the ideas behind the comparison, as instant figures (no training).

Thin page: shared controls (ε, δ, B are the same as on every other page), one section at a time,
figures from :mod:`ui.teaching`, export buttons under every chart.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

import streamlit as st

from ui import controls, display, formula, setting, sidebar, state, teaching, userdata
from ui.caption import add_caption
from ui.export import export_buttons
from ui.figures import format_number

side = sidebar.settings()

st.title("Learn: the ideas behind the comparison")
st.markdown(
    "The ways to make predictions differentially private differ in **what** they perturb (the weights, the "
    "training objective, the gradients, each answer), **which noise** they add (Laplace-like, Gaussian, a noisy "
    "vote) and **how the budget is split** over many predictions. Each section below is one idea, computed "
    "instantly from privcore's calibrations. ε, δ and B are shared with the other pages.")
st.caption("Every guarantee assumes the noise is secret. " + setting.RELEASE_MODE_NOTE)

c1, c2, c3 = st.columns(3, vertical_alignment="bottom")  # inputs level when a label wraps (800 px)
eps = float(controls.epsilon_slider(c1))
delta = float(controls.delta_slider(c2))
budget = int(controls.budget_slider(c3))

#: Characters of a formula line on a method card (ui.formula.line_width).
CARD_LINE = 56
SECTIONS = ("1 · Laplace-like vs Gaussian", "2 · Composition over B", "3 · Subsampling",
            "4 · Hypothesis tests", "5 · Method cards")


def _section_label(value: Any) -> str:
    """The section label of a stored number (1-5, the URL's ``learn``) or of a label; a deselected
    control (None) keeps the section shown."""
    if value in SECTIONS:
        return value
    if value is None:
        value = state.get("learn")
    return SECTIONS[value - 1] if isinstance(value, int) and 1 <= value <= len(SECTIONS) else SECTIONS[0]


chosen = st.segmented_control("Section", SECTIONS, label_visibility="collapsed", key=state.bind(
    "learn", normalise=_section_label, stored=lambda label: SECTIONS.index(label) + 1))
section = SECTIONS[state.commit("learn", SECTIONS.index(_section_label(chosen)) + 1) - 1]  # in the URL: a link opens it


def _grid_select(label: str, options: Sequence[Any], default: Any, key: str, help: str | None = None,  # noqa: A002 - Streamlit's name
                 fmt: Callable[[Any], str] = format_number) -> Any:
    return st.select_slider(label, options=list(options), value=default, key=key, help=help, format_func=fmt)


def _ratio_delta(ratio: float, what: str, than: str, note: str = "") -> dict[str, Any]:
    """st.metric's delta (and help) for a tight calibration against another, ``ratio`` = the other's noise over the
    tight one's (for σ) or the tight β over the other's (for β): either way above 1 means less noise, a gain, so a
    green down arrow for noise and a green up arrow for β ("2.95× less noise" had a grey up arrow). Short: a
    metric cuts its delta at the column's width ("3.08× less noise than the p…" at 1280 px)."""
    if ratio < 1.005:
        return dict(delta=f"same as {than}", delta_color="off", delta_arrow="off")
    if what == "noise":
        return dict(delta=f"{ratio:.2f}× less noise", delta_color="green", delta_arrow="down",
                    help=f"{ratio:.2f} times less noise than {than}.{note}")
    return dict(delta=f"{ratio:.2f}× {than}", delta_color="green", delta_arrow="up",
                help=f"{ratio:.2f} times {than}: a larger β is a less noisy vote.")


def _cards_csv(rows):  # noqa: ANN001, ANN202 - deferred download data
    from ui.export import rows_csv

    return rows_csv(rows, columns=list(rows[0]) if rows else None)


# ---------------------------------------------------------------- 1. noise shapes
if section == SECTIONS[0]:
    st.subheader("Same ε, different noise: Laplace-like (δ = 0) or Gaussian (δ > 0)")
    info, cur = side.info, controls.current_setting()
    # The numbers model sensitivity perturbs for the current data set (D·C), marked in the last panel.
    dc = int((cur.dim or info.dim) * (cur.classes or info.classes)) if info is not None else None
    dc_name = userdata.dataset_label(side) if info is not None else ""
    a, b = st.columns(2)
    with a:
        sens = _grid_select("L2 sensitivity Δ of the released vector", (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0), 1.0,
                            "learn_sens", help="How far one changed training example can move the released numbers "
                                               "(model sensitivity: Δ = 2K/(Nλ)).")
    with b:
        dim = _grid_select("Dimension d of the released vector", (1, 2, 5, 10, 20, 50, 100, 1000, 7840), 10, "learn_dim",
                           help="Model sensitivity perturbs D·C numbers ("
                                + (f"{dc:,} for {dc_name}" if dc else "7,840 for MNIST") + "); prediction sensitivity C.")
    s = teaching.noise_summary(eps, delta, sens, dim)
    # Two metrics a row (one row per noise), the detail in the help: four in a row were cut to
    # "Laplace-like β =…" and "classical fo…" at 800 px.
    m = st.columns(2)
    m[0].metric("Laplace-like β = ε/Δ", format_number(s["laplace_beta"], 4),
                help="Inverse scale of the Laplace-like noise (pure ε-DP).")
    m[1].metric(f"Laplace-like mean ||b|| (d = {dim})", format_number(s["laplace_mean_radius"], 4),
                help=f"Mean length ‖b‖₂ of the Laplace-like noise vector in d = {dim:,} dimensions: d/β.")
    if delta > 0:
        m = st.columns(2)
        m[0].metric("Gaussian σ (analytic)", format_number(s["gaussian_sigma"], 4),
                    delta=(f"classical formula: {format_number(s['classical_sigma'], 4)}" if eps < 1 else
                           "classical formula: holds only for ε < 1"), delta_color="off",
                    delta_arrow="off",
                    help="Analytic Gaussian σ (Balle and Wang 2018) at (ε, δ); below it the classical formula "
                         "√(2 ln(1.25/δ))·Δ/ε (Dwork and Roth, Theorem A.1), which needs more noise and is proved "
                         "only for ε < 1.")
        m[1].metric(f"Gaussian mean ||b|| (d = {dim})", format_number(s["gaussian_mean_radius"], 4),
                    delta=f"{s['gaussian_mean_radius'] / s['laplace_mean_radius']:.2f}× Laplace-like", delta_color="off",
                    delta_arrow="off",
                    help=f"Mean length of the Gaussian noise vector in d = {dim:,} dimensions (about σ√d), and its "
                         "ratio to the Laplace-like one.")
    else:
        st.info("δ = 0: only the Laplace-like noise is private. Set δ > 0 to compare with the Gaussian.")
    fig = teaching.noise_figure(eps, delta, sens, dim, reference_dim=dc, reference_label=dc_name)
    add_caption(fig, {"ε": eps, "delta": delta, "Δ": sens, "d": dim})
    display.show_figure(fig, key="learn_noise_chart")
    export_buttons(fig, teaching.noise_rows(eps, delta, sens, dim), key="learn_noise")
    st.markdown(
        "**Reading it.** The Laplace-like density exp(−β‖b‖) is pure ε-DP: on a neighbour D′ (dashed) every output "
        "is at most e^ε times more likely. The Gaussian needs δ > 0, but its noise vector grows like σ√d instead of "
        "d/β: for the thousands of weights that model sensitivity perturbs it is far shorter, which is why model "
        "sensitivity becomes more competitive at δ = 1e-5 in the paper. The analytic σ (Balle and Wang 2018) is "
        "smaller than the classical √(2 ln(1.25/δ))·Δ/ε, which is proved only for ε < 1.")

# ---------------------------------------------------------------- 2. composition
elif section == SECTIONS[1]:
    st.subheader("Splitting (ε, δ) over B predictions")
    rows = teaching.composition_rows(eps, delta)
    here = {(r["panel"], r["rule"]): r for r in teaching.composition_rows(eps, delta, budgets=(budget,))}
    # Two metrics a row, as in section 1: four in a row cut labels and deltas at 800 px ("tight (exact …",
    # "↓ 3.08× less …").
    m = [c for _ in range(2) for c in st.columns(2)]
    if delta > 0:
        g_basic, g_adv, g_tight = (here[("gaussian", k)]["value"] for k in ("basic", "advanced", "tight"))
        m[0].metric(f"Per-query σ/Δ at B = {budget}: basic", format_number(g_basic, 4))
        m[1].metric("paper (advanced)", format_number(g_adv, 4))
        m[2].metric("tight (exact Gaussian)", format_number(g_tight, 4),
                    **_ratio_delta(g_adv / g_tight, "noise", "the paper's advanced composition"))
        beta_t = here[("exponential", "tight")]["value"]
        beta_z = here[("exponential", "zcdp")]["value"]
        m[3].metric("Vote β: tight (optimal)", format_number(beta_t, 4), **_ratio_delta(
            beta_t / beta_z, "β", "zCDP's β″", f" zCDP's β″ = {format_number(beta_z, 4)}."))
    else:
        m[0].metric(f"Per-query ε at B = {budget}", format_number(eps / budget, 4))
        m[1].metric("Laplace-like scale 1/β (units of Δ)", format_number(here[("gaussian", "basic")]["value"], 4))
        m[2].metric("Vote β = ε/(2B)", format_number(here[("exponential", "basic")]["value"], 4))
        m[3].metric("as published β = ε/B", format_number(here[("exponential", "as published")]["value"], 4),
                    delta="2× the valid β ε/(2B): too little noise", delta_color="red", delta_arrow="off")
    fig = teaching.composition_figure(eps, delta, current_budget=budget)
    add_caption(fig, {"ε": eps, "delta": delta, "budget": budget})
    display.show_figure(fig, key="learn_comp_chart")
    export_buttons(fig, rows, key="learn_comp")
    st.markdown(
        "**Reading it.** A private *prediction* method answers B queries from one (ε, δ): each answer gets a "
        "share. Basic composition splits ε linearly (noise ∝ B). With δ > 0 the paper's advanced composition "
        "(ε\\* with the best δ′) grows like √B; *exact* Gaussian composition (B Gaussian answers are one Gaussian "
        "with √B times the sensitivity) is tight and needs several times less noise. For the noisy vote of "
        "subsample-and-aggregate, each answer is 2β-DP (one changed example moves one vote: one count falls, "
        "another rises), so pure composition allows β = ε/(2B), not the published ε/B; with δ > 0 the zCDP β″ and "
        "the optimal bounded-range composition allow much larger β. Training methods (model sensitivity, loss "
        "perturbation, DP-SGD) do not depend on B at all.")
    if delta == 0:
        st.info("δ = 0: advanced and tight composition need δ > 0. Set δ > 0 to see them.")

# ---------------------------------------------------------------- 3. subsampling
elif section == SECTIONS[2]:
    st.subheader("Amplification by subsampling (the reason DP-SGD works)")
    a, b = st.columns(2)
    with a:
        z = _grid_select("Noise multiplier σ of one step", (0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0), 1.0, "learn_sigma",
                         help="Gaussian noise std relative to the clipping norm ν (sensitivity of one step).")
    with b:
        steps = _grid_select("Steps composed", (1, 10, 100), 1, "learn_steps",
                             help="The classic bound is for one step; the accountants compose any number.")
    amp_delta = delta if delta > 0 else 1e-5
    if delta == 0:
        st.info("The subsampled Gaussian needs δ > 0 (DP-SGD has no pure-DP guarantee): shown at δ = 1e-5.")
    n = controls.current_setting().effective_n(side.info) if side.info is not None else None
    batch = int(controls.current_setting().batch_size)
    q_now = min(1.0, batch / n) if n else None
    with st.spinner("Running the Opacus accountants..."):
        rows = teaching.amplification_rows(z, amp_delta, steps=steps)
        fig = teaching.amplification_figure(z, amp_delta, steps=steps, current_rate=q_now)
    if q_now is not None:
        at_q = teaching.amplification_rows(z, amp_delta, rates=(q_now, 1.0), steps=steps)
        by = {(r["bound"], r["q"]): r["epsilon"] for r in at_q}
        m = st.columns(3)
        m[0].metric(f"ε at q = {q_now:.3g} (batch {batch} of N = {n:,}), RDP", format_number(by[("RDP (Opacus)", q_now)], 4))
        if ("PRV (Opacus)", q_now) in by:
            m[1].metric("PRV", format_number(by[("PRV (Opacus)", q_now)], 4))
        m[2].metric("Full batch (q = 1), RDP", format_number(by[("RDP (Opacus)", 1.0)], 4))
    add_caption(fig, {"delta": amp_delta, "noise multiplier σ": z, "steps": steps,
                      **({"q (batch / N)": round(q_now, 4)} if q_now is not None else {})})
    display.show_figure(fig, key="learn_amp_chart")
    export_buttons(fig, rows, key="learn_amp")
    st.markdown(
        "**Reading it.** When each example enters a step only with probability q, an attacker does not know "
        "whether its example was used: one step's ε shrinks roughly in proportion to q for small q. DP-SGD "
        "composes thousands of such cheap steps with an accountant (here Opacus RDP and PRV, add/remove "
        "neighbours; the calibration itself uses replace-one PLD, except *paper*); for a single "
        "step RDP is loose (its conversion to (ε, δ) costs ≈ ln(1/δ)/(α−1)), which is why the curves differ most "
        "at small q. The classic bound holds at δ′ = qδ, a smaller δ, so it is an (ε, δ) bound too, only a looser "
        "one. The dashed line at the current q uses the DP-SGD batch size and N of the shared settings.")

# ---------------------------------------------------------------- 4. hypothesis tests
elif section == SECTIONS[3]:
    st.subheader("What (ε, δ) means for an attacker")
    adv = teaching.attack_advantage(eps, delta)
    # Two metrics a row, as in the other sections: three in a row were cut at 800 px ("Max TPR − FPR allowe…").
    st.metric("Max TPR − FPR allowed by (ε, δ)-DP", format_number(adv["dp_bound"], 3))
    m = st.columns(2)
    m[0].metric("Laplace mechanism reaches", format_number(adv["laplace"], 3))
    if "gaussian" in adv:
        m[1].metric("Gaussian mechanism reaches", format_number(adv["gaussian"], 3))
    fig = teaching.hypothesis_figure(eps, delta)
    add_caption(fig, {"ε": eps, "delta": delta})
    display.show_figure(fig, key="learn_hyp_chart")
    export_buttons(fig, teaching.hypothesis_rows(eps, delta), key="learn_hyp")
    st.markdown(
        "**Reading it.** An attacker sees one output and must say whether the training data were D or a neighbour "
        "D′ (one example replaced). (ε, δ)-DP says that every test's true-positive rate is at most e^ε × its "
        "false-positive rate + δ (and the same for the opposite test): the shaded region. The Laplace mechanism "
        "touches the boundary (pure DP is tight for it); the Gaussian calibrated to (ε, δ) stays well inside "
        "except near the corners, where δ is spent: (ε, δ) is a loose description of the Gaussian, which is why "
        "exact accounting (tight mode) gains so much.")

# ---------------------------------------------------------------- 5. method cards
else:
    st.subheader("The methods")
    info = side.info
    cur = controls.current_setting()
    from privcore import Problem

    problem = None
    if info is not None:
        try:
            problem = setting.setting_problem(info, replace(cur, budget=budget), fit_n=True)
        except (TypeError, ValueError) as err:
            display.show_error(err, prefix="Settings")
    if problem is None:
        problem = Problem(budget=budget)
    st.caption(f"Calibrations at (ε, δ) = ({format_number(eps)}, {format_number(delta)}), B = {budget}, "
               f"N = {problem.n:,}, D = {problem.dim}, C = {problem.classes}, λ = {format_number(problem.lam)}"
               + (f" (λ = auto shown at {format_number(problem.lam)})" if cur.lam == "auto" else "") + f", T = {problem.teachers}. "
               + setting.NEIGHBOURS_NOTE + " Each card's guarantee holds for a release with secure noise "
               "(sweep --secure-noise) when it is published.")
    with st.spinner("Calibrating..."):
        cards = teaching.method_cards(eps, delta, problem)
    # One card per row, formulas wrapped at CARD_LINE characters: in two columns (430 px each at a 1,400 px
    # window) 17 of 24 formulas ran past their card's edge (KaTeX does not wrap); tests/test_browser_widths.py.
    for card in cards:
        with st.container(border=True):
            st.markdown(f"<div style='height:6px;background:{card['color']};border-radius:3px'></div>",
                        unsafe_allow_html=True)
            with formula.line_width(CARD_LINE):
                blocks = teaching.method_card_blocks(card)  # formulas typeset, as on Explore
            for kind, text in blocks:
                {"markdown": st.markdown, "latex": st.latex, "text": st.text, "caption": st.caption}[kind](text)
    rows = [{"method": c["name"], "accounting": cal["accounting"], "formula": cal["formula"], "values": cal["values"],
             "error": cal["error"], "summary": c["summary"], "assumptions": c["assumptions"], "wins_when": c["wins_when"]}
            for c in cards for cal in c["calibrations"]]
    st.download_button("Download the cards (CSV)", data=lambda: _cards_csv(rows), file_name="method-cards.csv",
                       mime="text/csv", key="learn_cards_csv", on_click="ignore")
