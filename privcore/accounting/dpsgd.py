"""DP-SGD noise multiplier: replace-one PLD (dp_accounting) by default, Opacus add/remove on request.

The mechanism is the Poisson-subsampled Gaussian (Abadi et al. 2016): each step samples every
example with probability q, sums clipped gradients (norm <= nu) and adds N(0, (z nu)^2). Which
datasets count as neighbours decides the privacy curve:

- ``relation="replace_one"`` (this project's convention, SPEC "DP-SGD"): one example is replaced by
  another, so the clipped sum moves by up to 2 nu. Accounted with Google's ``dp_accounting`` privacy
  loss distributions (Koskela et al. 2020; Doroshenko et al. 2022, "Connect the dots"):
  ``privacy_loss_distribution.from_gaussian_mechanism(z, sampling_prob=q,
  neighboring_relation=NeighboringRelation.REPLACE_ONE, pessimistic_estimate=True)`` self-composed
  ``steps`` times. Its dominating pair is q N(-1, z^2) + (1-q) N(0, z^2) against
  q N(1, z^2) + (1-q) N(0, z^2). dp_accounting's RDP accountant refuses Poisson sampling under
  REPLACE_ONE and Opacus has no replace-one analysis, so PLD is the only maintained choice.
- ``relation="add_remove"``: one example is added or removed (clipped sum moves by nu). Opacus RDP
  (Mironov et al. 2019, ``opacus.accountants.analysis.rdp``), Opacus PRV (Gopi et al. 2021) or
  dp_accounting PLD with ADD_OR_REMOVE_ONE. This is what the paper and Opacus use; under
  replace-one its real epsilon is larger (defaults N = 4,000, batch 256, 5 epochs, (1, 1e-5):
  z = 2.61 gives replace-one epsilon 1.72; meeting the target needs z = 4.24).

Soundness. Pessimistic PLD discretisation rounds every privacy loss up (connect-the-dots keeps the
hockey-stick curve an upper bound) and truncated tails go to the infinite-loss mass, so any grid
gives an upper bound on epsilon; a finer grid is only tighter. Our own code is the grid choice and
the root search on z; the returned z was evaluated and its epsilon compared with the target, so it
never under-protects. (The search starts at pld_approx's estimate, which only decides where the
accountant looks; memo.py replays such verified results, each re-checked on reading against
pld_approx's independent estimate, :func:`privcore.accounting.pld_approx.recheck`.) Opacus RDP uses orders up to 4096 (SPEC "Library pitfalls": its defaults,
up to 63, cannot certify epsilon = 0.1 at delta = 1e-5) and a relative tolerance on z.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

import numpy as np

from ..types import CalibrationError
from ..validation import check_choice, check_int, check_real, memoized

__all__ = ["RDP_ORDERS", "DPSGD_ACCOUNTANTS", "NEIGHBOURING_RELATIONS", "PLD_GRIDS", "dpsgd_epsilon",
           "dpsgd_epsilon_replace_one", "dpsgd_noise_multiplier", "pld_interval"]

#: Renyi orders: a few fractional ones below 4 (large epsilon needs them; each costs milliseconds) and integers up to 256. The cost of an
#: integer order grows with the order, so orders up to 8192 (needed for small epsilon, SPEC
#: "Library pitfalls") are added only when the best order found is the largest one.
RDP_ORDERS: tuple[float, ...] = tuple(
    sorted(set([1.1, 1.25, 1.5, 1.75, 2.25, 2.5, 2.75, 3.5] + [float(a) for a in range(2, 65)]
               + [float(a) for a in np.unique(np.round(np.geomspace(64, 256, 8)))]))
)
RDP_ORDERS_EXTENDED: tuple[float, ...] = tuple(float(a) for a in np.unique(np.round(np.geomspace(256, 4096, 10))))
#: ``pld``: dp_accounting privacy loss distributions (either relation); ``rdp``/``prv``: Opacus (add/remove only).
DPSGD_ACCOUNTANTS: tuple[str, ...] = ("pld", "rdp", "prv")
NEIGHBOURING_RELATIONS: tuple[str, ...] = ("replace_one", "add_remove")
#: PLD loss grids: ``name: (b, points)``. The interval is epsilon * b / sqrt(steps), but no finer than
#: (range of one step's privacy loss) / points, which bounds the cost (dp_accounting evaluates the
#: mechanism once per grid point in Python, 5-15 us each). The connect-the-dots error falls about
#: quadratically with the interval. Measured excess of epsilon over a 4x finer grid, q in
#: [0.001, 0.5], steps in [10, 2000], epsilon in [0.1, 100]: at most 0.12 % (moderate) and ~0.03 %
#: (fine) where the cap is inactive. The cap applies for small q with small sigma (q = 0.001 here),
#: where moderate can leave z up to ~1 % above fine's: looser there, still an upper bound.
PLD_GRIDS: dict[str, tuple[float, int]] = {"moderate": (1e-2, 6_000), "fine": (4e-3, 12_000)}
_MAX_SIGMA = 1e4
_MIN_SIGMA = 1e-2


def pld_interval(epsilon: float, steps: int, sigma: float, sample_rate: float, relation: str = "replace_one",
                 grid: str = "moderate") -> float:
    """PLD value-discretisation interval for a target ``epsilon`` (see :data:`PLD_GRIDS`)."""
    b, points = PLD_GRIDS[check_choice("grid", grid, tuple(PLD_GRIDS))]
    epsilon = _check("epsilon", epsilon, low=0.0, low_open=True)
    steps = check_int("steps", steps, low=1)
    sigma = _check("sigma", sigma, low=_MIN_SIGMA / 10.0, high=_MAX_SIGMA * 100.0)
    sample_rate = _check("sample_rate", sample_rate, low=0.0, high=1.0, low_open=True)
    check_choice("relation", relation, NEIGHBOURING_RELATIONS)
    return max(1e-7, epsilon * b / math.sqrt(steps), _loss_range(sigma, sample_rate, relation) / points)


@lru_cache(maxsize=8192)
def _loss_range(sigma: float, q: float, relation: str) -> float:
    """Width of one step's privacy-loss support as dp_accounting's connect-the-dots grid covers it."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    kind = plm.AdjacencyType.REPLACE if relation == "replace_one" else plm.AdjacencyType.REMOVE
    bounds = plm.GaussianPrivacyLoss(sigma, sampling_prob=q, adjacency_type=kind).connect_dots_bounds()
    return float(bounds.epsilon_upper - bounds.epsilon_lower)


