"""Deep models: the paper's Figure 7, DP-SGD against subsample-and-aggregate (and PATE-style votes)
on a GroupNorm network, from the cache, with a button to train what is missing."""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:  # pages can also be run on their own (streamlit run app_pages/x.py, AppTest)
    sys.path.insert(0, _ROOT)

import streamlit as st

from ui import deep
from ui.display import show_figure
from ui.figures import curve_figure

st.title("Deep models: DP-SGD or subsample-and-aggregate? (Figure 7)")
st.caption("The paper's Section 4.3 on a deep network with GroupNorm (per-example gradients need examples that do "
           "not see each other): DP-SGD trains one private model per ε; the teacher methods train T non-private "
           "teachers on disjoint parts once and answer B test queries by a noisy vote. δ = 1e-5, replace-one "
           "neighbours for every method.")

c1, c2 = st.columns(2)
dataset = c1.selectbox("Data set", ("fashion-mnist", "cifar-10"), key="deep_dataset",
                       help="Fashion-MNIST comes from Debian's dataset-fashion-mnist package; CIFAR-10 is downloaded "
                            "once (or placed by you) with its checksum.")
presets = deep.preset_choices()
preset = c2.selectbox("Model and training", presets, format_func=deep.PRESET_LABELS.get, key="deep_preset")
if deep.device_kind() == "cpu":
    st.info("No GPU here: the small preset is offered. " + deep.gpu_work_text(dataset))

specs = deep.figure_specs(preset, dataset)
got = [deep.cached(s) for s in specs] if specs else [None]
if specs and all(g is not None for g in got):
    missing = sum(g[1] for g in got)
    if missing and st.button(f"Compute the {missing} missing points", type="primary", key="deep_compute"):
        if deep.compute(specs, key="deep_run"):
            st.rerun()  # redraw from the cache, without the button
    elif missing:
        deep.cancel_notice("deep_run")
    a, b = st.columns(2)
    with a:
        show_figure(curve_figure(deep.panel_rows(got[0][0], 10), "epsilon", title="(a) Accuracy against ε at B = 10",
                                 log_x=True, chance=0.1), key="deep_fig7a")
    with b:
        show_figure(curve_figure(deep.panel_rows(got[1][0]), "budget", title="(b) Accuracy against B at ε = 1",
                                 log_x=True, chance=0.1), key="deep_fig7b")
    st.caption("DP-SGD's model serves any number of predictions, so its curve in (b) is flat; the vote methods pay "
               "for each of the B answers. Confident-GNMax's abstentions count as wrong answers.")
