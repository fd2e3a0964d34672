"""Figure builders for the Learn page: pure, instant (no data, no training), plotly only.

Longer than 400 lines on purpose: five independent views (rows + figure each) that share one
style and one set of calibration helpers; each view is one numbered section below.

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
import warnings
from functools import lru_cache
from math import lgamma as _lgamma
from typing import Any, Iterable, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from scipy import stats

from privcore import ACCOUNTING_MODES, REGISTRY, CalibrationError, PrivacyBudget, Problem, calibrate
from privcore.accounting import (
    advanced_gaussian_sigma,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    dpsgd_epsilon,
    exact_gaussian_sigma,
    optimal_beta,
    zcdp_beta,
)
from privcore.tradeoff import dp_region as _region, gaussian_mu, gaussian_tradeoff_tpr
from ui.figures import METHOD_COLORS, PRINT_TEMPLATE, format_number, plain_log_ticks
from ui.formula import display_latex

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
#: Sample rates q shown by the amplification view.
DEFAULT_SAMPLE_RATES: tuple[float, ...] = tuple(float(q) for q in np.geomspace(1e-4, 1.0, 17))

# One colour per idea, the same in every teaching figure.
_LAPLACE = "#1f77b4"
_GAUSS = "#d62728"
_RULE_COLOURS = {
    "basic": "#7f7f7f",
    "advanced": "#ff7f0e",
    "tight": "#2ca02c",
    "zcdp": "#1f77b4",
    "as published": "#d62728",
    "no subsampling": "#7f7f7f",
    "classic bound": "#ff7f0e",
    "RDP (Opacus)": "#1f77b4",
    "PRV (Opacus)": "#2ca02c",
}
#: Dimensions of the mean-radius panel (MNIST's model sensitivity perturbs D*C = 784*10 numbers).
_DIMS: tuple[int, ...] = tuple(int(d) for d in np.unique(np.round(np.geomspace(1, 10_000, 25))))


def _style(fig: go.Figure, title: str, height: int = 430) -> go.Figure:
    # The dashboard's print template (white, dark fonts, fixed colours whatever the Streamlit theme).
    fig.update_layout(template=PRINT_TEMPLATE, title=dict(text=title), height=height,
                      margin=dict(l=70, r=20, t=80, b=140),
                      legend=dict(orientation="h", yanchor="top", y=-0.24, xanchor="left", x=0.0))
    return plain_log_ticks(fig)


def _check_eps(epsilon: float) -> float:
    return PrivacyBudget(float(epsilon), 0.0).epsilon


def _check_delta(delta: float) -> float:
    return PrivacyBudget(1.0, float(delta)).delta


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
            fig.add_trace(go.Scatter(x=[r["x"] for r in pts], y=[r["y"] for r in pts], mode="lines",
                                     line=dict(color=colours[dist], dash=dash), name=names[dist] + ("" if which == "D" else " on D′"),
                                     legendgroup=dist, showlegend=which == "D"), row=1, col=1)
        pts = [r for r in sub if r["panel"] == "samples_2d"]
        fig.add_trace(go.Scattergl(x=[r["x"] for r in pts], y=[r["y"] for r in pts], mode="markers",
                                   marker=dict(color=colours[dist], size=3, opacity=0.25 if dist == "gaussian" else 0.45), name=names[dist] + " samples",
                                   legendgroup=dist, showlegend=False), row=1, col=2)
        pts = [r for r in sub if r["panel"] == "radius"]
        fig.add_trace(go.Scatter(x=[r["x"] for r in pts], y=[r["y"] for r in pts], mode="lines",
                                 line=dict(color=colours[dist]), fill="tozeroy", name=names[dist] + " radius",
                                 legendgroup=dist, showlegend=False), row=2, col=1)
        pts = [r for r in sub if r["panel"] == "mean_radius"]
        fig.add_trace(go.Scatter(x=[r["x"] for r in pts], y=[r["y"] for r in pts], mode="lines",
                                 line=dict(color=colours[dist]), name=names[dist] + " mean radius",
                                 legendgroup=dist, showlegend=False,
                                 hovertemplate="d = %{x}<br>E||b|| = %{y:.4g}<extra></extra>"), row=2, col=2)
    fig.add_vline(x=int(dim), line=dict(color="#444", dash="dash", width=1), row=2, col=2)
    if reference_dim:
        # Inside the plot, on the side of the line with more room (the axis spans _DIMS on a log scale).
        right = math.log10(reference_dim) > math.log10(_DIMS[-1]) / 2
        fig.add_vline(x=int(reference_dim), line=dict(color="#999", dash="dot", width=1), row=2, col=2)
        fig.add_annotation(x=math.log10(reference_dim), y=0.97, yref="y4 domain", xref="x4",
                           text=f"{reference_label + ': ' if reference_label else ''}D·C = {int(reference_dim):,}",
                           showarrow=False, xanchor="right" if right else "left", xshift=-4 if right else 4,
                           yanchor="top", bgcolor="rgba(255,255,255,0.8)", font=dict(size=11, color="#555"))
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
    left = ("Prediction sensitivity: per-query σ (lower = less noise)" if dlt > 0
            else "Prediction sensitivity: Laplace-like 1/β (lower = less noise)")
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=(left, "Subsample-and-aggregate: vote β (higher = less noise)"))
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
            fig.add_trace(go.Scatter(
                x=[r["budget"] for r in pts], y=[r["value"] for r in pts], mode="lines+markers",
                name=labels[(panel, rule)], marker=dict(size=5),
                line=dict(color=_RULE_COLOURS[rule], dash="dot" if rule == "as published" else "solid"),
                hovertemplate="B = %{x}<br>%{y:.4g}<extra>" + labels[(panel, rule)] + "</extra>"), row=1, col=col)
        if current_budget is not None:
            fig.add_vline(x=int(current_budget), line=dict(color="#444", dash="dash", width=1), row=1, col=col)
    fig.update_xaxes(type="log", title_text="inference budget B (predictions answered)")
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="per-query noise (units of Δ = %g)" % float(sensitivity) if dlt > 0 else "noise scale", row=1, col=1)
    fig.update_yaxes(title_text="inverse temperature β of the vote", row=1, col=2)
    title = f"How the per-query budget shrinks with B at total (ε, δ) = ({_check_eps(epsilon):g}, {dlt:g})"
    return _style(fig, title, height=540)


# --------------------------------------------------------------------------------------------
# 3. Amplification by subsampling
# --------------------------------------------------------------------------------------------


def _classic_amplification(eps0: float, q: float) -> float:
    """log(1 + q (e^eps0 - 1)): epsilon of a q-subsampled eps0-DP mechanism (Balle et al. 2018)."""
    return math.log1p(q * math.expm1(eps0))


@lru_cache(maxsize=64)
def _amplification_cached(sigma: float, dlt: float, rates: tuple[float, ...], steps: int, prv: bool) -> tuple[dict[str, Any], ...]:
    rows: list[dict[str, Any]] = []
    eps0 = analytic_gaussian_epsilon(sigma, dlt, 1.0)
    for q in rates:
        rows.append({"bound": "no subsampling", "q": q, "steps": steps, "epsilon": eps0 if steps == 1 else math.nan,
                     "delta": dlt})
        if steps == 1:
            rows.append({"bound": "classic bound", "q": q, "steps": 1, "epsilon": _classic_amplification(eps0, q),
                         "delta": q * dlt})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rdp = dpsgd_epsilon(sigma, q, steps, dlt, "rdp")
            rows.append({"bound": "RDP (Opacus)", "q": q, "steps": steps, "epsilon": rdp, "delta": dlt})
            if prv:
                # PRV returns estimate + eps_error: keep the error a small fraction of the value.
                ref = _classic_amplification(eps0, q) if steps == 1 else rdp
                try:
                    value = dpsgd_epsilon(sigma, q, steps, dlt, "prv", eps_error=max(1e-6, 0.02 * ref))
                except Exception:  # noqa: BLE001 - PRV can fail at extreme rates; the point is left out
                    value = math.nan
                rows.append({"bound": "PRV (Opacus)", "q": q, "steps": steps, "epsilon": value, "delta": dlt})
    return tuple(r for r in rows if math.isfinite(r["epsilon"]))


def amplification_rows(noise_multiplier: float, delta: float, rates: Iterable[float] = DEFAULT_SAMPLE_RATES,
                       steps: int = 1, prv: bool = True) -> list[dict[str, Any]]:
    """Epsilon of ``steps`` Poisson-subsampled Gaussian steps vs sample rate q (long format).

    ``no subsampling``: the analytic-Gaussian epsilon of one full-batch step at ``delta``
    (sensitivity 1, std ``noise_multiplier``). ``classic bound``: log(1 + q (e^eps0 - 1)), valid at
    delta' = q delta <= delta (one step only). ``RDP (Opacus)`` / ``PRV (Opacus)``: the accountants
    DP-SGD uses, via :func:`privcore.accounting.dpsgd_epsilon`.
    """
    z = float(noise_multiplier)
    if not z > 0:
        raise ValueError(f"noise_multiplier must be > 0, got {noise_multiplier!r}")
    dlt = _check_delta(delta)
    if dlt == 0:
        raise ValueError("the subsampled Gaussian needs delta > 0 (Gaussian noise has no pure-DP guarantee)")
    qs = tuple(sorted({float(q) for q in rates}))
    if not qs or qs[0] <= 0 or qs[-1] > 1:
        raise ValueError(f"sample rates must lie in (0, 1], got {list(rates)!r}")
    return [dict(r) for r in _amplification_cached(z, dlt, qs, int(steps), bool(prv))]


def amplification_figure(noise_multiplier: float, delta: float, rates: Iterable[float] = DEFAULT_SAMPLE_RATES,
                         steps: int = 1, prv: bool = True, current_rate: float | None = None) -> go.Figure:
    """Log-log: epsilon of the subsampled Gaussian vs sample rate q, one line per bound."""
    rows = amplification_rows(noise_multiplier, delta, rates, steps, prv)
    fig = go.Figure()
    for bound in ("no subsampling", "classic bound", "RDP (Opacus)", "PRV (Opacus)"):
        pts = [r for r in rows if r["bound"] == bound]
        if not pts:
            continue
        name = {"no subsampling": "no subsampling (q = 1, analytic Gaussian)",
                "classic bound": "classic bound log(1 + q(e^ε₀ − 1)), δ′ = qδ"}.get(bound, bound)
        fig.add_trace(go.Scatter(x=[r["q"] for r in pts], y=[r["epsilon"] for r in pts], mode="lines+markers", name=name,
                                 marker=dict(size=5), line=dict(color=_RULE_COLOURS[bound],
                                                                dash="dash" if bound == "no subsampling" else "solid"),
                                 hovertemplate="q = %{x:.3g}<br>ε = %{y:.4g}<extra>" + bound + "</extra>"))
    if current_rate is not None:
        fig.add_vline(x=float(current_rate), line=dict(color="#444", dash="dash", width=1))
    fig.update_xaxes(type="log", title_text="sample rate q = batch / N")
    fig.update_yaxes(type="log", title_text=f"ε after {int(steps)} step{'s' if int(steps) != 1 else ''}")
    title = (f"Amplification by subsampling: Gaussian step with noise multiplier σ = {float(noise_multiplier):g}, "
             f"δ = {_check_delta(delta):g}")
    return _style(fig, title, height=500)


# --------------------------------------------------------------------------------------------
# 4. Hypothesis-testing view
# --------------------------------------------------------------------------------------------


def dp_region(epsilon: float, delta: float, fpr: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) true-positive rates reachable at each false-positive rate under (eps, delta)-DP.

    Any test telling D from a neighbour D' from the output satisfies TPR <= e^eps FPR + delta and,
    applied to the complementary test, 1 - FPR <= e^eps (1 - TPR) + delta (Kairouz, Oh, Viswanath
    2015), plus the same with D and D' swapped, which gives the lower boundary
    (:func:`privcore.tradeoff.dp_region`, the one implementation).
    """
    return _region(_check_eps(epsilon), _check_delta(delta), fpr)


