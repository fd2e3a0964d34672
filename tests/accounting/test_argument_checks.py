"""Public accounting functions check their arguments like the value types: by name, range and value."""

from __future__ import annotations

import math

import pytest

from privcore.accounting.composition import (advanced_composition_epsilon, basic_per_query,
                                             zcdp_per_query_epsilon)
from privcore.accounting.dpsgd import dpsgd_epsilon
from privcore.accounting.gaussian import classical_gaussian_sigma, gaussian_delta

BAD = [
    (classical_gaussian_sigma, (0, 1e-5), "epsilon"),
    (classical_gaussian_sigma, (1, 0), "delta"),
    (classical_gaussian_sigma, (math.nan, 1e-5), "epsilon"),
    (classical_gaussian_sigma, (1, 1e-5, -1), "sensitivity"),
    (gaussian_delta, (1.0, -0.5), "epsilon"),
    (gaussian_delta, (-1.0, 0.5), "sigma"),
    (gaussian_delta, (1.0, math.nan), "epsilon"),
    (advanced_composition_epsilon, (-0.1, 10, 1e-5), "eps0"),
    (advanced_composition_epsilon, (0.1, 10, 0.0), "delta_prime"),
    (advanced_composition_epsilon, (0.1, 0, 1e-5), "budget"),
    (zcdp_per_query_epsilon, (1.0, 1e-5, 0), "budget"),
    (zcdp_per_query_epsilon, (1.0, 0.0, 10), "delta_prime"),
    (zcdp_per_query_epsilon, (-1.0, 1e-5, 10), "epsilon"),
    (basic_per_query, (1.0, -1e-5, 10), "delta"),
    (dpsgd_epsilon, (-1.0, 0.01, 100, 1e-5), "noise_multiplier"),
    (dpsgd_epsilon, (1.0, 0.01, 0, 1e-5), "steps"),
    (dpsgd_epsilon, (1.0, 1.5, 100, 1e-5), "sample_rate"),
    (dpsgd_epsilon, (1.0, 0.01, 100, 0.0), "delta"),
]


@pytest.mark.parametrize("func, args, name", BAD, ids=[f"{f.__name__}{a}" for f, a, _ in BAD])
def test_bad_arguments_are_refused_by_name(func, args, name):
    with pytest.raises((ValueError, TypeError), match=name):
        func(*args)


def test_good_arguments_still_give_the_known_values():
    assert classical_gaussian_sigma(1.0, 1e-5) == pytest.approx(4.8448, abs=1e-4)
    assert gaussian_delta(0.0, 1.0) == 1.0  # no noise: no guarantee
    assert advanced_composition_epsilon(0.0, 10, 1e-5) == 0.0
    assert zcdp_per_query_epsilon(1.0, 1e-5, 1) > 0


# ---------------------------------------------------------------- the rest of the public accounting API
# A probe of every public function (0, negative, NaN, inf, bool, 10**400, strings, lists, 1e-320,
# 1e308) found these returning nonsense or raising ZeroDivisionError, OverflowError, AttributeError,
# "unhashable type" or an internal name; each now refuses by the argument's name.

import torch  # noqa: E402

from privcore import inverse, noise  # noqa: E402
from privcore.accounting import bounded_range, composition, dpsgd, gaussian, pate, pld_approx  # noqa: E402

GEN = torch.Generator().manual_seed(0)
ROW = {"method": "model_sensitivity", "epsilon": 1.0, "accuracy_mean": 0.5, "accuracy_std": 0.1}

