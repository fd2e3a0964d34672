"""Tests for the optimal composition of bounded-range mechanisms (Dong, Durfee & Rogers 2020).

Run with ``-s`` to see the optimal/zCDP ratio table and the timings.
"""

from __future__ import annotations

import itertools
import math
import time
from decimal import Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privcore.accounting.bounded_range import (
    br_composition_delta,
    br_composition_epsilon,
    grr_product_delta,
    optimal_beta,
    zcdp_beta,
)

# --------------------------------------------------------------------------------------------
# Independent reference: brute-force enumeration of the product distribution
# --------------------------------------------------------------------------------------------


def brute_force_delta(eps0: float, k: int, epsilon: float, t: float) -> float:
    """delta(epsilon) = sum over all 2^k outcomes o of max(0, P(o) - e^epsilon Q(o)).

    P and Q are the k-fold products of the generalised randomized response whose two outcomes
    have privacy losses (1 - t) eps0 ("high") and -t eps0 ("low"). Computed in 40-digit decimal
    arithmetic from the normalisation conditions alone (no shared code with the module), so the
    float result is exact to rounding and comparisons below need no tolerance.
    """
    with localcontext() as ctx:
        ctx.prec = 40
        a = Decimal(eps0)
        u = Decimal((1.0 - t) * eps0)  # the same float offset as the module sees
        # Solve q_high + q_low = 1 with p_high = e^u q_high, p_low = e^(u - a) q_low:
        #   e^u q_high + e^(u-a) (1 - q_high) = 1.
        e_u, e_ua = u.exp(), (u - a).exp()
        q_high = (1 - e_ua) / (e_u - e_ua)
        q_low = 1 - q_high
        p_high, p_low = e_u * q_high, e_ua * q_low
        assert abs(p_high + p_low - 1) < Decimal(10) ** -30
        e_eps = Decimal(epsilon).exp()
        total = Decimal(0)
        for outcome in itertools.product((0, 1), repeat=k):
            p = q = Decimal(1)
            for low in outcome:
                p *= p_low if low else p_high
                q *= q_low if low else q_high
            total += max(Decimal(0), p - e_eps * q)
        return float(total)


def peak_t(eps0: float, k: int, epsilon: float, ell: int) -> float:
    """t of DDR 2020 Theorem 3's l-th term: u_l = (eps + (l+1) eps0)/(k+1), t = 1 - u_l/eps0."""
    u = min((epsilon + (ell + 1) * eps0) / (k + 1), eps0)
    return min(1.0, max(0.0, 1.0 - u / eps0))


EPS0S = [0.05, 0.4, 1.0, 2.5]
TS = [0.0, 0.1, 0.37, 0.5, 0.81, 1.0]


# --------------------------------------------------------------------------------------------
# 1. Exact brute force for small k
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", range(1, 7))
@pytest.mark.parametrize("eps0", EPS0S)
def test_closed_form_matches_brute_force_at_fixed_t(k: int, eps0: float) -> None:
    for t in TS:
        for frac in (0.05, 0.3, 0.7):
            epsilon = frac * k * eps0
            exact = brute_force_delta(eps0, k, epsilon, t)
            got = grr_product_delta(eps0, k, epsilon, t)
            assert got >= exact, (k, eps0, epsilon, t)  # never optimistic, even by an ulp
            assert got == pytest.approx(exact, rel=1e-9, abs=1e-300), (k, eps0, epsilon, t)


@pytest.mark.parametrize("k", range(1, 7))
@pytest.mark.parametrize("eps0", [0.3, 1.0, 2.5])
def test_max_over_t_dominates_brute_force_on_fine_grid(k: int, eps0: float) -> None:
    for frac in (0.1, 0.45, 0.8):
        epsilon = frac * k * eps0
        opt = br_composition_delta(eps0, k, epsilon)
        grid = np.linspace(0.0, 1.0, 161)
        grid_max = max(brute_force_delta(eps0, k, epsilon, float(t)) for t in grid)
        assert opt >= grid_max, (k, eps0, epsilon)
        # ...and the grid gets close: the optimum is a max over t, not a loose bound.
        assert grid_max >= opt * (1.0 - 0.05)
        # The exact maximiser is one of DDR's t_l; brute force there reproduces the optimum.
        at_peaks = max(
            brute_force_delta(eps0, k, epsilon, peak_t(eps0, k, epsilon, ell)) for ell in range(k)
        )
        assert at_peaks == pytest.approx(opt, rel=1e-9)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("eps0", [0.5, 2.0])
