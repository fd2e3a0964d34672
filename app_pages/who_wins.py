"""Who wins: maps over ε x B and ε x N coloured by the method with the best accuracy."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from privcore.engine.specs import TUNING_LABELS

from privcore.inverse import score_rows
from ui import controls, display, inverse, progress, setting, sidebar, state
from ui.caption import rows_n
from ui.panel import result_panel
from ui.figures import format_number, winner_map_figure

B_VALUES, N_VALUES = setting.WHO_WINS_B, setting.WHO_WINS_N
EPS_CHOICES = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)

st.title("Who wins?")
st.caption("Each cell is one setting; its colour is the method with the best mean test accuracy there "
           "(hover for every method's accuracy ± std). “≈” marks a lead within the repetition noise. The other "
           "settings (λ, T, N, DP-SGD, data set) are those of the Explore page and the sidebar.")

side = sidebar.settings(require_data=True)
c1, c2 = st.columns(2)
delta = controls.delta_slider(c1)
eps_key = state.bind("map_eps", normalise=lambda v: [e for e in v if e in EPS_CHOICES] or ([] if v == [] else [1.0, 10.0]),
                     explain="the map's ε columns are among " + ", ".join(format_number(e) for e in EPS_CHOICES))
with c2:
    eps_list = sorted(st.multiselect("ε values (columns)", list(EPS_CHOICES), key=eps_key, format_func=format_number,
                                     wrap=True))  # in a column the chips would stay on one row, the rest hidden
eps_list = state.commit("map_eps", eps_list)
methods = controls.methods_select(delta=delta)
answered_only = inverse.answered_only_toggle()  # default off: abstentions count as wrong
s = replace(controls.current_setting(in_url=True), delta=float(delta), methods=tuple(methods))  # the link keeps λ, T, ...
n_checked, n_note = setting.checked_n(side.info, s.n)  # N comes from the URL here: same rule as the N slider
if n_note:
    st.warning(n_note)
    state.put("n", n_checked)
s = replace(s, n=n_checked)
if side.tuning == "configured":
    st.caption(f"Fixed: λ = {format_number(s.lam)}, T = {s.teachers}, DP-SGD clip {format_number(s.clip)}, "
               f"{s.epochs} epoch{'s' if s.epochs != 1 else ''}, batch {s.batch_size}; {side.repeats} repetitions; "
               f"{side.accounting} accounting.")
else:  # the tuned map: every cell has each method at its own best knobs
    st.info(f"**Tuned map** ({TUNING_LABELS[side.tuning]}). {setting.TUNING_NOTES[side.tuning]} The sidebar's "
            "“Each method's knobs” switches back to the knobs as configured. "
            f"{side.repeats} repetitions; {side.accounting} accounting.")
if not eps_list:
    st.error("Choose at least one ε value.")
    st.stop()
errors, warns = setting.setting_problems(side, replace(s, n=None))
for e in errors:
    st.error(e)
if errors:
    st.stop()
_, warns_at_n = setting.setting_problems(side, s)  # the ε × B map runs at this N: who is left out there, and why
display.show_warnings(w for w in warns + warns_at_n if "ε =" not in w)
display.show_caveats(setting.setting_caveats(side, s))

# ---------------------------------------------------------------- map 1: epsilon x B
n_eff = s.effective_n(side.info)
st.subheader("ε × number of predictions B")
spec_b = display.spec_or_error(side, s, epsilons=eps_list, vary="budget", values=B_VALUES)
res_b = progress.run_with_progress(spec_b, key="map_b", label="Map ε × B") if spec_b is not None else None
if res_b is None and spec_b is not None:
    progress.show_previous("fig_map_b")  # cancelled or waiting for its Compute click
if res_b is not None:
    fig_b = winner_map_figure(score_rows(res_b.rows, answered_only), "epsilon", "budget",
                              title=f"Best method over ε and B (δ = {format_number(delta)}, N = "
                                    f"{rows_n(res_b.rows) or n_eff:,})")
    result_panel(fig_b, res_b, spec_b, side, key="map_b",
                 caption="Private-prediction methods pay for every answer, so they win at small B and fade as B "
                         "grows; private-training methods do not depend on B.")

# ---------------------------------------------------------------- map 2: epsilon x N
st.subheader("ε × training-set size N")
info = side.info
can_grow = info is not None and info.image
augment = state.commit("augment", st.checkbox(
    "Also N beyond the real training data (deformed copies; slow)", key=state.bind("augment"), disabled=not can_grow,
    help="Grows the training set with elastic deformations of its images. Several minutes on a CPU."))
real_rows = info.train_rows(s.classes)  # the rows of the classes kept: what the loader grows N from
n_values = sorted({v for v in N_VALUES if v <= real_rows} | {real_rows})
n_values = [v for v in n_values if v >= setting.min_train_size(s)]
if augment and can_grow:
    n_values += [2 * real_rows, 4 * real_rows]
    st.warning(setting.augmentation_caveat(real_rows, 4 * real_rows, max(eps_list)))
s_n = replace(s, n=None, augment=bool(augment and can_grow))
spec_n = display.spec_or_error(side, s_n, epsilons=eps_list, vary="n", values=tuple(n_values)) if n_values else None
if not n_values:
    st.error(f"No N value is at least T = {s.teachers} and the DP-SGD batch size {s.batch_size}.")
res_n = progress.run_with_progress(spec_n, key="map_n", label="Map ε × N") if spec_n is not None else None
if res_n is None and spec_n is not None:
    progress.show_previous("fig_map_n")
if res_n is not None:
    fig_n = winner_map_figure(score_rows(res_n.rows, answered_only), "epsilon", "n",
                              title=f"Best method over ε and N (δ = {format_number(delta)}, B = {s.budget:,})")
    result_panel(fig_n, res_n, spec_n, side, key="map_n",
                 caption="Each cell is the best method at that ε and N. The sensitivity methods' noise 2K/(Nλ) "
                         "shrinks as N grows; subsample-and-aggregate's T teachers each see N/T examples, so they "
                         "improve with N too.")
