"""Forward accounting: the epsilon a calibrated noise really spends (privcore.accounting.forward)."""

from __future__ import annotations

import math

import pytest

from privcore.accounting.dpsgd import dpsgd_epsilon_replace_one
from privcore.accounting.forward import (exponential_vote_epsilon, real_guarantee, replace_one_epsilon,
                                         spent_epsilon)
from privcore.calibration import calibrate
from privcore.methods import METHOD_NAMES, get_method
from privcore.types import PrivacyBudget, Problem

# Small DP-SGD (few steps) keeps the PLD accountant quick.
PROBLEM = Problem(n=2000, batch_size=400, epochs=1, budget=10, teachers=10)
PLD = ("dpsgd", "private_knn")
SLOW = {("prediction_sensitivity", 1e-5, "corrected")}  # a bisection over the advanced composition


def _cases():
    for m in METHOD_NAMES:
        for d in (0.0, 1e-5):
            if not get_method(m).supports(d):
                continue
            for acc in ("corrected", "tight"):
                yield m, d, acc


@pytest.mark.parametrize("method,delta,accounting", list(_cases()))
def test_round_trip_forward_meets_and_nearly_equals_the_target(method, delta, accounting):
    """Calibrate at epsilon, then ask the forward direction with the calibrated noise: <= target, and close."""
    eps = 1.5
    scale = calibrate(method, PrivacyBudget(eps, delta), PROBLEM, accounting)
    fwd = spent_epsilon(method, scale.to_dict(), PROBLEM, delta, accounting)
    # Prediction sensitivity's basic/advanced composition is inverted by bisection (upper end, 1e-7 relative).
    assert fwd <= eps * (1 + (2e-7 if (method, delta, accounting) in SLOW else 1e-9))
    # The PLD methods (DP-SGD, Private-kNN): the calibration's search keeps a pessimistic margin; the others invert
    # in closed form.
    assert fwd >= eps * (0.99 if method in PLD else 1 - 1e-6), (method, fwd)


@pytest.mark.parametrize("accounting", ["corrected", "tight"])
def test_private_knn_round_trip(accounting):
    """Private-kNN (registered or not): its forward epsilon is its accountant's, <= the target and close."""
    from privcore.methods.private_knn import PrivateKNN

    scale = PrivateKNN().calibrate(PrivacyBudget(1.5, 1e-5), PROBLEM, accounting)
    fwd = spent_epsilon("private_knn", scale.to_dict(), PROBLEM, 1e-5, accounting)
    assert 1.5 * 0.99 <= fwd <= 1.5


def test_subsample_aggregate_paper_at_delta_zero_is_exactly_two_epsilon():
    for eps in (0.5, 1.0, 3.0):
        scale = calibrate("subsample_aggregate", PrivacyBudget(eps, 0.0), PROBLEM, "paper")
        assert replace_one_epsilon(scale, PROBLEM) == pytest.approx(2 * eps, rel=1e-12)


def test_subsample_aggregate_paper_with_delta_uses_zcdp_of_its_beta():
    eps, dlt, b = 3.0, 1e-5, PROBLEM.budget
    scale = calibrate("subsample_aggregate", PrivacyBudget(eps, dlt), PROBLEM, "paper")
    rho = b * scale.beta ** 2 / 2
    expected = min(2 * scale.beta * b, rho + 2 * math.sqrt(rho * math.log(1 / dlt)))
    assert replace_one_epsilon(scale, PROBLEM) == pytest.approx(expected, rel=1e-12)
    assert replace_one_epsilon(scale, PROBLEM) > eps  # the published beta misses its target


def test_dpsgd_paper_matches_an_independent_call_of_the_accountant():
    scale = calibrate("dpsgd", PrivacyBudget(2.0, 1e-5), PROBLEM, "paper")
    independent = dpsgd_epsilon_replace_one(scale.noise_multiplier, PROBLEM.sample_rate, PROBLEM.steps, 1e-5)
    assert replace_one_epsilon(scale, PROBLEM) == pytest.approx(independent, rel=1e-9)
    assert independent > 2.0


def test_paper_sensitivity_variants_use_the_certified_sensitivity():
    """Model sensitivity's paper noise assumes the exact minimiser: its real epsilon is eps x certified / exact."""
    scale = calibrate("model_sensitivity", PrivacyBudget(1.0, 0.0), PROBLEM, "paper")
    ratio = PROBLEM.certified_sensitivity / PROBLEM.sensitivity
    assert replace_one_epsilon(scale, PROBLEM) == pytest.approx(ratio, rel=1e-12)
    # Loss perturbation as published at delta = 0: 1.5 epsilon under replace-one (noise eps + Jacobian eps/2).
    lp = calibrate("loss_perturbation", PrivacyBudget(1.0, 0.0), PROBLEM, "paper")
    assert replace_one_epsilon(lp, PROBLEM) == pytest.approx(1.5, rel=1e-12)


def test_tight_votes_are_not_charged_less_than_adaptive_accounting():
    """Catches a known-bad variant: judging a tight S&A row by its own (non-adaptive) accountant."""
    scale = calibrate("subsample_aggregate", PrivacyBudget(3.0, 1e-5), PROBLEM, "tight")
    real, text = real_guarantee("subsample_aggregate", scale.to_dict(), PROBLEM, 1e-5, "tight")
    assert real == pytest.approx(exponential_vote_epsilon(scale.beta, PROBLEM.budget, 1e-5, "corrected"))
    assert real > 3.0 and "fixed in advance" in text
    assert real_guarantee("subsample_aggregate", scale.to_dict(), PROBLEM, 1e-5, "corrected") == (None, None)


def test_forward_rejects_missing_noise():
    with pytest.raises(ValueError, match="beta"):
        spent_epsilon("subsample_aggregate", {"noise": "exponential_mechanism"}, PROBLEM, 0.0)
