"""The approximate replace-one PLD (privcore/accounting/pld_approx.py): a starting point only.

It is never a guarantee (test_dpsgd_search.py shows a wrong start still gives a verified
multiplier); these tests only check that it is a good start: q = 1 against the exact analytic
Gaussian, subsampled settings against dp_accounting, delta and epsilon consistent.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privcore.accounting.gaussian import analytic_gaussian_epsilon
from privcore.accounting.pld_approx import approx_delta, approx_epsilon, approx_noise_multiplier


@pytest.mark.parametrize("z, steps", [(2.0, 1), (5.0, 4), (30.0, 100)])
def test_without_subsampling_it_is_the_analytic_gaussian(z, steps):
    # q = 1: steps Gaussians of std z at sensitivity 2 compose to one of std z / sqrt(steps).
    exact = analytic_gaussian_epsilon(z / math.sqrt(steps), 1e-5, 2.0)
    got = approx_epsilon(z, 1.0, steps, 1e-5, exact * 1e-3 / math.sqrt(steps))
    assert got == pytest.approx(exact, rel=2e-3)


@pytest.mark.parametrize("z, q, steps", [(4.25, 0.064, 79), (1.6, 0.064, 79), (0.9, 0.01, 300), (1.0, 0.2, 1)])
def test_close_to_dp_accounting(z, q, steps):
    from test_dpsgd_replace_one import reference_epsilon  # tests/accounting is on sys.path

    ref = reference_epsilon(z, q, steps, 1e-5, 1e-3 / math.sqrt(steps))
    got = approx_epsilon(z, q, steps, 1e-5, ref * 1e-2 / math.sqrt(steps))
    assert got == pytest.approx(ref, rel=5e-3)
    assert approx_delta(z, q, steps, got, ref * 1e-2 / math.sqrt(steps)) == pytest.approx(1e-5, rel=1e-6)


def test_noise_multiplier_inverts_epsilon_from_a_poor_guess():
    for guess in (0.01, 1.0, 500.0):
        z, slope = approx_noise_multiplier(2.0, 1e-5, 0.064, 79, guess)
        assert approx_epsilon(z, 0.064, 79, 1e-5, 2.0 * 1e-2 / math.sqrt(79)) == pytest.approx(2.0, rel=5e-4)
        assert -5.0 < slope < -0.5


def test_refuses_where_float64_cannot_follow():
    with pytest.raises(ValueError, match="below 0.1"):
        approx_noise_multiplier(500.0, 1e-5, 0.5, 2, 1.0)


def test_the_scipy_free_normal_cdf_gives_the_same_epsilon():
    """The memo's re-check (pld_approx.recheck) uses math.erfc instead of scipy.special.ndtr."""
    from privcore.accounting.pld_approx import _ndtr_stdlib

    special = pytest.importorskip("scipy.special")
    xs = np.array([-40.0, -8.0, -1.0, 0.0, 0.5, 3.0, 9.0, np.inf, -np.inf])
    assert np.allclose(_ndtr_stdlib(xs), special.ndtr(xs), rtol=1e-14, atol=0.0)
    for z, q, steps in ((4.2, 0.064, 79), (1.7, 0.01, 500)):
        a = approx_epsilon(z, q, steps, 1e-5, 1e-2 / math.sqrt(steps), stdlib=True)
        # The same decision as scipy's ndtr: the re-check's slack is 0.5 %; the two paths differ by about
        # 1e-10 after the FFT composition, so 1e-6 (not an 8-digit match) leaves room for any CPU's FFT.
        assert a == pytest.approx(approx_epsilon(z, q, steps, 1e-5, 1e-2 / math.sqrt(steps)), rel=1e-6)
