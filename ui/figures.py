"""Plotly figure builders for the dashboard (no Streamlit here).

About 490 lines: the curve, the winner map and the accounting comparison share the template, the
colours, markers, dashes, bands, tick labels and the number formatting defined here (the noise tables,
which use the labels and formatting, are in :mod:`ui.tables`).

Every figure uses :data:`PRINT_TEMPLATE` (white background, dark readable fonts, light grid) and the
FIXED per-method colours of :data:`METHOD_COLORS` (Okabe-Ito, colour-blind safe), whatever the
Streamlit theme: show them with ``st.plotly_chart(fig, theme=None)`` (``ui.display.show_figure``
does that) so Streamlit does not restyle them.

Public builders:

* :func:`curve_figure` - accuracy of each method along one axis, +-1 std band, non-private
  reference as a dashed line, the current setting as a vertical dotted line, chance level dotted;
* :func:`winner_map_figure` - a grid coloured by the winning method, all accuracies on hover;
* :func:`accounting_comparison_figure` - each method's noise under the accounting modes.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Iterable, Mapping, Sequence

import plotly.graph_objects as go

from privcore.methods import BASELINE, ENTRIES

__all__ = [
    "METHOD_COLORS", "METHOD_ORDER", "METHOD_LABELS", "SHORT_LABELS", "AXIS_TITLES", "PRINT_TEMPLATE",
    "method_label", "method_color", "method_style", "BANDS", "band_halfwidth", "log_tickvals", "curve_figure", "winner_map_figure",
    "format_number", "LEGEND_BELOW", "reserve_legend_rows", "winner_grid", "main_noise", "accounting_comparison_figure", "is_baseline",
]

#: Fixed colours, labels and order, all from the method registry (each method's module says them).
METHOD_COLORS: dict[str, str] = {name: m.colour for name, m in ENTRIES.items()}
METHOD_ORDER: tuple[str, ...] = tuple(ENTRIES)
METHOD_LABELS: dict[str, str] = {name: m.label for name, m in ENTRIES.items()}
SHORT_LABELS: dict[str, str] = {name: m.short_label or m.label for name, m in ENTRIES.items()}
#: Axis titles for the result columns a chart may be drawn along.
AXIS_TITLES: dict[str, str] = {
    "epsilon": "Privacy loss ε (smaller = more private)",
    "delta": "δ",
    "budget": "Inference budget B (number of private predictions)",
    "n": "Training examples N",
    "dim": "Input dimension D (PCA)",
    "classes": "Classes C",
    "lam": "L2 weight λ (average form)",
    "teachers": "Teachers T (subsample-and-aggregate)",
}

_FONT = "Arial, Helvetica, sans-serif"
PRINT_TEMPLATE = go.layout.Template(
    layout=go.Layout(
        paper_bgcolor="white",
        plot_bgcolor="white",
        font=dict(family=_FONT, size=14, color="#111111"),
        title=dict(font=dict(size=17, color="#111111"), x=0.0, xanchor="left"),
        xaxis=dict(showline=True, linecolor="#222222", linewidth=1, mirror=True, ticks="outside",
                   gridcolor="#E5E5E5", zeroline=False, title=dict(font=dict(size=15)),
                   tickfont=dict(size=13, color="#111111")),
        yaxis=dict(showline=True, linecolor="#222222", linewidth=1, mirror=True, ticks="outside",
                   gridcolor="#E5E5E5", zeroline=False, title=dict(font=dict(size=15)),
                   tickfont=dict(size=13, color="#111111")),
        legend=dict(bgcolor="rgba(255,255,255,0.9)", bordercolor="#CCCCCC", borderwidth=1, font=dict(size=13)),
        hoverlabel=dict(bgcolor="white", font=dict(family=_FONT, size=13, color="#111111")),
        margin=dict(l=70, r=20, t=60, b=60),
        colorway=[METHOD_COLORS[m] for m in METHOD_ORDER],
    )
)


#: A horizontal legend pinned to the bottom edge of the figure (not to the plot area), so on a narrow
#: screen its extra rows grow into the bottom margin instead of over the x axis and its title.
LEGEND_BELOW = dict(orientation="h", yref="container", y=0.0, yanchor="bottom", xanchor="left", x=0.0,
                    entrywidth=0, font=dict(size=12))


def reserve_legend_rows(fig: go.Figure, *, per_row: int = 2, row_px: int = 30, axis_px: int = 70) -> go.Figure:
    """Make the bottom margin of a :data:`LEGEND_BELOW` figure (and its height, so the plot keeps its
    size) hold the legend at its narrowest: ``per_row`` entries a row, as in the chart column of an
    800 px window. A fixed margin let 11 entries cover the x axis's tick labels and title there."""
    entries = sum(1 for t in fig.data if t.showlegend is not False and t.name)
    bottom = axis_px + row_px * math.ceil(entries / per_row)
    current = fig.layout.margin.b or 0
    if bottom > current:
        fig.update_layout(margin=dict(b=bottom), height=(fig.layout.height or 480) + bottom - current)
        # its top just under the axis title (a wide screen needs fewer rows: the spare room is below)
        plot_px = fig.layout.height - bottom - (fig.layout.margin.t or 60)
        fig.update_layout(legend=dict(yref="paper", y=-axis_px / max(plot_px, 100), yanchor="top"))
    return fig


