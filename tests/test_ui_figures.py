"""ui/figures.py: the legend under a chart has room at its narrowest (the chart column of an 800 px
window fits two entries a row), so it never covers the x axis's tick labels and title."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("plotly")
from privcore.methods import REGISTRY
from ui.figures import curve_figure

AXIS_PX, ROW_PX = 60, 28  # tick labels + axis title; one legend row (13 px text in a bordered box)


def _rows() -> list[dict]:
    rows = []
    for m in list(REGISTRY) + ["non_private"]:
        for i, e in enumerate((0.1, 1.0, 10.0)):
            rows.append(dict(method=m, epsilon=e, budget=10, accuracy_mean=0.2 + 0.1 * i, accuracy_std=0.01,
                             repeats=20, classes=10))
    return rows


def _entries(fig) -> int:
    return sum(1 for t in fig.data if t.showlegend is not False and t.name)


def test_all_methods_leave_the_x_axis_room_on_a_narrow_screen():
    fig = curve_figure(_rows(), "epsilon", title="t", log_x=True, current=3.0)
    n = _entries(fig)
    assert n >= 10  # 8 methods, the non-private line, chance, the current setting
    assert fig.layout.margin.b >= AXIS_PX + ROW_PX * math.ceil(n / 2), (fig.layout.margin.b, n)
    assert fig.layout.height - fig.layout.margin.b - fig.layout.margin.t >= 260  # the plot keeps its size


def test_a_short_legend_keeps_the_usual_margin():
    rows = [r for r in _rows() if r["method"] == "model_sensitivity"]
    fig = curve_figure(rows, "epsilon", title="t", log_x=True)
    assert fig.layout.margin.b == 150 and fig.layout.height == 480


def test_winner_cells_break_their_label_when_the_grid_is_wide():
    """Six ε columns leave ~60 px a cell at 800 px: 'Model sens.' ran over its neighbours on one line."""
    from ui.figures import winner_map_figure

    rows = []
    for e in (0.3, 1.0, 3.0, 10.0, 30.0, 100.0):
        for b in (1, 100):
            for m, acc in (("model_sensitivity", 0.8), ("subsample_aggregate", 0.5)):
                rows.append(dict(method=m, epsilon=e, budget=b, accuracy_mean=acc, accuracy_std=0.01, repeats=20,
                                 classes=10))
    heat = winner_map_figure(rows, "epsilon", "budget").data[0]
    cells = [t for row in heat.text for t in row]
    assert cells and all(t.startswith("Model<br>sens.<br>0.80") for t in cells), cells
    narrow = winner_map_figure([r for r in rows if r["epsilon"] <= 3.0], "epsilon", "budget").data[0]
    assert all(t.startswith("Model sens.<br>") for row in narrow.text for t in row)  # few columns: one line


def test_log_axes_get_one_plain_label_a_decade():
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from ui.figures import plain_log_ticks
    from ui.teaching import composition_figure

    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Scatter(x=[1, 2, 3], y=[1e-4, 0.5, 1.0]), row=1, col=2)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_xaxes(type="log", range=[-6, 0], row=1, col=1)  # an empty panel with a fixed range
    plain_log_ticks(fig)
    assert fig.layout.yaxis2.ticktext == ("1e-4", "1e-3", "0.01", "0.1", "1")
    assert fig.layout.xaxis.tickvals[0] == 1e-6 and fig.layout.yaxis.tickvals is None  # linear axes untouched
    learn = composition_figure(1.0, 1e-5)
    labels = [t for k, ax in learn.layout.to_plotly_json().items()
              if k.startswith(("xaxis", "yaxis")) and ax.get("type") == "log" for t in ax.get("ticktext", ())]
    assert labels and not any(ch in t for t in labels for ch in "µμpn")  # no SI prefixes


def test_an_empty_frame_spans_the_planned_grid_not_plotlys_default():
    fig = curve_figure([], "epsilon", title="", log_x=True, empty_text="Computing…", x_values=(0.1, 1, 100))
    assert fig.layout.xaxis.range == pytest.approx((-1.1, 2.1))
    assert fig.layout.annotations[0].text == "Computing…"
    assert curve_figure([], "epsilon", title="", log_x=True).layout.xaxis.range is None  # no grid given


def test_accounting_comparison_bars_are_horizontal_rows_that_fit():
    """Calibrate's comparison: one row per method with its full label (no rotated, cut ticks), the
    value at each bar's end inside the axis range, a height that grows with the methods, the legend
    below the axis title (a walk-through found it over the tick labels at 1400 px)."""
    from privcore.methods import REGISTRY
    from privcore.types import PrivacyBudget, Problem
    from ui.figures import LEGEND_BELOW, accounting_comparison_figure, method_label

    problem = Problem(n=4000, dim=784, classes=10, budget=10)

    def scales(names):
        out = {}
        for mode in ("paper", "corrected", "tight"):
            row = {}
            for name in names:
                try:
                    row[name] = REGISTRY[name].calibrate(PrivacyBudget(1.0, 1e-5), problem, mode)
                except Exception as e:  # noqa: BLE001 - a method without a guarantee here shows no bar
                    row[name] = e
            out[mode] = row
        return out

    names = list(REGISTRY)
    fig = accounting_comparison_figure(scales(names), title="t")
    small = accounting_comparison_figure(scales(names[:2]), title="t")
    assert all(t.orientation == "h" for t in fig.data) and len(fig.data) == 3
    shown = set().union(*(set(t.y) for t in fig.data))
    assert {method_label(n) for n in names if n in REGISTRY and method_label(n) in shown} == shown
    assert max(max(t.x) for t in fig.data) < fig.layout.xaxis.range[1]  # room for the value labels
    assert fig.layout.height > small.layout.height
    assert fig.layout.legend.orientation == LEGEND_BELOW["orientation"] and fig.layout.legend.yanchor == "top"
    assert fig.layout.legend.y < 0  # below the plot area, under the axis title


def test_winner_map_hover_uses_the_pages_symbols_and_the_legend_names_chance_cells():
    """The hover read 'epsilon = 10, budget = 100'; white '≈ chance' cells had no legend entry."""
    from ui.figures import winner_map_figure

    rows = []
    for e in (0.1, 10.0):
        for b in (1, 100):
            for m, acc in (("model_sensitivity", 0.8 if e > 1 else 0.1), ("subsample_aggregate", 0.5 if e > 1 else 0.1)):
                rows.append(dict(method=m, epsilon=e, budget=b, accuracy_mean=acc, accuracy_std=0.01, repeats=20,
                                 classes=10))
    fig = winner_map_figure(rows, "epsilon", "budget")
    hover = [h for row in fig.data[0].customdata for h in row]
    assert all(h.startswith("ε = ") and ", B = " in h for h in hover), hover
    assert "epsilon" not in " ".join(hover)
    names = [t.name for t in fig.data[1:]]
    assert any("chance" in (n or "") for n in names), names
    clear = winner_map_figure([r for r in rows if r["epsilon"] > 1], "epsilon", "budget")
    assert not any("chance" in (t.name or "") for t in clear.data[1:])


def test_a_short_log_axis_gets_1_2_5_labels():
    """The vs N chart (N = 500 to 4,000) showed one label, "1,000": within two decades the axis is labelled at 1,
    2 and 5 of each decade; a wide axis keeps one label a decade."""
    from ui.figures import log_tickvals

    ticks, labels = log_tickvals([500, 1000, 2000, 4000])
    assert {500.0, 1000.0, 2000.0} <= set(ticks) and "2,000" in labels
    wide, _ = log_tickvals([1, 10, 100, 1000, 10000])
    assert wide == [1.0, 10.0, 100.0, 1000.0, 10000.0]