def _laplace_tradeoff(eps: float, fpr: np.ndarray) -> np.ndarray:
    """TPR of the best threshold test between Laplace(0, 1) and Laplace(eps, 1) (1-D, scale Delta/eps)."""
    # Threshold t: FPR = P(X > t | 0), TPR = P(X > t | eps).
    t = stats.laplace.isf(fpr)
    return stats.laplace.sf(t, loc=eps)


@lru_cache(maxsize=64)
def _hypothesis_cached(eps: float, dlt: float, points: int) -> tuple[dict[str, Any], ...]:
    half = max(points // 2, 10)
    x = np.unique(np.concatenate([[0.0], np.geomspace(1e-6, 1.0, half), np.linspace(0.0, 1.0, half)]))
    lower, upper = dp_region(eps, dlt, x)
    rows: list[dict[str, Any]] = []
    for f, lo, hi in zip(x, lower, upper):
        rows.append({"curve": "dp_upper", "fpr": float(f), "tpr": float(hi)})
        rows.append({"curve": "dp_lower", "fpr": float(f), "tpr": float(lo)})
    for f, t in zip(x, _laplace_tradeoff(eps, x)):
        rows.append({"curve": "laplace", "fpr": float(f), "tpr": float(t)})
    if dlt > 0:
        mu = gaussian_mu(eps, dlt)
        for f, t in zip(x, gaussian_tradeoff_tpr(x, mu)):
            rows.append({"curve": "gaussian", "fpr": float(f), "tpr": float(t), "mu": mu})
    return tuple(rows)


def hypothesis_rows(epsilon: float, delta: float, points: int = 300) -> list[dict[str, Any]]:
    """Boundaries of the (eps, delta)-DP region and the mechanisms' trade-off curves (long format).

    Curves: ``dp_upper`` / ``dp_lower`` (the region), ``laplace`` (1-D Laplace mechanism at scale
    Delta/eps, pure eps-DP) and, for delta > 0, ``gaussian`` (sigma = analytic Gaussian sigma at
    (eps, delta); TPR = Phi(Phi^-1(FPR) + Delta/sigma)).
    """
    return [dict(r) for r in _hypothesis_cached(_check_eps(epsilon), _check_delta(delta), int(points))]


def attack_advantage(epsilon: float, delta: float) -> dict[str, float]:
    """Largest TPR - FPR any test can reach: under (eps, delta)-DP, and for the calibrated Gaussian.

    The DP bound is (e^eps - 1 + 2 delta) / (e^eps + 1) (the corner of the region of
    :func:`dp_region`); the Gaussian mechanism with mu = Delta / sigma reaches 2 Phi(mu / 2) - 1.
    """
    eps, dlt = _check_eps(epsilon), _check_delta(delta)
    e = math.exp(min(eps, 700.0))
    out = {"dp_bound": min(1.0, (e - 1.0 + 2.0 * dlt) / (e + 1.0)),
           "laplace": float(np.max(_laplace_tradeoff(eps, np.linspace(0, 1, 2001)) - np.linspace(0, 1, 2001)))}
    if dlt > 0:
        mu = gaussian_mu(eps, dlt)
        out["gaussian"] = float(2.0 * stats.norm.cdf(mu / 2.0) - 1.0)
    return out


def hypothesis_figure(epsilon: float, delta: float, points: int = 300) -> go.Figure:
    """The (FPR, TPR) region allowed by (eps, delta)-DP with the calibrated mechanisms' curves."""
    eps, dlt = _check_eps(epsilon), _check_delta(delta)
    rows = hypothesis_rows(eps, dlt, points)

    def curve(name: str) -> tuple[list[float], list[float]]:
        pts = [r for r in rows if r["curve"] == name]
        return [r["fpr"] for r in pts], [r["tpr"] for r in pts]

    fig = go.Figure()
    xl, yl = curve("dp_lower")
    xu, yu = curve("dp_upper")
    fig.add_trace(go.Scatter(x=xl, y=yl, mode="lines", line=dict(color="#1f77b4", width=1), name="region boundary",
                             showlegend=False, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=xu, y=yu, mode="lines", line=dict(color="#1f77b4", width=2), fill="tonexty",
                             fillcolor="rgba(31,119,180,0.15)",
                             name=f"reachable by any test under ({eps:g}, {dlt:g})-DP: TPR ≤ e^ε FPR + δ",
                             hovertemplate="FPR = %{x:.3g}<br>max TPR = %{y:.3g}<extra></extra>"))
    xs, ys = curve("laplace")
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=_LAPLACE, dash="dot"),
                             name="Laplace mechanism (scale Δ/ε, δ = 0)",
                             hovertemplate="FPR = %{x:.3g}<br>TPR = %{y:.3g}<extra>Laplace</extra>"))
    if dlt > 0:
        xs, ys = curve("gaussian")
        mu = [r for r in rows if r["curve"] == "gaussian"][0]["mu"]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=_GAUSS, width=2.5),
                                 name=f"Gaussian mechanism at calibrated σ = {1 / mu:.3g} Δ",
                                 hovertemplate="FPR = %{x:.3g}<br>TPR = %{y:.3g}<extra>Gaussian</extra>"))
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(color="#999", dash="dash", width=1),
                             name="random guessing (perfect privacy)", hoverinfo="skip"))
    fig.update_xaxes(title_text="false positive rate (say 'D′' when the data were D)", range=[0, 1], constrain="domain")
    fig.update_yaxes(title_text="true positive rate (say 'D′' when they were D′)", range=[0, 1.01],
                     scaleanchor="x", scaleratio=1)
    return _style(fig, f"Hypothesis-testing view: an attacker guessing D or D′ from one output, (ε, δ) = ({eps:g}, {dlt:g})",
                  height=560)


