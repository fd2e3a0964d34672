"""Explore: move one knob, see every method's accuracy, noise and the recommended method.

The current setting is computed first (a few seconds, then cached) so the recommendation and the
noise table appear quickly; the active tab's curve follows with a progress bar.
"""

from __future__ import annotations

import streamlit as st

from privcore.methods import REGISTRY, methods_of_family
from privcore.methods.fields import ANSWERED_FRACTION

from privcore.inverse import score_rows
from privcore.validation import epsilon_up
from privcore.accounting.forward import real_epsilon_summary
from privcore.engine.rows import knobs_picked
from privcore.recommend import recommend
from ui import controls, display, forward, inverse, progress, setting, sidebar, state, userdata
from ui.caption import add_caption, leaders_text, rows_n, settings_of, try_this
from ui.panel import result_tail
from ui.figures import AXIS_SYMBOLS, BANDS, curve_figure, format_number, is_baseline, method_label
from ui.text import escape_markdown
from ui.tables import knobs_lines, noise_table, noise_table_config, noise_table_legend, noise_table_order

TABS = {"epsilon": "Accuracy vs ε", "budget": "vs B (predictions)", "delta": "vs δ", "n": "vs N (training size)"}
LABEL_TO_AXIS = {v: k for k, v in TABS.items()}
B_VALUES = (1, 3, 10, 30, 100, 300, 1000)
DELTA_VALUES = (1e-10, 1e-8, 1e-6, 1e-5, 1e-4, 1e-3)
N_VALUES = (250, 500, 1000, 2000, 4000, 8000, 16000)

st.title("Explore the trade-offs of private prediction")
def _names(family: str) -> str:
    return ", ".join(REGISTRY[m].sentence_label or REGISTRY[m].label for m in methods_of_family(family))


st.caption(f"{len(REGISTRY)} ways to make a linear classifier's predictions differentially private, compared on the "
           f"same data. Private training ({_names('training')}) protects the model once; private prediction "
           f"({_names('prediction')}) spends ε over B answers.")

side = sidebar.settings(require_data=True)
s = controls.checked_setting_panel(side, allow_augment=True)
answered_only = inverse.answered_only_toggle()  # default off: abstentions count as wrong

# Two fixed slots, so every run has the same layout: the current setting's progress (empty once it
# is computed or when it comes from the memo), then the recommendation. With one shared container
# the box moved up a slot when no bar was drawn, and the previous run's box stayed visible, faded,
# below the new one until the run ended.
rec_area = st.container()
point_status = rec_area.empty()
rec_slot = rec_area.container()
tab_key = state.bind("tab", normalise=lambda v: TABS.get(v, v) if v in TABS else (v if v in LABEL_TO_AXIS else TABS["epsilon"]))
tabs = st.tabs(list(TABS.values()), key=tab_key, on_change="rerun")
active = state.commit("tab", LABEL_TO_AXIS.get(st.session_state.get(tab_key), "epsilon"))


def frame_grid(axis: str) -> tuple[float, ...]:
    """The x values the empty frame's axis spans (about those of the curve to come)."""
    if axis == "epsilon":
        return setting.curve_epsilons(state.get("eps_min"), state.get("eps_max"), current=s.eps)
    return {"budget": B_VALUES, "delta": DELTA_VALUES}.get(axis, N_VALUES)


with tabs[list(TABS).index(active)]:
    tab_controls = st.container()  # the band choice and the curve's own range controls
    chart_slot = st.empty()        # the curve; on a first visit an empty frame at once, so the browser
    if not progress.has_previous(f"fig_{active}"):  # loads its chart code while the setting computes
        with chart_slot:
            display.show_figure(curve_figure([], active, title="", log_x=True, empty_text="Computing…",
                                             x_values=frame_grid(active)), key=f"fig_{active}_frame")
    with tab_controls:
        band = state.commit("band", st.radio(
            "Bands around each curve", list(BANDS), key=state.bind("band"), format_func=BANDS.get, horizontal=True,
            help="±1 sd: the spread of single runs. 95 % CI: where the mean of the R runs lies (1.96 sd/√R), "
                 "to judge whether two curves really differ."))
table_area = st.container()
target_area = st.container()  # the inverse view (filled from the ε curve), below the noise table


