"""Mechanics of privcore.audit: Clopper-Pearson bounds and epsilon lower bounds on toy mechanisms
whose true epsilon is known exactly (Gaussian, Laplace, randomised response)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from privcore.accounting.gaussian import analytic_gaussian_sigma
from privcore.audit import AuditResult, audit, clopper_pearson, epsilon_lower_bound


def test_clopper_pearson_matches_binomial_tails():
    n, alpha = 200, 0.05
    for k in (0, 1, 17, 100, 199, 200):
        lo, hi = clopper_pearson(k, n, alpha)
        # Definition: P[Bin(n, lo) >= k] = alpha / 2 and P[Bin(n, hi) <= k] = alpha / 2.
        if k > 0:
            assert binom.sf(k - 1, n, float(lo)) == pytest.approx(alpha / 2, rel=1e-6)
        else:
            assert lo == 0.0
        if k < n:
            assert binom.cdf(k, n, float(hi)) == pytest.approx(alpha / 2, rel=1e-6)
        else:
            assert hi == 1.0
        assert lo <= k / n <= hi


def test_clopper_pearson_coverage_is_at_least_nominal():
    # Exact coverage over all outcomes k for a few true p: >= 1 - alpha (CP is conservative).
    n, alpha = 60, 0.1
    k = np.arange(n + 1)
    lo, hi = clopper_pearson(k, n, alpha)
    for p in (0.01, 0.1, 0.37, 0.5, 0.9):
        covered = (lo <= p) & (p <= hi)
        assert binom.pmf(k, n, p)[covered].sum() >= 1 - alpha - 1e-12


def test_clopper_pearson_rejects_bad_input():
    with pytest.raises(ValueError):
        clopper_pearson(5, 4, 0.05)
    with pytest.raises(ValueError):
        clopper_pearson(1, 4, 1.5)


def test_epsilon_lower_bound_formula_and_delta():
    lo, _ = clopper_pearson(300, 1000, 0.05)
    _, hi = clopper_pearson(100, 1000, 0.05)
    assert epsilon_lower_bound(300, 1000, 100, 1000, 0.05) == pytest.approx(math.log(lo / hi))
    assert epsilon_lower_bound(300, 1000, 100, 1000, 0.05, delta=0.01) == pytest.approx(math.log((lo - 0.01) / hi))
    # No evidence: floored at 0, never negative or NaN.
    assert epsilon_lower_bound(0, 1000, 0, 1000, 0.05) == 0.0
    assert epsilon_lower_bound(100, 1000, 300, 1000, 0.05) == 0.0


def test_identical_distributions_give_no_evidence():
    rng = np.random.default_rng(0)
    res = audit(rng.standard_normal(40000), rng.standard_normal(40000), alpha=0.05)
    assert isinstance(res, AuditResult)
    assert res.eps_lower < 0.1
    assert res.samples == (20000, 20000)


def test_result_is_frozen():
    res = audit(np.zeros(10), np.ones(10))
    with pytest.raises(AttributeError):
        res.eps_lower = 3.0  # type: ignore[misc]


@pytest.mark.parametrize("direction_sign", [1.0, -1.0])
def test_gaussian_mechanism_bound_is_below_and_near_truth(direction_sign):
    # N(0, 1) vs N(mu, 1) is exactly (eps, delta)-DP on the analytic-Gaussian curve: sigma = 1/mu.
    eps, delta = 2.0, 1e-3
    mu = 1.0 / analytic_gaussian_sigma(eps, delta, 1.0)
    rng = np.random.default_rng(1)
    n = 100_000
    res = audit(rng.standard_normal(n), rng.standard_normal(n) + direction_sign * mu, delta=delta, alpha=0.05)
    assert 0.5 * eps < res.eps_lower <= eps  # both tails of the test are tried
    # Twice the shift (half the noise) is caught.
    res_bad = audit(rng.standard_normal(n), rng.standard_normal(n) + 2 * direction_sign * mu, delta=delta)
    assert res_bad.eps_lower > eps


def test_laplace_mechanism_bound_is_below_and_near_truth():
    # 1-D Laplace with scale 1/eps and shift 1 is exactly eps-DP; the ratio e^eps holds on a whole tail.
    eps = 1.0
    rng = np.random.default_rng(2)
    n = 100_000
    res = audit(rng.laplace(0, 1 / eps, n), rng.laplace(1.0, 1 / eps, n), alpha=0.05)
    assert 0.8 * eps < res.eps_lower <= eps
    res_bad = audit(rng.laplace(0, 1 / eps, n), rng.laplace(2.0, 1 / eps, n), alpha=0.05)
    assert res_bad.eps_lower > eps


def test_randomised_response_discrete_scores():
    # Binary output, P[1] = e^eps / (1 + e^eps) vs 1 / (1 + e^eps): exactly eps-DP.
    eps = 1.0
    p = math.exp(eps) / (1 + math.exp(eps))
    rng = np.random.default_rng(3)
    n = 50_000
    res = audit((rng.random(n) < 1 - p).astype(float), (rng.random(n) < p).astype(float))
    assert 0.85 * eps < res.eps_lower <= eps
    assert res.threshold in (0.0, 1.0)


def test_false_positive_rate_of_the_bound():
    # Over many independent audits of an exactly eps-DP mechanism, the bound exceeds eps in at most
    # about alpha of them (here: none of 40 with alpha = 0.05 is expected, allow 6).
    eps, n = 0.5, 4000
    p = math.exp(eps) / (1 + math.exp(eps))
    rng = np.random.default_rng(4)
    over = sum(audit((rng.random(n) < 1 - p).astype(float), (rng.random(n) < p).astype(float),
                     alpha=0.05).eps_lower > eps for _ in range(40))
    assert over <= 6


def test_audit_validates_input():
    with pytest.raises(ValueError):
        audit(np.array([1.0, np.nan]), np.zeros(2))
    with pytest.raises(ValueError):
        audit(np.zeros(1), np.zeros(1))
    with pytest.raises(ValueError):
        audit(np.zeros(10), np.zeros(10), select_fraction=1.0)
