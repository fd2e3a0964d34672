"""The settings a chart was made with, carried by the chart itself (no Streamlit here).

:func:`chart_settings` collects data set, the N actually used (from the result rows, so a class
filter or a subsample shows the true size), C, D, lambda, T, R, the accounting mode and the seed;
:func:`add_caption` writes them as a caption row under the title of a figure and into
``layout.meta["privcore"]``, which :mod:`ui.export` embeds in every exported file (SVG ``<desc>``,
PNG ``tEXt``, HTML ``<meta>``). A ``paper`` and a ``corrected`` export therefore never look alike.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

import plotly.graph_objects as go

from privcore.methods import BASELINE
from .figures import AXIS_SYMBOLS

__all__ = ["DPSGD_KNOBS", "dpsgd_sampling_text", "chart_settings", "caption_text", "add_caption", "settings_of", "rows_n", "leaders_text", "try_this"]

#: DP-SGD's knobs: recorded with every chart (caption, file metadata, CSV) that has a DP-SGD curve, so
#: two charts at different epochs, batch, clip or learning rate never look alike.
DPSGD_KNOBS: tuple[str, ...] = ("epochs", "batch_size", "clip", "learning_rate")
_ORDER = (("dataset", "data"), *((k, AXIS_SYMBOLS[k]) for k in ("delta", "budget", "n", "classes", "dim", "lam", "teachers")),
          ("repeats", "R"), ("accounting", "accounting"), ("seed", "seed"), ("epochs", "DP-SGD epochs"),
          ("batch_size", "batch"), ("clip", "clip"), ("learning_rate", "learning rate"))


def _values(rows: Sequence[Mapping[str, Any]], key: str) -> list[Any]:
    out = []
    for r in rows:
        v = r.get(key)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        if v not in out:
            out.append(v)
    return out


def _fmt(v: Any) -> str:
    from .figures import format_number

    return format_number(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def _one(values: list[Any]) -> Any:
    """A single value, a 'lo–hi' range of numbers, or the values joined."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(nums) == len(values):
        return f"{_fmt(min(nums))}–{_fmt(max(nums))}"
    return "/".join(str(v) for v in values)


def rows_n(rows: Sequence[Mapping[str, Any]]) -> int | None:
    """The training-set size the rows were computed on (the largest, when N varies)."""
    ns = [int(v) for v in _values(rows, "n")]
    return max(ns) if ns else None