# ---------------------------------------------------------------- 1. the current setting (fast)
def show_point(rows: list[dict]) -> None:
    with rec_slot:
        rec = recommend(rows)
        box = st.container(border=True)
        if rec.winner is None:
            box.warning("No private method produced a result at this setting.")
            return
        acc, std = rec.accuracies[rec.winner]
        winner_row = next((r for r in rows if r.get("method") == rec.winner), {})
        real = winner_row.get("real_epsilon")
        overspent = real is not None and float(real) > float(s.eps) * (1 + 1e-9)
        if overspent:  # paper mode: the best row's noise does not meet the header's ε, so no green box
            box.warning(f"**Not a recommendation at ε = {format_number(s.eps)}:** {method_label(rec.winner)} is the "
                        f"most accurate at the paper's published calibration (accuracy {acc:.3f} ± {std:.3f}), "
                        f"but its noise really guarantees ε = {format_number(epsilon_up(real))}, over your budget: "
                        "set Accounting to “corrected” for a choice that meets it.")
        elif not rec.useful:  # an honest verdict: no green box for a method at chance
            box.warning(f"**No method is useful at this setting** · best: {method_label(rec.winner)}, accuracy "
                        f"{acc:.3f} ± {std:.3f}")
        else:
            head = f"**Recommended: {method_label(rec.winner)}** · accuracy {acc:.3f} ± {std:.3f}"
            if rec.runner_up is not None:
                verdict = ("beyond the repetition noise" if rec.significant
                           else f"within the repetition noise: too close to call, {method_label(rec.runner_up)} "
                                "is as good a choice")
                head += (f" · margin over {method_label(rec.runner_up)}: {rec.margin:+.3f} ({verdict}, "
                         f"threshold ±{rec.threshold:.3f} = 2 standard errors over R = {side.repeats})")
            (box.success if rec.significant or rec.runner_up is None else box.info)(head)
        box.markdown(rec.reason)
        if side.tuning != "configured":  # what the comparison is, and the knobs the winner was run at
            box.caption(setting.TUNING_NOTES[side.tuning] + f" {method_label(rec.winner)}'s: "
                        + (knobs_picked(winner_row.get("tuned")) or "as configured") + ".")
        # The attacker sentence speaks of what is really guaranteed (the header's ε where that holds).
        box.caption(inverse.risk_caption(s.eps if real is None else float(real), s.delta)
                    + ("" if real is None else f" (at the real ε = {format_number(epsilon_up(real))} of "
                                               f"{method_label(rec.winner)}'s noise, not the stated "
                                               f"{format_number(s.eps)})"))
        summary = real_epsilon_summary(rows, method_label)
        if summary:
            box.warning(summary + ". The table's “Real ε” column has every method's.")
        for caveat in setting.data_caveats(side, s):  # augmentation, PCA on the private split
            box.caption("What the guarantee covers: " + caveat)
        try:  # the recommended method's privacy statement (any shown method can be chosen)
            with box:
                forward.statement_buttons([r["method"] for r in rows], setting.setting_problem(side.info, s),
                                          float(s.eps), float(s.delta), side.accounting, setting.data_caveats(side, s),
                                          first=rec.winner, tuned={r["method"]: r.get("tuned") for r in rows},
                                          data=setting.data_words(side))
        except (ValueError, TypeError) as err:
            box.caption(f"No privacy statement at this setting: {err}")
    with table_area:
        st.subheader(f"Noise at the current setting (ε = {format_number(s.eps)}, δ = {format_number(s.delta)}, "
                     f"B = {s.budget:,})")
        table = noise_table(rows)  # formulas and notes are long: typeset below, where text wraps
        st.dataframe(table, hide_index=True, width="stretch", column_config=noise_table_config(table.columns),
                     column_order=noise_table_order(table.columns, table))
        st.caption(noise_table_legend(noise_table_order(table.columns, table), answered_only=answered_only) + ".")
        knobs = knobs_lines(rows)
        if knobs:  # a tuned comparison's knobs, where text wraps (a table cell cut them short)
            st.markdown("**Knobs each method ran at**\n" + "\n".join(f"- {escape_markdown(k)}" for k in knobs))
        display.show_formulas(rows)


def curve_values(axis: str) -> tuple:
    """The x values of the tab's curve other than epsilon (B, delta or N)."""
    if axis == "budget":
        return tuple(sorted(set(B_VALUES) | {s.budget}))
    if axis == "delta":
        return tuple(sorted(set(DELTA_VALUES) | ({s.delta} if s.delta > 0 else set())))
    lowest, avail = setting.min_train_size(s), side.info.train_rows(s.classes)  # a class filter keeps fewer rows
    return tuple(sorted({v for v in N_VALUES if lowest <= v <= avail} | {s.effective_n(side.info)}))


