"""Result rows carry the real epsilon where their accounting claims more (issue 32, item 1)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from privcore.accounting.dpsgd import dpsgd_epsilon_replace_one
from privcore.calibration import calibrate
from privcore.engine.runner import _row
from privcore.types import PrivacyBudget, Problem

PROBLEM = Problem(n=2000, batch_size=400, epochs=1, budget=10, teachers=10)


def _a_row(method: str, eps: float, delta: float, accounting: str):
    scale = calibrate(method, PrivacyBudget(eps, delta), PROBLEM, accounting)
    spec = SimpleNamespace(delta=delta, budget=PROBLEM.budget, accounting=accounting, repeats=2)
    stored = {"accuracy_mean": 0.5, "accuracy_std": 0.01, "seconds": 1.0, "device": "cpu", "lam": PROBLEM.lam,
              "scale": scale.to_dict()}
    return _row(method, eps, spec, PROBLEM, None, None, stored, False), scale


def test_paper_subsample_aggregate_row_at_delta_zero_carries_two_epsilon():
    row, _ = _a_row("subsample_aggregate", 1.5, 0.0, "paper")
    assert row.real_epsilon == pytest.approx(3.0, rel=1e-12)
    assert "epsilon = 3" in row.guarantee and row.to_dict()["real_epsilon"] == row.real_epsilon


def test_paper_dpsgd_row_matches_an_independent_accountant_call():
    row, scale = _a_row("dpsgd", 2.0, 1e-5, "paper")
    expected = dpsgd_epsilon_replace_one(scale.noise_multiplier, PROBLEM.sample_rate, PROBLEM.steps, 1e-5)
    assert row.real_epsilon == pytest.approx(expected, rel=1e-9) and row.real_epsilon > 2.0


def test_sound_rows_carry_none():
    row, _ = _a_row("subsample_aggregate", 1.5, 1e-5, "corrected")
    assert row.real_epsilon is None and row.guarantee is None
    tight, _ = _a_row("subsample_aggregate", 1.5, 1e-5, "tight")  # non-adaptive assumption: the adaptive epsilon
    assert tight.real_epsilon > 1.5


@pytest.mark.parametrize("method", ["loss_perturbation", "model_sensitivity", "prediction_sensitivity"])
def test_a_paper_row_of_a_solver_method_says_its_real_epsilon_is_for_the_exact_minimiser(method):
    """An independent audit: paper accounting's noise has no term for the solver's residual, so the
    real epsilon it reaches holds for the exact minimiser only, and the row's sentence says so."""
    row, _ = _a_row(method, 2.0, 1e-5, "paper")
    assert row.guarantee is not None and row.real_epsilon is not None
    assert "exact minimiser" in row.guarantee and "not covered" in row.guarantee, row.guarantee
    dpsgd, _ = _a_row("dpsgd", 2.0, 1e-5, "paper")  # no solver: no such clause
    assert "exact minimiser" not in dpsgd.guarantee


def test_the_paper_dpsgd_note_and_the_row_show_one_rounding_of_the_real_epsilon():
    """A walk-through saw Calibrate's note say 4.09 beside a table saying 4.1: the calibration's note and the
    row's sentence round the real epsilon up, the same way (privcore.validation.epsilon_up)."""
    import re

    from privcore.validation import epsilon_up

    row, scale = _a_row("dpsgd", 2.0, 1e-5, "paper")
    in_note = re.search(r"replace-one epsilon of this noise: ([0-9.]+)", " ".join(scale.notes)).group(1)
    in_row = re.search(r"guarantees epsilon = ([0-9.]+)", row.guarantee).group(1)
    assert in_note == in_row == f"{epsilon_up(row.real_epsilon):g}"
