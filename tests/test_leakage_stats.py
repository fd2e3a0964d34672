"""privcore.leakage.stats: ROC summaries, Clopper-Pearson and the epsilon bound on hand-checked cases."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from privcore.leakage.stats import (FPR_GRID, EpsilonBound, advantage, auc, clopper_pearson, dp_region_tpr,
                                    epsilon_from_rates, epsilon_lower_bound, gaussian_mu, gaussian_tradeoff_tpr, roc,
                                    tpr_at_fpr)


def test_clopper_pearson_matches_hand_computed_values():
    # k = 0 and k = n have closed forms: 1 - (alpha/2)^(1/n) and (alpha/2)^(1/n).
    assert clopper_pearson(0, 10) == pytest.approx((0.0, 1 - 0.025 ** 0.1), abs=1e-12)
    assert clopper_pearson(10, 10) == pytest.approx((0.025 ** 0.1, 1.0), abs=1e-12)
    # Tabulated exact interval for 5 of 10 at 95 %.
    assert clopper_pearson(5, 10) == pytest.approx((0.187086, 0.812914), abs=1e-6)
    # 1 of 100: (0.000253, 0.054460).
    assert clopper_pearson(1, 100) == pytest.approx((0.000253, 0.054460), abs=2e-6)


@pytest.mark.parametrize("k, n, alpha", [(-1, 10, 0.05), (11, 10, 0.05), (1, 0, 0.05), (1, 10, 0.0), (1, 10, 1.0),
                                         (1.5, 10, 0.05)])
def test_clopper_pearson_rejects_bad_input(k, n, alpha):
    with pytest.raises(ValueError):
        clopper_pearson(k, n, alpha)


def test_epsilon_from_rates():
    assert epsilon_from_rates(0.5, 0.5) == 0.0  # a coin
    assert epsilon_from_rates(0.1, 0.1) == pytest.approx(math.log(9.0))
    assert epsilon_from_rates(0.1, 0.1, delta=0.05) == pytest.approx(math.log(8.5))
    assert epsilon_from_rates(0.0, 0.2) == math.inf
    assert epsilon_from_rates(0.9, 0.9) == 0.0  # worse than a coin implies nothing


def test_epsilon_lower_bound_perfect_separation_by_hand():
    # 20 trials per side: threshold chosen on the 10 even ones, counted on the 10 odd ones.
    b = epsilon_lower_bound(np.ones(20), np.zeros(20), delta=0.0, alpha=0.05)
    hi = 1 - 0.025 ** 0.1  # CP upper bound of 0 errors in 10
    assert isinstance(b, EpsilonBound)
    assert (b.n_in, b.n_out, b.n_select) == (10, 10, 10)
    assert (b.fpr, b.fnr) == (0.0, 0.0)
    assert b.lower == pytest.approx(math.log((1 - hi) / hi), rel=1e-9)  # 0.8072
    assert b.lower == pytest.approx(0.80716, abs=1e-4)
    assert b.estimate == math.inf and b.upper == math.inf
    assert EpsilonBound.from_dict(b.to_dict()) == b


def test_epsilon_lower_bound_no_signal_is_zero():
    rng = np.random.default_rng(0)
    b = epsilon_lower_bound(rng.normal(size=400), rng.normal(size=400), delta=1e-5)
    assert b.lower == 0.0
    assert b.lower <= b.estimate <= b.upper


def test_epsilon_lower_bound_is_below_the_true_epsilon_of_randomised_response():
    # Randomised response at eps = 1: the score is the reported bit; P(report 1 | in) = e/(1+e).
    eps, rng = 1.0, np.random.default_rng(1)
    p = math.exp(eps) / (1 + math.exp(eps))
    lowers = []
    for _ in range(20):
        ins = (rng.random(2000) < p).astype(float)
        outs = (rng.random(2000) < 1 - p).astype(float)
        b = epsilon_lower_bound(ins, outs)
        lowers.append(b.lower)
        assert b.lower <= eps
    assert max(lowers) > 0.6  # and it finds most of it


def test_roc_auc_and_tpr_on_known_cases():
    assert auc([1, 2, 3], [0, 0.5]) == 1.0
    assert auc([0], [1]) == 0.0
    assert auc([1, 1], [1, 1]) == 0.5  # ties count half
    assert auc([0, 2], [1, 3]) == pytest.approx(0.25)
    assert tpr_at_fpr([3, 2, 1], [0, 2.5], 0.0) == pytest.approx(1 / 3)
    assert tpr_at_fpr([3, 2, 1], [0, 2.5], 0.5) == 1.0
    assert advantage([3, 2, 1], [0, 2.5]) == pytest.approx(0.5)
    r = roc(np.arange(100) + 0.5, np.arange(100))
    assert r.auc == pytest.approx(0.505)
    assert r.fpr == FPR_GRID and len(r.tpr) == len(FPR_GRID)
    assert all(a <= b for a, b in zip(r.tpr, r.tpr[1:]))  # monotone
    assert r.tpr[-1] == 1.0
    assert r.n_in == r.n_out == 100
    assert type(r).from_dict(r.to_dict()) == r


def test_auc_matches_pairwise_definition():
    rng = np.random.default_rng(2)
    a, b = rng.integers(0, 5, 40).astype(float), rng.integers(0, 5, 30).astype(float)
    pairwise = np.mean([(x > y) + 0.5 * (x == y) for x in a for y in b])
    assert auc(a, b) == pytest.approx(pairwise)


@pytest.mark.parametrize("bad", [[], [float("nan")], [float("inf")]])
def test_scores_must_be_finite_and_non_empty(bad):
    with pytest.raises(ValueError):
        roc(bad, [0.0])
    with pytest.raises(ValueError):
        epsilon_lower_bound([0.0, 1.0], bad if bad else [0.0])


def test_dp_region_and_gaussian_tradeoff():
    f = np.array([0.0, 1e-3, 0.01, 0.5, 1.0])
    region = dp_region_tpr(f, 1.0, 1e-5)
    assert region[0] == pytest.approx(1e-5)
    assert region[1] == pytest.approx(math.e * 1e-3 + 1e-5)
    assert region[-1] == 1.0 and np.all(region <= 1.0)
    mu = gaussian_mu(1.0, 1e-5)
    assert mu == pytest.approx(1 / 3.7306, rel=1e-3)  # SPEC: sigma = 3.7306 at (1, 1e-5)
    g = gaussian_tradeoff_tpr(f, mu)
    assert np.all(g <= region + 1e-12)  # the Gaussian curve lies inside the (eps, delta) region
    assert g[0] == 0.0 and g[-1] == 1.0
    with pytest.raises(ValueError):
        gaussian_mu(1.0, 0.0)


def test_an_fpr_out_of_range_is_named_by_its_parameter_with_a_plain_value():
    """A bad-input hunt: dp_region_tpr([2.0], 1) said "false-positive rate ... got np.float64(2.0)"."""
    with pytest.raises(ValueError, match=re.escape("fpr must be in [0, 1], got 2.0")):
        dp_region_tpr([0.5, 2.0], 1.0)

