"""The paper's Figures 1-6 for the Reproduce page: their settings on a given data set, a
multi-epsilon curve figure (Figure 6), accuracy gaps between accountings, and a cache probe.

Plotly only, no Streamlit; nothing here trains (``cached_sweep`` only reads the disk cache).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go

from privcore import REGISTRY
from ui.figures import (AXIS_TITLES, LEGEND_BELOW, METHOD_COLORS, PRINT_TEMPLATE, format_number, is_baseline, log_tickvals,
                        method_label, method_style, reserve_legend_rows)


#: What the paper found (SPEC "What the paper found"), one sentence per figure.
PAPER_FINDINGS: dict[str, str] = {
    "1a": "At δ = 0 and B = 100, subsample-and-aggregate is best for most ε, loss perturbation is best at small ε, "
          "model sensitivity trails both and prediction sensitivity is poor everywhere.",
    "1b": "At δ = 1e-5, DP-SGD is best and model sensitivity (now with Gaussian noise) is more competitive than at δ = 0.",
    "2a": "At ε = 1 and δ = 0, subsample-and-aggregate is best for small B and loss perturbation overtakes it near "
          "B = 80; the training methods are flat in B.",
    "2b": "At ε = 1 and δ = 1e-5, the prediction methods lose accuracy as B grows while DP-SGD and the other training "
          "methods stay flat.",
    "3": "Loss perturbation, DP-SGD and model sensitivity work well even at very small δ; prediction sensitivity needs "
         "unacceptably large δ, and subsample-and-aggregate benefits most from a larger δ.",
    "4": "Subsample-and-aggregate suits small N; loss perturbation and model sensitivity improve fastest as N grows.",
    "5a": "Fewer input dimensions (PCA) help loss perturbation and model sensitivity most.",
    "5b": "More classes lower every method's accuracy; the ranking of the methods hardly changes.",
    "6a": "Loss perturbation has an interior optimum in λ (overfits the perturbation when λ is too small, underfits "
          "when too large), and the best λ depends on ε.",
    "6b": "Subsample-and-aggregate improves with more teachers T up to a point, then degrades as each teacher sees "
          "too few examples.",
}

#: The paper's five methods (the figures reproduce the paper; the methods added since are in Explore).
ALL_METHODS: tuple[str, ...] = tuple(m for m in REGISTRY if REGISTRY[m].from_paper)
#: The methods with a pure-DP (delta = 0) guarantee, and a note naming the ones left out.
_PURE: tuple[str, ...] = tuple(m for m in ALL_METHODS if REGISTRY[m].supports(0.0))
_LEFT_OUT = [REGISTRY[m].label for m in ALL_METHODS if m not in _PURE]
_PURE_NOTE = " and ".join(_LEFT_OUT) + (" needs δ > 0 and is left out." if len(_LEFT_OUT) == 1
                                        else " need δ > 0 and are left out.")


def _figure6(axis: str) -> tuple[str, ...]:
    """The method(s) whose module names ``axis`` as its paper Figure 6 sweep."""
    return tuple(m for m in ALL_METHODS if REGISTRY[m].paper_figure6_axis == axis)


class PaperFigure:
    """One panel of the paper's Figures 1-6 on a given data set: what to sweep and how to draw it.

    ``x`` is the result column on the horizontal axis; ``vary``/``values`` the SweepSpec axis (None
    for Figure 1, which varies epsilon itself). ``by_epsilon``: one curve per epsilon (Figure 6).
    """

    def __init__(self, key: str, title: str, x: str, log_x: bool, epsilons: Sequence[float], delta: float,
                 vary: str | None = None, values: Sequence[Any] = (), methods: Sequence[str] = ALL_METHODS,
                 budget: int = 100, by_epsilon: bool = False, note: str = "") -> None:
        self.key, self.title, self.x, self.log_x = key, title, x, log_x
        self.epsilons = tuple(float(e) for e in epsilons)
        self.delta, self.vary, self.values = float(delta), vary, tuple(values)
        self.methods, self.budget, self.by_epsilon, self.note = tuple(methods), int(budget), by_epsilon, note
        self.finding = PAPER_FINDINGS.get(key, "")

    @property
    def label(self) -> str:
        return f"Figure {self.key}: {self.title}"

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"PaperFigure({self.key!r}, vary={self.vary!r}, values={self.values!r}, epsilons={self.epsilons!r})"


def paper_figures(n_train: int, dim: int, classes: int, *, image: bool = True, augment: bool = False,
                  min_n: int = 1) -> list[PaperFigure]:
    """The paper's Figures 1a-6b with axes limited to what a data set of this size allows.

    Settings follow Section 4 of the paper: B = 100 unless B varies, epsilon = 1 unless epsilon
    varies, delta = 0 (Figures 1a, 2a, 4, 5, 6) or 1e-5 (1b, 2b). N values stop at ``n_train``
    unless ``augment`` (image data only: deformed copies) and start at ``min_n`` (e.g. T or the
    batch size, which every N must reach). PCA dimensions stay below ``dim``; classes 2..``classes``;
    teachers T up to n_train / 4.
    """
    n_train, dim, classes = int(n_train), int(dim), int(classes)
    ns = [v for v in (100, 250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 60000) if min_n <= v < n_train]
    ns.append(n_train)
    if augment and image:
        ns += [v for v in (2 * n_train, 4 * n_train, 8 * n_train)]
    dims = [d for d in (5, 10, 20, 50, 100, 200, 500) if d < dim] + [dim]
    teachers = [t for t in (1, 2, 4, 8, 16, 32, 64, 128, 256) if t <= max(1, n_train // 4)]
    eps_pure = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
    return [
        PaperFigure("1a", "accuracy vs ε at δ = 0, B = 100", "epsilon", True, eps_pure, 0.0,
                    methods=_PURE, note=_PURE_NOTE),
        PaperFigure("1b", "accuracy vs ε at δ = 1e-5, B = 100", "epsilon", False, (0.1, 0.2, 0.4, 0.6, 0.8, 1.0), 1e-5,
                    note="As in the paper's panel, ε runs up to 1 on a linear axis (from 0.1 here: ε = 0 has no private model)."),
        PaperFigure("2a", "accuracy vs inference budget B at ε = 1, δ = 0", "budget", True, (1.0,), 0.0, vary="budget",
                    values=(1, 3, 10, 30, 100, 300, 1000), methods=_PURE),
        PaperFigure("2b", "accuracy vs inference budget B at ε = 1, δ = 1e-5", "budget", True, (1.0,), 1e-5,
                    vary="budget", values=(1, 3, 10, 30, 100, 300, 1000)),
        PaperFigure("3", "accuracy vs δ at ε = 1, B = 100", "delta", True, (1.0,), 1e-5, vary="delta",
                    values=(1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)),
        PaperFigure("4", "accuracy vs training-set size N at (ε, δ) = (1, 0), B = 100", "n", True, (1.0,), 0.0,
                    vary="n", values=tuple(ns), methods=_PURE,
                    note="The paper grew MNIST to 1M images (InfiMNIST); here N stops at the data set's training split "
                         "unless augmentation is switched on."),
        PaperFigure("5a", "accuracy vs input dimension D (PCA) at (ε, δ) = (1, 0), B = 100", "dim", True, (1.0,), 0.0,
                    vary="dim", values=tuple(dims), methods=_PURE),
        PaperFigure("5b", "accuracy vs number of classes C at (ε, δ) = (1, 0), B = 100", "classes", False, (1.0,), 0.0,
                    vary="classes", values=tuple(range(2, classes + 1)),
                    methods=_PURE),
        PaperFigure("6a", "loss perturbation vs L2 weight λ at δ = 0, B = 100", "lam", True, (1.0, 10.0, 100.0), 0.0,
                    vary="lam", values=(1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 0.5), methods=_figure6("lam"),
                    by_epsilon=True),
        PaperFigure("6b", "subsample-and-aggregate vs number of teachers T at δ = 0, B = 100", "teachers", True,
                    (1.0, 10.0, 100.0), 0.0, vary="teachers", values=tuple(teachers), methods=_figure6("teachers"),
                    by_epsilon=True),
    ]


def epsilon_curves_figure(rows: Sequence[dict[str, Any]], x: str, *, title: str, log_x: bool,
                          x_title: str | None = None, height: int = 480) -> go.Figure:
    """One curve per (method, epsilon) along column ``x`` (the paper's Figure 6 style).

    Shades of the method's fixed colour, darker for larger epsilon, +-1 std as error bars; the
    ``non_private`` rows as a dashed reference line.
    """

    fig = go.Figure()
    methods = [m for m in METHOD_COLORS if any(r["method"] == m for r in rows)]
    for method in methods:
        pts = [r for r in rows if r["method"] == method and r.get(x) is not None and r.get("accuracy_mean") is not None]
        if is_baseline(method):
            pts = sorted(pts, key=lambda r: float(r[x]))
            fig.add_trace(go.Scatter(x=[float(r[x]) for r in pts], y=[r["accuracy_mean"] for r in pts], mode="lines",
                                     name=method_label(method), line=dict(color=METHOD_COLORS[method], dash="dash")))
            continue
        eps_values = sorted({float(r["epsilon"]) for r in pts})
        for i, e in enumerate(eps_values):
            sub = sorted((r for r in pts if float(r["epsilon"]) == e), key=lambda r: float(r[x]))
            alpha = 0.45 + 0.55 * (i + 1) / len(eps_values)
            colour = METHOD_COLORS.get(method, "#888888")
            rgb = tuple(int(colour.lstrip("#")[k:k + 2], 16) for k in (0, 2, 4))
            shade = "rgba({},{},{},{:.2f})".format(*rgb, alpha)
            fig.add_trace(go.Scatter(
                x=[float(r[x]) for r in sub], y=[r["accuracy_mean"] for r in sub], mode="lines+markers",
                name=f"{method_label(method)}, ε = {e:g}",
                line=dict(color=shade, width=2.5, dash=("dot", "dash", "solid")[min(i, 2)] if len(eps_values) <= 3 else "solid"),
                marker=dict(color=shade, size=8, symbol=method_style(method)[0]),
                error_y=dict(type="data", array=[float(r.get("accuracy_std") or 0.0) for r in sub], color=shade, thickness=1),
                hovertemplate=f"ε = {e:g}<br>{x} = %{{x:.4g}}<br>accuracy %{{y:.3f}}<extra></extra>"))
    xaxis = dict(title=dict(text=x_title or AXIS_TITLES.get(x, x)), type="log" if log_x else "linear")
    ticks = log_tickvals(float(r[x]) for r in rows if r.get(x) is not None) if log_x else None
    if ticks is not None:
        xaxis.update(tickmode="array", tickvals=ticks[0], ticktext=ticks[1])
    fig.update_layout(template=PRINT_TEMPLATE, title=dict(text=title), height=height,
                      xaxis=xaxis,
                      yaxis=dict(title=dict(text="Test accuracy"), range=[0.0, 1.02]),
                      legend=LEGEND_BELOW,
                      margin=dict(l=70, r=20, t=60, b=150))
    return reserve_legend_rows(fig)


def accounting_gaps(rows_by_accounting: dict[str, Sequence[dict[str, Any]]], x: str,
                    reference: str = "paper") -> list[dict[str, Any]]:
    """Per method, the mean and largest accuracy difference of each accounting mode vs ``reference``.

    Matches rows on (method, epsilon, x). Returns [{method, accounting, mean_change, max_drop, points}].
    """
    ref = {(r["method"], r["epsilon"], r.get(x)): r["accuracy_mean"] for r in rows_by_accounting.get(reference, ())}
    out = []
    for acc, rows in rows_by_accounting.items():
        if acc == reference:
            continue
        diffs: dict[str, list[float]] = {}
        for r in rows:
            key = (r["method"], r["epsilon"], r.get(x))
            if not is_baseline(r["method"]) and key in ref:
                diffs.setdefault(r["method"], []).append(r["accuracy_mean"] - ref[key])
        for method, d in diffs.items():
            out.append({"method": method, "accounting": acc, "mean_change": float(np.mean(d)),
                        "max_drop": float(-min(d)), "points": len(d)})
    return out


def _axis_settings(fig: PaperFigure, s: Any, info: Any) -> list[tuple[Any, dict[str, Any], int | None]]:
    """(axis value, the knobs methods' rules read, N) at each point of ``fig``'s axis (one for Figure 1)."""
    from dataclasses import replace

    from .setting import method_knobs

    out = []
    for value in (fig.values if fig.vary else (None,)):
        at = s
        if fig.vary in ("delta", "teachers", "n", "classes"):
            at = replace(s, **{"delta": {"delta": float(value)}, "teachers": {"teachers": int(value)},
                               "n": {"n": int(value)}, "classes": {"classes": int(value)}}[fig.vary])
        out.append((value, method_knobs(at), at.effective_n(info)))
    return out


def runnable_methods(fig: PaperFigure, s: Any, info: Any) -> tuple[tuple[str, ...], list[str], tuple[str, ...]]:
    """Which of ``fig``'s methods can run at setting ``s`` (a :class:`ui.setting.Setting`) on data
    ``info``, by each method's own ``unavailable`` rule at every point of the figure's axis.

    Returns (methods that run at one point at least, plain-words messages for the others and for
    the points left out, methods left out at some points only). A method left out of the whole
    figure is not computed; the others still are (methods fail alone)."""
    points = _axis_settings(fig, s, info)
    keep: list[str] = []
    partial: list[str] = []
    notes: list[str] = []
    for name in fig.methods:
        entry = REGISTRY[name]
        why = [(value, entry.unavailable(knobs, n)) for value, knobs, n in points]
        missing = [(value, reason) for value, reason in why if reason]
        if not missing:
            keep.append(name)
        elif len(missing) == len(points):
            notes.append(f"{entry.label} is left out of Figure {fig.key}: {missing[0][1]}.")
        else:
            keep.append(name)
            partial.append(name)
            values = ", ".join(format_number(v) for v, _ in missing)
            axis = {"n": "N", "classes": "C", "delta": "δ", "teachers": "T"}.get(fig.vary, fig.vary)
            notes.append(f"{entry.label} is left out at {axis} = {values}: {missing[0][1]}.")
    return tuple(keep), notes, tuple(partial)


def cached_sweep(spec: Any) -> Any | None:
    """The :class:`~privcore.engine.runner.SweepResult` of ``spec`` if every point is already in the
    on-disk cache, else None. Computes nothing (it loads the data set to fingerprint it)."""
    from privcore.engine.runner import read_cached

    return read_cached(spec)


def noise_ratios(problem: Any, methods: Sequence[str], epsilon: float, delta: float, modes: Sequence[str],
                 reference: str = "paper") -> dict[tuple[str, str], float | None]:
    """{(method, mode): the method's noise under ``mode`` / its noise under ``reference``} at one
    (epsilon, delta) on ``problem``, oriented so that > 1 means more noise (β, an inverse scale, is
    inverted; see :func:`ui.figures.main_noise`). None where either calibration does not exist (DP-SGD
    at delta = 0). Computed from the calibrations themselves, so the Reproduce page's note can never
    again say a method "is the same in both" while its noise differs."""
    from privcore import PrivacyBudget, calibrate
    from ui.figures import main_noise

    def headline(method: str, mode: str) -> tuple[float | None, bool]:
        try:
            _, value, up = main_noise(calibrate(method, PrivacyBudget(float(epsilon), float(delta)), problem, mode))
        except (ValueError, TypeError):  # no guarantee at this delta
            return None, True
        return value, up

    out: dict[tuple[str, str], float | None] = {}
    for m in methods:
        ref, up = headline(m, reference)
        for mode in modes:
            if mode == reference:
                continue
            v, _ = headline(m, mode)
            out[(m, mode)] = None if not v or not ref else (v / ref if up else ref / v)
    return out


def ratio_text(ratio: float | None) -> str:
    """A noise ratio for a table cell: "×1.46", "same" within 0.5 %, "-" when there is none."""
    if ratio is None:
        return "-"
    return "same" if abs(ratio - 1.0) < 0.005 else f"×{ratio:.2f}"
