"""A fast approximate replace-one DP-SGD epsilon: only a starting point for the verified search.

:func:`privcore.accounting.dpsgd.dpsgd_noise_multiplier` finds the smallest noise multiplier z whose
pessimistic dp_accounting PLD epsilon meets the target; every z it returns was evaluated by that
accountant. Each such evaluation costs 20-60 ms, and a search that starts far from the root needs
eight or nine of them. This module supplies a start within a fraction of a percent, from a plain
numpy privacy-loss distribution of the same mechanism (Koskela et al. 2020): a few milliseconds per
z, no rounding towards safety (it may be slightly optimistic or pessimistic), so it is never used as
a guarantee, only to place the first accountant evaluations next to the root.

The mechanism: one step of the Poisson(q)-subsampled Gaussian under replace-one neighbours has the
dominating pair P = (1-q) N(0, z^2) + q N(-1, z^2), Q = (1-q) N(0, z^2) + q N(1, z^2). Its privacy
loss L(x) = log P(x)/Q(x) is decreasing in x and has a closed-form inverse (a quadratic in
u = e^(x/z^2)), so the mass of each loss cell [l - h/2, l + h/2] is a difference of normal CDFs.
The cells' pmf is composed ``steps`` times by one FFT (on a window of the composed mean +- 20
standard deviations; cells with mass below 1e-30 of the largest are dropped), and delta(epsilon) = sum over l > epsilon of p(l) (1 - e^(epsilon - l)).
"""

from __future__ import annotations

import math

import numpy as np

from ..validation import check_int, check_real

__all__ = ["approx_delta", "approx_epsilon", "approx_noise_multiplier", "recheck", "rechecks", "RECHECK_SLACK"]

_MAX_CELLS = 8_000
_MAX_FFT = 1 << 21
#: Below this multiplier the losses (about 1/z^2 per unit of x) overflow e^l: the caller's own search takes over.
_Z_MIN = 0.1


def _loss(x: np.ndarray, z: float, q: float) -> np.ndarray:
    a = math.log1p(-q) if q < 1.0 else -math.inf
    lq = math.log(q)
    return np.logaddexp(a, lq - (2.0 * x + 1.0) / (2.0 * z * z)) - np.logaddexp(a, lq + (2.0 * x - 1.0) / (2.0 * z * z))


def _inverse_loss(ell: np.ndarray, z: float, q: float) -> np.ndarray:
    """x with L(x) = ell: the positive root u of c e^l u^2 + a (e^l - 1) u - c = 0, x = z^2 log u."""
    a, c = 1.0 - q, q * math.exp(-0.5 / (z * z))
    el = np.exp(ell)
    b = a * (el - 1.0)
    disc = np.sqrt(b * b + 4.0 * c * c * el)
    # Stable positive root: (-b + disc) / (2 c e^l) = 2 c / (b + disc); np.where computes both.
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        u = np.where(b > 0, 2.0 * c / (b + disc), (disc - b) / (2.0 * c * el))
    return z * z * np.log(u)


_ERFC = np.frompyfunc(math.erfc, 1, 1)


def _ndtr_stdlib(x: np.ndarray) -> np.ndarray:
    """Phi(x) by ``math.erfc`` element by element (full relative precision in both tails, no scipy)."""
    return 0.5 * _ERFC(np.asarray(x, dtype=np.float64) * -math.sqrt(0.5)).astype(np.float64)


def _mass_between(x_lo: np.ndarray, x_hi: np.ndarray, z: float, q: float, stdlib: bool = False) -> np.ndarray:
    """P-mass of [x_lo, x_hi], P = (1-q) N(0, z^2) + q N(-1, z^2), each component without cancellation.

    ``stdlib``: Phi by ``math.erfc`` (slower, imports no scipy: the memo's re-check, whose caller
    has not imported dp_accounting); otherwise ``scipy.special.ndtr`` (the search imports it anyway).
    """
    if stdlib:
        ndtr = _ndtr_stdlib
    else:
        from scipy.special import ndtr  # the DP-SGD path imports scipy anyway (dp_accounting)

    def part(mean: float) -> np.ndarray:
        lo, hi = (x_lo - mean) / z, (x_hi - mean) / z
        return np.where(lo > 0, ndtr(-lo) - ndtr(-hi), ndtr(hi) - ndtr(lo))

    return (1.0 - q) * part(0.0) + q * part(-1.0)


