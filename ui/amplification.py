"""The Learn page's amplification view: epsilon of the Poisson-subsampled Gaussian step against the sample rate.

Part of the Learn page's figures (:mod:`ui.teaching`, which re-exports it); rows for the CSV and the tests,
a figure drawing them. The accountants are privcore's (:func:`privcore.accounting.dpsgd_epsilon`).
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache
from typing import Any, Iterable

import numpy as np
import plotly.graph_objects as go

from privcore.accounting import analytic_gaussian_epsilon, dpsgd_epsilon
from ui.teaching_style import RULE_COLOURS as _RULE_COLOURS
from ui.teaching_style import RULE_STYLES
from ui.teaching_style import check_delta as _check_delta
from ui.teaching_style import style as _style

__all__ = ["DEFAULT_SAMPLE_RATES", "amplification_rows", "amplification_figure"]

#: Sample rates q shown by the amplification view.
DEFAULT_SAMPLE_RATES: tuple[float, ...] = tuple(float(q) for q in np.geomspace(1e-4, 1.0, 17))


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
                                 marker=dict(size=6, symbol=RULE_STYLES[bound][1]),  # distinct in grey too
                                 line=dict(color=_RULE_COLOURS[bound], dash=RULE_STYLES[bound][0]),
                                 hovertemplate="q = %{x:.3g}<br>ε = %{y:.4g}<extra>" + bound + "</extra>"))
    if current_rate is not None:
        fig.add_vline(x=float(current_rate), line=dict(color="#444", dash="dash", width=1))
    fig.update_xaxes(type="log", title_text="sample rate q = batch / N")
    fig.update_yaxes(type="log", title_text=f"ε after {int(steps)} step{'s' if int(steps) != 1 else ''}")
    title = (f"Amplification by subsampling: Gaussian step with noise multiplier σ = {float(noise_multiplier):g}, "
             f"δ = {_check_delta(delta):g}")
    return _style(fig, title, height=500)


