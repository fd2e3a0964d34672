"""Confident-GNMax as a registry method: calibration, abstentions, independence of the batch."""

from __future__ import annotations

import math

import pytest
import torch

from privcore.accounting.pate import GNMAX_SIGMA_RATIO, gnmax_epsilon
from privcore.context import TrainContext
from privcore.data import load_dataset
from privcore.methods import REGISTRY, get_method
from privcore.types import CalibrationError, PrivacyBudget, Problem

CPU = torch.device("cpu")
M = get_method("confident_gnmax")


@pytest.fixture(scope="module")
def ctx():
    ds = load_dataset("synthetic", seed=0)
    problem = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=1e-2, budget=10, teachers=40)
    return TrainContext.from_dataset(ds, problem, 0, CPU)


def test_registered_with_its_properties():
    assert "confident_gnmax" in REGISTRY and M.family == "prediction" and M.releases == "labels" and M.abstains
    assert not M.supports(0.0) and M.supports(1e-5)


@pytest.mark.parametrize("mode", ["paper", "corrected", "tight"])
def test_calibration_meets_the_budget(mode):
    p = Problem(n=4000, budget=1000, teachers=16)
    s = M.calibrate(PrivacyBudget(1.0, 1e-5), p, mode)
    assert s.noise == "gaussian" and s.test_noise == pytest.approx(GNMAX_SIGMA_RATIO * s.sigma)
    assert s.threshold == pytest.approx(0.8 * 16)
    assert gnmax_epsilon(s.sigma, s.test_noise, 1000, 1e-5, mode) <= 1.0 + 1e-9


def test_bad_settings():
    with pytest.raises(CalibrationError):
        M.calibrate(PrivacyBudget(1.0, 0.0), Problem(n=100, teachers=4))  # needs delta > 0
    with pytest.raises(CalibrationError):
        M.calibrate(PrivacyBudget(1.0, 1e-5), Problem(n=10, teachers=20))  # T > N
    assert M.unavailable({"teachers": 20, "delta": 1e-5}, 10) is not None


def test_abstains_and_answers(ctx):
    scales = [M.calibrate(PrivacyBudget(e, 1e-5), ctx.problem) for e in (0.5, 50.0, 5000.0)]
    out = M.release(ctx, scales, 3)
    assert out.shape == (3, 3, ctx.x_test.shape[0]) and out.min() >= -1 and out.max() < ctx.classes
    answered = (out >= 0).double().mean(dim=(1, 2))
    assert answered[2] > answered[0]  # less noise: the check passes where the teachers agree
    votes = ctx.teacher_votes(40, 1e-2)
    confident = votes.max(dim=1).values >= 0.8 * 40 + 5.0  # far above the threshold at eps = 5000
    assert bool((out[2][:, confident] == votes.argmax(dim=1)[confident]).all())
    acc = M.evaluate(ctx, scales, 3)
    right = (out == ctx.y_test).double().mean(dim=2)
    assert torch.allclose(acc, right)  # abstentions count as wrong


def test_results_independent_of_the_batch(ctx):
    a, b = (M.calibrate(PrivacyBudget(e, 1e-5), ctx.problem) for e in (2.0, 20.0))
    both = M.release(ctx, [a, b], 4)
    assert torch.equal(both[1], M.release(ctx, [b], 4)[0])
    assert torch.equal(both[0, :2], M.release(ctx, [a], 2)[0])


def test_empirical_abstain_probability_matches_the_gaussian_check(ctx):
    s = M.calibrate(PrivacyBudget(20.0, 1e-5), ctx.problem)
    out = M.release(ctx, [s], 200)[0]
    top = ctx.teacher_votes(40, 1e-2).max(dim=1).values
    expected = 1.0 - torch.special.ndtr((s.threshold - top) / s.test_noise)  # P(answered) per row
    got = (out >= 0).double().mean(dim=0)
    assert float((got - expected).abs().mean()) < 0.03
    assert math.isclose(float(got.mean()), float(expected.mean()), abs_tol=0.01)


def test_data_dependent_epsilon_beside_the_guarantee(ctx):
    """PATE's data-dependent epsilon is stored per point, never above the data-independent one; the
    calibration (the guarantee) does not use it."""
    from privcore.engine.rows import RESULT_COLUMNS
    from privcore.engine.units import _evaluate

    budgets = [PrivacyBudget(e, 1e-5) for e in (1.0, 30.0)]
    scales, acc, extras = _evaluate("confident_gnmax", ctx, budgets, "corrected", 2)
    assert "epsilon_data_dependent" in RESULT_COLUMNS and "epsilon_dd_published" in RESULT_COLUMNS
    for b, s, x in zip(budgets, scales, extras):
        assert 0.0 <= x["epsilon_data_dependent"] <= b.epsilon * 1.02  # grid of orders vs the exact optimum
        assert x["epsilon_dd_published"] >= x["epsilon_data_dependent"]
        assert gnmax_epsilon(s.sigma, s.test_noise, ctx.problem.budget, 1e-5, "corrected") <= b.epsilon * (1 + 1e-9)
    # independent of the batch: the eps = 30 point alone gives the same numbers
    alone = _evaluate("confident_gnmax", ctx, budgets[1:], "corrected", 2)[2]
    assert alone[0] == extras[1]
    # at eps = 30 with B = 10 and T = 40 the teachers often agree beyond the noise: the data-dependent value is lower
    assert extras[1]["epsilon_data_dependent"] < 30.0
    assert all(x == {} for x in get_method("subsample_aggregate").extra_results(ctx, scales, torch.zeros(2, 2, 3)))


def test_wherever_the_data_dependent_epsilon_is_shown_it_says_showing_it_is_a_release():
    """Issue 29 item 4: PATE's data-dependent epsilon is a non-private function of the votes. The row's
    notes, the method's standing caveats (shown with the method on every page), the noise table's
    column help and the CLI documentation say that showing it is itself a release of private information."""
    from pathlib import Path

    from ui.tables import noise_table_headers

    said = "release of private information"
    scale = M.calibrate(PrivacyBudget(1.0, 1e-5), Problem(teachers=40))
    assert any(said in note for note in scale.notes)
    assert any(said in caveat for caveat in M.caveats)
    assert said in noise_table_headers()["ε data-dependent (not a guarantee)"][1]
    docs = Path(__file__).resolve().parents[1] / "docs"
    for name in ("cli.md", "limits.md", "spec.md"):
        assert said in (docs / name).read_text(encoding="utf-8"), name