# --------------------------------------------------------------------------------------------
# 5. Method cards
# --------------------------------------------------------------------------------------------


def _scale_text(scale: Any) -> str:
    parts = []
    for key, fmt in (("sigma", "σ = {:.4g}"), ("beta", "β = {:.4g}"), ("noise_multiplier", "noise multiplier = {:.4g}"),
                     ("rho", "ρ = {:.4g}"), ("per_query_epsilon", "per-query ε = {:.4g}")):
        value = getattr(scale, key, None)
        if value is not None:
            parts.append(fmt.format(value))
    return ", ".join(parts)


def method_cards(epsilon: float, delta: float, problem: Problem | None = None,
                 accountings: Sequence[str] = ACCOUNTING_MODES) -> list[dict[str, Any]]:
    """One card per registered method: class attributes plus each accounting mode's calibration.

    Each card: name, label, family, summary, assumptions, wins_when, uses_budget and
    ``calibrations`` (one dict per mode: accounting, formula, noise, values, notes, error).
    Calibration is instant except DP-SGD (an accountant bisection, well under a second).
    """
    budget = PrivacyBudget(float(epsilon), float(delta))
    pb = problem if problem is not None else Problem()
    cards = []
    for name, m in REGISTRY.items():
        cals = []
        for acc in accountings:
            entry: dict[str, Any] = {"accounting": acc, "formula": "", "noise": "", "values": "", "notes": [], "error": ""}
            try:
                scale = calibrate(name, budget, pb, acc)
                entry.update(formula=scale.formula, noise=scale.noise, values=_scale_text(scale), notes=list(scale.notes))
            except CalibrationError as err:
                entry["error"] = str(err)
            cals.append(entry)
        cards.append({"name": name, "label": m.label, "color": METHOD_COLORS.get(name, "#888888"), "family": m.family, "summary": m.summary,
                      "assumptions": m.assumptions, "wins_when": m.wins_when, "uses_budget": m.uses_budget,
                      "uses": list(m.uses), "supports_pure": m.supports_pure, "calibrations": cals})
    return cards