def test_heterogeneous_offsets_do_not_beat_common_t(k: int, eps0: float) -> None:
    """Homogeneous composition: a common t is the worst case (DDR 2020), checked on a grid."""
    grid = np.linspace(0.0, 1.0, 13)
    for frac in (0.2, 0.5):
        epsilon = frac * k * eps0
        opt = br_composition_delta(eps0, k, epsilon)
        e_eps = math.exp(epsilon)
        best = 0.0
        for ts in itertools.product(grid, repeat=k):
            # float brute force of the heterogeneous product (tolerance below covers rounding)
            p, q = np.ones(1), np.ones(1)
            for t in ts:
                u = (1.0 - t) * eps0
                q_high = -math.expm1(u - eps0) / (math.exp(u) - math.exp(u - eps0))
                p_pair = np.array([math.exp(u) * q_high, 1.0 - math.exp(u) * q_high])
                q_pair = np.array([q_high, 1.0 - q_high])
                p, q = np.outer(p, p_pair).ravel(), np.outer(q, q_pair).ravel()
            best = max(best, float(np.maximum(p - e_eps * q, 0.0).sum()))
        assert best <= opt * (1.0 + 1e-9) + 1e-15, (k, eps0, epsilon, ts)


# --------------------------------------------------------------------------------------------
# 2. One mechanism
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps0", [1e-3, 0.3, 1.0, 7.0, 800.0])
def test_single_mechanism(eps0: float) -> None:
    # An eps0-BR mechanism is eps0-DP: delta(eps) = 0 for eps >= eps0.
    for epsilon in (eps0, eps0 * (1 + 1e-12), 1.5 * eps0, 10 * eps0):
        assert br_composition_delta(eps0, 1, epsilon) == 0.0
    # Below eps0, Theorem 3 with k = 1 has one term, at u = (eps + eps0)/2:
    #   delta = (1 - e^{-(eps0 - eps)/2})^2 / (1 - e^{-eps0}).
    for frac in (0.01, 0.3, 0.9, 0.999):
        epsilon = frac * eps0
        closed = math.expm1(-(eps0 - epsilon) / 2) ** 2 / -math.expm1(-eps0)
        got = br_composition_delta(eps0, 1, epsilon)
        assert got >= closed
        assert got == pytest.approx(closed, rel=1e-12)


# --------------------------------------------------------------------------------------------
# The max over l: exhaustive comparison (the unimodality the fast search relies on)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("eps0", "k", "frac"),
    [
        (0.9, 40, 0.3),
        (0.05, 300, 0.2),
        (0.01, 2000, 0.05),
        (0.2, 1500, 0.02),
        (3.0, 120, 0.6),
        (0.002, 1200, 0.01),
        (0.5, 900, 0.9),
    ],
)
def test_fast_search_matches_exhaustive_enumeration(eps0: float, k: int, frac: float) -> None:
    epsilon = frac * k * eps0
    n = min(k, math.ceil(k - epsilon / eps0))
    values = np.array(
        [grr_product_delta(eps0, k, epsilon, peak_t(eps0, k, epsilon, ell)) for ell in range(n)]
    )
    opt = br_composition_delta(eps0, k, epsilon)
    assert opt >= values.max()  # never optimistic
    assert opt == pytest.approx(values.max(), rel=1e-7)
    # l -> S_l(u_l) is unimodal (in log scale, up to rounding): one rise then one fall.
    logs = np.log(values[values > 0])
    steps = np.diff(logs)
    signs = np.sign(steps[np.abs(steps) > 1e-9 * np.maximum(1.0, np.abs(logs[:-1]))])
    assert np.count_nonzero(signs[1:] != signs[:-1]) <= 1