def method_label(method: str) -> str:
    """Human label of a method name, from its registry entry (falls back to the name itself)."""
    entry = ENTRIES.get(method)
    return entry.label if entry is not None else str(method)


def is_baseline(method: str | None) -> bool:
    """Whether ``method`` names the non-private reference (drawn dashed, never a winner)."""
    return method == BASELINE.name


def method_color(method: str) -> str:
    """Fixed hex colour of a method, from its registry entry (grey for unknown names)."""
    entry = ENTRIES.get(method)
    return entry.colour if entry is not None else "#888888"


def method_style(method: str) -> tuple[str, str]:
    """(marker symbol, line dash) of a method, from its registry entry: distinct per method, so a chart
    reads in greyscale and without colour."""
    entry = ENTRIES.get(method)
    return (entry.marker, entry.dash) if entry is not None else ("circle", "solid")


#: Bands around each curve: one standard deviation of the R repetitions, or a 95 % confidence
#: interval of their mean (1.96 standard errors).
BANDS = {"sd": "±1 standard deviation", "ci95": "95 % CI of the mean"}


def band_halfwidth(std: float, repeats: int | None, band: str) -> float:
    """Half-width of the band around a mean of ``repeats`` runs with standard deviation ``std``."""
    if band == "ci95":
        return 1.96 * std / math.sqrt(max(int(repeats or 1), 1))
    if band != "sd":
        raise ValueError(f"band must be one of {', '.join(BANDS)}, got {band!r}")
    return std


def log_tickvals(values: Iterable[float]) -> tuple[list[float], list[str]] | None:
    """Tick positions and plain labels (1e-10, 0.001, 1, 1,000) for a log axis spanning ``values``:
    one tick per decade (every other decade beyond 8), never SI prefixes such as 100p or 10µ."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    if not vals:
        return None
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    step = 1 if hi - lo <= 8 else 2
    ticks = [10.0 ** k for k in range(lo, hi + 1, step)]
    if max(vals) / min(vals) <= 100:  # within two decades one label a decade left N = 500..4,000 with "1,000" alone
        ticks = sorted(m * t for t in ticks for m in (1, 2, 5))
    return ticks, [format_number(t) if 1e-2 <= t < 1e5 else f"1e{int(round(math.log10(t)))}" for t in ticks]


def plain_log_ticks(fig: go.Figure) -> go.Figure:
    """Every log axis of ``fig`` gets :func:`log_tickvals` over its traces' values (and its fixed range):
    one plain label a decade, no "2 5" minor labels, no SI prefixes such as 100µ."""
    layout = fig.layout.to_plotly_json()
    for key, axis in layout.items():
        if not (key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict) and axis.get("type") == "log"):
            continue
        letter, ident = key[0], key[0] + key[5:]  # "yaxis3" -> "y3"
        values: list[float] = []
        for trace in fig.data:
            if (getattr(trace, letter + "axis", None) or letter) == ident and getattr(trace, letter, None) is not None:
                values += [float(v) for v in getattr(trace, letter) if isinstance(v, numbers.Real)]
        values += [10.0 ** r for r in (axis.get("range") or []) if isinstance(r, (int, float))]
        ticks = log_tickvals(values)
        if ticks is not None:
            fig.layout[key].update(tickmode="array", tickvals=ticks[0], ticktext=ticks[1])
    return fig


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def format_number(value: Any, digits: int = 3) -> str:
    """Compact rendering: 1e-05, 0.001, 12.5, 1,000, inf, '-' for None/NaN."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(v):
        return "-"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if v == 0:
        return "0"
    if float(v).is_integer() and abs(v) < 1e7:
        return f"{int(v):,}"
    if abs(v) < 1e-3 or abs(v) >= 1e5:
        return f"{v:.{digits}g}".replace("e-0", "e-").replace("e+0", "e").replace("e+", "e")
    return f"{v:.{digits}g}"


