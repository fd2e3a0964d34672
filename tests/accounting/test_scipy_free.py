"""Calibrations in the standard library (issue 16: the light CLI imports no scipy outside DP-SGD).

privcore/accounting/gaussian.py: ``log_ndtr`` is ``math.erfc`` plus an asymptotic series. It is
checked against ``scipy.special.log_ndtr`` and 50-digit mpmath, and every calibrated sigma on a
grid is re-checked with an independent 50-digit evaluation of Balle and Wang's Theorem 8 and with
dp_accounting's own ``get_epsilon_gaussian``. The checker itself is shown to reject a sigma 1 %
too small, so the soundness test can fail. Loss perturbation's chi quantile (a Poisson sum, once
``scipy.special.gammainccinv``) and PATE's zCDP-to-(eps, delta) conversion (a golden-section
search, once ``scipy.optimize.minimize_scalar``) are checked the same way.
"""

from __future__ import annotations

import math

import pytest

from privcore.accounting.gaussian import analytic_gaussian_sigma, log_ndtr

mpmath = pytest.importorskip("mpmath")

EPSILONS = (0.01, 0.1, 0.5, 1.0, 3.0, 10.0, 50.0)
DELTAS = (1e-2, 1e-5, 1e-10, 1e-15)


def mp_delta(sigma: float, eps: float, sens: float = 1.0):
    """Theorem 8 of Balle and Wang (2018) in 50-digit arithmetic (independent of the module)."""
    with mpmath.workdps(50):
        s, e, d = mpmath.mpf(sigma), mpmath.mpf(eps), mpmath.mpf(sens)
        return mpmath.ncdf(d / (2 * s) - e * s / d) - mpmath.exp(e) * mpmath.ncdf(-d / (2 * s) - e * s / d)


def meets(sigma: float, eps: float, delta: float, sens: float = 1.0) -> bool:
    """Does N(0, sigma^2) at L2 ``sens`` give (eps, delta)-DP? (exact, high precision)"""
    return bool(mp_delta(sigma, eps, sens) <= delta)


@pytest.mark.parametrize("x", [-1e6, -1e3, -200.0, -38.5, -37.5, -30.0, -20.000001, -20.0, -19.99999, -10.0, -5.0,
                               -1.0, -1e-9, 0.0, 1e-9, 0.5, 1.0, 3.0, 5.0, 8.0, 20.0, 30.0])
def test_log_ndtr_matches_high_precision(x):
    with mpmath.workdps(60):  # log1p(-Phi(-x)) keeps the tiny complement for x > 0
        m = mpmath.mpf(x)
        ref = float(mpmath.log(mpmath.ncdf(m)) if x <= 0 else mpmath.log1p(-mpmath.ncdf(-m)))
    # Rounding x / sqrt(2) costs about x^2 * 1e-16 relative in a tail, the price of float64 input.
    assert log_ndtr(x) == pytest.approx(ref, rel=1e-14 + 2e-16 * min(x * x, 1e4), abs=1e-300)


def test_log_ndtr_matches_scipy_on_a_dense_grid():
    special = pytest.importorskip("scipy.special")
    xs = [i / 100.0 for i in range(-6000, 3700, 7)] + [-(10.0 ** (k / 10)) for k in range(-80, 1500, 13)]
    worst = max(abs(log_ndtr(x) - float(special.log_ndtr(x))) / abs(float(special.log_ndtr(x))) for x in xs)
    assert worst < 1e-12
    assert log_ndtr(math.inf) == 0.0 and log_ndtr(-math.inf) == -math.inf and math.isnan(log_ndtr(math.nan))


@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_sigma_meets_the_target_exactly_and_is_tight(eps, delta):
    sigma = analytic_gaussian_sigma(eps, delta)
    assert meets(sigma, eps, delta)  # never under-protects (independent 50-digit check)
    assert not meets(sigma * (1 - 1e-6), eps, delta)  # and is the smallest to 1e-6
    # The checker can fail: a deliberately too small sigma (1 % less) is caught.
    assert not meets(sigma * 0.99, eps, delta)


@pytest.mark.parametrize("sens", [0.003, 2.0, 700.0])
def test_sigma_scales_with_sensitivity_and_meets_target(sens):
    for eps, delta in ((0.5, 1e-5), (4.0, 1e-9)):
        sigma = analytic_gaussian_sigma(eps, delta, sens)
        assert meets(sigma, eps, delta, sens) and not meets(sigma * 0.99, eps, delta, sens)


@pytest.mark.parametrize("eps, delta", [(0.1, 1e-5), (1.0, 1e-5), (3.0, 1e-10), (10.0, 1e-6)])
def test_agrees_with_dp_accounting_get_epsilon_gaussian(eps, delta):
    gm = pytest.importorskip("dp_accounting.gaussian_mechanism")
    sigma = analytic_gaussian_sigma(eps, delta)
    assert gm.get_epsilon_gaussian(sigma, delta) <= eps * (1 + 1e-9)
    assert gm.get_epsilon_gaussian(sigma * 0.99, delta) > eps
    assert sigma == pytest.approx(gm.get_sigma_gaussian(eps, delta), rel=1e-7)


