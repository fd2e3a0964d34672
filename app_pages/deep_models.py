"""Deep models: the paper's Figure 7, DP-SGD against subsample-and-aggregate (and PATE-style votes)
on a GroupNorm network, from the cache, with a button to train what is missing."""

from __future__ import annotations

import streamlit as st

from privcore.deep.spec import FIG7_B, FIG7_BUDGETS, FIG7_EPS, FIG7_EPSILONS
from ui import deep
from ui.caption import add_caption, chart_settings
from ui.display import show_figure
from ui.export import export_buttons
from ui.figures import curve_figure

st.title("Deep models: DP-SGD or subsample-and-aggregate? (Figure 7)")
st.caption("The paper's Section 4.3 on a deep network with GroupNorm (per-example gradients need examples that do "
           "not see each other): DP-SGD trains one private model per ε; the teacher methods train T non-private "
           "teachers on disjoint parts once and answer B test queries by a noisy vote. δ = 1e-5, replace-one "
           "neighbours for every method.")

c1, c2 = st.columns(2)
dataset = c1.selectbox("Data set", tuple(deep.DATASET_LABELS), format_func=deep.DATASET_LABELS.get, key="deep_dataset",
                       help="Fashion-MNIST comes from Debian's dataset-fashion-mnist package; CIFAR-10 is downloaded "
                            "once (or placed by you) with its checksum.")
presets = deep.preset_choices()
preset = c2.selectbox("Model and training", presets, format_func=deep.preset_label,
                      key="deep_preset")
if deep.device_kind() == "cpu":
    st.info("No GPU here: the small preset is offered. " + deep.gpu_work_text(dataset))

specs = deep.figure_specs(preset, dataset)
got = deep.cached_all(specs) if specs else None  # shows why the data are unavailable, once
if specs and got is None:
    st.caption(f"Nothing is computed or drawn for {deep.DATASET_LABELS[dataset]} until its data are available "
               "(see above).")
elif got is not None:
    missing = sum(g[1] for g in got)
    if missing and st.button(f"Compute the {missing} missing points", type="primary", key="deep_compute"):
        if deep.compute(specs, key="deep_run"):
            st.rerun()  # redraw from the cache, without the button
    elif missing:
        deep.cancel_notice("deep_run")
    a, b = st.columns(2)
    panels = ((a, deep.panel_rows(got[0][0], FIG7_B), "epsilon", FIG7_EPSILONS, f"(a) Accuracy against ε at B = {FIG7_B}", "a"),
              (b, deep.panel_rows(got[1][0]), "budget", FIG7_BUDGETS, f"(b) Accuracy against B at ε = {FIG7_EPS:g}", "b"))
    for column, rows, x, grid, title, name in panels:
        with column:
            fig = curve_figure(rows, x, title=title, log_x=True, chance=0.1, x_values=grid,
                               empty_text="Not computed yet")
            fig = add_caption(fig, chart_settings(rows, dataset=deep.DATASET_LABELS[dataset], extra={"preset": preset}))
            show_figure(fig, key=f"deep_fig7{name}")
            if rows:
                export_buttons(fig, rows, key=f"deep_export_{name}", filename=f"figure-7{name}-{dataset}-{preset}")
    st.caption("DP-SGD's model serves any number of predictions, so its curve in (b) is flat; the vote methods pay "
               "for each of the B answers. Confident-GNMax's abstentions count as wrong answers.")
