"""Figure builders for the Learn page: pure, instant (no data, no training), plotly only.

Five independent views (rows + figure each) sharing one style (:mod:`ui.teaching_style`): the first two
are below, the others in :mod:`ui.amplification`, :mod:`ui.hypothesis` and :mod:`ui.cards`, re-exported here.

Every view has a ``*_rows`` function returning plain dicts (the numbers behind the figure, for the
CSV export and for tests) and a ``*_figure`` function drawing them. All privacy numbers come from
privcore's calibrations; nothing here re-derives a noise scale that privcore already computes.

1. :func:`noise_figure` -- Laplace-like vs Gaussian noise at the same epsilon (1-D densities with the
   neighbouring shift, 2-D samples from privcore's samplers, radius distribution in d dimensions).
2. :func:`composition_figure` -- how the per-query budget shrinks with the inference budget B under
   basic, advanced (the paper's eps* with the best delta') and tight composition, for the Gaussian
   mechanism (prediction sensitivity) and the exponential mechanism (subsample-and-aggregate).
3. :func:`amplification_figure` -- privacy amplification by subsampling: epsilon of one step of the
   Poisson-subsampled Gaussian mechanism vs the sample rate q.
4. :func:`hypothesis_figure` -- the hypothesis-testing view of (epsilon, delta)-DP: the region of
   (false positive rate, true positive rate) pairs any test can reach, and the trade-off curves of
   the calibrated Gaussian and Laplace mechanisms inside it.
5. :func:`method_cards` / :func:`method_card_markdown` / :func:`method_card_blocks` -- one card per
   registered method built from its class attributes and the formula string of each accounting mode's
   calibration (typeset by :func:`ui.formula.display_latex` where it reads cleanly).
The Reproduce page's figure settings live in :mod:`ui.paper`.
"""

from __future__ import annotations

import math
from functools import lru_cache
from math import lgamma as _lgamma
from typing import Any, Iterable

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from scipy import stats

from privcore.accounting import (
    advanced_gaussian_sigma,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    exact_gaussian_sigma,
    optimal_beta,
    zcdp_beta,
)
from ui.amplification import DEFAULT_SAMPLE_RATES, amplification_figure, amplification_rows
from ui.cards import method_card_blocks, method_card_markdown, method_cards
from ui.figures import format_number
from ui.hypothesis import attack_advantage, dp_region, hypothesis_figure, hypothesis_rows
from ui.teaching_style import GAUSS as _GAUSS
from ui.teaching_style import LAPLACE as _LAPLACE
from ui.teaching_style import RULE_COLOURS as _RULE_COLOURS
from ui.teaching_style import RULE_STYLES as _RULE_STYLES
from ui.teaching_style import check_delta as _check_delta
from ui.teaching_style import check_eps as _check_eps
from ui.teaching_style import style as _style

__all__ = [
    "DEFAULT_BUDGETS",
    "DEFAULT_SAMPLE_RATES",
    "noise_summary",
    "noise_rows",
    "noise_figure",
    "composition_rows",
    "composition_figure",
    "amplification_rows",
    "amplification_figure",
    "dp_region",
    "hypothesis_rows",
    "attack_advantage",
    "hypothesis_figure",
    "method_cards",
    "method_card_markdown",
    "method_card_blocks",
]

#: Inference budgets B shown by the composition view (log-spaced integers, 1 to 1000).
DEFAULT_BUDGETS: tuple[int, ...] = (1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1000)

#: Dimensions of the mean-radius panel (MNIST's model sensitivity perturbs D*C = 784*10 numbers).
_DIMS: tuple[int, ...] = tuple(int(d) for d in np.unique(np.round(np.geomspace(1, 10_000, 25))))


# --------------------------------------------------------------------------------------------
# 1. Laplace-like vs Gaussian noise at the same epsilon
# --------------------------------------------------------------------------------------------