@lru_cache(maxsize=8192)
def _pld_epsilon(sigma: float, q: float, steps: int, delta: float, relation: str, interval: float) -> float:
    """Pessimistic dp_accounting PLD epsilon of ``steps`` Poisson(q)-subsampled Gaussian steps.

    ``PrivacyLossDistribution.from_gaussian_mechanism(..., pessimistic_estimate=True)`` (an upper
    bound for any ``interval``; the noise tail beyond mass e^-50 goes to the infinite loss),
    ``self_compose(steps)`` (FFT; the truncated tail mass, 1e-15, goes to the infinite loss too),
    then ``get_epsilon_for_delta``. Memoised: searches revisit sigmas.
    """
    from dp_accounting import NeighboringRelation  # heavy (scipy.stats, ~1 s): only when used
    from dp_accounting.pld import privacy_loss_distribution as pld

    rel = NeighboringRelation.REPLACE_ONE if relation == "replace_one" else NeighboringRelation.ADD_OR_REMOVE_ONE
    dist = pld.from_gaussian_mechanism(sigma, sensitivity=1.0, pessimistic_estimate=True,
                                       value_discretization_interval=interval, sampling_prob=q,
                                       neighboring_relation=rel)
    return float(dist.self_compose(steps).get_epsilon_for_delta(delta))


