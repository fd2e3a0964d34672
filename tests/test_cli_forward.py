"""``privcore epsilon`` (forward accounting) and ``privcore statement`` (privacy statement) on the CLI."""

from __future__ import annotations

import json

import pytest

from privcore.accounting.dpsgd import dpsgd_epsilon_replace_one
from privcore.calibration import calibrate
from privcore.cli import main
from privcore.types import PrivacyBudget, Problem


def _json(args, capsys) -> dict:
    assert main(args + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_epsilon_dpsgd_matches_the_accountant(capsys):
    out = _json(["epsilon", "--method", "dpsgd", "--noise-multiplier", "1.1", "--batch-size", "400", "--n", "2000",
                 "--epochs", "1", "--delta", "1e-5"], capsys)
    assert out["epsilon"] == pytest.approx(dpsgd_epsilon_replace_one(1.1, 0.2, 5, 1e-5), rel=1e-9)
    assert out["neighbouring_relation"] == "replace-one" and "PLD" in out["accountant"]


@pytest.mark.parametrize("method,flag,field,delta", [
    ("model_sensitivity", "--sigma", "sigma", "1e-5"), ("model_sensitivity", "--beta", "beta", "0"),
    ("subsample_aggregate", "--beta", "beta", "1e-5"), ("pate_student", "--sigma", "sigma", "1e-5")])
def test_epsilon_round_trips_calibrate(method, flag, field, delta, capsys):
    cal = _json(["calibrate", "--method", method, "--epsilon", "2", "--delta", delta], capsys)
    out = _json(["epsilon", "--method", method, flag, repr(cal[field]), "--delta", delta], capsys)
    assert 2.0 * (1 - 1e-6) <= out["epsilon"] <= 2.0 * (1 + 1e-9)


def test_epsilon_confident_gnmax_and_sparse_vector_take_their_test_noise(capsys):
    p = Problem()
    for method in ("confident_gnmax", "sparse_vector"):
        s = calibrate(method, PrivacyBudget(2.0, 1e-5), p)
        args = ["epsilon", "--method", method, "--delta", "1e-5", "--test-noise", repr(s.test_noise)]
        args += ["--sigma", repr(s.sigma)] if s.sigma else ["--beta", repr(s.beta), "--threshold", repr(s.threshold)]
        assert _json(args, capsys)["epsilon"] == pytest.approx(2.0, rel=1e-6)


def test_epsilon_without_noise_is_one_line_error(capsys):
    assert main(["epsilon", "--method", "dpsgd"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "--noise-multiplier" in err[0]


def test_statement_markdown_and_json(capsys):
    assert main(["statement", "--method", "subsample_aggregate", "--epsilon", "1", "--delta", "0",
                 "--accounting", "paper", "--preprocessing", "PCA fitted on the training split: not covered"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# Privacy statement") and "(2, 0)-differential privacy" in md and "NOT covered" in md
    data = _json(["statement", "--method", "model_sensitivity", "--epsilon", "1", "--secure-noise"], capsys)
    assert data["epsilon"] == 1.0 and data["neighbouring_relation"].startswith("replace-one")
    assert "secure noise" in data["randomness"]


def test_epsilon_names_a_missing_knob_and_the_exact_minimiser_assumption(capsys):
    assert main(["epsilon", "--method", "loss_perturbation", "--sigma", "30"]) == 2
    assert "loss_perturbation needs rho" in capsys.readouterr().err
    out = _json(["epsilon", "--method", "loss_perturbation", "--sigma", "30", "--rho", "10"], capsys)
    assert "exact minimiser" in out["note"] and out["epsilon"] > 0


def test_one_noise_its_own_accountant_and_the_judge_said(capsys):
    """A bad-input hunt: --sigma and --beta together were taken (beta ignored, but printed), --beta at delta > 0
    was named the analytic Gaussian's accountant, and paper accounting printed "tight" without a word."""
    assert main(["epsilon", "--method", "model_sensitivity", "--sigma", "1", "--beta", "100"]) == 2
    assert "give one noise: --sigma (Gaussian) or --beta (Laplace-like), not both" in capsys.readouterr().err
    assert main(["epsilon", "--method", "model_sensitivity", "--beta", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["delta"] > 0 and out["accountant"].startswith("Laplace-like")
    assert main(["epsilon", "--method", "dpsgd", "--noise-multiplier", "1", "--accounting", "paper", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["accounting"] == "tight" and "paper accounting is judged by the tight accountant" in out["note"]
