"""A chart laid out for one column of a two-column paper (ui/column.py): a walk-through found the print exports'
13 px ticks printing at about 3 pt once a 750 pt PDF was placed in a 3.3-inch column."""

from __future__ import annotations

import re

import pytest

from privcore.engine.specs import DataSpec, SweepSpec
from privcore.methods import ENTRIES
from ui import export
from ui.caption import add_caption, settings_of
from ui.column import COLUMN_WIDTH_PX, column_figure, offers_column
from ui.export import state_guarantee
from ui.figures import curve_figure


def _figure(note: bool = True):
    rows = [dict(method=m, epsilon=e if m != "non_private" else float("inf"), delta=1e-5, budget=10, n=4000, dim=784,
                 classes=10, lam=1e-3, teachers=16, accounting="paper", accuracy_mean=0.1 + 0.05 * i, accuracy_std=0.02,
                 repeats=20, real_epsilon=2 * e if m == "subsample_aggregate" else None)
            for i, m in enumerate(ENTRIES) for e in (0.1, 1.0, 10.0)]
    spec = SweepSpec(data=DataSpec(name="mnist-5k"), methods=tuple(m for m in ENTRIES if m != "non_private"),
                     epsilons=(0.1, 1.0, 10.0), accounting="paper")
    fig = add_caption(curve_figure(rows, "epsilon", title="Test accuracy vs ε (δ = 1e-5, B = 10, N = 4,000)",
                                   log_x=True), settings_of(spec, rows))
    if note:
        state_guarantee(fig, rows, ["N = 50,000 exceeds the 4,000 real training examples."])
    return fig


def test_a_column_chart_is_240_points_wide_with_8_point_text_and_keeps_its_caption_and_guarantee():
    fig = _figure()
    col = column_figure(fig)
    assert col.layout.width == COLUMN_WIDTH_PX == 320  # 0.75 pt a pixel: 240 pt, 3.3 inches
    sizes = [col.layout.font.size, col.layout.legend.font.size, col.layout.xaxis.tickfont.size, col.layout.yaxis.tickfont.size]
    assert all(6.5 <= s * 0.75 <= 8.5 for s in sizes), sizes  # 7-8 pt at 100 % (the print exports: 3 pt)
    by = {a.name: a for a in col.layout.annotations}
    caption = str(by["privcore-settings"].text).split("<br>")
    assert all(len(line) <= 58 for line in caption) and "accounting: paper" in by["privcore-settings"].text
    assert "really guaranteed" in by["privcore-guarantee"].text and "50,000" in by["privcore-guarantee"].text
    legend_rows = -(-sum(1 for t in col.data if t.showlegend is not False and t.name) // 2)
    assert -by["privcore-guarantee"].yshift >= 34 + 19 * legend_rows  # under the axis and the legend
    assert col.layout.height >= col.layout.margin.t + 190 + col.layout.margin.b
    bands = [t for t in fig.data if t.line.width == 0]
    assert bands and all(t.line.width == 0 for t in col.data if t.name in {b.name for b in bands})
    assert fig.layout.width != 320  # the chart itself is untouched


def test_only_a_single_panel_chart_is_offered_a_column_layout():
    from plotly.subplots import make_subplots

    assert offers_column(_figure(note=False))
    assert not offers_column(make_subplots(rows=2, cols=1))  # Learn's composition chart, for one


@pytest.mark.slow  # starts the Chromium renderer
@pytest.mark.skipif(not export.browser_available(), reason="PDF export needs Chromium (apt-get install chromium)")
def test_the_column_pdf_is_3_3_inches_wide():
    pdf = export.figure_bytes(column_figure(_figure()), "pdf", width=COLUMN_WIDTH_PX)
    box = re.search(rb"MediaBox\s*\[\s*0\s+0\s+([0-9.]+)\s+([0-9.]+)\s*\]", pdf)
    assert box and abs(float(box.group(1)) - 240) < 0.5
