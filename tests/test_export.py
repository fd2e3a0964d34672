"""Export builders: PNG/SVG/PDF bytes via kaleido + Chromium (skipped without a browser), HTML and CSV always."""

from __future__ import annotations

import csv
import io
import math
import time

import pytest

from ui import export
from ui.figures import METHOD_COLORS, curve_figure, winner_map_figure


def _rows():
    rows = []
    for m, base in (("model_sensitivity", 0.3), ("subsample_aggregate", 0.5), ("dpsgd", 0.6)):
        for e in (0.1, 1.0, 10.0):
            rows.append({"method": m, "epsilon": e, "delta": 1e-5, "budget": 10, "n": 4000, "classes": 10,
                         "accuracy_mean": min(0.95, base + 0.1 * math.log10(e) + 0.1), "accuracy_std": 0.02,
                         "repeats": 5, "value": None, "formula": "sigma = x, y", "note": None})
    rows.append({"method": "non_private", "epsilon": math.inf, "delta": 1e-5, "budget": 10, "n": 4000, "classes": 10,
                 "accuracy_mean": 0.89, "accuracy_std": 0.0, "repeats": 5, "value": None})
    return rows


@pytest.fixture(scope="module")
def fig():
    return curve_figure(_rows(), "epsilon", title="Test accuracy vs ε", log_x=True, current=1.0)


needs_browser = pytest.mark.skipif(not export.browser_available(),
                                   reason="no Chromium-family browser found: PNG/SVG/PDF export cannot be tested here")


@pytest.mark.slow
@needs_browser
@pytest.mark.parametrize("fmt,magic", [("png", b"\x89PNG\r\n\x1a\n"), ("svg", b"<svg"), ("pdf", b"%PDF")])
def test_image_bytes_have_the_right_magic(fig, fmt, magic):
    data = export.figure_bytes(fig, fmt)
    assert data[: len(magic)] == magic
    assert len(data) > 1000


@pytest.mark.slow
@needs_browser
def test_export_is_fast_once_the_server_runs(fig):
    export.figure_bytes(fig, "svg")  # server already up (or started here)
    t0 = time.perf_counter()
    for fmt in export.IMAGE_FORMATS:
        export.figure_bytes(fig, fmt)
    per_image = (time.perf_counter() - t0) / len(export.IMAGE_FORMATS)
    assert per_image < 1.0, f"an export took {per_image:.2f} s on average"


@pytest.mark.slow
@needs_browser
def test_svg_keeps_the_fixed_method_colours_and_white_background(fig):
    svg = export.figure_bytes(fig, "svg").decode("utf-8")
    assert "rgb(255, 255, 255)" in svg or "#ffffff" in svg.lower() or "fill: white" in svg
    r, g, b = (int(METHOD_COLORS["subsample_aggregate"].lstrip("#")[i:i + 2], 16) for i in (0, 2, 4))
    assert f"rgb({r}, {g}, {b})" in svg


@needs_browser
def test_winner_map_exports(fig):
    rows = [dict(r, value=b, budget=b) for r in _rows() if r["method"] != "non_private" for b in (1, 100)]
    heat = winner_map_figure(rows, "epsilon", "budget")
    assert export.figure_bytes(heat, "png")[:4] == b"\x89PNG"


def test_bad_format_is_a_value_error(fig):
    with pytest.raises(ValueError, match="png, svg, pdf"):
        export.figure_bytes(fig, "gif")


def test_missing_browser_raises_export_unavailable(fig, monkeypatch):
    monkeypatch.setattr(export, "_server_started", False)
    monkeypatch.setattr(export, "find_browser", lambda: None)
    with pytest.raises(export.ExportUnavailable, match="Chromium"):
        export.figure_bytes(fig, "png")


def test_html_is_standalone(fig):
    html = export.figure_html(fig).decode("utf-8")
    assert html.lstrip().lower().startswith("<html") or html.lstrip().lower().startswith("<!doctype html")
    assert "plotly" in html.lower() and "Test accuracy vs" in html
    assert '<script src="https://cdn.plot.ly' not in html  # plotly.js embedded: works offline
    assert len(html) > 1_000_000


