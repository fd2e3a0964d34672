"""DP-SGD noise multiplier from Opacus's accountants (RDP by default, PRV for ``tight``).

We do not write RDP by hand: the privacy curve of the Poisson-subsampled Gaussian mechanism comes
from Opacus (RDP: Mironov et al. 2019 via ``opacus.accountants.RDPAccountant``; PRV: Gopi et al.
2021 via ``opacus.accountants.PRVAccountant``). Our own code is only the root search on sigma,
with two fixes over ``opacus.accountants.utils.get_noise_multiplier`` (SPEC "Library pitfalls"):
RDP orders up to 4096 (the defaults, up to 63, cannot certify epsilon = 0.1 at delta = 1e-5) and a
relative tolerance on sigma instead of the coarse absolute 0.01 on epsilon. The returned sigma
always has an achieved epsilon <= target, re-checked by the accountant.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

import numpy as np

from ..types import CalibrationError
from ..validation import check_choice, check_int, check_real

__all__ = ["RDP_ORDERS", "DPSGD_ACCOUNTANTS", "dpsgd_epsilon", "dpsgd_noise_multiplier"]

#: Renyi orders: a few fractional ones below 4 (large epsilon needs them; each costs milliseconds) and integers up to 256. The cost of an
#: integer order grows with the order, so orders up to 8192 (needed for small epsilon, SPEC
#: "Library pitfalls") are added only when the best order found is the largest one.
RDP_ORDERS: tuple[float, ...] = tuple(
    sorted(set([1.1, 1.25, 1.5, 1.75, 2.25, 2.5, 2.75, 3.5] + [float(a) for a in range(2, 65)]
               + [float(a) for a in np.unique(np.round(np.geomspace(64, 256, 8)))]))
)
RDP_ORDERS_EXTENDED: tuple[float, ...] = tuple(float(a) for a in np.unique(np.round(np.geomspace(256, 4096, 10))))
DPSGD_ACCOUNTANTS: tuple[str, ...] = ("rdp", "prv")
_MAX_SIGMA = 1e4


def dpsgd_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                  accountant: str = "rdp", eps_error: float = 0.005) -> float:
    """Epsilon spent by ``steps`` Poisson-subsampled Gaussian steps (rate q, noise multiplier sigma).

    Opacus's accountant; for PRV the returned value is its certified upper bound (an estimate plus
    ``eps_error``), so a coarser ``eps_error`` is still safe, only less tight.
    """
    from opacus.accountants import PRVAccountant  # heavy imports, only when used

    check_choice("accountant", accountant, DPSGD_ACCOUNTANTS)
    if accountant == "rdp":
        # Integer orders first; then only the fractional ones (milliseconds each, most of the
        # cost) next to the best integer order: epsilon is unimodal in the order, so no other
        # can do better. Leaving orders out can only raise epsilon, never under-protect.
        orders = [a for a in RDP_ORDERS if a == int(a)]
        eps, best = _rdp_epsilon(noise_multiplier, sample_rate, steps, delta, orders)
        near = [a for a in RDP_ORDERS if a != int(a) and best - 1 < a < best + 1]
        if near:
            eps = min(eps, _rdp_epsilon(noise_multiplier, sample_rate, steps, delta, near)[0])
        if best >= orders[-1]:
            eps = min(eps, _rdp_epsilon(noise_multiplier, sample_rate, steps, delta, list(RDP_ORDERS_EXTENDED))[0])
        return float(eps)
    acc = PRVAccountant()
    acc.history = [(noise_multiplier, sample_rate, steps)]
    # eps_error relative to the likely epsilon keeps the PRV bound tight without huge grids.
    return float(acc.get_epsilon(delta=delta, eps_error=eps_error, delta_error=delta * 1e-3))


def _rdp_epsilon(sigma: float, q: float, steps: int, delta: float, orders: list[float]) -> tuple[float, float]:
    """(epsilon, best order) from Opacus's RDP analysis over ``orders``.

    Opacus warns when the best order is at the end of the list; we pick the lists ourselves
    (fractional and extended orders are added above), so those warnings are noise here.
    """
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    rdp = compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=orders)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Optimal order is the")
        eps, best = get_privacy_spent(orders=orders, rdp=rdp, delta=delta)
    return float(eps), float(best)


@lru_cache(maxsize=2048)
def dpsgd_noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int,
                           accountant: str = "rdp", rel_tol: float = 1e-3) -> float:
    """Smallest noise multiplier (to ``rel_tol``) with accountant epsilon <= ``epsilon`` at ``delta``.

    Subsampled Gaussian mechanism (Abadi et al. 2016) with Poisson rate ``sample_rate`` composed
    ``steps`` times. Raises :class:`CalibrationError` for delta = 0 (the Gaussian mechanism has no
    pure-DP guarantee) and when no sigma up to 1e4 reaches the target.
    """
    eps = check_real("epsilon", epsilon, low=0.0, low_open=True)
    dlt = check_real("delta", delta, low=0.0, high=1.0, high_open=True)
    q = check_real("sample_rate", sample_rate, low=0.0, high=1.0, low_open=True)
    k = check_int("steps", steps, low=1)
    check_choice("accountant", accountant, DPSGD_ACCOUNTANTS)
    if dlt == 0.0:
        raise CalibrationError(
            "dpsgd needs delta > 0 (Gaussian noise has no pure-DP guarantee): use delta > 0 such as 1e-5, "
            "or a delta = 0 method (model_sensitivity, loss_perturbation, prediction_sensitivity, subsample_aggregate)"
        )
    # PRV's grid grows as 1/eps_error: a relative error keeps large-epsilon calls fast. RDP has no
    # such parameter; a constant keeps its memo keys the same for every target epsilon.
    err = 0.002 * max(eps, 1.0) if accountant == "prv" else 0.005
    eps_at = lambda s: _epsilon_cached(s, q, k, dlt, accountant, err)  # noqa: E731
    # Bracket [lo, hi] with eps_at(lo) > eps >= eps_at(hi) on powers of two: the same few sigmas
    # for every target, so after the first call the bracket comes from the cache.
    hi = 1.0
    while eps_at(hi) > eps:
        hi *= 2.0
        if hi > _MAX_SIGMA:
            raise CalibrationError(
                f"dpsgd cannot reach epsilon={eps:g} at delta={dlt:g} with sample rate {q:g} and {k} steps: "
                "use fewer epochs, a smaller batch, or a larger epsilon/delta"
            )
    lo = hi / 2.0
    while eps_at(lo) <= eps:
        if lo < 1e-3:  # a huge epsilon: any such tiny sigma will do (safe, evaluated)
            return lo
        hi, lo = lo, lo / 2.0
    sigma = _shrink_bracket(eps_at, eps, lo, hi, rel_tol)
    # The returned sigma was evaluated and met the target; re-check anyway (memoised: free).
    if eps_at(sigma) > eps:  # pragma: no cover - defensive
        raise CalibrationError("internal: calibrated DP-SGD noise does not meet the target epsilon")
    return sigma


def _shrink_bracket(eps_at, eps: float, lo: float, hi: float, rel_tol: float) -> float:
    """Smallest-to-``rel_tol`` sigma in [lo, hi] with eps_at(sigma) <= eps, for eps_at decreasing.

    eps_at(lo) > eps >= eps_at(hi). Illinois false position on h(u) = log eps_at(e^u) - log eps
    (log epsilon is close to linear in log sigma, so the estimate is good after two or three
    accountant calls where bisection needs ten). Once the estimate sits within the tolerance of
    one end, the probe goes to just under one tolerance from that end, so a single call closes the
    bracket. A bisection step is taken whenever three calls fail to halve the bracket. The sigma
    returned is one that was evaluated and compared with ``eps`` directly (not through logs), so
    the result never under-protects.
    """
    tol = -math.log1p(-rel_tol)  # hi - lo <= rel_tol hi  <=>  log hi - log lo <= tol

    def h(sigma: float) -> float:
        return math.log(eps_at(sigma)) - math.log(eps)

    s_lo, s_hi = lo, hi
    h_lo, h_hi = h(lo), min(h(hi), 0.0)
    side, calls, checkpoint = 0, 0, math.log(s_hi / s_lo)
    while math.log(s_hi / s_lo) > tol:
        u_lo, u_hi = math.log(s_lo), math.log(s_hi)
        if (calls >= 3 and u_hi - u_lo > 0.5 * checkpoint) or not h_lo > h_hi:
            u, side = 0.5 * (u_lo + u_hi), 0
        else:
            u = (u_lo * h_hi - u_hi * h_lo) / (h_hi - h_lo)
            if u_hi - u < 0.5 * tol:
                u = u_hi - 0.9 * tol
            elif u - u_lo < 0.5 * tol:
                u = u_lo + 0.9 * tol
        if calls >= 3:
            calls, checkpoint = 0, u_hi - u_lo
        calls += 1
        sigma = math.exp(u)
        if not s_lo < sigma < s_hi:  # rounding at the ends: bisect instead
            sigma, side = math.sqrt(s_lo * s_hi), 0
        if eps_at(sigma) <= eps:
            s_hi, h_hi = sigma, min(h(sigma), 0.0)
            if side == 1:
                h_lo *= 0.5  # Illinois: the same end moved twice, halve the other's weight
            side = 1
        else:
            s_lo, h_lo = sigma, max(h(sigma), 0.0)
            if side == -1:
                h_hi *= 0.5
            side = -1
    return s_hi


@lru_cache(maxsize=8192)
def _epsilon_cached(sigma: float, q: float, steps: int, delta: float, accountant: str, eps_error: float) -> float:
    """:func:`dpsgd_epsilon`, memoised: calibrations at other epsilons revisit the same sigmas."""
    return dpsgd_epsilon(sigma, q, steps, delta, accountant, eps_error)
