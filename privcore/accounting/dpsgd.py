"""DP-SGD noise multiplier from Opacus's accountants (RDP by default, PRV for ``tight``).

We do not write RDP by hand: the privacy curve of the Poisson-subsampled Gaussian mechanism comes
from Opacus (RDP: Mironov et al. 2019 via ``opacus.accountants.RDPAccountant``; PRV: Gopi et al.
2021 via ``opacus.accountants.PRVAccountant``). Our own code is only the bisection on sigma,
with two fixes over ``opacus.accountants.utils.get_noise_multiplier`` (SPEC "Library pitfalls"):
RDP orders up to 4096 (the defaults, up to 63, cannot certify epsilon = 0.1 at delta = 1e-5) and a
relative tolerance on sigma instead of the coarse absolute 0.01 on epsilon. The returned sigma
always has an achieved epsilon <= target, re-checked by the accountant.
"""

from __future__ import annotations

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
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    check_choice("accountant", accountant, DPSGD_ACCOUNTANTS)
    if accountant == "rdp":
        orders = list(RDP_ORDERS)
        rdp = compute_rdp(q=sample_rate, noise_multiplier=noise_multiplier, steps=steps, orders=orders)
        eps, best = get_privacy_spent(orders=orders, rdp=rdp, delta=delta)
        if best >= orders[-1]:
            more = list(RDP_ORDERS_EXTENDED)
            rdp_more = compute_rdp(q=sample_rate, noise_multiplier=noise_multiplier, steps=steps, orders=more)
            eps_more, _ = get_privacy_spent(orders=more, rdp=rdp_more, delta=delta)
            eps = min(eps, eps_more)
        return float(eps)
    acc = PRVAccountant()
    acc.history = [(noise_multiplier, sample_rate, steps)]
    # eps_error relative to the likely epsilon keeps the PRV bound tight without huge grids.
    return float(acc.get_epsilon(delta=delta, eps_error=eps_error, delta_error=delta * 1e-3))


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
    # PRV's grid grows as 1/eps_error: a relative error keeps large-epsilon calls fast.
    err = 0.002 * max(eps, 1.0)
    eps_at = lambda s: dpsgd_epsilon(s, q, k, dlt, accountant, err)  # noqa: E731
    lo, hi = 0.0, 1.0
    while eps_at(hi) > eps:
        lo, hi = hi, hi * 2.0
        if hi > _MAX_SIGMA:
            raise CalibrationError(
                f"dpsgd cannot reach epsilon={eps:g} at delta={dlt:g} with sample rate {q:g} and {k} steps: "
                "use fewer epochs, a smaller batch, or a larger epsilon/delta"
            )
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        if eps_at(mid) <= eps:
            hi = mid
        else:
            lo = mid
    # hi always satisfied the target when it was set; re-check anyway (never under-protect).
    if eps_at(hi) > eps:  # pragma: no cover - defensive
        raise CalibrationError("internal: calibrated DP-SGD noise does not meet the target epsilon")
    return hi