def test_csv_has_result_columns_and_inf():
    rows = _rows()
    text = export.rows_csv(rows).decode("utf-8")
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert len(parsed) == len(rows)
    header = text.splitlines()[0].split(",")
    assert header[0] == "method" and "accuracy_mean" in header and "epsilon" in header
    assert parsed[-1]["method"] == "non_private" and parsed[-1]["epsilon"] == "inf"
    assert parsed[0]["note"] == ""                      # None -> empty
    assert parsed[0]["formula"] == "sigma = x, y"       # commas quoted correctly
    assert float(parsed[0]["accuracy_mean"]) == pytest.approx(rows[0]["accuracy_mean"])


def test_csv_with_explicit_columns_and_empty_rows():
    assert export.rows_csv([{"a": 1, "b": None}], columns=["b", "a"]).decode() == "b,a\n,1\n"
    assert export.rows_csv([]).decode().startswith("method,")


# ---------------------------------------------------------------- figure builders (no browser needed)

def test_curve_figure_structure(fig):
    names = [t.name for t in fig.data]
    assert "Non-private (no noise)" in names and "Current setting" in names
    np_trace = next(t for t in fig.data if t.name == "Non-private (no noise)")
    assert np_trace.line.dash == "dash" and list(np_trace.y) == [0.89, 0.89]
    sa = next(t for t in fig.data if t.name == "Subsample-and-aggregate")
    assert sa.line.color == METHOD_COLORS["subsample_aggregate"]
    assert any(t.fill == "tonexty" for t in fig.data)               # the ±1 std band
    cur = next(t for t in fig.data if t.name == "Current setting")
    assert list(cur.x) == [1.0, 1.0]
    assert fig.layout.xaxis.type == "log" and fig.layout.plot_bgcolor == "white"


def test_curve_figure_drops_zero_on_log_axis_and_says_so():
    rows = [{"method": "model_sensitivity", "delta": d, "accuracy_mean": 0.5, "accuracy_std": 0.0} for d in (0.0, 1e-5, 1e-3)]
    f = curve_figure(rows, "delta", title="t", log_x=True)
    line = next(t for t in f.data if t.name == "Model sensitivity")
    assert list(line.x) == [1e-5, 1e-3]
    assert any("not shown" in a.text for a in f.layout.annotations)


def test_curve_figure_with_no_rows_is_still_a_figure():
    f = curve_figure([], "epsilon", title="empty", log_x=True)
    assert any("No results" in a.text for a in f.layout.annotations)


def test_winner_map_has_no_infinite_column_and_shows_the_baseline_on_hover():
    rows = []
    for b in (1, 100):
        for e in (1.0, 10.0):
            rows.append({"method": "dpsgd", "epsilon": e, "budget": b, "accuracy_mean": 0.7, "accuracy_std": 0.01, "repeats": 10})
            rows.append({"method": "subsample_aggregate", "epsilon": e, "budget": b, "accuracy_mean": 0.8 if b == 1 else 0.2,
                         "accuracy_std": 0.01, "repeats": 10})
        rows.append({"method": "non_private", "epsilon": math.inf, "budget": b, "accuracy_mean": 0.9, "accuracy_std": 0.0})
    heat = winner_map_figure(rows, "epsilon", "budget")
    assert list(heat.data[0].x) == ["1", "10"] and list(heat.data[0].y) == ["1", "100"]
    assert "Subs.-agg." in heat.data[0].text[0][0] and "DP-SGD" in heat.data[0].text[1][0]
    assert "Non-private" in heat.data[0].customdata[0][0]
    legend = {t.name for t in heat.data[1:]}
    assert legend == {"DP-SGD", "Subsample-and-aggregate"}


def test_file_names_drop_thousands_separators():
    from ui.export import _slug

    assert _slug("Accuracy vs ε (N = 4,000, δ = 1e-5)") == "accuracy-vs-eps-n-4000-delta-1e-5"