def test_large_k_is_stable() -> None:
    k, eps0 = 100_000, 0.0085
    values = [br_composition_delta(eps0, k, eps) for eps in (0.5, 1.0, 2.0, 4.0)]
    assert all(0.0 < v < 1.0 and math.isfinite(v) for v in values)
    assert values == sorted(values, reverse=True)
    # Every t gives a lower bound; a coarse scan of DDR's t_l gets within 1e-4 of the optimum.
    epsilon = 1.0
    opt = br_composition_delta(eps0, k, epsilon)
    ts = [peak_t(eps0, k, epsilon, ell) for ell in range(0, k, 173)]
    scan = [grr_product_delta(eps0, k, epsilon, t) for t in ts]
    assert max(scan) <= opt
    assert max(scan) >= opt * (1.0 - 1e-4)


@pytest.mark.parametrize(
    ("eps0", "k", "epsilon", "t"),
    [(0.0085, 100_000, 1.0, 0.49), (0.03, 10_000, 2.0, 0.45), (0.3, 2_000, 20.0, 0.3)],
)
def test_log_space_sum_matches_scipy_binomial_pmf(
    eps0: float, k: int, epsilon: float, t: float
) -> None:
    """Large k: the log-space sum agrees with a plain sum of scipy's binomial pmf."""
    from scipy.stats import binom

    u = (1.0 - t) * eps0
    p_low = math.expm1(u) / math.expm1(eps0)
    i = np.arange(k + 1)
    excess = k * u - i * eps0 - epsilon  # L_i - epsilon
    terms = binom.pmf(i, k, p_low) * np.where(excess > 0, -np.expm1(-np.maximum(excess, 0.0)), 0.0)
    reference = math.fsum(terms)
    assert reference > 1e-12
    got = grr_product_delta(eps0, k, epsilon, t)
    # The module inflates by its rounding margin (~1e-8 relative at k = 1e5), so it sits just above.
    assert got >= reference
    assert got == pytest.approx(reference, rel=5e-8)


# --------------------------------------------------------------------------------------------
# zCDP calibration and the inverse functions
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("epsilon", "delta", "budget"), [(1.0, 1e-5, 1), (0.3, 1e-8, 50), (8.0, 1e-3, 4000)]
)
def test_zcdp_beta_solves_its_equation(epsilon: float, delta: float, budget: int) -> None:
    beta = zcdp_beta(epsilon, delta, budget)
    rho = budget * beta**2 / 2.0
    assert rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)) == pytest.approx(epsilon, rel=1e-12)
    # The zCDP analysis is valid, so the exact curve must already meet delta at beta''.
    assert br_composition_delta(2.0 * beta, budget, epsilon) <= delta


@pytest.mark.parametrize(
    ("eps0", "k", "delta"), [(0.1, 1, 0.01), (0.2, 30, 1e-6), (0.01, 5000, 1e-8)]
)
def test_br_composition_epsilon_inverts_delta(eps0: float, k: int, delta: float) -> None:
    epsilon = br_composition_epsilon(eps0, k, delta)
    assert 0.0 < epsilon <= k * eps0
    assert br_composition_delta(eps0, k, epsilon) <= delta
    assert br_composition_delta(eps0, k, epsilon * (1.0 - 1e-6)) > delta
    assert br_composition_epsilon(eps0, k, 0.0) == k * eps0


# --------------------------------------------------------------------------------------------
# 3 & 5. optimal_beta against the zCDP bound, pure composition and its own target
# --------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    epsilon=st.floats(min_value=0.05, max_value=20.0),
    log10_delta=st.floats(min_value=-10.0, max_value=-2.0),
    budget=st.integers(min_value=1, max_value=5000),
)
@pytest.mark.slow
def test_optimal_beta_dominates_and_is_feasible(
    epsilon: float, log10_delta: float, budget: int
) -> None:
    delta = 10.0**log10_delta
    beta = optimal_beta(epsilon, delta, budget)
    assert beta >= zcdp_beta(epsilon, delta, budget)  # optimal composition never worse than zCDP
    assert beta >= epsilon / (2 * budget)  # ...nor than pure composition
    assert br_composition_delta(2.0 * beta, budget, epsilon) <= delta  # never exceeds the target
    # Tight: 1e-6 more inverse temperature (10x the bisection width) breaks the target.
    assert br_composition_delta(2.0 * beta * (1.0 + 1e-6), budget, epsilon) > delta