def dpsgd_epsilon_replace_one(noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                              grid: str = "fine") -> float:
    """Replace-one epsilon of DP-SGD at noise multiplier z: dp_accounting PLD, pessimistic.

    An upper bound on the true epsilon (see the module docstring). The grid scales with epsilon,
    which is not known in advance: a first pass on a coarse grid (about 2,000 points per step;
    itself an upper bound) sets the scale, a second on the ``grid`` interval for that epsilon
    refines it; the smaller of the two upper bounds is returned. Used for the ``paper`` note and
    for re-checks.
    """
    z = _check("noise_multiplier", noise_multiplier, low=0.0, low_open=True)
    q = _check("sample_rate", sample_rate, low=0.0, high=1.0, low_open=True)
    k = check_int("steps", steps, low=1)
    dlt = _check("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    check_choice("grid", grid, tuple(PLD_GRIDS))
    try:
        rough = _pld_epsilon(z, q, k, dlt, "replace_one", max(1e-7, _loss_range(z, q, "replace_one") / 2000))
        if not math.isfinite(rough) or rough <= 0.0:
            return rough
        return min(rough, _pld_epsilon(z, q, k, dlt, "replace_one", pld_interval(rough, k, z, q, "replace_one", grid)))
    except (ArithmeticError, ValueError):  # a multiplier far outside what the PLD represents
        raise _beyond("noise_multiplier", z) from None


def dpsgd_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                  accountant: str = "rdp", eps_error: float = 0.005) -> float:
    """Add/remove epsilon spent by ``steps`` Poisson-subsampled Gaussian steps (Opacus accountants).

    ``rdp``: Opacus RDP over :data:`RDP_ORDERS`; ``prv``: Opacus PRV's certified upper bound (an
    estimate plus ``eps_error``; a coarser ``eps_error`` is still safe, only less tight). For
    replace-one neighbours use :func:`dpsgd_epsilon_replace_one`.
    """
    check_choice("accountant", accountant, ("rdp", "prv"))
    eps_error = _check("eps_error", eps_error, low=0.0, low_open=True)
    noise_multiplier = _check("noise_multiplier", noise_multiplier, low=0.0, low_open=True)
    sample_rate = _check("sample_rate", sample_rate, low=0.0, high=1.0, low_open=True)
    steps = check_int("steps", steps, low=1)
    delta = _check("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    try:
        return _opacus_epsilon(noise_multiplier, sample_rate, steps, delta, accountant, eps_error)
    except ArithmeticError:  # a multiplier far outside what the accountant represents
        raise _beyond("noise_multiplier", noise_multiplier) from None


def _beyond(name: str, value: float) -> CalibrationError:
    return CalibrationError(f"dpsgd: {name}={value:g} is beyond what the accountant can evaluate (a numerical "
                            "limit); use a value nearer 1")


def _opacus_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float, accountant: str,
                    eps_error: float) -> float:
    """:func:`dpsgd_epsilon` (arguments checked)."""
    from opacus.accountants import PRVAccountant  # heavy imports, only when used

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


def _check(name: str, value, **bounds) -> float:
    """:func:`check_real`, raising :class:`CalibrationError` (naming parameter, range and value)."""
    try:
        return check_real(name, value, **bounds)
    except TypeError:
        raise
    except ValueError as exc:
        raise CalibrationError(f"dpsgd: {exc}") from None


@memoized(maxsize=2048)
def dpsgd_noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int,
                           accountant: str = "pld", rel_tol: float = 1e-3, relation: str | None = None,
                           grid: str = "moderate") -> float:
    """Smallest noise multiplier z (to ``rel_tol``) with epsilon <= ``epsilon`` at ``delta``.

    Poisson sampling rate ``sample_rate``, ``steps`` compositions. ``relation`` is the neighbouring
    relation: ``"replace_one"`` (default for ``accountant="pld"``; dp_accounting PLD on the
    ``grid`` of :data:`PLD_GRIDS`) or ``"add_remove"`` (the only one, and the default, for the
    Opacus accountants ``"rdp"`` and ``"prv"``; also available with ``"pld"``). So
    ``dpsgd_noise_multiplier(eps, delta, q, steps, "rdp")`` is the paper's/Opacus's add/remove
    multiplier, which is too small for replace-one neighbours.

    Raises :class:`CalibrationError` naming the parameter, its range and value for an invalid
    input, for delta = 0 (Gaussian noise has no pure-DP guarantee), and when no z up to 1e4 reaches
    the target. The returned z was evaluated by the accountant and met the target (with the PLD
    accountant it may come from the on-disk memo of such verified results, privcore/accounting/memo.py).
    """
    eps = _check("epsilon", epsilon, low=0.0, low_open=True)
    dlt = _check("delta", delta, low=0.0, high=1.0, high_open=True)
    q = _check("sample_rate", sample_rate, low=0.0, high=1.0, low_open=True)
    k = check_int("steps", steps, low=1)
    rel_tol = _check("rel_tol", rel_tol, low=0.0, low_open=True, high=0.5)
    check_choice("accountant", accountant, DPSGD_ACCOUNTANTS)
    check_choice("grid", grid, tuple(PLD_GRIDS))
    rel = check_choice("relation", relation or ("replace_one" if accountant == "pld" else "add_remove"),
                       NEIGHBOURING_RELATIONS)
    if rel == "replace_one" and accountant != "pld":
        raise CalibrationError(f"dpsgd: the Opacus {accountant.upper()} accountant analyses add/remove neighbours only: "
                               "use accountant='pld' for relation='replace_one'")
    if dlt == 0.0:
        raise CalibrationError(
            "dpsgd needs delta > 0 (Gaussian noise has no pure-DP guarantee): use delta > 0 such as 1e-5, "
            "or a delta = 0 method (model_sensitivity, loss_perturbation, prediction_sensitivity, subsample_aggregate)"
        )
    try:
        return _noise_multiplier(eps, dlt, q, k, accountant, float(rel_tol), rel, grid)
    except ArithmeticError:  # far outside what the accountant represents (epsilon 1e6, sample rate 1e-320)
        raise CalibrationError(f"dpsgd: epsilon={eps:g}, delta={dlt:g}, sample_rate={q:g}, steps={k} are beyond what "
                               "the accountant can evaluate (a numerical limit); choose an epsilon of at most 1e4 "
                               "and a sample rate of at least 1e-6") from None