def curve_spec_kwargs(axis: str, lo: float, hi: float) -> dict:
    """:func:`ui.setting.make_spec`'s arguments of the tab's curve (``lo``, ``hi``: the ε curve's range)."""
    if axis == "epsilon":
        return {"epsilons": setting.curve_epsilons(lo, hi, current=s.eps)}
    return {"epsilons": (s.eps,), "vary": axis, "values": curve_values(axis)}


def tab_curve(axis: str):  # noqa: ANN201 - SweepSpec | None
    """The active tab's curve spec (None when the setting is invalid: the tab says what is wrong with it)."""
    try:
        return setting.make_spec(side, s, **curve_spec_kwargs(axis, state.get("eps_min"), state.get("eps_max")))
    except (ValueError, TypeError):
        return None


def approve_curve_with_point(axis: str) -> None:
    """The click on the current setting's "Compute" approves the active tab's curve too (its quick part
    included): one click computes what the page shows (a walk-through needed a second click for the curve)."""
    curve = tab_curve(axis)
    if curve is None:
        return
    approved = st.session_state.setdefault("_approved", {})
    approved[f"curve_{axis}"] = curve.key
    quick = setting.quick_subset(curve)
    if quick is not None:
        approved[f"curve_{axis}_quick"] = quick.key


point_spec = display.spec_or_error(side, s, epsilons=(s.eps,))
if point_spec is None:
    st.stop()
if st.session_state.get("point_compute"):  # this run is the click on the current setting's Compute button
    approve_curve_with_point(active)
also = None  # the point's Compute click also starts the curve: its button prices both (it said 26 s for 80 s)
if progress.needs_click(point_spec, "point") and (curve := tab_curve(active)) is not None:
    seconds = progress.plan_and_estimate(curve)[1]
    if seconds:
        also = (f"the “{TABS[active]}” curve", seconds)
with point_status.container():  # progress (and a cancelled notice) where the recommendation will appear
    point = progress.run_with_progress(point_spec, key="point", label="Current setting", also=also)
if point is None:  # failed, cancelled or waiting for its Compute click: the previous chart stays
    with chart_slot.container():
        progress.show_previous(f"fig_{active}")
    st.stop()
display.show_warnings(point.warnings)
show_point(score_rows(point.rows, answered_only))
with rec_slot:
    userdata.baseline_check(side, point.rows)  # own data: far below a plain logistic regression?


# ---------------------------------------------------------------- 2. the active tab's curve
def describe(rows: list[dict], x: str, xname: str) -> str:
    """One sentence saying what the chart shows (leaders at both ends, the non-private level)."""
    text = leaders_text(rows, x, xname, method_label, format_number)
    if not text:
        return ""
    if answered_only and any(r.get(ANSWERED_FRACTION.name) is not None for r in rows):
        text += " (abstaining methods scored on their answered queries only)"
    base = [r["accuracy_mean"] for r in rows if is_baseline(r["method"])]
    if base:
        text += f"; the dashed line is the non-private model ({max(base):.2f})"
    return text + f". Shaded bands: {BANDS[band]} over the R = {side.repeats} repetitions."