def test_csv_numbers_are_short_and_exact():
    """0.12065000000000001 (float noise) is written 0.12065; integers and small p-values keep every digit."""
    text = export.rows_csv([{"a": 0.12065000000000001, "b": 0.1 + 0.2, "p": 3.1e-12, "n": 2 ** 60, "x": [0.1 + 0.2]}],
                           columns=["a", "b", "p", "n", "x"]).decode()
    assert text == f"a,b,p,n,x\n0.12065,0.3,3.1e-12,{2 ** 60},0.3\n"


def test_csv_names_each_method_and_carries_the_charts_data_set_and_seed():
    from ui.figures import method_label

    rows = _rows()
    text = export.rows_csv(rows, context={"dataset": "digits", "seed": 7, "unused": None}).decode("utf-8")
    header = text.splitlines()[0].split(",")
    assert header[:4] == ["dataset", "seed", "method", "method_label"] and "unused" not in header
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert {(r["dataset"], r["seed"]) for r in parsed} == {("digits", "7")}
    assert all(r["method_label"] == method_label(r["method"]) for r in parsed)
    assert parsed[0]["method_label"] != parsed[0]["method"]   # a display name, not the id
    explicit = export.rows_csv(rows[:1], columns=["method", "epsilon"], context={"seed": 1}).decode()
    assert explicit.splitlines()[0] == "seed,method,method_label,epsilon"


def test_the_csv_button_takes_data_set_and_seed_from_the_charts_caption():
    import plotly.graph_objects as go

    from ui.caption import add_caption

    fig = add_caption(go.Figure(), {"dataset": "mnist-5k", "seed": 3, "n": 4000})
    assert export.csv_context(fig) == {"dataset": "mnist-5k", "seed": 3}
    assert export.csv_context(go.Figure()) == {}


def test_exports_state_the_real_epsilon_of_paper_rows(fig):
    """Issue 32 item 1: the CSV has the real epsilon, the chart's files say it (caption line and metadata)."""
    rows = [dict(r, accounting="paper", real_epsilon=2 * r["epsilon"]) if r["method"] == "subsample_aggregate" else r
            for r in _rows()]
    text = export.rows_csv(rows).decode("utf-8")
    header = text.splitlines()[0].split(",")
    assert "real_epsilon" in header
    import plotly.graph_objects as go

    frozen = go.Figure(fig)
    line = export.state_guarantee(frozen, rows)
    assert "Subsample-and-aggregate ε = " in line and "really guaranteed" in line
    assert frozen.layout.meta["privcore"]["guarantee"] == line
    assert any(a.name == "privcore-guarantee" for a in frozen.layout.annotations)
    html = export.figure_html(frozen).decode("utf-8")
    assert "really guaranteed" in html
    assert export.state_guarantee(go.Figure(fig), _rows()) == ""  # sound rows: nothing added


def test_data_caveats_reach_the_chart_files(fig):
    """PCA on the private split and augmentation's group privacy are stated in the exported chart too."""
    import plotly.graph_objects as go

    frozen = go.Figure(fig)
    note = "D = 50 uses PCA fitted on the training split: a data-dependent step that the privacy guarantee does not cover"
    text = export.state_guarantee(frozen, _rows(), [note])
    assert note in text and frozen.layout.meta["privcore"]["guarantee"] == text
    assert "PCA fitted" in export.figure_html(frozen).decode("utf-8")


def test_the_guarantee_lines_keep_the_plot_height_the_legend_was_placed_for():
    """The legend below the axis sits at a paper-unit offset made for the plot's height; the guarantee lines
    grew the bottom margin inside the same figure height, so the plot shrank and the legend rose onto the x
    axis's title (a walk-through's Reproduce export at paper accounting)."""
    import plotly.graph_objects as go

    from ui.export import state_guarantee
    from ui.figures import LEGEND_BELOW, reserve_legend_rows

    fig = go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name=f"m{i}") for i in range(6)])
    fig.update_layout(legend=LEGEND_BELOW, height=480, margin=dict(t=60))
    reserve_legend_rows(fig)

    def plot_px(f):
        return f.layout.height - f.layout.margin.t - f.layout.margin.b

    before = plot_px(fig)
    text = state_guarantee(fig, [], ["A data caveat long enough to take two lines of the chart's bottom margin, "
                                     "as the paper accounting's real-epsilon note does on Reproduce."])
    assert text and plot_px(fig) == before