def noise_summary(epsilon: float, delta: float, sensitivity: float = 1.0, dim: int = 10) -> dict[str, float]:
    """The two calibrations compared by :func:`noise_figure`, at L2 ``sensitivity`` in ``dim`` dimensions.

    Laplace-like (density prop. to exp(-beta ||b||_2)) is epsilon-DP with beta = epsilon / sensitivity
    (the calibration model sensitivity uses, with sensitivity 2K/(N lam)); its radius is
    Gamma(dim, 1/beta), mean dim / beta. The Gaussian is (epsilon, delta)-DP with the analytic sigma
    (Balle and Wang 2018); its radius is sigma * chi(dim), mean about sigma sqrt(dim). The classical
    sigma = sensitivity sqrt(2 ln(1.25/delta)) / epsilon is shown for comparison.
    """
    eps = _check_eps(epsilon)
    dlt = _check_delta(delta)
    if not math.isfinite(eps):
        raise ValueError("epsilon must be finite for a noise comparison")
    sens = float(sensitivity)
    d = int(dim)
    if sens <= 0 or d < 1:
        raise ValueError(f"sensitivity must be > 0 and dim >= 1, got {sensitivity!r} and {dim!r}")
    beta = eps / sens
    out = {"epsilon": eps, "delta": dlt, "sensitivity": sens, "dim": float(d), "laplace_beta": beta,
           "laplace_scale": 1.0 / beta, "laplace_mean_radius": d / beta}
    # E||b||^2 = d(d+1)/beta^2 for the Laplace-like law, so each coordinate has variance (d+1)/beta^2.
    out["laplace_coordinate_std"] = math.sqrt(d + 1.0) / beta
    if dlt > 0:
        sigma = analytic_gaussian_sigma(eps, dlt, sens)
        out.update(gaussian_sigma=sigma, gaussian_mean_radius=float(stats.chi(d, scale=sigma).mean()),
                   classical_sigma=classical_gaussian_sigma(eps, dlt, sens))
    return out


@lru_cache(maxsize=64)
def _noise_rows_cached(eps: float, dlt: float, sens: float, dim: int, samples: int, seed: int) -> tuple[dict[str, Any], ...]:
    import torch

    from privcore.noise import sample_gaussian, sample_laplace_like

    s = noise_summary(eps, dlt, sens, dim)
    beta = s["laplace_beta"]
    sigma = s.get("gaussian_sigma")
    rows: list[dict[str, Any]] = []
    # 1-D densities on D and on a neighbour D' (query shifted by the sensitivity).
    spread = max(4.0 / beta, 4.0 * (sigma or 0.0)) + sens
    xs = np.linspace(-spread, spread, 401)
    for shift, which in ((0.0, "D"), (sens, "D'")):
        for x, p in zip(xs, 0.5 * beta * np.exp(-beta * np.abs(xs - shift))):
            rows.append({"panel": "density_1d", "distribution": "laplace_like", "dataset": which, "x": float(x), "y": float(p)})
        if sigma is not None:
            for x, p in zip(xs, stats.norm.pdf(xs, loc=shift, scale=sigma)):
                rows.append({"panel": "density_1d", "distribution": "gaussian", "dataset": which, "x": float(x), "y": float(p)})
    # 2-D samples from privcore's own samplers.
    gen = torch.Generator().manual_seed(int(seed))
    lap2 = sample_laplace_like(beta, samples, 2, gen, dtype=torch.float64).numpy()
    for x, y in lap2:
        rows.append({"panel": "samples_2d", "distribution": "laplace_like", "dataset": "D", "x": float(x), "y": float(y)})
    if sigma is not None:
        gau2 = sample_gaussian(sigma, samples, 2, gen, dtype=torch.float64).numpy()
        for x, y in gau2:
            rows.append({"panel": "samples_2d", "distribution": "gaussian", "dataset": "D", "x": float(x), "y": float(y)})
    # Radius ||b|| in `dim` dimensions: Gamma(dim, 1/beta) vs sigma * chi(dim).
    lap_r = stats.gamma(dim, scale=1.0 / beta)
    hi = lap_r.ppf(0.999)
    if sigma is not None:
        gau_r = stats.chi(dim, scale=sigma)
        hi = max(hi, gau_r.ppf(0.999))
    rs = np.linspace(0.0, hi, 301)
    for r, p in zip(rs, lap_r.pdf(rs)):
        rows.append({"panel": "radius", "distribution": "laplace_like", "dataset": "D", "x": float(r), "y": float(p)})
    if sigma is not None:
        for r, p in zip(rs, gau_r.pdf(rs)):
            rows.append({"panel": "radius", "distribution": "gaussian", "dataset": "D", "x": float(r), "y": float(p)})
    # Mean radius as the dimension grows: d / beta vs sigma E[chi_d] (about sigma sqrt(d)).
    for d in _DIMS:
        rows.append({"panel": "mean_radius", "distribution": "laplace_like", "dataset": "D", "x": float(d), "y": d / beta})
        if sigma is not None:
            rows.append({"panel": "mean_radius", "distribution": "gaussian", "dataset": "D", "x": float(d),
                         "y": float(sigma * math.sqrt(2.0) * math.exp(_lgamma((d + 1) / 2.0) - _lgamma(d / 2.0)))})
    return tuple(rows)