def _noise_multiplier(eps: float, dlt: float, q: float, k: int, accountant: str, rel_tol: float, rel: str,
                      grid: str) -> float:
    """:func:`dpsgd_noise_multiplier` (arguments checked)."""
    if accountant == "pld":
        # A repeated calibration (another CLI call, another visit) reads its verified answer from
        # the on-disk memo (privcore/accounting/memo.py), re-checked by pld_approx without scipy,
        # and never imports dp_accounting.
        from . import memo
        from .pld_approx import recheck as _recheck
        from .pld_approx import rechecks as _rechecks

        args = (eps, dlt, q, k, rel, float(rel_tol), grid)
        # The shipped table only for replace-one: the only relation whose answers are re-checked here.
        hit = memo.lookup("dpsgd_noise_multiplier", args, bundled=rel == "replace_one")
        if hit is not None and (rel != "replace_one" or _recheck(hit, eps, dlt, q, k)):
            return hit
        z = pld_noise_multiplier(eps, dlt, q, k, rel, rel_tol, grid)
        if rel != "replace_one" or _rechecks(z, eps, dlt, q, k):  # stored only if a later read can replay it
            memo.store("dpsgd_noise_multiplier", args, z)
        return z
    # PRV's grid grows as 1/eps_error: a relative error keeps large-epsilon calls fast.
    err = 0.002 * max(eps, 1.0) if accountant == "prv" else 0.005
    eps_at = lambda s: _epsilon_cached(s, q, k, dlt, accountant, err)  # noqa: E731
    return _search(eps_at, eps, dlt, q, k, _guess(eps, dlt, q, k, rel), rel_tol, 0.02)[0]


def pld_noise_multiplier(eps: float, dlt: float, q: float, k: int, rel: str, rel_tol: float, grid: str) -> float:
    """:func:`dpsgd_noise_multiplier` with the PLD accountant (arguments checked)."""
    z0 = _guess(eps, dlt, q, k, rel)
    # Start next to the root, then let the accountant decide. Replace-one: a numpy privacy-loss
    # distribution (privcore/accounting/pld_approx.py, a few ms) lands within ~0.15 % of the
    # moderate grid's root, so the verified search needs about three evaluations. Otherwise
    # (or if the approximation fails): a search on a 4x coarser grid (cheap, slightly looser).
    # ``fine`` continues from the moderate result and keeps the smaller of the two (both
    # verified): never more noise. Either way the returned z is one the PLD evaluated and
    # compared with the target; the approximation only chooses where to look.
    def at(g: str, scale: float = 1.0):
        return lambda s: _pld_epsilon(s, q, k, dlt, rel, scale * pld_interval(eps, k, s, q, rel, g))
    start = _approx_start(eps, dlt, q, k, z0) if rel == "replace_one" else None
    if start is None:
        z0, slope = _search(at("moderate", 4.0), eps, dlt, q, k, z0, 1e-2, 0.02)
        z0, slope = _search(at("moderate"), eps, dlt, q, k, z0, rel_tol, rel_tol, slope)
    else:
        z0, slope = _search(at("moderate"), eps, dlt, q, k, start[0], rel_tol, _START_MARGIN * rel_tol, start[1])
    if grid == "fine":
        z0 = min(z0, _search(at("fine"), eps, dlt, q, k, z0, rel_tol, _START_MARGIN * rel_tol, slope)[0])
    return z0