def _composed(z: float, q: float, steps: int, h: float, stdlib: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(losses, pmf) of ``steps`` composed steps on the lattice of interval h; losses > 0 only."""
    # P puts mass e^-50 beyond 10 standard deviations: none of it matters for a starting point.
    l_hi, l_lo = float(_loss(np.array(-1.0 - 10.0 * z), z, q)), float(_loss(np.array(10.0 * z), z, q))
    h = max(h, (l_hi - l_lo) / _MAX_CELLS, 1e-9)
    j_lo, j_hi = math.floor(l_lo / h), math.ceil(l_hi / h)
    cells = np.arange(j_lo, j_hi + 1, dtype=np.float64)
    # Cell j holds the x with L(x) in [(j - 1/2) h, (j + 1/2) h]; L decreases, so x runs backwards.
    edges = _inverse_loss((np.arange(j_lo, j_hi + 2, dtype=np.float64) - 0.5) * h, z, q)
    p = np.clip(_mass_between(edges[1:], edges[:-1], z, q, stdlib), 0.0, None)
    if not (np.all(np.isfinite(p)) and p.max() > 0):
        raise ValueError("approx: the loss distribution could not be formed in float64")
    live = np.flatnonzero(p > 1e-30 * p.max())
    p, cells = p[live[0]:live[-1] + 1], cells[live[0]:live[-1] + 1]
    j_lo, m = int(cells[0]), p.size
    mean = float(p @ cells) / float(p.sum())
    sd = math.sqrt(max(float(p @ (cells - mean) ** 2) / float(p.sum()), 1e-30))
    size = min(steps * (m - 1) + 1, int(40.0 * sd * math.sqrt(steps)) + m)
    n_fft = 1 << max(1, math.ceil(math.log2(size)))
    if n_fft > _MAX_FFT:
        raise ValueError(f"approx: composed support of {size} cells is too large for a start")
    comp = np.fft.irfft(np.fft.rfft(p, n_fft) ** steps, n_fft)
    # Bin b holds the composed offsets o = b (mod n_fft) from steps * j_lo; pick the o nearest
    # the composed mean (the window n_fft covers its +- 20 standard deviations).
    base = steps * (mean - j_lo) - n_fft / 2.0
    losses = (steps * j_lo + base + np.mod(np.arange(n_fft) - base, n_fft)) * h
    keep = losses > 0
    order = np.argsort(losses[keep])
    return losses[keep][order], np.clip(comp[keep], 0.0, None)[order]


#: Above this multiplier the loss range underflows to nothing a lattice can hold (DP-SGD searches up to 1e4).
_Z_MAX = 1e6


def _mechanism(z: float, q: float, steps: int) -> tuple[float, float, int]:
    """(z, q, steps) checked: z in [0.1, 1e6], q in (0, 1], steps >= 1 (named in the error, with range and value)."""
    return (check_real("z", z, low=_Z_MIN, high=_Z_MAX), check_real("q", q, low=0.0, high=1.0, low_open=True),
            check_int("steps", steps, low=1))


def _interval(interval: float) -> float:
    return check_real("interval", interval, low=0.0, low_open=True)


def approx_delta(z: float, q: float, steps: int, epsilon: float, interval: float | None = None) -> float:
    """Approximate delta(epsilon) of ``steps`` replace-one Poisson(q)-subsampled Gaussian steps at z."""
    z, q, steps = _mechanism(z, q, steps)
    epsilon = check_real("epsilon", epsilon, low=0.0, low_open=True)
    interval = _interval(interval) if interval is not None else epsilon * 1e-2 / math.sqrt(steps)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        losses, p = _composed(z, q, steps, interval)
    keep = losses > epsilon
    return float(p[keep] @ -np.expm1(epsilon - losses[keep]))


def approx_epsilon(z: float, q: float, steps: int, delta: float, interval: float, stdlib: bool = False) -> float:
    """Approximate epsilon at ``delta`` (0 where delta(0) <= delta), on the lattice of ``interval``.

    ``stdlib=True`` evaluates the normal CDF without scipy (see :func:`_mass_between`).

    delta(eps) = S0 - e^eps S1 with S0, S1 the sums of p(l) and p(l) e^-l over l > eps: reverse
    cumulative sums give it at every lattice point, and e^eps = (S0 - delta) / S1 inside a cell.
    """
    z, q, steps = _mechanism(z, q, steps)
    delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    interval = _interval(interval)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        losses, p = _composed(z, q, steps, interval, stdlib)
    s0 = np.cumsum(p[::-1])[::-1]
    with np.errstate(over="ignore", invalid="ignore"):  # e^l overflows only where s1 is 0: delta = s0 there
        s1 = np.cumsum((p * np.exp(-losses))[::-1])[::-1]
        at_points = np.where(s1 > 0, s0 - np.exp(losses) * s1, s0)  # at eps = l_j: l_j's own cell adds 0
    above = np.flatnonzero(at_points > delta)
    if above.size == 0:
        return 0.0 if s0.size == 0 or s0[0] - s1[0] <= delta else float(losses[0])
    j = above[-1] + 1  # delta(losses[j - 1]) > delta >= delta(losses[j])
    if j >= losses.size:
        return float(losses[-1])
    if not s1[j] > 0 or not s0[j] > delta:
        return float(losses[j])
    return float(min(max(math.log((s0[j] - delta) / s1[j]), losses[j - 1]), losses[j]))


def approx_noise_multiplier(epsilon: float, delta: float, q: float, steps: int, z0: float,
                            rel_tol: float = 1e-4) -> tuple[float, float]:
    """(z with approx_epsilon(z) = epsilon to ``rel_tol``, slope of log epsilon in log z there).

    Secant steps on log approx_epsilon - log epsilon in log z (close to linear), from ``z0`` (any
    positive guess) with at most a 4x move per step, kept inside the bracket once one is found.
    Raises ValueError where the approximation cannot be formed or does not converge (the caller
    then starts from its own guess).
    """
    epsilon = check_real("epsilon", epsilon, low=0.0, low_open=True)
    delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    _, q, steps = _mechanism(1.0, q, steps)
    z0 = check_real("z0", z0, low=0.0, low_open=True, high=_Z_MAX)
    rel_tol = check_real("rel_tol", rel_tol, low=0.0, high=1.0, low_open=True, high_open=True)
    h = epsilon * 1e-2 / math.sqrt(steps)
    log_e = math.log(epsilon)

    def g(u: float) -> float:
        return math.log(max(approx_epsilon(math.exp(u), q, steps, delta, h), 1e-300)) - log_e

    u_min = math.log(_Z_MIN)
    u = max(math.log(z0), u_min)
    gu, slope = g(u), -1.0
    lo, hi = -math.inf, math.inf  # g(lo) > 0 >= g(hi)
    prev: tuple[float, float] | None = None
    for _ in range(40):
        if gu > 0:
            lo = max(lo, u)
        else:
            hi = min(hi, u)
        if prev is not None and prev[0] != u and (gu - prev[1]) / (u - prev[0]) < -0.05:
            slope = (gu - prev[1]) / (u - prev[0])
        step = max(min(-gu / slope, math.log(4.0)), -math.log(4.0))
        if abs(step) <= rel_tol and math.isfinite(hi):
            return math.exp(u), min(slope, -0.05)
        nxt = u + step
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi) if math.isfinite(lo) and math.isfinite(hi) else nxt
        if nxt < u_min:
            if u <= u_min:
                raise ValueError(f"approx_noise_multiplier: the multiplier is below {_Z_MIN}")
            nxt = u_min
        prev = (u, gu)
        u, gu = nxt, g(nxt)
    raise ValueError("approx_noise_multiplier did not converge")


#: A memo entry is replayed only if approx_epsilon at it is at most this factor over the target.
#: At verified multipliers it is within 0.15 % of the target (q 0.004-1, 5-11,719 steps, epsilon
#: 0.1-100; bench/bench_memo_recheck.py); 1 % less noise raises it by 1-2.2 %, so a multiplier more
#: than ~0.3 % too small is refused.
RECHECK_SLACK = 1.003


def rechecks(z: float, epsilon: float, delta: float, q: float, steps: int) -> bool:
    """:func:`recheck` without its warning: also asked before a multiplier is stored, since one it cannot
    judge (z below 0.1: epsilon in the hundreds) would be refused, with a warning, on every later read."""
    epsilon = check_real("epsilon", epsilon, low=0.0, low_open=True)
    delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    _, q, steps = _mechanism(1.0, q, steps)
    try:
        z = check_real("z", z, low=0.0, low_open=True)
        return approx_epsilon(z, q, steps, delta, epsilon * 1e-2 / math.sqrt(steps), stdlib=True) <= epsilon * RECHECK_SLACK
    except (TypeError, ValueError, ArithmeticError):
        return False


def recheck(z: float, epsilon: float, delta: float, q: float, steps: int) -> bool:
    """Does a replace-one multiplier read from DP-SGD's on-disk memo look right? (milliseconds, no scipy)

    The memo's per-entry sha256 (privcore/accounting/memo.py) catches accidental damage (a changed
    value, an entry moved to another key); it is not keyed, so an entry edited by hand together
    with its checksum would otherwise be trusted. Here z must also meet the target by this
    module's independent estimate, up to :data:`RECHECK_SLACK`. A multiplier it cannot judge (z
    below 0.1, a support too large) is refused too: the caller recomputes rather than trusts.
    A refusal warns (RuntimeWarning). A ``z`` that is not a positive number is refused the same
    way (it comes from a file); the other arguments are the caller's and are checked.
    """
    ok = rechecks(z, epsilon, delta, q, steps)
    if not ok:
        import warnings

        warnings.warn(f"ignoring the calibration memo's noise multiplier {z!r} for epsilon={epsilon!r}, delta={delta!r}, "
                      f"sample rate {q!r}, {steps} steps: an independent check finds it too small; recomputing",
                      RuntimeWarning, stacklevel=3)
    return ok