def chart_settings(rows: Sequence[Mapping[str, Any]], *, dataset: str, seed: int | None = None,
                   accounting: str | None = None, repeats: int | None = None,
                   extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """{name: value} of the settings behind ``rows`` (values from the rows win over the arguments)."""
    priv = [r for r in rows if r.get("method") != BASELINE.name] or list(rows)
    meta: dict[str, Any] = {"dataset": dataset}
    for key in ("delta", "budget", "n", "classes", "dim", "lam", "teachers", "repeats", "accounting"):
        meta[key] = _one(_values(priv, key))
    if meta["accounting"] is None:
        meta["accounting"] = accounting
    if meta["repeats"] is None:
        meta["repeats"] = repeats
    meta["seed"] = seed
    for k, v in (extra or {}).items():
        meta[k] = v
    return {k: v for k, v in meta.items() if v is not None}


def settings_of(spec: Any, rows: Sequence[Mapping[str, Any]], *, dataset: str | None = None) -> dict[str, Any]:
    """:func:`chart_settings` of a privcore SweepSpec's result rows (data set name, seed and accounting from it)."""
    from privcore.methods import get_method

    d = spec.data
    extra = {"preprocess": d.preprocess} if d.name == "file" else {}
    tuned = getattr(spec, "tuning", "configured") != "configured"
    if any(k in get_method(m).uses for m in spec.methods for k in DPSGD_KNOBS):  # DP-SGD (or a method like it)
        # A knob some method tunes is each row's own (the table's knobs, the CSV's rows), not the configured value.
        picked = {k for m in spec.methods for k in get_method(m).tuning_grid} if tuned else set()
        extra.update({k: getattr(spec, k) for k in DPSGD_KNOBS if k not in picked})
    if tuned:  # each method at its own knobs (rows' "tuned")
        extra["knobs"] = {"held-out": "tuned on the test queries (not private)",
                          "private": "tuned privately (in ε)"}[spec.tuning]
    return chart_settings(rows, dataset=dataset or d.name, seed=spec.seed, accounting=spec.accounting,
                          repeats=spec.repeats, extra=extra)


def dpsgd_sampling_text(problem: Any) -> str:
    """DP-SGD's sampling rate and steps at ``problem`` (a Problem), or why it cannot run: a batch larger
    than N would be a sampling rate q = batch / N above 1, which is no probability."""
    from .figures import format_number

    if problem.batch_size > problem.n:
        return (f"DP-SGD cannot run: its batch ({problem.batch_size:,}) is larger than N ({problem.n:,}), so no "
                "sampling rate q = batch / N ≤ 1 exists (lower the batch or raise N)")
    return f"DP-SGD: q = {format_number(problem.sample_rate, 3)}, {problem.steps:,} steps"


def caption_text(meta: Mapping[str, Any]) -> str:
    """'data: digits · N = 1,437 · C = 10 · ...' in a fixed order, extra keys last (one line)."""
    parts = []
    for key, sym in _ORDER:
        if key in meta:
            v = meta[key]
            parts.append(f"{sym}: {v}" if key in ("dataset", "accounting") else f"{sym} = {_fmt(v)}")
    for key, v in meta.items():
        if key not in dict(_ORDER):
            parts.append(f"{key}: {_fmt(v)}")
    return " · ".join(parts)


#: Height of one caption row (11 px text, with room to spare) and the room above a title pinned to the figure's top.
CAPTION_LINE_PX = 15
#: Height of one title row (17 px text).
TITLE_LINE_PX = 24
TITLE_PAD_PX = 10


def add_caption(fig: go.Figure, meta: Mapping[str, Any]) -> go.Figure:
    """Write the settings under the title (a caption row inside every export) and into layout.meta."""
    text = caption_text(meta)
    top = (fig.layout.margin.t or 60) if fig.layout.margin else 60
    # Rows of at most ~64 characters, so the caption fits a chart on an 800 px screen.
    lines: list[str] = []
    for part in text.split(" · "):
        if lines and len(lines[-1]) + 3 + len(part) <= 64:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    shown = "<br>".join(lines)
    fig.add_annotation(text=shown, xref="paper", yref="paper", x=0.0, y=1.0, xanchor="left", yanchor="bottom",
                       yshift=6, showarrow=False, align="left", font=dict(size=11, color="#444444"),
                       name="privcore-settings")
    meta_all = dict(fig.layout.meta) if isinstance(fig.layout.meta, dict) else {}
    meta_all["privcore"] = {**{k: v for k, v in meta.items()}, "caption": text}
    # Plotly centres an unpinned title in the top margin, so the margin grown for the caption moved the
    # title down onto the caption's first row: pin it to the figure's top edge instead.
    # A title of two lines (the leakage chart's) needs a second row above the caption, or its first is cut off.
    title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else ""
    new_top = max(top, 16 + TITLE_LINE_PX * (1 + title.count("<br>")) + CAPTION_LINE_PX * len(lines) + 10)
    # A figure of fixed height grows with its caption, so its plot keeps the size the legend's place below
    # the axis was computed for (ui.figures.reserve_legend_rows): the legend covered the axis title.
    height = fig.layout.height + new_top - top if fig.layout.height else None
    fig.update_layout(meta=meta_all, margin=dict(t=new_top), height=height,
                      # plotly places a pinned title's first line at the top and its others above it: pad
                      # them down into the figure (the leakage chart's first line was cut off)
                      title=dict(yref="container", y=1.0, yanchor="top",
                                 pad=dict(t=TITLE_PAD_PX + TITLE_LINE_PX * title.count("<br>"), l=8)))
    return fig


def meta_json(fig: go.Figure | Mapping[str, Any]) -> str | None:
    """The settings of a figure (dict or Figure) as compact JSON, or None when it has none."""
    layout = fig.get("layout", {}) if isinstance(fig, Mapping) else fig.to_plotly_json().get("layout", {})
    meta = layout.get("meta") if isinstance(layout, Mapping) else None
    if isinstance(meta, Mapping) and "privcore" in meta:
        return json.dumps(meta["privcore"], sort_keys=True, ensure_ascii=True, default=str)
    return None


#: Accuracy spread below which the methods at one x are called level (no leader is named).
LEVEL_SPREAD = 0.02
#: Most stretches :func:`leaders_text` names before it summarises the rest.
MOST_STRETCHES = 4


def leaders_text(rows: Sequence[Mapping[str, Any]], x: str, xname: str, label, fmt) -> str:  # noqa: ANN001
    """Who leads the curve over ``x`` (accuracy_mean; the baseline left out), stretch by stretch from
    the smallest to the largest value, e.g. "DP-SGD leads from ε = 0.1 to 3 (0.21 to 0.80), then
    subsample-and-aggregate from ε = 10 to 100 (0.92 to 0.95)". Where every method is within
    LEVEL_SPREAD of the best (all at chance at a tiny ε, all at the non-private level at a huge one)
    no leader is named: "every method scores about 0.10 at ε = 0.1". ``label`` names a method,
    ``fmt`` writes an x value. Empty when no private row has a finite ``x``."""
    priv = [r for r in rows if r["method"] != BASELINE.name and r.get(x) is not None and math.isfinite(float(r[x]))]
    if not priv:
        return ""
    xs = sorted({float(r[x]) for r in priv})

    def leader(xv: float) -> tuple[str | None, float]:
        here = [r for r in priv if float(r[x]) == xv]
        best = max(here, key=lambda r: r["accuracy_mean"])
        level = len(here) > 1 and best["accuracy_mean"] - min(r["accuracy_mean"] for r in here) < LEVEL_SPREAD
        return (None if level else label(best["method"])), best["accuracy_mean"]

    stretches: list[tuple[str | None, list[float], list[float]]] = []  # (leader or None, xs, best accuracies)
    for xv in xs:
        who, acc = leader(xv)
        if stretches and stretches[-1][0] == who:
            stretches[-1][1].append(xv)
            stretches[-1][2].append(acc)
        else:
            stretches.append((who, [xv], [acc]))

    def span(where: list[float], accs: list[float]) -> tuple[str, str]:
        if len(where) == 1:
            return f"at {xname} = {fmt(where[0])}", f"{accs[0]:.2f}"
        ends = f"{accs[0]:.2f}" if f"{accs[0]:.2f}" == f"{accs[-1]:.2f}" else f"{accs[0]:.2f} to {accs[-1]:.2f}"
        return f"from {xname} = {fmt(where[0])} to {fmt(where[-1])}", ends  # "0.82", not "0.82 to 0.82"

    parts = []
    for k, (who, where, accs) in enumerate(stretches[:MOST_STRETCHES]):
        place, acc = span(where, accs)
        if who is None:
            lo_acc, hi_acc = f"{min(accs):.2f}", f"{max(accs):.2f}"
            level = f"about {lo_acc}" if lo_acc == hi_acc else f"about {lo_acc} to {hi_acc}"
            parts.append(f"every method scores {level} {place}")
        else:
            parts.append(f"{who} leads {place} ({acc})")
    text = "; then ".join(parts)
    if len(stretches) > MOST_STRETCHES:
        more = stretches[MOST_STRETCHES:]
        rest = sorted({w for w, _, _ in more if w is not None})
        if len(more) == 1:
            who, where, accs = more[0]
            place, acc = span(where, accs)
            text += f"; then {who} leads {place} ({acc})" if who is not None else f"; then every method is level {place}"
        else:
            text += f"; the lead changes {len(more)} more times" + (f" (among {', '.join(rest)})" if rest else "")
    return text[0].upper() + text[1:]


def try_this(delta: float, budget: int, bundled: bool = True, methods: Sequence[str] | None = None) -> str:
    """The ε curve's "Try this" hint: the next step of the tour from where the controls stand.

    Steps: set δ = 0 (the training method that needs δ > 0 drops out), then raise B to 100 (the
    prediction methods pay per prediction), then change N or λ (the sensitivity methods' noise scales
    as 1/(N λ)). The outcomes quoted are the bundled 4,000 digits' at λ = 0.001: ``bundled`` False
    (another data set is in use) gives the steps without them. ``methods`` (the methods shown; None: all)
    without DP-SGD makes the first step say nothing of it (a walk-through saw "DP-SGD drops out" with no
    DP-SGD on the chart).
    """
    if float(delta) > 0 and methods is not None and "dpsgd" not in methods:
        return "Try this: set δ = 0 (pure DP: only the methods with a δ = 0 guarantee stay), then compare B = 10 with B = 100."
    if float(delta) > 0:
        return ("Try this: set δ = 0. DP-SGD drops out and subsample-and-aggregate wins at B = 10 from ε ≈ 1 on; "
                "then raise B to 100 and loss perturbation leads up to ε ≈ 30 (bundled 4,000 digits, λ = 0.001)."
                if bundled else "Try this: set δ = 0 (DP-SGD drops out), then compare B = 10 with B = 100.")
    if int(budget) < 100:
        return ("Try this: raise B to 100. The prediction methods pay for every prediction, so loss perturbation "
                "leads up to ε ≈ 30 (bundled 4,000 digits, λ = 0.001)." if bundled else
                "Try this: raise B to 100. The prediction methods pay for every prediction; the training methods "
                "do not change.")
    return ("Try this: open “More settings” and raise N or λ. The sensitivity methods' noise scales as 1/(N λ); "
            "the Who wins page maps the winner over ε and B.")