@pytest.mark.parametrize("classes", [1, 2, 10, 47, 100])
@pytest.mark.parametrize("delta", [0.3, 1e-5, 1e-12, 1e-40])
def test_gamma_upper_quantile_is_the_quantile_rounded_up(classes, delta):
    from privcore.methods.loss_perturbation import gamma_upper_quantile

    x = gamma_upper_quantile(classes, delta)
    with mpmath.workdps(50):
        sf = lambda v: mpmath.gammainc(classes, mpmath.mpf(v), mpmath.inf, regularized=True)  # noqa: E731
        assert sf(x) <= delta  # the chi radius is never too small (more noise, never less)
        assert sf(x * (1 - 1e-9)) > delta  # and tight
        assert sf(x * 0.99) > delta  # the check can fail
    special = pytest.importorskip("scipy.special")
    assert x == pytest.approx(float(special.gammainccinv(classes, delta)), rel=3e-10)  # 1e-10 rounding up


def test_gamma_upper_quantile_refuses_a_non_integer_shape():
    from privcore.methods.loss_perturbation import gamma_upper_quantile

    with pytest.raises(ValueError, match="classes must be an integer >= 1, got 2.5"):
        gamma_upper_quantile(2.5, 1e-5)


@pytest.mark.parametrize("rho", [1e-6, 1e-3, 0.05, 1.0, 30.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-12])
def test_zcdp_conversion_is_the_minimum_over_alpha(rho, delta):
    from privcore.accounting.pate import zcdp_epsilon

    got = zcdp_epsilon(rho, delta, "improved")

    def bound(a: float) -> float:  # Balle et al. 2020: valid at every alpha > 1
        return a * rho + math.log((a - 1.0) / a) - (math.log(delta) + math.log(a)) / (a - 1.0)

    # A grid in log(alpha - 1), then a 10,000x finer one around its best point.
    u0 = min((-12.0 + 26.0 * i / 20_000 for i in range(20_001)), key=lambda u: bound(1.0 + math.exp(u)))
    dense = min(bound(1.0 + math.exp(u0 + 2.6e-3 * (i / 10_000 - 1))) for i in range(20_001))
    # Never below the true minimum (a smaller number would be no bound at all), and reaches it.
    assert got >= max(dense, 0.0) * (1 - 1e-9) - 1e-15
    assert got <= max(dense, 0.0) * (1 + 1e-7) + 1e-15
    assert got <= zcdp_epsilon(rho, delta, "standard")


# Reported epsilons round up too (review, s4): at small epsilon and large sigma the two Phi terms of
# Theorem 8 nearly cancel, and a plain bisection returned epsilons whose true delta exceeded the
# target by up to 3.5e-11 relative (these cases, found by a 60-digit search).
@pytest.mark.parametrize("sigma, delta", [(705.9996743409906, 3.4525226555317057e-14),
                                          (423.3008489564292, 1.9062496340261324e-22),
                                          (101.27569820735435, 9.42571954456305e-24),
                                          (760.4245791897064, 0.0002330553711207559),
                                          (3.0, 1e-5), (0.5, 1e-10)])
def test_analytic_gaussian_epsilon_is_an_upper_bound(sigma, delta):
    from privcore.accounting.gaussian import analytic_gaussian_epsilon

    eps = analytic_gaussian_epsilon(sigma, delta)
    assert meets(sigma, eps, delta)  # the reported epsilon is never below the true one
    assert not meets(sigma, eps * (1 - 1e-6), delta)  # and tight
    assert not meets(sigma, eps * 0.99, delta)  # the check can fail


@pytest.mark.parametrize("classes, delta", [(5000, 0.00030445504718134604), (2000, 1e-5), (20000, 1e-9)])
def test_gamma_upper_quantile_rounds_up_at_many_classes(classes, delta):
    from privcore.methods.loss_perturbation import gamma_upper_quantile

    x = gamma_upper_quantile(classes, delta)
    with mpmath.workdps(60):
        sf = lambda v: mpmath.gammainc(classes, mpmath.mpf(v), mpmath.inf, regularized=True)  # noqa: E731
        assert sf(x) <= delta  # the float64 Poisson sum alone ended 3.5e-12 (relative tail) short at 5,000
        assert sf(x * (1 - 1e-9)) > delta


@pytest.mark.parametrize("eps, delta", [(1e-8, 1e-100), (1e-8, 1e-20), (1e-7, 1e-100), (1e-6, 1e-200),
                                        (3e-6, 1e-12), (1e-5, 1e-100)])
def test_sigma_and_epsilon_stay_safe_where_the_two_terms_cancel(eps, delta):
    """At tiny epsilon and delta the two Phi terms of Theorem 8 agree to many digits and float64 misjudged
    delta: without the rounding allowance sigma was about 5e-6 relative too small at (1e-8, 1e-100) (delta
    reached 1.002e-100; an independent attack). The allowance costs at most 0.2 % of noise there."""
    from privcore.accounting.gaussian import _delta_upper, analytic_gaussian_epsilon, gaussian_delta

    with mpmath.workdps(80):
        sigma = analytic_gaussian_sigma(eps, delta)
        assert meets(sigma, eps, delta)
        assert not meets(sigma * (1 - 2e-3), eps, delta)
        e = analytic_gaussian_epsilon(sigma * 1.001, delta)
        assert meets(sigma * 1.001, e, delta)
    # The check can fail: the old calibration (bisection on the float64 estimate alone, 1e-8 margin) is caught.
    if (eps, delta) == (1e-8, 1e-100):
        from privcore.accounting.gaussian import _bisect_decreasing

        f = lambda x: gaussian_delta(x, eps)  # noqa: E731
        old = _bisect_decreasing(f, delta, 1.0, 2.0 ** 40) * (1.0 + 1e-8)
        assert not meets(old, eps, delta) and meets(sigma, eps, delta)
        assert _delta_upper(old, eps) > delta