def noise_rows(epsilon: float, delta: float, sensitivity: float = 1.0, dim: int = 10, samples: int = 1500,
               seed: int = 0) -> list[dict[str, Any]]:
    """Long-format numbers behind :func:`noise_figure` (panel, distribution, dataset, x, y).

    Panels: ``density_1d`` (densities of the noisy answer on D and on a neighbour D' whose answer is
    ``sensitivity`` larger), ``samples_2d`` (draws from :mod:`privcore.noise`), ``radius`` (density
    of ||b|| in ``dim`` dimensions). Gaussian rows only when ``delta > 0``.
    """
    return [dict(r) for r in _noise_rows_cached(_check_eps(epsilon), _check_delta(delta), float(sensitivity), int(dim),
                                                int(samples), int(seed))]


#: Laplace-like and Gaussian told apart without colour (a walk-through printed section 1 in grey: two solid
#: lines, two round point clouds): open circles against squares, solid against dotted radius curves.
_DIST_MARKERS = {"laplace_like": dict(symbol="circle-open", size=6, maxdisplayed=14),
                 "gaussian": dict(symbol="square", size=5, maxdisplayed=14)}
_DIST_DASH = {"laplace_like": "solid", "gaussian": "dot"}


def noise_figure(epsilon: float, delta: float, sensitivity: float = 1.0, dim: int = 10, samples: int = 1500,
                 seed: int = 0, *, reference_dim: int | None = None, reference_label: str = "") -> go.Figure:
    """Four panels: 1-D densities on D and D', 2-D samples, radius in ``dim`` dimensions, mean radius vs d.

    ``reference_dim``: a dotted line in the last panel at the numbers a model perturbs (the current
    data set's D·C), labelled ``reference_label: D·C = ...`` inside the plot.
    Titles are short and broken into lines: at 800 px (sidebar open) each panel is ~190 px wide.
    """
    s = noise_summary(epsilon, delta, sensitivity, dim)
    rows = noise_rows(epsilon, delta, sensitivity, dim, samples, seed)
    fig = make_subplots(rows=2, cols=2, horizontal_spacing=0.14, vertical_spacing=0.2, subplot_titles=(
        "1-D: answer on D (solid)<br>and on a neighbour D′ (dashed)", "2-D samples",
        f"Length ‖b‖₂ of the noise<br>in d = {int(dim):,} dimensions", "Mean length ‖b‖₂<br>as d grows"))
    fig.update_annotations(font_size=13)  # the subplot titles (the only annotations so far)
    names = {"laplace_like": f"Laplace-like, δ = 0 (β = ε/Δ = {s['laplace_beta']:.3g})",
             "gaussian": f"Gaussian, δ = {format_number(s['delta'])} (analytic σ = {s.get('gaussian_sigma', float('nan')):.3g})"}
    colours = {"laplace_like": _LAPLACE, "gaussian": _GAUSS}
    for dist in ("laplace_like", "gaussian"):
        sub = [r for r in rows if r["distribution"] == dist]
        if not sub:
            continue
        for which, dash in (("D", "solid"), ("D'", "dash")):
            pts = [r for r in sub if r["panel"] == "density_1d" and r["dataset"] == which]
            fig.add_trace(go.Scatter(x=[r["x"] for r in pts], y=[r["y"] for r in pts], mode="lines+markers",
                                     line=dict(color=colours[dist], dash=dash), name=names[dist] + ("" if which == "D" else " on D′"),
                                     marker=dict(_DIST_MARKERS[dist], color=colours[dist]), legendgroup=dist, showlegend=which == "D"), row=1, col=1)
        pts = [r for r in sub if r["panel"] == "samples_2d"]
        fig.add_trace(go.Scattergl(x=[r["x"] for r in pts], y=[r["y"] for r in pts], mode="markers",
                                   marker=dict(color=colours[dist], size=3 if dist == "gaussian" else 4, opacity=0.25 if dist == "gaussian" else 0.45,
                                               symbol=_DIST_MARKERS[dist]["symbol"]), name=names[dist] + " samples",
                                   legendgroup=dist, showlegend=False), row=1, col=2)
        pts = [r for r in sub if r["panel"] == "radius"]
        fig.add_trace(go.Scatter(x=[r["x"] for r in pts], y=[r["y"] for r in pts], mode="lines+markers",
                                 line=dict(color=colours[dist], dash=_DIST_DASH[dist]), marker=dict(_DIST_MARKERS[dist], color=colours[dist]),
                                 fill="tozeroy", name=names[dist] + " radius",
                                 legendgroup=dist, showlegend=False), row=2, col=1)
        pts = [r for r in sub if r["panel"] == "mean_radius"]
        fig.add_trace(go.Scatter(x=[r["x"] for r in pts], y=[r["y"] for r in pts], mode="lines+markers",
                                 line=dict(color=colours[dist], dash=_DIST_DASH[dist]), marker=dict(_DIST_MARKERS[dist], color=colours[dist]),
                                 name=names[dist] + " mean radius",
                                 legendgroup=dist, showlegend=False,
                                 hovertemplate="d = %{x}<br>E||b|| = %{y:.4g}<extra></extra>"), row=2, col=2)
    fig.add_vline(x=int(dim), line=dict(color="#444", dash="dash", width=1), row=2, col=2)
    if reference_dim:
        # Inside the plot, on the side of the line with more room (the axis spans _DIMS on a log scale), at the
        # bottom: the mean radii rise with d on log-log axes, so the top right is where the curves are (the
        # label sat on the Laplace-like curve there).
        right = math.log10(reference_dim) > math.log10(_DIMS[-1]) / 2
        fig.add_vline(x=int(reference_dim), line=dict(color="#999", dash="dot", width=1), row=2, col=2)
        fig.add_annotation(x=math.log10(reference_dim), y=0.03, yref="y4 domain", xref="x4",
                           text=f"{reference_label + ': ' if reference_label else ''}D·C = {int(reference_dim):,}",
                           showarrow=False, xanchor="right" if right else "left", xshift=-4 if right else 4,
                           yanchor="bottom", bgcolor="rgba(255,255,255,0.8)", font=dict(size=11, color="#555"))
    fig.update_xaxes(title_text="noisy answer", row=1, col=1)
    fig.update_yaxes(title_text="density", row=1, col=1)
    fig.update_xaxes(title_text="b₁", row=1, col=2)
    fig.update_yaxes(title_text="b₂", scaleanchor="x2", scaleratio=1, row=1, col=2)
    fig.update_xaxes(title_text="||b||₂", row=2, col=1)
    fig.update_yaxes(title_text="density", row=2, col=1)
    fig.update_xaxes(title_text="d (numbers perturbed)", type="log", row=2, col=2)
    fig.update_yaxes(title_text="E ||b||₂", type="log", row=2, col=2)
    title = (f"Same ε = {s['epsilon']:g}, L2 sensitivity Δ = {s['sensitivity']:g}:<br>"
             + ("Laplace-like only (δ = 0: no pure-DP Gaussian)" if s["delta"] == 0
                else f"Laplace-like (δ = 0) vs Gaussian (δ = {format_number(s['delta'])})"))
    _style(fig, title, height=860)  # two title lines above the subplot titles: a taller top margin
    return fig.update_layout(title=dict(y=0.985, yanchor="top"), legend=dict(y=-0.13), margin=dict(t=135, b=110))


