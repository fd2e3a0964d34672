"""Reproduce the paper: its Figures 1-6 on the chosen data set, as published and corrected, one chart under the other.

Thin page: figure settings come from :func:`ui.paper.paper_figures`, sweeps run through
:func:`ui.progress.run_with_progress` (progress bar with device and ETA, disk cache), charts from
:mod:`ui.figures` / :mod:`ui.teaching`, exports from :mod:`ui.export`.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from privcore.methods import get_method
from ui import controls, display, paper, progress, setting, sidebar, state, userdata
from ui.caption import add_caption, settings_of
from ui.export import export_buttons
from ui.figures import curve_figure, format_number, method_label

ACCOUNTING_TITLES = {
    "paper": "as published (paper accounting)",
    "corrected": "corrected accounting",
    "tight": "tight accounting (exact / optimal composition)",
}
TEACHER_OPTIONS = (16, 32, 64, 128, 256)

side = sidebar.settings()
st.title("Reproduce the paper")
st.markdown(
    "The linear-model figures of *The Trade-Offs of Private Prediction* (van der Maaten and Hannun, Section 4) on the "
    "data set chosen in the sidebar, with the paper's axes and settings. Each figure is computed on demand (progress "
    "bar with device and ETA) and then cached. The **as published** accounting is drawn next to the **corrected** one: "
    "the paper's subsample-and-aggregate calibration β = ε/B is really 2ε-DP (one changed example moves one vote, so "
    "one count falls and another rises) and its loss perturbation is calibrated for add/remove rather than "
    "replace-one neighbours.")
if side.info is None:
    st.stop()
info = side.info
cur = controls.current_setting()

c1, c2, c3 = st.columns([4, 3, 2])
t_options = [t for t in TEACHER_OPTIONS if t <= max(1, info.n_train // 4)] or [1]
teachers = int(state.get("repro_t"))
if teachers not in t_options:
    teachers = min(64, t_options[-1])
augment = False
figures = paper.paper_figures(info.n_train, info.dim, info.classes, image=info.image, augment=False,
                              min_n=int(teachers))
keys = [f.key for f in figures]
with c1:
    key = state.commit("figure", st.selectbox(  # in the URL, so a link opens the same figure
        "Figure", keys, format_func=lambda k: next(f.label for f in figures if f.key == k),
        key=state.bind("figure", normalise=lambda v: v if v in keys else keys[0])))
with c2:
    accountings = st.multiselect("Accountings to compare", list(ACCOUNTING_TITLES),
                                 key=state.bind("repro_acc", normalise=lambda v: [a for a in v if a in ACCOUNTING_TITLES]),
                                 format_func=lambda a: a, wrap=True,
                                 help="paper: the published calibrations. corrected: sound ones. tight: exact Gaussian "
                                      "and optimal bounded-range composition, finer replace-one PLD grid for DP-SGD. "
                                      "This choice replaces the sidebar's accounting on this page.")
    accountings = state.commit("repro_acc", list(accountings))
    st.caption(f"This page draws a chart for each accounting chosen here; the sidebar's “{side.accounting}” applies "
               "to the other pages." + ("" if accountings else " None is chosen: the chart is drawn with “corrected”."))
    accountings = accountings or ["corrected"]  # said above: an empty choice (or repro_acc=[] in a link) was silent
fig_def = next(f for f in figures if f.key == key)
# Only the controls that apply to this figure: T when one of its methods uses teachers (and the figure
# does not vary T itself), growing N only for the figure that varies N on image data.
uses = {u for m in fig_def.methods for u in get_method(m).uses}
if "teachers" in uses and fig_def.vary != "teachers":
    with c3:
        teachers = state.commit("repro_t", st.select_slider(
            "Teachers T (subsample-and-aggregate)", options=t_options,
            key=state.bind("repro_t", normalise=lambda v: v if v in t_options else min(64, t_options[-1])),
            help="The paper used T = 256 on 60,000 examples (234 per teacher). Training time grows with T."))
    figures = paper.paper_figures(info.n_train, info.dim, info.classes, image=info.image, augment=False,
                                  min_n=int(teachers))
if fig_def.vary == "n" and info.image:
    augment = st.checkbox("Grow N beyond the data set with deformed copies of its images (slow)", value=False,
                          key="repro_augment", help="The paper used InfiMNIST (1M deformed digits) for this figure.")
    if augment:
        figures = paper.paper_figures(info.n_train, info.dim, info.classes, image=True, augment=True,
                                      min_n=int(teachers))
        fig4 = next(f for f in figures if f.key == key)
        st.warning(setting.augmentation_caveat(info.n_train, int(max(fig4.values)), float(fig4.epsilons[0])))
fig_def = next(f for f in figures if f.key == key)

# The paper's setting: full data unless the figure varies it, B = 100, the shared λ and DP-SGD knobs.
paper_setting = replace(cur, eps=fig_def.epsilons[0], delta=fig_def.delta, budget=fig_def.budget, n=None, dim=None,
                  classes=None, teachers=int(teachers), methods=fig_def.methods, augment=augment)
if fig_def.vary == "n":  # every N must hold a full DP-SGD batch (privcore checks it even when DP-SGD is off)
    paper_setting = replace(paper_setting, batch_size=min(int(cur.batch_size), int(min(fig_def.values))))
# Each method's own rules (a DP-SGD batch above N, T above N, ...): a method that cannot run is left
# out with its reason and the others still compute.
run_methods, left_out, partly = paper.runnable_methods(fig_def, paper_setting, info)
display.show_warnings(left_out)
if not run_methods:
    st.error(f"None of Figure {key}'s methods can run at this setting (see the notes above).")
    st.stop()
specs = {}
for acc in accountings:
    try:
        specs[acc] = setting.make_spec(replace(side, accounting=acc), paper_setting, epsilons=fig_def.epsilons,
                                       vary=fig_def.vary, values=fig_def.values, methods=run_methods)
    except (TypeError, ValueError) as err:
        display.show_error(err, prefix=f"Figure {key} cannot be set up on this data set")
        st.stop()

variants = len(fig_def.values) if fig_def.vary else 1
points = variants * len(run_methods) * len(fig_def.epsilons) * len(specs)
fixed = [f"Data: {info.name} ({info.n_train:,} training examples, D = {info.dim}, C = {info.classes})",
         f"R = {side.repeats} repetitions (sidebar)"]
if "lam" in uses:
    fixed.append(f"λ = {format_number(cur.lam)}")
if "teachers" in uses:
    fixed.append(f"T = {teachers}")
if "epochs" in uses:
    fixed.append(f"DP-SGD: clip {format_number(cur.clip)}, {cur.epochs} epoch{'s' if cur.epochs != 1 else ''}, batch {paper_setting.batch_size}")
st.caption(" · ".join(fixed + [f"{points} private points in all (and the non-private baseline)"]) + ". The paper used N = 60,000, R = 100 and "
           "cross-validated λ. " + setting.NEIGHBOURS_NOTE)

store = st.session_state.setdefault("repro_results", {})
results = {}
for acc, spec in specs.items():
    sig = spec.key
    if sig not in store:
        hit = paper.cached_sweep(spec)  # straight from the disk cache when every point is there
        if hit is not None:
            store[sig] = hit
    if sig in store:
        results[acc] = store[sig]

missing = [acc for acc in specs if acc not in results]
if missing:
    slot = st.empty()
    seconds = [progress.estimate_seconds(specs[acc]) for acc in missing]
    about = f", about {progress.fmt_seconds(sum(seconds))}" if None not in seconds else ""
    with slot.container():
        clicked = st.button(f"Compute Figure {key} ({', '.join(missing)} accounting{about})", type="primary",
                            key="repro_compute",
                            help="Runs on the device chosen in the sidebar; finished points are cached on disk.")
        if not clicked and any(progress.cancel_clicked(f"repro_{key}_{acc}") for acc in missing):
            st.info(f"Figure {key}: cancelled. Finished points are cached; press the button to compute the rest.")
        elif not clicked:
            st.info(f"Figure {key} is not computed yet for this data set and these settings: about {points} points "
                    f"× {side.repeats} repetitions. Press the button to compute it.")
    if clicked:
        slot.empty()
        for acc in missing:
            res = progress.run_with_progress(specs[acc], key=f"repro_{key}_{acc}",
                                            label=f"Figure {key}, {acc} accounting", show_done=True, ask=False)
            if res is None:
                break
            store[specs[acc].key] = res
            results[acc] = res

if results:
    # One under the other at full width: side by side, each chart was too narrow at 800 px to read (titles,
    # captions and ticks cut; a walk-through finding), as on the Deep models page.
    drawn = []
    for acc in specs:
        with st.container():
            res = results.get(acc)
            if res is None:
                st.info(f"{ACCOUNTING_TITLES[acc]}: not computed yet.")
                continue
            title = f"Figure {key} · {ACCOUNTING_TITLES[acc]}"
            if fig_def.by_epsilon:
                fig = paper.epsilon_curves_figure(res.rows, fig_def.x, title=title, log_x=fig_def.log_x)
            else:
                fig = curve_figure(res.rows, fig_def.x, title=title, log_x=fig_def.log_x)
            add_caption(fig, settings_of(specs[acc], res.rows, dataset=userdata.dataset_label(side)))
            display.show_figure(fig, key=f"repro_chart_{key}_{acc}")
            # the points left out above already say why (the runner's message names the method by code)
            display.show_warnings(w for w in res.warnings if not any(w.startswith(f"{m}: ") for m in partly))
            drawn.append((acc, fig, res))
    st.markdown(f"**What the paper found.** {fig_def.finding}")
    if fig_def.note:
        st.caption(fig_def.note)
    # Export rows at full width (the buttons do not fit under half-width charts).
    for acc, fig, res in drawn:
        st.caption(f"Download Figure {key}, {ACCOUNTING_TITLES[acc]}:")
        export_buttons(fig, res.rows, key=f"repro_export_{key}_{acc}", filename=f"figure-{key}-{acc}")
        display.copy_as_code(specs[acc], side, key=f"repro_code_{key}_{acc}")
    gaps = paper.accounting_gaps({a: r.rows for a, r in results.items()}, fig_def.x,
                                    reference="paper" if "paper" in results else next(iter(results)))
    if gaps:
        at_eps = 1.0 if 1.0 in fig_def.epsilons else fig_def.epsilons[len(fig_def.epsilons) // 2]
        problem = setting.setting_problem(info, paper_setting, fit_n=True)
        ratios = paper.noise_ratios(problem, [g["method"] for g in gaps], at_eps, fig_def.delta,
                                    sorted({g["accounting"] for g in gaps}), reference="paper")
        st.markdown("**How much the accounting changes each method** (accuracy minus the as-published accuracy, "
                    "matched point by point):")
        st.dataframe(pd.DataFrame([{
            "Method": method_label(g["method"]), "Accounting": g["accounting"],
            "Noise vs published": paper.ratio_text(ratios.get((g["method"], g["accounting"]))),
            "Mean change": f"{round(g['mean_change'], 3) + 0.0:+.3f}",  # + 0.0: never "-0.000" "Largest drop": f"{max(0.0, g['max_drop']):.3f}", "Points": g["points"],
        } for g in gaps]), hide_index=True)
        st.caption(f"Noise vs published: the method's noise under that accounting divided by its published noise at "
                   f"ε = {format_number(at_eps)}, δ = {format_number(fig_def.delta)}, B = {fig_def.budget:,}, "
                   f"N = {problem.n:,} (> 1: more noise; β, an inverse scale, is inverted). Why each calibration "
                   "changed: the method cards on the Learn page and the formulas on the Calibrate page.")
