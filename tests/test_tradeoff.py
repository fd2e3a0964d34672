"""privcore.tradeoff: the one hypothesis-testing region of (eps, delta)-DP and the Gaussian trade-off curve."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privcore.tradeoff import dp_max_tpr, dp_region, gaussian_mu, gaussian_tradeoff_tpr

FPR = np.unique(np.concatenate([[0.0, 1.0], np.geomspace(1e-9, 1.0, 200), np.linspace(0.0, 1.0, 201)]))


@pytest.mark.parametrize("eps, delta", [(0.1, 0.0), (1.0, 0.0), (1.0, 1e-5), (4.0, 1e-3), (20.0, 1e-6)])
def test_the_region_is_the_kairouz_oh_viswanath_one(eps, delta):
    lower, upper = dp_region(eps, delta, FPR)
    e = math.exp(eps)
    want_up = np.minimum(1.0, np.minimum(e * FPR + delta, 1.0 - (1.0 - delta - FPR) / e))
    want_lo = np.maximum(0.0, np.maximum((FPR - delta) / e, 1.0 - delta - e * (1.0 - FPR)))
    assert np.allclose(upper, np.maximum(want_up, FPR), atol=1e-12) and np.allclose(lower, want_lo, atol=1e-12)
    assert np.all(lower <= FPR + 1e-15) and np.all(FPR <= upper + 1e-15)  # guessing is always allowed


def test_randomized_response_sits_on_the_upper_edge():
    # Randomized response at eps: say the truth with probability e^eps / (1 + e^eps). Its test "say 1"
    # has FPR 1 / (1 + e^eps) and TPR e^eps / (1 + e^eps): exactly on the edge, so a region one ulp
    # too tight (or an eps/2 region) would exclude a real eps-DP mechanism.
    for eps in (0.5, 1.0, 3.0):
        f = 1.0 / (1.0 + math.exp(eps))
        assert dp_max_tpr(eps, 0.0, f) == pytest.approx(1.0 - f, rel=1e-12)
        assert dp_max_tpr(eps / 2, 0.0, f) < 1.0 - f - 1e-3  # the check can fail


@pytest.mark.parametrize("eps, delta", [(0.5, 1e-5), (1.0, 1e-5), (4.0, 1e-6)])
def test_the_calibrated_gaussian_curve_lies_in_the_region_and_touches_it(eps, delta):
    curve = gaussian_tradeoff_tpr(FPR, gaussian_mu(eps, delta))
    upper = dp_max_tpr(eps, delta, FPR)
    assert np.all(curve <= upper + 1e-9)
    fine = np.linspace(0.0, 1.0, 200_001)  # calibrated exactly: the curve touches the edge e^eps FPR + delta
    assert np.min(dp_max_tpr(eps, delta, fine) - gaussian_tradeoff_tpr(fine, gaussian_mu(eps, delta))) < 1e-4
    assert np.any(curve > dp_max_tpr(0.8 * eps, delta, FPR) + 1e-6)  # a tighter region would exclude it


def test_extreme_epsilons_give_the_limits_without_overflow():
    lower, upper = dp_region(1000.0, 0.0, FPR)
    assert np.all(np.isfinite(upper)) and upper[FPR > 0].min() == 1.0 and upper[0] == 0.0
    lower, upper = dp_region(math.inf, 0.0, FPR)
    assert np.all(upper == 1.0) and np.all(lower == 0.0)
    assert np.allclose(dp_region(0.0, 0.0, FPR)[1], FPR) and np.allclose(dp_region(0.0, 0.0, FPR)[0], FPR)


@pytest.mark.parametrize("kw, fragment", [(dict(epsilon=-1.0, delta=0.0, fpr=0.1), "epsilon"),
                                          (dict(epsilon=1.0, delta=1.5, fpr=0.1), "delta"),
                                          (dict(epsilon=1.0, delta=0.0, fpr=[0.1, 1.2]), "false-positive rate")])
def test_bad_arguments_are_named(kw, fragment):
    with pytest.raises(ValueError, match=fragment):
        dp_region(**kw)