# --------------------------------------------------------------------------------------------
# 2. Composition over B queries
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _composition_cached(eps: float, dlt: float, sens: float, budgets: tuple[int, ...]) -> tuple[dict[str, Any], ...]:
    rows: list[dict[str, Any]] = []

    def add(panel: str, rule: str, b: int, value: float, **extra: Any) -> None:
        rows.append({"panel": panel, "rule": rule, "budget": b, "value": float(value), **extra})

    for b in budgets:
        if dlt == 0:
            # Laplace-like noise on the logits: basic composition is the only rule for pure DP here.
            add("gaussian", "basic", b, b * sens / eps, quantity="Laplace-like scale 1/beta = B Delta / eps",
                per_query_epsilon=eps / b, per_query_delta=0.0)
        else:
            basic = analytic_gaussian_sigma(eps / b, dlt / b, sens)
            adv = advanced_gaussian_sigma(eps, dlt, b, sens)
            tight = exact_gaussian_sigma(eps, dlt, b, sens)
            add("gaussian", "basic", b, basic, quantity="sigma: analytic Gaussian at (eps/B, delta/B)",
                per_query_epsilon=eps / b, per_query_delta=dlt / b)
            add("gaussian", "advanced", b, adv.sigma, quantity=f"sigma: paper's min(basic, eps* with best delta') [{adv.branch}]",
                per_query_epsilon=adv.per_query_epsilon, per_query_delta=adv.per_query_delta, delta_prime=adv.delta_prime)
            add("gaussian", "tight", b, tight, quantity="sigma: sqrt(B) x analytic Gaussian at (eps, delta)",
                per_query_epsilon=analytic_gaussian_epsilon(tight, dlt / b, sens), per_query_delta=dlt / b,
                ratio_to_advanced=adv.sigma / tight)
        # Exponential mechanism (subsample-and-aggregate): inverse temperature beta per query.
        add("exponential", "as published", b, eps / b, quantity="beta = eps/B (paper; one query is really 2 beta-DP)")
        add("exponential", "basic", b, eps / (2.0 * b), quantity="beta = eps/(2B)")
        if dlt > 0:
            add("exponential", "zcdp", b, zcdp_beta(eps, dlt, b), quantity="beta'' (zCDP)")
            add("exponential", "tight", b, optimal_beta(eps, dlt, b), quantity="optimal bounded-range composition")
    return tuple(rows)