def _x_of(row: Mapping[str, Any], x: str) -> Any:
    value = row.get(x)
    if value is None and x != "value":
        value = row.get("value")
    return value


def _ordered_methods(methods: Iterable[str]) -> list[str]:
    present = set(methods)
    order = tuple(ENTRIES)  # registry order (live)
    return [m for m in order if m in present] + sorted(present - set(order))


def curve_figure(rows: Sequence[Mapping[str, Any]], x: str, *, title: str, log_x: bool,
                 current: float | None = None, y_title: str = "Test accuracy",
                 x_title: str | None = None, chance: float | None = None, height: int = 480,
                 band: str = "sd", empty_text: str = "No results to show",
                 x_values: Sequence[float] | None = None) -> go.Figure:
    """Accuracy of every method along column ``x`` of result rows.

    rows: result rows of :func:`privcore.engine.runner.run_sweep` (``method``, ``accuracy_mean``,
    ``accuracy_std`` and the column ``x``, e.g. ``"epsilon"``, ``"budget"``, ``"delta"``, ``"n"``).
    One line per method (its own colour, marker and dash) with a shaded band: ``band="sd"`` +-1 std
    between repetitions, ``"ci95"`` a 95 % confidence interval of the mean; the ``non_private``
    rows become a dashed reference line (horizontal when they have a single or infinite x);
    ``current`` draws a dotted vertical line at the current setting; ``chance`` (default 1/C from
    the rows' ``classes``) a dotted grey line. On a log axis, non-positive x (e.g. delta = 0) is
    left out and said so in a note under the chart. Without rows the frame says ``empty_text`` and
    its x axis spans ``x_values`` (the planned grid), not plotly's default 1 to 10^6 of a log axis.
    """
    fig = go.Figure()
    by_method: dict[str, list[tuple[float, float, float]]] = {}
    dropped = False
    for row in rows:
        xv = _x_of(row, x)
        mean = row.get("accuracy_mean")
        if xv is None or mean is None:
            continue
        try:
            xf = float(xv)
        except (TypeError, ValueError):
            continue
        if log_x and xf <= 0 and math.isfinite(xf):
            dropped = True
            continue
        std = band_halfwidth(float(row.get("accuracy_std") or 0.0), row.get("repeats"), band)
        by_method.setdefault(row["method"], []).append((xf, float(mean), float(std)))

    finite_x = sorted({p[0] for pts in by_method.values() for p in pts if math.isfinite(p[0])})
    for method in _ordered_methods(by_method):
        pts = sorted(by_method[method])
        colour, label = method_color(method), method_label(method)
        symbol, dash = method_style(method)
        if is_baseline(method):
            finite = [p for p in pts if math.isfinite(p[0])]
            if len({p[0] for p in finite}) >= 2:
                xs, ys = [p[0] for p in finite], [p[1] for p in finite]
            elif finite_x:
                ys = [pts[-1][1]] * 2
                xs = [finite_x[0], finite_x[-1]] if len(finite_x) > 1 else [finite_x[0] * 0.9, finite_x[0] * 1.1]
            else:
                continue
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines", name=label, legendgroup=method,
                line=dict(color=colour, dash="dash", width=2),
                hovertemplate=f"{label}<br>accuracy %{{y:.3f}}<extra></extra>"))
            continue
        pts = [p for p in pts if math.isfinite(p[0])]
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        hi = [min(1.0, p[1] + p[2]) for p in pts]
        lo = [max(0.0, p[1] - p[2]) for p in pts]
        fig.add_trace(go.Scatter(x=xs, y=hi, mode="lines", line=dict(width=0, color=colour), showlegend=False,
                                 legendgroup=method, hoverinfo="skip", name=label + " band top"))
        fig.add_trace(go.Scatter(x=xs, y=lo, mode="lines", line=dict(width=0, color=colour), fill="tonexty",
                                 fillcolor=_rgba(colour, 0.18), showlegend=False, legendgroup=method,
                                 hoverinfo="skip", name=label + " band bottom"))
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines+markers", name=label, legendgroup=method,
            line=dict(color=colour, width=2.5, dash=dash),
            marker=dict(color=colour, size=9, symbol=symbol, line=dict(color="#111111", width=0.8)),
            customdata=[[p[2]] for p in pts],
            hovertemplate=f"{label}<br>{x} = %{{x:.4g}}<br>accuracy %{{y:.3f}} ± %{{customdata[0]:.3f}} "
                          f"({BANDS[band]})<extra></extra>"))

    if chance is None:
        classes = {r.get("classes") for r in rows if r.get("classes")}
        if len(classes) == 1:
            chance = 1.0 / float(classes.pop())
    if chance is not None and finite_x:
        xs = [finite_x[0], finite_x[-1]] if len(finite_x) > 1 else [finite_x[0] * 0.9, finite_x[0] * 1.1]
        fig.add_trace(go.Scatter(x=xs, y=[chance, chance], mode="lines", name=f"Chance (1/C = {chance:.2g})",
                                 line=dict(color="#999999", dash="dot", width=1.5), hoverinfo="skip"))
    if current is not None and math.isfinite(float(current)) and not (log_x and float(current) <= 0):
        fig.add_trace(go.Scatter(x=[float(current)] * 2, y=[0.0, 1.0], mode="lines", name="Current setting",
                                 line=dict(color="#555555", dash="dot", width=2),
                                 hovertemplate=f"current setting: {x} = {format_number(current)}<extra></extra>"))

    annotations = []
    if dropped:
        annotations.append(dict(text=f"{x} = 0 is not shown on the log axis", xref="paper", yref="paper",
                                x=0.99, y=0.02, xanchor="right", yanchor="bottom", showarrow=False,
                                font=dict(size=12, color="#555555")))
    if not by_method:
        annotations.append(dict(text=empty_text, xref="paper", yref="paper", x=0.5, y=0.5,
                                showarrow=False, font=dict(size=16, color="#555555")))
    xaxis = dict(title=dict(text=x_title or AXIS_TITLES.get(x, x)), type="log" if log_x else "linear")
    if not finite_x and x_values:  # nothing to draw yet: the axis of the planned grid
        finite_x = sorted(float(v) for v in x_values if math.isfinite(float(v)) and (float(v) > 0 or not log_x))
        if finite_x:
            lo, hi = finite_x[0], finite_x[-1]
            xaxis["range"] = ([math.log10(lo) - 0.1, math.log10(hi) + 0.1] if log_x
                              else [lo - 0.05 * (hi - lo or 1.0), hi + 0.05 * (hi - lo or 1.0)])
    ticks = log_tickvals(finite_x) if log_x else None
    if ticks is not None:
        xaxis.update(tickmode="array", tickvals=ticks[0], ticktext=ticks[1])
    fig.update_layout(
        template=PRINT_TEMPLATE, paper_bgcolor="white", plot_bgcolor="white", title=dict(text=title), height=height, annotations=annotations,
        xaxis=xaxis,
        yaxis=dict(title=dict(text=y_title), range=[0.0, 1.02], tickformat=".1f"),
        legend=LEGEND_BELOW,
        margin=dict(l=70, r=20, t=60, b=150),
        hovermode="closest",
    )
    return reserve_legend_rows(fig)