def _search(eps_at, eps: float, dlt: float, q: float, k: int, z0: float, rel_tol: float, margin: float,
            slope: float = -1.0) -> tuple[float, float]:
    """(smallest z to ``rel_tol`` with eps_at(z) <= eps, slope of log eps in log z near it).

    :func:`_bracket` from z0, then :func:`_shrink_bracket`. The slope, from the evaluated points
    either side of the root, lets a search on a finer grid start with the right step.
    """
    seen: dict[float, float] = {}

    def rec(z: float) -> float:
        seen[z] = eps_at(z)
        return seen[z]

    found = _bracket(rec, eps, z0, margin, slope)
    if found is None:
        raise CalibrationError(
            f"dpsgd cannot reach epsilon={eps:g} at delta={dlt:g} with sample rate {q:g} and {k} steps "
            f"(noise multiplier up to {_MAX_SIGMA:g}): use fewer epochs, a smaller batch, or a larger epsilon/delta")
    lo, hi = found
    sigma = hi if lo is None else _shrink_bracket(rec, eps, lo, hi, rel_tol)
    if not eps_at(sigma) <= eps:  # pragma: no cover - evaluated before; memoised, so free
        raise CalibrationError("internal: calibrated DP-SGD noise does not meet the target epsilon")
    fails = [z for z, e in seen.items() if z < sigma and 0 < e < math.inf]
    if fails and 0 < seen.get(sigma, 0.0) and math.log(sigma) > math.log(max(fails)):
        z_f = max(fails)
        slope = (math.log(seen[z_f]) - math.log(seen[sigma])) / (math.log(z_f) - math.log(sigma))
    return sigma, min(slope, -0.05)


#: How far past the predicted root (in units of rel_tol) the first step from an approximate start aims.
_START_MARGIN = 0.5


def _approx_start(eps: float, delta: float, q: float, steps: int, z0: float) -> tuple[float, float] | None:
    """(z, slope) from :func:`privcore.accounting.pld_approx.approx_noise_multiplier`, or None."""
    from .pld_approx import approx_noise_multiplier

    try:
        z, slope = approx_noise_multiplier(eps, delta, q, steps, z0)
    except (ValueError, ArithmeticError):
        return None
    return (z, slope) if math.isfinite(z) and _MIN_SIGMA < z < _MAX_SIGMA else None


def _guess(eps: float, delta: float, q: float, steps: int, relation: str) -> float:
    """Starting z: the central-limit (Gaussian DP) approximation, capped by the unsubsampled z.

    Bu, Dong, Long and Su (2020): the subsampled Gaussian with sensitivity s is close to mu-GDP with
    mu = q sqrt(steps (e^(s^2/z^2) - 1)); mu comes from the analytic Gaussian at (eps, delta)
    (Balle and Wang 2018). Without subsampling z = s sqrt(steps) / mu exactly, never less private,
    so the guess is the smaller of the two. Only a starting point: every bracket end is evaluated.
    """
    from .gaussian import analytic_gaussian_sigma

    s = 2.0 if relation == "replace_one" else 1.0
    mu = 1.0 / analytic_gaussian_sigma(eps, delta)
    clt = s / math.sqrt(math.log1p(mu * mu / (q * q * steps)))
    return min(max(min(clt, s * math.sqrt(steps) / mu), 2 * _MIN_SIGMA), _MAX_SIGMA / 2)


def _bracket(eps_at, eps: float, z0: float, margin: float = 0.02, slope: float = -1.0) -> tuple[float | None, float] | None:
    """(lo, hi) with eps_at(lo) > eps >= eps_at(hi), found by secant steps in log-log from ``z0``.

    log epsilon is close to linear in log z, so two or three evaluations usually bracket the root;
    each step aims ``margin`` (in log z) past the predicted root and moves by at most 4x. Returns (None, hi) when even
    z = 0.01 meets the target (a huge epsilon: any such z is safe, and evaluated), None when z = 1e4
    does not.
    """
    def h(z: float) -> float:
        e = eps_at(z)
        return math.log(max(e, 1e-300)) - math.log(eps) if e < math.inf else math.inf

    u, hu = math.log(z0), h(z0)
    u_min, u_max = math.log(_MIN_SIGMA), math.log(_MAX_SIGMA)
    for _ in range(200):
        up = hu > 0  # too little noise: move up
        if math.isfinite(hu):
            step = min(abs(hu / slope) + margin, math.log(4.0))
        else:
            step = math.log(4.0)
        un = min(max(u + (step if up else -step), u_min), u_max)
        hn = h(math.exp(un))
        if up and hn <= 0:
            return math.exp(u), math.exp(un)
        if not up and hn > 0:
            return math.exp(un), math.exp(u)
        if un in (u_min, u_max):
            return (None, math.exp(un)) if un == u_min else None
        if math.isfinite(hn) and math.isfinite(hu) and (hn - hu) / (un - u) < -0.05:
            slope = (hn - hu) / (un - u)
        u, hu = un, hn
    raise CalibrationError("internal: DP-SGD noise search did not bracket the target")  # pragma: no cover


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
        e = eps_at(sigma)
        return math.log(max(e, 1e-300)) - math.log(eps) if e < math.inf else 50.0

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