def composition_rows(epsilon: float, delta: float, sensitivity: float = 1.0,
                     budgets: Iterable[int] = DEFAULT_BUDGETS) -> list[dict[str, Any]]:
    """Per-query noise vs inference budget B (long format: panel, rule, budget, value, ...).

    Panel ``gaussian`` (prediction sensitivity): per-query sigma under ``basic`` (analytic Gaussian
    at (eps/B, delta/B)), ``advanced`` (the paper's choice: the smaller of basic and the zCDP eps*
    with the best delta', :func:`~privcore.accounting.advanced_gaussian_sigma`) and ``tight`` (exact
    Gaussian composition, sqrt(B) times the one-query sigma). With delta = 0 only the Laplace-like
    basic rule exists (its value is the scale 1/beta). Panel ``exponential`` (subsample-and-
    aggregate): inverse temperature beta under ``as published`` (eps/B), ``basic`` (eps/(2B)),
    ``zcdp`` (beta'') and ``tight`` (optimal bounded-range composition, Dong, Durfee, Rogers 2020).
    Larger beta means less noise.
    """
    bs = tuple(sorted({int(b) for b in budgets}))
    if not bs or bs[0] < 1:
        raise ValueError(f"budgets must be integers >= 1, got {list(budgets)!r}")
    return [dict(r) for r in _composition_cached(_check_eps(epsilon), _check_delta(delta), float(sensitivity), bs)]


