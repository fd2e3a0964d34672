"""Deep models: the paper's Figure 7, DP-SGD against subsample-and-aggregate (and PATE-style votes) on a
GroupNorm network. First the results that ship with the project and the paper's findings beside them, then
training here (from the cache, with a button and a time estimate for what is missing)."""

from __future__ import annotations

import streamlit as st

from privcore.deep.spec import FIG7_B, FIG7_BUDGETS, FIG7_EPS, FIG7_EPSILONS
from ui import deep, state
from ui.caption import add_caption, chart_settings
from ui.display import show_figure
from ui.export import export_buttons
from ui.figures import curve_figure
from ui.text import escape_markdown

st.title("Deep models: DP-SGD or subsample-and-aggregate? (Figure 7)")
st.caption("The paper's Section 4.3 on a deep network with GroupNorm (per-example gradients need examples that do "
           "not see each other): DP-SGD trains one private model per ε; the teacher methods train T non-private "
           "teachers on disjoint parts once and answer B test queries by a noisy vote. δ = 1e-5, replace-one "
           "neighbours for every method.")
state.current_values()  # a link's values checked as on every page: a bad or unknown one is said, not kept silently
for message in state.url_errors() + state.unknown_params():
    st.warning(escape_markdown(message))
TITLES = (f"(a) Accuracy against ε at B = {FIG7_B}", f"(b) Accuracy against B at ε = {FIG7_EPS:g}")


def draw_panels(rows_a, rows_b, settings: dict, key: str, export: str, filename: str) -> None:  # noqa: ANN001
    """Panels (a) and (b) one under the other, each the page's full width. Side by side (with the findings in a
    third column) a panel was 305 px wide in a 1280 px window and 169 px at 800 px: the legend covered the x
    axis's title and the settings caption ran past the chart's right edge."""
    for rows, x, grid, title, name in ((rows_a, "epsilon", FIG7_EPSILONS, TITLES[0], "a"),
                                       (rows_b, "budget", FIG7_BUDGETS, TITLES[1], "b")):
        fig = curve_figure(rows, x, title=title, log_x=True, chance=0.1, x_values=grid, empty_text="Not computed yet")
        fig = add_caption(fig, chart_settings(rows, **settings))
        show_figure(fig, key=f"{key}{name}")
        if rows:
            export_buttons(fig, rows, key=f"{export}_{name}", filename=f"figure-7{name}-{filename}")


st.subheader("Results shipped with the project")
runs = deep.shipped()
if not runs:
    st.info("No Figure 7 results ship in docs/figures with this installation; train below.")
    st.markdown(deep.PAPER_FINDINGS)
else:
    tags = [r.tag for r in runs]
    shown_key = state.bind("deep_shipped", normalise=lambda v: v if v in tags else tags[0],
                           explain="no shipped run has that name",
                           stored=lambda t: None if t == tags[0] else t)  # the default is stored as None
    tag = st.selectbox("Shipped run", tags, key=shown_key, format_func=lambda t: runs[tags.index(t)].label(),
                       help="Computed by bench/figure7_deep.sh; the file names in docs/figures say the card and the "
                            "epochs, the columns everything else.")
    state.commit("deep_shipped", None if tag == tags[0] else tag)
    run = runs[tags.index(tag)]
    got = deep.shipped_rows(run)
    if got is not None:
        extra = {**deep.epochs_settings(run.epochs, run.teacher_epochs), "run": run.tag}
        if deep.drawn_before_exact_tails(got[0] + got[1]):  # above the charts: a reader of the charts sees it
            st.warning(deep.OLD_SAMPLERS_NOTE)
        draw_panels(got[0], got[1], {"dataset": deep.DATASET_LABELS.get(run.dataset, run.dataset), "extra": extra},
                    "deep_shipped_fig7", "deep_shipped_export", run.tag)
    st.markdown(deep.PAPER_FINDINGS)
    if got is not None and (lead := deep.lead_text(got[1])):
        st.markdown(f"**{run.label()}.** {lead}")
    st.caption("Bands: ± 1 standard deviation over repetitions (the teacher methods' vote samplings; DP-SGD is one "
               "training per ε, so it has none). DP-SGD's model serves any number of predictions, so its curve in "
               "(b) is flat; the vote methods pay for each of the B answers. Confident-GNMax's abstentions count as "
               "wrong answers.")

st.subheader("Train here")
c1, c2 = st.columns(2)
dataset = state.commit("deep_data", c1.selectbox(
    "Data set", tuple(deep.DATASET_LABELS), format_func=deep.DATASET_LABELS.get, key=state.bind("deep_data"),
    help="Fashion-MNIST comes from Debian's dataset-fashion-mnist package; CIFAR-10 is downloaded once (or placed by "
         "you) with its checksum."))
presets = deep.preset_choices()
preset_key = state.bind("deep_preset", normalise=lambda v: v if v in presets else presets[0],
                        explain="the paper's settings need a GPU")
preset = state.commit("deep_preset", c2.selectbox("Model and training", presets, format_func=deep.preset_label,
                                                   key=preset_key))
if deep.device_kind() == "cpu":
    st.info("No GPU here: the small preset is offered. " + deep.gpu_work_text(dataset))

specs = deep.figure_specs(preset, dataset)
got = deep.cached_all(specs) if specs else None  # shows why the data are unavailable, once
if specs and got is None:
    st.caption(f"Nothing is computed or drawn for {deep.DATASET_LABELS[dataset]} until its data are available "
               "(see above).")
elif got is not None:
    missing = sum(g[1] for g in got)
    total = sum(len(g[0]) + g[1] for g in got)
    if missing:
        st.caption(deep.estimate_text(preset, dataset, missing, total))
    if missing and st.button(f"Compute the {missing} missing points", type="primary", key="deep_compute"):
        if deep.compute(specs, key="deep_run"):
            st.rerun()  # redraw from the cache, without the button
    elif missing:
        deep.cancel_notice("deep_run")
    draw_panels(deep.panel_rows(got[0][0], FIG7_B), deep.panel_rows(got[1][0]),
                {"dataset": deep.DATASET_LABELS[dataset], "extra": {"preset": preset, **deep.epochs_settings(
                    specs[0].epochs, specs[0].teacher_epochs)}}, "deep_fig7", "deep_export",
                f"{dataset}-{preset}")
