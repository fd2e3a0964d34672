"""The Learn page's hypothesis-testing view of (epsilon, delta)-DP: the region any test can reach and the
calibrated Laplace and Gaussian mechanisms' trade-off curves inside it.

Part of the Learn page's figures (:mod:`ui.teaching`, which re-exports it). The region and the Gaussian
curve are privcore's one implementation (:mod:`privcore.tradeoff`).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go
from scipy import stats

from privcore.tradeoff import dp_region as _region
from privcore.tradeoff import gaussian_mu, gaussian_tradeoff_tpr
from ui.teaching_style import GAUSS as _GAUSS
from ui.teaching_style import LAPLACE as _LAPLACE
from ui.teaching_style import check_delta as _check_delta
from ui.teaching_style import check_eps as _check_eps
from ui.teaching_style import style as _style

__all__ = ["dp_region", "hypothesis_rows", "attack_advantage", "hypothesis_figure"]


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
    return _style(fig, f"Hypothesis-testing view: an attacker guessing D or D′<br>from one output, (ε, δ) = ({eps:g}, {dlt:g})",
                  height=560)


