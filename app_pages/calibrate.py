"""Calibrate: every method's noise scale for the current setting, instantly (no training)."""

from __future__ import annotations

import streamlit as st

from privcore.accounting.forward import real_epsilon_summary, real_guarantee
from privcore.calibration import calibrate_all
from privcore.knobs import LAM_AUTO_STANDIN
from privcore.methods import get_method
from privcore.types import ACCOUNTING_MODES, CalibrationError, PrivacyBudget
from ui import controls, display, forward, setting, sidebar, state, userdata
from ui.caption import DPSGD_KNOBS, add_caption, chart_settings, dpsgd_sampling_text
from ui.export import export_buttons, rows_csv
from ui.figures import accounting_comparison_figure, format_number, main_noise, method_label
from ui.tables import calibration_table, noise_table_config, noise_table_legend, noise_table_order

st.title("Calibrate: how much noise does each method add?")
st.caption("Pure calibration: the noise each method must add to meet (ε, δ) on this problem. No data are "
           "trained, so it is instant. " + setting.NEIGHBOURS_NOTE + " " + setting.RELEASE_MODE_NOTE)

side = sidebar.settings(require_data=True)
info = side.info
c1, c2, c3 = st.columns(3, vertical_alignment="bottom")  # inputs level when a label wraps (800 px)
eps = controls.epsilon_slider(c1)
delta = controls.delta_slider(c2)
budget = controls.budget_slider(c3)
with st.expander("Problem: N, T, λ, D, C and DP-SGD", expanded=False):
    a, b, c = st.columns(3)
    n = controls.n_slider(info, a, allow_augment=True)  # the N of the other pages, augmented or not
    teachers = controls.teachers_slider(b)
    lam = controls.lam_slider(c)
    d, e, f = st.columns(3)
    dim = controls.dim_slider(info, d)
    classes = controls.classes_slider(info, e)
    clip, epochs, batch = controls.dpsgd_controls(st.columns(3))

s = setting.Setting(eps=float(eps), delta=float(delta), budget=int(budget), n=n, teachers=int(teachers), lam=lam,
                    dim=dim, classes=classes, clip=float(clip), epochs=int(epochs), batch_size=int(batch))
for caveat in setting.data_caveats(side, s):  # augmentation (k from the rows of the classes kept), PCA, class filter
    st.warning(caveat)
if lam == "auto":
    st.info(f"λ = auto is chosen per method during training; the table uses λ = {format_number(LAM_AUTO_STANDIN)} "
            "instead.")
try:
    problem = setting.setting_problem(info, s)
    target = PrivacyBudget(float(eps), float(delta))
except (ValueError, TypeError) as err:  # a method's own rules (T <= N, batch <= N) show per method below
    display.show_error(err, prefix="Invalid problem")
    st.stop()

if side.accounting == "paper":  # the published sensitivity, which assumes the exact minimiser
    sens_text = f"sensitivity 2K/(Nλ) = **{format_number(problem.sensitivity, 4)}** (exact minimiser, as published)"
else:  # what model and prediction sensitivity calibrate to: the solver's certified gradient norm g included
    sens_text = (f"sensitivity 2K/(Nλ) + 2g/λ = **{format_number(problem.certified_sensitivity, 4)}** (g: the "
                 f"solver's certified gradient norm; the exact minimiser's 2K/(Nλ) is "
                 f"{format_number(problem.sensitivity, 4)})")
st.markdown(f"N = {problem.n:,}, D = {problem.dim}, C = {problem.classes}, λ = {format_number(problem.lam)} → "
            f"{sens_text}; {dpsgd_sampling_text(problem)}.")

with st.spinner("Calibrating..."):
    scales = calibrate_all(target, problem, side.accounting)
st.subheader(f"Noise scales under “{side.accounting}” accounting (ε = {format_number(eps)}, δ = {format_number(delta)}, "
             f"B = {budget:,})")
# Where the accounting mode claims more than the noise gives (paper; tight subsample-and-aggregate), the
# epsilon each noise really reaches under replace-one neighbours, computed.
real = {m: real_guarantee(m, sc.to_dict(), problem, float(delta), side.accounting)[0]
        for m, sc in scales.items() if not isinstance(sc, CalibrationError)}
table = calibration_table(scales, real=real)  # formulas and notes are long: typeset below, where text wraps
st.dataframe(table, hide_index=True, width="stretch", column_config=noise_table_config(table.columns),
             column_order=noise_table_order(table.columns, table))
st.caption(noise_table_legend(noise_table_order(table.columns, table)) + ".")
summary = real_epsilon_summary([{"method": m, "epsilon": float(eps), "real_epsilon": v} for m, v in real.items()],
                               method_label)
if summary:
    st.warning(summary + ".")
# Under the table, where their rows read "not available": one sentence for the methods without a
# guarantee at this delta (as on Explore), then any other calibration that failed, by its label.
unsupported = [m for m, sc in scales.items() if isinstance(sc, CalibrationError) and not get_method(m).supports(delta)]
if unsupported:
    st.warning(setting.needs_delta_text([method_label(m) for m in unsupported]))
for m, sc in scales.items():
    if isinstance(sc, CalibrationError) and m not in unsupported:
        st.warning(f"{method_label(m)}: {sc}")
display.show_formulas([{"method": m, "formula": sc.formula, "note": "; ".join(sc.notes)}
                       for m, sc in scales.items() if not isinstance(sc, CalibrationError)], expanded=True)

forward.forward_section(scales, problem, float(delta), side.accounting)
data_notes = setting.data_caveats(side, s)
forward.statement_buttons([m for m, sc in scales.items() if not isinstance(sc, CalibrationError)], problem, float(eps),
                          float(delta), side.accounting, data_notes, data=setting.data_words(side))

compare = state.commit("compare", st.checkbox("Compare paper / corrected / tight side by side", key=state.bind("compare")))
if compare:
    by_mode = {mode: (scales if mode == side.accounting else calibrate_all(target, problem, mode)) for mode in ACCOUNTING_MODES}
    rows = []
    for m in scales:
        row = {"Method": method_label(m)}
        for mode in ACCOUNTING_MODES:
            sym, v, _ = main_noise(by_mode[mode][m])
            row[mode] = "not available" if v is None else f"{sym} = {format_number(v, 4)}"
        rows.append(row)
    st.dataframe(rows, hide_index=True, width="stretch")
    fig = accounting_comparison_figure(by_mode, title=f"Noise relative to corrected accounting (ε = {format_number(eps)}, "
                                                         f"δ = {format_number(delta)}, B = {budget:,})")
    add_caption(fig, chart_settings([], dataset=userdata.dataset_label(side), accounting="paper / corrected / tight",
                                    extra={"n": problem.n, "classes": problem.classes, "dim": problem.dim,
                                           "lam": problem.lam, "teachers": problem.teachers,
                                           **{k: getattr(problem, k) for k in DPSGD_KNOBS}}))
    display.show_figure(fig, key="fig_accounting")
    st.caption("Bars above 1 add more noise than the corrected calibration; bars below 1 add less. β is an inverse "
               "scale, so its ratio is inverted. 'paper' bars below 1 mark published calibrations that are too "
               "optimistic (they promise more privacy than they give).")
    flat = [{"accounting": mode, "method": m, **(sc.to_dict() if not isinstance(sc, Exception) else {"error": str(sc)})}
            for mode, d in by_mode.items() for m, sc in d.items()]
    export_buttons(fig, flat, key="export_accounting")
else:
    st.download_button("CSV of this table", data=rows_csv(table.to_dict("records")), file_name="calibration.csv",
                       mime="text/csv", on_click="ignore")
