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