def composition_figure(epsilon: float, delta: float, sensitivity: float = 1.0,
                       budgets: Iterable[int] = DEFAULT_BUDGETS, current_budget: int | None = None) -> go.Figure:
    """Log-log: per-query Gaussian sigma vs B (left) and exponential-mechanism beta vs B (right)."""
    rows = composition_rows(epsilon, delta, sensitivity, budgets)
    dlt = _check_delta(delta)
    # One panel above the other: side by side, at 800 px (a 480 px column beside the sidebar) their titles
    # and axis titles ran into each other; titles on two lines fit any width.
    left = ("Prediction sensitivity: per-query σ<br>(lower = less noise)" if dlt > 0
            else "Prediction sensitivity: Laplace-like 1/β<br>(lower = less noise)")
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.16,
                        subplot_titles=(left, "Subsample-and-aggregate: vote β<br>(higher = less noise)"))
    labels = {
        ("gaussian", "basic"): "basic composition (ε/B, δ/B)",
        ("gaussian", "advanced"): "advanced: paper's ε* with best δ′",
        ("gaussian", "tight"): "tight: exact Gaussian composition",
        ("exponential", "as published"): "as published ε/B (not valid)",
        ("exponential", "basic"): "basic ε/(2B)",
        ("exponential", "zcdp"): "zCDP β″",
        ("exponential", "tight"): "tight: optimal bounded-range",
    }
    for col, panel in ((1, "gaussian"), (2, "exponential")):
        for rule in ("basic", "advanced", "zcdp", "tight", "as published"):
            pts = [r for r in rows if r["panel"] == panel and r["rule"] == rule]
            if not pts:
                continue
            dash, symbol = _RULE_STYLES[rule]
            fig.add_trace(go.Scatter(
                x=[r["budget"] for r in pts], y=[r["value"] for r in pts], mode="lines+markers",
                name=labels[(panel, rule)],  # the vote panel's markers open: its "basic" is not the σ panel's
                marker=dict(size=7, symbol=symbol if col == 1 else symbol + "-open", color=_RULE_COLOURS[rule]),
                line=dict(color=_RULE_COLOURS[rule], dash=dash),
                hovertemplate="B = %{x}<br>%{y:.4g}<extra>" + labels[(panel, rule)] + "</extra>"), row=col, col=1)
        if current_budget is not None:
            fig.add_vline(x=int(current_budget), line=dict(color="#444", dash="dash", width=1), row=col, col=1)
    fig.update_xaxes(type="log")
    fig.update_xaxes(title_text="inference budget B (predictions answered)", row=2, col=1)  # once, under both
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text=("per-query noise (Δ = %g)" % float(sensitivity)) if dlt > 0 else "noise scale",
                     row=1, col=1)
    fig.update_yaxes(title_text="vote β", row=2, col=1)
    title = f"Per-query budget vs B at (ε, δ) = ({_check_eps(epsilon):g}, {format_number(dlt)})"
    _style(fig, title, height=860)  # the title pinned to the top, room below it for the two-line subplot titles
    return fig.update_layout(title=dict(yref="container", y=1.0, yanchor="top", xanchor="left", pad=dict(t=10, l=8)),
                             margin=dict(t=105))
