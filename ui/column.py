"""A chart laid out for one column of a two-column paper: 3.3 inches (240 pt) wide, 8-point text.

The print exports (:mod:`ui.export`) are 1,000 layout pixels wide: placed in a 3.3-inch column a PDF of
750 pt is scaled to a third, and its 13 px ticks print at about 3 pt. :func:`column_figure` re-lays a
single-panel chart at :data:`COLUMN_WIDTH_PX` (0.75 pt a pixel, so it is placed at 100 %): 8 pt text, the
caption and the guarantee lines re-wrapped to the width, the legend two entries a row under the axis, and
the height grown to hold them. The settings (caption row, file metadata) and what is really guaranteed stay
in the figure, as in every export.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

__all__ = ["COLUMN_WIDTH_PX", "column_figure", "offers_column"]

#: 3.3 inches at 72 pt an inch, 0.75 pt a layout pixel.
COLUMN_WIDTH_PX = 320
_TEXT_PX = 10.7  # 8 pt
_SMALL_PX = 9.3  # 7 pt: ticks, legend, caption
_PLOT_PX = 190
_AXIS_PX = 34  # tick labels and the axis title under the plot
_ROW_PX = 19  # a legend row
_LEFT_PX = 46
_ENTRY_PX = 150  # a legend entry: two a row from the figure's left edge


def offers_column(fig: go.Figure) -> bool:
    """Whether :func:`column_figure` can lay ``fig`` out: one panel (a second axis means subplots)."""
    keys = fig.layout.to_plotly_json().keys()
    return not any(k in keys for k in ("xaxis2", "yaxis2"))


def _wrap(words: list[str], sep: str, most: int) -> list[str]:
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + len(sep) + len(word) <= most:
            lines[-1] += sep + word
        else:
            lines.append(word)
    return lines


def column_figure(fig: go.Figure) -> go.Figure:
    """A copy of the single-panel ``fig`` laid out for a 3.3-inch column (see the module docstring)."""
    out = go.Figure(fig)
    caption_lines: list[str] = []
    notes_lines: list[str] = []
    annotations = []
    for a in out.layout.annotations:
        if a.name == "privcore-settings":
            caption_lines = _wrap(str(a.text).replace("<br>", " · ").split(" · "), " · ", 58)
            a = go.layout.Annotation(a, text="<br>".join(caption_lines), font=dict(size=_SMALL_PX - 1, color="#444444"),
                                     yshift=3)
        elif a.name == "privcore-guarantee":
            notes_lines = _wrap(str(a.text).replace("<br>", " ").split(" "), " ", 64)
            a = go.layout.Annotation(a, text="<br>".join(notes_lines), font=dict(size=_SMALL_PX - 1, color="#9a3412"))
        annotations.append(a)
    entries = sum(1 for t in out.data if t.showlegend is not False and t.name)
    legend_px = _ROW_PX * math.ceil(entries / 2) + 6 if entries else 0
    top = 8 + 15 + 6 + 10 * len(caption_lines) + 4
    bottom = _AXIS_PX + legend_px + (11 * len(notes_lines) + 10 if notes_lines else 0)
    for a in annotations:
        if a.name == "privcore-guarantee":
            a.yshift = -(_AXIS_PX + legend_px + 2)
    out.layout.annotations = annotations
    out.update_layout(
        width=COLUMN_WIDTH_PX, height=top + _PLOT_PX + bottom, font=dict(size=_TEXT_PX),
        margin=dict(l=_LEFT_PX, r=8, t=top, b=bottom),
        title=dict(font=dict(size=_TEXT_PX + 0.5), yref="container", y=1.0, yanchor="top", x=0.0, xanchor="left",
                   pad=dict(t=6, l=2)),
        legend=dict(orientation="h", yref="paper", y=-_AXIS_PX / _PLOT_PX, yanchor="top",
                    x=-(_LEFT_PX - 4) / (COLUMN_WIDTH_PX - _LEFT_PX - 8), xanchor="left", font=dict(size=_SMALL_PX),
                    entrywidth=_ENTRY_PX - 40, entrywidthmode="pixels", borderwidth=0, itemwidth=30,
                    tracegroupgap=0),
    )
    out.update_xaxes(tickfont=dict(size=_SMALL_PX), title=dict(font=dict(size=_TEXT_PX), standoff=4))
    out.update_yaxes(tickfont=dict(size=_SMALL_PX), title=dict(font=dict(size=_TEXT_PX), standoff=4))
    out.update_traces(marker=dict(size=5), selector=dict(mode="lines+markers"))
    for trace in out.data:  # thinner lines; a band's edges stay invisible (width 0)
        if trace.type == "scatter" and trace.line.width != 0:
            trace.line.width = 1.5
    return out