def test_optimal_beta_delta_zero_is_pure_composition() -> None:
    for epsilon, budget in [(1.0, 1), (2.0, 100), (0.5, 7)]:
        assert optimal_beta(epsilon, 0.0, budget) == epsilon / (2 * budget)


# --------------------------------------------------------------------------------------------
# 4. Known ratios
# --------------------------------------------------------------------------------------------


def test_ratio_to_zcdp_table() -> None:
    budgets = [1, 10, 100, 1000, 10_000, 100_000]
    rows = []
    for epsilon in (1.0, 5.0):
        for budget in budgets:
            ratio = optimal_beta(epsilon, 1e-5, budget) / zcdp_beta(epsilon, 1e-5, budget)
            rows.append((epsilon, budget, ratio))
            if budget >= 100:
                assert 1.0 <= ratio <= 2.5, (epsilon, budget, ratio)
    print("\noptimal_beta / zcdp_beta at delta = 1e-5")
    print(f"{'eps':>5} {'B':>7} {'ratio':>7}")
    for epsilon, budget, ratio in rows:
        print(f"{epsilon:5.1f} {budget:7d} {ratio:7.4f}")


# --------------------------------------------------------------------------------------------
# 6. Monotonicity
# --------------------------------------------------------------------------------------------


def test_optimal_beta_monotone() -> None:
    for budget in (1, 30, 1000):
        betas = [optimal_beta(eps, 1e-6, budget) for eps in (0.1, 0.5, 1.0, 3.0, 10.0)]
        assert all(b0 < b1 for b0, b1 in zip(betas, betas[1:])), (budget, betas)
    for epsilon in (0.2, 2.0):
        betas = [optimal_beta(epsilon, 1e-6, b) for b in (1, 2, 10, 100, 1000, 10_000)]
        assert all(b0 > b1 for b0, b1 in zip(betas, betas[1:])), (epsilon, betas)


# --------------------------------------------------------------------------------------------
# Validation and speed
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: optimal_beta(0.0, 1e-5, 10), "epsilon"),
        (lambda: optimal_beta(float("inf"), 1e-5, 10), "epsilon"),
        (lambda: optimal_beta(float("nan"), 1e-5, 10), "epsilon"),
        (lambda: optimal_beta(1.0, 1.0, 10), "delta"),
        (lambda: optimal_beta(1.0, -1e-9, 10), "delta"),
        (lambda: optimal_beta(1.0, 1e-5, 0), "budget"),
        (lambda: optimal_beta(1.0, 1e-5, True), "budget"),
        (lambda: optimal_beta(1.0, 1e-5, 10.0), "budget"),
        (lambda: zcdp_beta(1.0, 0.0, 10), "delta"),
        (lambda: br_composition_delta(0.0, 3, 1.0), "eps0"),
        (lambda: br_composition_delta(1.0, 0, 1.0), "k"),
        (lambda: br_composition_delta(1.0, 3, -1.0), "epsilon"),
        (lambda: br_composition_epsilon(1.0, 3, 1.5), "delta"),
    ],
)
def test_invalid_inputs_raise_value_error_naming_parameter(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()


def test_error_message_has_range_and_value() -> None:
    with pytest.raises(ValueError) as info:
        optimal_beta(1.0, 1e-5, -3)
    assert "budget" in str(info.value) and "[1, inf]" in str(info.value) and "-3" in str(info.value)
    with pytest.raises(ValueError) as info:
        optimal_beta(1.0, 2.0, 3)
    assert "delta" in str(info.value) and "[0, 1)" in str(info.value) and "2.0" in str(info.value)


def test_optimal_beta_is_fast() -> None:
    timings = {}
    for budget in (1000, 10_000, 100_000):
        optimal_beta(1.0, 1e-5, budget)  # warm-up (imports, caches)
        start = time.perf_counter()
        optimal_beta(1.0, 1e-5, budget)
        timings[budget] = time.perf_counter() - start
    shown = ", ".join(f"B={b}: {t * 1e3:.1f} ms" for b, t in timings.items())
    print("\noptimal_beta(1.0, 1e-5, B) wall time: " + shown)
    # Interactive use needs ~50 ms for B <= 10,000; the bound here is loose against noisy CI.
    assert timings[1000] < 0.25 and timings[10_000] < 0.25