def method_card_markdown(card: dict[str, Any]) -> str:
    """Markdown for one card from :func:`method_cards` (formulas in code spans, one line per mode)."""
    family = ("private training: the model is private, any number of predictions" if card["family"] == "training"
              else "private prediction: the guarantee covers B predictions only")
    lines = [f"**{card['label']}** (`{card['name']}`) · *{family}*", "",
             card["summary"], "",
             f"- **Assumptions:** {card['assumptions']}",
             f"- **Wins when:** {card['wins_when']}",
             "- **Calibration at the chosen (ε, δ):**"]
    for cal in card["calibrations"]:
        if cal["error"]:
            lines.append(f"    - `{cal['accounting']}`: not available: {cal['error']}")
            continue
        text = f"    - `{cal['accounting']}`: `{cal['formula']}`"
        if cal["values"]:
            text += f" → {cal['values']}"
        lines.append(text)
        for note in cal["notes"]:
            lines.append(f"        - *{note}*")
    return "\n".join(lines)


def method_card_blocks(card: dict[str, Any]) -> list[tuple[str, str]]:
    """One card from :func:`method_cards` as ``(kind, text)`` blocks for the page to draw in order,
    kind in ``markdown``, ``latex``, ``text``, ``caption`` (the Streamlit call of that name).

    Formulas are typeset with :func:`ui.formula.display_latex`, as Explore's and Calibrate's are
    (:func:`ui.display.show_formulas`); one it cannot read safely stays plain text, never half-rendered
    (the cards showed raw ASCII: ``sqrt(2/B)``, ``lam``, ``chi_{2C}``).
    """
    family = ("private training: the model is private, any number of predictions" if card["family"] == "training"
              else "private prediction: the guarantee covers B predictions only")
    blocks = [("markdown", "\n".join([f"**{card['label']}** (`{card['name']}`) · *{family}*", "", card["summary"], "",
                                       f"- **Assumptions:** {card['assumptions']}",
                                       f"- **Wins when:** {card['wins_when']}", "",
                                       "**Calibration at the chosen (ε, δ):**"]))]
    for cal in card["calibrations"]:
        if cal["error"]:
            blocks.append(("markdown", f"`{cal['accounting']}`: not available: {cal['error']}"))
            continue
        blocks.append(("markdown", f"`{cal['accounting']}`" + (f" → {cal['values']}" if cal["values"] else "")))
        if cal["formula"]:
            latex = display_latex(cal["formula"])
            blocks.append(("latex", latex) if latex else ("text", cal["formula"]))
        blocks.extend(("caption", note) for note in cal["notes"])
    return blocks