MORE = [
    (gaussian.log_ndtr, ("1",), "x"),                                   # was log Phi(1): a string accepted
    (gaussian.analytic_gaussian_sigma, ([1.0], 1e-5), "epsilon"),       # was "unhashable type: 'list'"
    (gaussian.analytic_gaussian_sigma, (1.0, 1e-5, 1e308), "sensitivity"),  # was inf
    (gaussian.analytic_gaussian_epsilon, (1e-320, 1e-5), "sigma"),      # was "epsilon must be finite"
    (gaussian.classical_gaussian_sigma, (1e-320, 1e-5), "epsilon"),     # was inf
    (composition.advanced_gaussian_sigma, (1.0, 1e-5, [10], 1.0), "budget"),
    (composition.exact_gaussian_sigma, (1.0, 1e-5, 10, 1e308), "sensitivity"),
    (bounded_range.grr_product_delta, (1e308, 10, 1.0, 0.5), "eps0"),   # was OverflowError
    (pate.gnmax_query_mu, (1e-320, 30.0), "sigma_vote"),                # was ZeroDivisionError
    (pate.gnmax_query_mu, (10.0, 1e-320), "sigma_check"),
    (pate.gnmax_epsilon, (1e-320, 30.0, 10, 1e-5, "corrected"), "sigma_vote"),
    (pate.gnmax_epsilon, (10.0, 30.0, 10, 1e-5, "exact"), "accounting"),
    (pate.zcdp_rho, (1e308, 1e-5), "epsilon"),                          # was "rho must be finite"
    (pate.zcdp_rho, ([1.0], 1e-5), "epsilon"),
    (pate.zcdp_rho, (1.0, 1e-5, "best"), "conversion"),
    (pate.gnmax_sigmas, (1e308, 1e-5, 10, "corrected"), "epsilon"),
    (pate.svt_calibration, (1e-320, 1e-5, 10, 3), "epsilon"),           # was an infinite threshold
    (pate.distance_to_instability, ([3, 1, 0],), "votes"),              # was AttributeError
    (pate.distance_to_instability, (torch.tensor([3.0]),), "votes"),
    (pld_approx.approx_delta, (1.0, 0.01, 0, 1.0), "steps"),            # was ZeroDivisionError
    (pld_approx.approx_delta, (1e-320, 0.01, 100, 1.0), "z"),
    (pld_approx.approx_epsilon, (1.0, 10**400, 100, 1e-5, 0.01), "q"),  # was OverflowError
    (pld_approx.approx_noise_multiplier, (1.0, 0.0, 0.01, 100, 1.0), "delta"),  # was a multiplier for delta = 0
    (pld_approx.approx_noise_multiplier, (1.0, 1e-5, 0.01, 100, math.inf), "z0"),
    (pld_approx.recheck, (1.0, 1.0, 1e-5, 0.01, math.inf), "steps"),
    (dpsgd.pld_interval, (1.0, 0, 1.0, 0.01), "steps"),                 # was ZeroDivisionError
    (dpsgd.pld_interval, (math.inf, 100, 1.0, 0.01), "epsilon"),        # was inf
    (dpsgd.pld_interval, (1.0, 100, 1e-320, 0.01), "sigma"),
    (dpsgd.dpsgd_epsilon, (1e-320, 0.01, 100, 1e-5), "noise_multiplier"),   # was ZeroDivisionError
    (dpsgd.dpsgd_epsilon, (1e308, 0.01, 100, 1e-5), "noise_multiplier"),    # was OverflowError
    (dpsgd.dpsgd_epsilon_replace_one, (1e-320, 0.01, 100, 1e-5), "noise_multiplier"),  # was "NaN to integer"
    (dpsgd.dpsgd_noise_multiplier, (1e6, 1e-5, 0.01, 100), "epsilon"),   # was OverflowError
    (dpsgd.dpsgd_noise_multiplier, ([1.0], 1e-5, 0.01, 100), "epsilon"),
    (dpsgd.dpsgd_noise_multiplier, (1.0, 1e-5, 0.01, 100, "pld", 0.0), "rel_tol"),
    (noise.sample_gamma, (math.nan, (3,), GEN), "shape"),               # NaN and inf looped for ever
    (noise.sample_gamma, (math.inf, (3,), GEN), "shape"),
    (noise.sample_gamma, (2.0, (10**9, 10**9), GEN), "size"),
    (noise.sample_gamma, (2.0, (3,), None), "generator"),
    (noise.sample_laplace_like, (-1.0, 3, 4, GEN), "beta"),             # was noise of a negative scale
    (noise.sample_laplace_like, (1e-320, 3, 4, GEN), "beta"),           # was infinite draws
    (noise.sample_laplace_like, (1.0, 10**18, 4, GEN), "count"),        # was a torch RuntimeError
    (noise.sample_gaussian, (math.nan, 3, 4, GEN), "sigma"),
    (noise.sample_gaussian, (1e308, 3, 4, GEN), "sigma"),
    (noise.sample_gaussian, (torch.tensor([1.0, -1.0, 1.0]), 3, 4, GEN), "sigma"),
    (noise.sample_gaussian, (1.0, 3, "4", GEN), "dim"),
    (inverse.score_rows, (None, True), "rows"),                         # was "'NoneType' is not iterable"
    (inverse.epsilon_for_accuracy, (5, 0.5), "rows"),
    (inverse.epsilon_for_accuracy, ([ROW, 3], 0.5), r"rows\[1\]"),
    (inverse.score_rows, ([ROW, 3], True), r"rows\[1\]"),               # was AttributeError
]


@pytest.mark.parametrize("func, args, name", MORE, ids=[f"{f.__name__}-{n}-{i}" for i, (f, _, n) in enumerate(MORE)])
def test_the_rest_of_the_api_refuses_bad_arguments_by_name(func, args, name):
    with pytest.raises((ValueError, TypeError), match=name):
        func(*args)


def test_a_memoised_result_is_never_served_to_a_bool():
    assert gaussian.analytic_gaussian_sigma(1, 1e-5) > 0                # memoised for 1 ...
    with pytest.raises(TypeError, match="epsilon"):
        gaussian.analytic_gaussian_sigma(True, 1e-5)                    # ... True is still refused


def test_extreme_but_valid_arguments_give_the_limits():
    assert gaussian.log_ndtr(-math.inf) == -math.inf and gaussian.log_ndtr(10**400) == 0.0
    assert pate.gnmax_query_mu(1e308, None) == 0.0                      # no overflow: mu is 0 to every digit
    assert pate.gnmax_epsilon(1e308, 1e308, 10, 1e-5, "tight") == 0.0
    assert math.isinf(composition.advanced_composition_epsilon(1e6, 10, 1e-5))   # no finite bound
    assert composition.advanced_composition_epsilon(0.1, 10, 1e-320) < 50        # was inf: 1/delta' overflowed
    assert pate.svt_calibration(1.0, 1e-320, 10, 3).threshold < 2e4             # was inf, likewise
    assert gaussian.classical_gaussian_sigma(1.0, 1e-320) < 100
    assert noise.sample_gaussian(torch.tensor([1.0, 2.0, 3.0]), 3, 4, GEN).shape == (3, 4)
    assert noise.sample_gamma(0.5, (2, 3), GEN).shape == (2, 3)
    with pytest.warns(RuntimeWarning):
        assert pld_approx.recheck(math.nan, 1.0, 1e-5, 0.01, 100) is False     # a memo's NaN: refused, not raised