def winner_grid(rows: Sequence[Mapping[str, Any]], x: str, y: str) -> dict[tuple[float, float], dict[str, Mapping[str, Any]]]:
    """Group rows by finite (x, y) cell: {(x, y): {method: row}}.

    ``non_private`` rows (epsilon = inf) do not make cells of their own; each is attached to the
    cells it matches on the finite axis, as the reference shown on hover.
    """
    cells: dict[tuple[float, float], dict[str, Mapping[str, Any]]] = {}
    baselines: list[Mapping[str, Any]] = []
    for row in rows:
        xv, yv = _x_of(row, x), _x_of(row, y)
        if xv is None or yv is None or row.get("accuracy_mean") is None:
            continue
        if not (math.isfinite(float(xv)) and math.isfinite(float(yv))):
            if is_baseline(row.get("method")):  # epsilon = inf: a reference for every cell it matches
                baselines.append(row)
            continue
        cells.setdefault((float(xv), float(yv)), {})[row["method"]] = row
    for base in baselines:
        bx, by = float(_x_of(base, x)), float(_x_of(base, y))
        for (cx, cy), cell in cells.items():
            if (not math.isfinite(bx) or bx == cx) and (not math.isfinite(by) or by == cy):
                cell.setdefault(BASELINE.name, base)
    return cells