def curve_tab(axis: str) -> None:
    info = side.info
    n_eff = s.effective_n(info)
    if axis == "epsilon":
        c1, c2 = tab_controls.columns(2)
        lo = controls.log_select("eps_min", "Smallest ε on the curve", [e for e in controls.EPS_GRID if e <= 10], container=c1)
        hi = controls.log_select("eps_max", "Largest ε on the curve", [e for e in controls.EPS_GRID if e >= 1], container=c2)
        eps = curve_spec_kwargs(axis, lo, hi)["epsilons"]
        if lo > hi:  # a link may carry them crossed: say so, the curve still runs from the smaller to the larger
            tab_controls.warning(f"The smallest ε on the curve ({format_number(lo)}) is above the largest "
                                 f"({format_number(hi)}): the curve runs from {format_number(hi)} to {format_number(lo)}.")
        if min(eps) < min(lo, hi) or max(eps) > max(lo, hi):  # the sliders' range, widened to the current ε
            tab_controls.caption(f"The curve runs from ε = {format_number(min(eps))} to {format_number(max(eps))}: "
                                 f"it always includes the current ε = {format_number(s.eps)}.")
        spec = display.spec_or_error(side, s, epsilons=eps)
        x, log_x, current, xname = "epsilon", True, s.eps, AXIS_SYMBOLS["epsilon"]
        title = f"Test accuracy vs ε (δ = {format_number(s.delta)}, B = {s.budget:,}, N = {{N}})"
        bundled = (side.dataset, s.lam, s.dim, s.classes) == (state.DEFAULTS["dataset"], state.DEFAULTS["lam"], None, None)
        bundled = bundled and set(s.methods) == set(state.DEFAULTS["methods"])  # its outcomes: the default methods'
        note = try_this(s.delta, s.budget, bundled=bundled, methods=s.methods)  # ... on the bundled data
    elif axis == "budget":
        spec = display.spec_or_error(side, s, **curve_spec_kwargs(axis, 0.0, 0.0))
        x, log_x, current, xname = "budget", True, s.budget, AXIS_SYMBOLS["budget"]
        title = f"Test accuracy vs number of predictions B (ε = {format_number(s.eps)}, δ = {format_number(s.delta)})"
        note = "Only the private-prediction methods depend on B; the private-training methods are flat."
    elif axis == "delta":
        spec = display.spec_or_error(side, s, **curve_spec_kwargs(axis, 0.0, 0.0))
        x, log_x, current, xname = "delta", True, (s.delta if s.delta > 0 else None), AXIS_SYMBOLS["delta"]
        title = f"Test accuracy vs δ (ε = {format_number(s.eps)}, B = {s.budget:,})"
        note = "δ = 0 (pure DP, no DP-SGD) cannot sit on a log axis: set δ = 0 above to see it in the table."
    else:
        top = max(n_eff, info.train_rows(s.classes))
        values = curve_values(axis)
        spec = display.spec_or_error(side, s, **curve_spec_kwargs(axis, 0.0, 0.0))
        x, log_x, current, xname = "n", True, n_eff, AXIS_SYMBOLS["n"]
        title = f"Test accuracy vs training-set size N (ε = {format_number(s.eps)}, δ = {format_number(s.delta)})"
        note = (f"N runs from {min(values):,} (at least T = {s.teachers} and the DP-SGD batch) to the "
                f"{top:,} training examples available; larger N needs augmentation (Who wins page).")
    if spec is None:
        return
    # The methods that only draw noise answer in a fraction of a second: draw them first, then
    # replace the chart when loss perturbation and DP-SGD (one training run per release) are done.
    def chart(rows: list[dict]):  # noqa: ANN202 - the figure, its title with the N the rows used, its settings
        n_used = rows_n(rows)
        fig = curve_figure(rows, x, title=title.replace("{N}", f"{n_used:,}" if n_used else "-"), log_x=log_x,
                           current=current, band=band)
        return add_caption(fig, settings_of(spec, rows, dataset=userdata.dataset_label(side)))

    pending = st.empty()
    if st.session_state.get(f"curve_{axis}_compute"):  # the curve's one Compute click approves its quick part too
        approve_curve_with_point(axis)
    quick = progress.quick_part(spec)
    quick_key = f"curve_{axis}_quick"
    if quick is not None and progress.needs_click(quick, quick_key):
        quick = None  # one Compute box for the whole curve, not a second one for its quick methods
    first = progress.run_with_progress(quick, key=quick_key, label="Quick methods") if quick else None
    if quick is not None and first is None and progress.waiting(quick_key):
        return  # the warm-up computes it (and the full curve next): the page reruns when it is done
    if quick is not None and first is None and progress.was_cancelled(quick, quick_key):
        with chart_slot.container():
            progress.show_previous(f"fig_{axis}")
        return  # one Cancel stops the whole curve; its Resume box is shown
    if first is not None:
        with chart_slot:
            display.show_figure(chart(score_rows(first.rows, answered_only)), key=f"fig_{axis}_quick")
        slow = [method_label(m) for m in spec.methods if m not in quick.methods]
        pending.caption(f"{setting.and_list(slow)} retrain the model for every release and follow in a few seconds.")
    res = progress.run_with_progress(spec, key=f"curve_{axis}", label=f"Curve {TABS[axis]}")
    pending.empty()
    if res is None:  # cancelled, failed (said inline) or waiting for a click: the quick chart, if any, stays
        if first is None:
            with chart_slot.container():
                progress.show_previous(f"fig_{axis}")
        return
    rows = score_rows(res.rows, answered_only)
    fig = chart(rows)
    with chart_slot:
        display.show_figure(fig, key=f"fig_{axis}")
    st.markdown(describe(rows, x, xname))
    if note:
        st.caption(note)
    result_tail(fig, res, spec, side, key=axis, notes=setting.data_caveats(side, s))
    if axis == "epsilon":
        with target_area:
            inverse.target_section(rows, s.budget, n_eff, answered_only)


with tabs[list(TABS).index(active)]:
    curve_tab(active)