def winner_map_figure(rows_grid: Sequence[Mapping[str, Any]], x: str, y: str, *, title: str = "Which method wins",
                      x_title: str | None = None, y_title: str | None = None, height: int = 520) -> go.Figure:
    """Heatmap over (x, y) coloured by the method with the best mean accuracy in each cell.

    rows_grid: result rows covering a grid (e.g. ``x="epsilon"``, ``y="budget"`` from a sweep with
    several epsilons and ``vary="budget"``). ``non_private`` rows are reference only (shown on
    hover, never a winner). Each cell's text is the winner's short label and accuracy; an "≈" marks
    a cell whose margin over the runner-up does not exceed the repetition noise (see
    :func:`privcore.recommend.recommend`). Hover lists every method's accuracy +- std.
    """
    from privcore.recommend import recommend  # pure helper, no Streamlit

    cells = winner_grid(rows_grid, x, y)
    xs = sorted({k[0] for k in cells})
    ys = sorted({k[1] for k in cells})
    winners_present: list[str] = []
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    hover: list[list[str]] = []
    for yv in ys:
        zrow, trow, hrow = [], [], []
        for xv in xs:
            cell = cells.get((xv, yv), {})
            rec = recommend(list(cell.values()))
            if rec.winner is None:
                zrow.append(None)
                trow.append("")
                hrow.append("no private result")
                continue
            acc = cell[rec.winner]["accuracy_mean"]
            if not rec.useful:  # every method near chance: no winner's colour, said in the cell
                zrow.append(None)
                trow.append(f"≈ chance<br>{acc:.2f}")
            else:
                if rec.winner not in winners_present:
                    winners_present.append(rec.winner)
                zrow.append(rec.winner)
                entry = ENTRIES.get(rec.winner)
                short = (entry.short_label or entry.label) if entry is not None else rec.winner
                if len(xs) >= 5:  # narrow cells (an 800 px window): "Model sens." ran over its neighbours
                    short = short.replace(" ", "<br>")
                trow.append(f"{short}<br>{acc:.2f}{'' if rec.significant else ' ≈'}")
            lines = [f"{AXIS_SYMBOLS.get(x, x)} = {format_number(xv)}, {AXIS_SYMBOLS.get(y, y)} = {format_number(yv)}"]
            for m in _ordered_methods(cell):
                r = cell[m]
                mark = " ◀ winner" if m == rec.winner else ""
                lines.append(f"{method_label(m)}: {r['accuracy_mean']:.3f} ± {float(r.get('accuracy_std') or 0):.3f}{mark}")
            if not rec.useful:
                lines.append("no method is useful here: all near chance")
            elif not rec.significant:
                lines.append("margin within repetition noise (≈)")
            hrow.append("<br>".join(lines))
        z.append(zrow)
        text.append(trow)
        hover.append(hrow)

    order = _ordered_methods(winners_present)
    index = {m: i for i, m in enumerate(order)}
    zi = [[None if v is None else index[v] for v in row] for row in z]
    k = max(len(order), 1)
    scale = []
    for i, m in enumerate(order):
        scale += [[i / k, _rgba(method_color(m), 0.85)], [(i + 1) / k, _rgba(method_color(m), 0.85)]]
    if not scale:
        scale = [[0, "#ffffff"], [1, "#ffffff"]]
    xlab = [format_number(v) for v in xs]
    ylab = [format_number(v) for v in ys]
    # Band i of the colour scale is [i/k, (i+1)/k]: method i is drawn at z = i + 0.5 on [0, k].
    zc = [[None if v is None else v + 0.5 for v in row] for row in zi]
    fig = go.Figure(go.Heatmap(
        z=zc, x=xlab, y=ylab, text=text, texttemplate="%{text}", textfont=dict(size=12, color="#111111"),
        customdata=hover, hovertemplate="%{customdata}<extra></extra>", colorscale=scale,
        zmin=0, zmax=k, showscale=False, xgap=2, ygap=2))
    for m in order:  # legend entries for the categorical colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=method_label(m),
                                 marker=dict(size=14, color=method_color(m), symbol="square")))
    if any(t.startswith("≈ chance") for row in text for t in row):  # the white cells say so; the legend too
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="≈ chance: no method useful",
                                 marker=dict(size=14, color="#ffffff", symbol="square", line=dict(color="#999999", width=1))))
    fig.update_layout(
        template=PRINT_TEMPLATE, paper_bgcolor="white", plot_bgcolor="white", title=dict(text=title), height=height,
        xaxis=dict(title=dict(text=x_title or AXIS_TITLES.get(x, x)), type="category", showgrid=False),
        yaxis=dict(title=dict(text=y_title or AXIS_TITLES.get(y, y)), type="category", showgrid=False),
        legend=LEGEND_BELOW,
        margin=dict(l=90, r=20, t=60, b=130),
    )
    return reserve_legend_rows(fig)


def main_noise(scale: Any) -> tuple[str, float | None, bool]:
    """(symbol, value, larger_is_noisier) of a NoiseScale's headline number.

    Gaussian: σ (noisier when larger); DP-SGD: its noise multiplier; Laplace-like and the vote's
    exponential mechanism: β (an inverse scale: noisier when *smaller*).
    """
    if scale is None or isinstance(scale, Exception):
        return "-", None, True
    if scale.noise_multiplier is not None:
        return "noise multiplier", float(scale.noise_multiplier), True
    if scale.noise == "gaussian":
        return "σ", float(scale.sigma), True
    if scale.noise in ("laplace_like", "exponential_mechanism"):
        return "β", float(scale.beta), False
    return "-", None, True


#: The symbols the pages use for the swept axes (hover text of the winner maps).
AXIS_SYMBOLS = {"epsilon": "ε", "delta": "δ", "budget": "B", "n": "N", "teachers": "T", "lam": "λ", "dim": "D",
                "classes": "C"}


def accounting_comparison_figure(by_mode: Mapping[str, Mapping[str, Any]], *, title: str,
                                 reference: str = "corrected", height: int | None = None) -> go.Figure:
    """Grouped horizontal bars: each method's noise relative to ``reference`` accounting (1 = same noise).

    by_mode: {accounting mode: {method: NoiseScale or error}}. Ratios are oriented so that > 1
    always means *more* noise than the reference (σ ratio, or the inverse ratio for β). One row per
    method (its full label on the left, no rotated ticks), one bar per mode with its value at the
    bar's end; the height grows with the rows (``height`` overrides it), the legend sits below.
    """
    modes = list(by_mode)
    methods = [m for m in METHOD_ORDER if any(m in by_mode[md] for md in modes)]
    fig = go.Figure()
    patterns = {"paper": "/", "corrected": "", "tight": "."}
    greys = {"paper": "#B0B0B0", "corrected": "#606060", "tight": "#202020"}
    ref = by_mode.get(reference, {})
    top = 1.0
    for md in modes:
        labels, ratios, texts = [], [], []
        for m in methods:
            sym, v, noisier_up = main_noise(by_mode[md].get(m))
            _, r, _ = main_noise(ref.get(m))
            if v is None or r is None or v == 0 or r == 0:
                continue
            ratio = v / r if noisier_up else r / v
            labels.append(method_label(m))
            ratios.append(ratio)
            texts.append(f"{sym} = {format_number(v, 4)}")
            top = max(top, ratio)
        fig.add_trace(go.Bar(y=labels, x=ratios, orientation="h", name=md,
                             marker=dict(color=greys.get(md, "#888888"), pattern=dict(shape=patterns.get(md, ""))),
                             customdata=texts, hovertemplate="%{y} (" + md + "): %{customdata}<br>noise × %{x:.3f} vs "
                             + reference + "<extra></extra>", text=[f"{x:.2f}" for x in ratios], textposition="outside",
                             cliponaxis=False, textfont=dict(size=11)))
    fig.add_vline(x=1.0, line=dict(color="#333333", dash="dash", width=1))
    rows_px = len(methods) * (14 * max(1, len(modes)) + 16)
    fig.update_layout(template=PRINT_TEMPLATE, paper_bgcolor="white", plot_bgcolor="white", title=dict(text=title),
                      barmode="group", bargap=0.25, height=height or 150 + rows_px,
                      xaxis=dict(title=dict(text=f"Noise relative to '{reference}' (>1 = more noise)"),
                                 range=[0.0, top * 1.18]),  # room for the value at the longest bar's end
                      yaxis=dict(title=dict(text=""), autorange="reversed", automargin=True),
                      legend={**LEGEND_BELOW, "title": dict(text="Accounting")},
                      margin=dict(l=20, r=30, t=60, b=60))
    return reserve_legend_rows(fig, per_row=3, axis_px=75)
