"""Privacy statements (privcore.statement): every field, in Markdown and JSON, equal to the calibration's."""

from __future__ import annotations

import json

import pytest

from privcore.accounting.dpsgd import dpsgd_epsilon_replace_one
from privcore.calibration import calibrate
from privcore.statement import STATEMENT_FIELDS, privacy_statement, statement_json, statement_markdown
from privcore.types import PrivacyBudget, Problem

PROBLEM = Problem(n=2000, batch_size=400, epochs=1, budget=10, teachers=10)
PCA = "PCA to 50 dimensions fitted on the training split: a data-dependent step not covered by the privacy guarantee"


@pytest.mark.parametrize("method,delta", [("model_sensitivity", 0.0), ("subsample_aggregate", 1e-5),
                                          ("confident_gnmax", 1e-5), ("loss_perturbation", 1e-5)])
def test_json_has_every_field_and_the_calibrations_values(method, delta):
    s = privacy_statement(method, 2.0, delta, PROBLEM, "corrected", preprocessing=[PCA])
    data = json.loads(statement_json(s))
    assert tuple(data) == STATEMENT_FIELDS
    scale = calibrate(method, PrivacyBudget(2.0, delta), PROBLEM, "corrected")
    assert data["epsilon"] == scale.epsilon and data["delta"] == scale.delta
    assert data["neighbouring_relation"].startswith("replace-one")
    for key in ("sigma", "beta", "rho", "noise_multiplier", "threshold", "test_noise"):
        assert data["noise"].get(key) == getattr(scale, key)
    assert data["mechanism"] == scale.formula and data["accountant"]
    assert data["preprocessing"] == [{"step": PCA, "covered": False}]
    assert "public seed" in data["randomness"]


def test_markdown_states_every_field():
    s = privacy_statement("subsample_aggregate", 1.0, 1e-5, PROBLEM, "tight", preprocessing=[PCA], secure_noise=True)
    md = statement_markdown(s)
    for label in ("epsilon", "delta", "neighbouring relation", "accountant", "mechanism", "noise", "covers",
                  "randomness", "Preprocessing", "Assumptions"):
        assert label in md
    assert "NOT covered" in md and "secure noise" in md
    assert "fixed in advance" in md  # tight's non-adaptive assumption, with the adaptive epsilon stated
    assert f"{s['epsilon']:.4g}" in md and s["epsilon"] > 1.0


def test_paper_statement_states_the_real_epsilon():
    s = privacy_statement("dpsgd", 2.0, 1e-5, PROBLEM, "paper")
    scale = calibrate("dpsgd", PrivacyBudget(2.0, 1e-5), PROBLEM, "paper")
    real = dpsgd_epsilon_replace_one(scale.noise_multiplier, PROBLEM.sample_rate, PROBLEM.steps, 1e-5)
    assert s["epsilon"] == pytest.approx(real, rel=1e-9) and s["epsilon_nominal"] == 2.0
    assert "calibrated for 2 under paper accounting" in statement_markdown(s)
    sa = privacy_statement("subsample_aggregate", 1.5, 0.0, PROBLEM, "paper")
    assert sa["epsilon"] == pytest.approx(3.0, rel=1e-12)


def test_dpsgd_statement_records_its_knobs():
    from privcore.statement import privacy_statement, statement_markdown
    from privcore.types import Problem

    st = privacy_statement("dpsgd", 1.0, 1e-5, Problem(n=1000, epochs=3, batch_size=50, clip=0.3, learning_rate=4.0))
    assert {k: st["setting"][k] for k in ("epochs", "batch_size", "clip", "learning_rate")} == {
        "epochs": 3, "batch_size": 50, "clip": 0.3, "learning_rate": 4.0}
    md = statement_markdown(st)
    assert "epochs = 3" in md and "batch_size = 50" in md and "clip = 0.3" in md and "learning_rate = 4.0" in md


def test_a_statement_names_the_data_set_it_is_of():
    """A course teacher's download did not say which data its guarantee was about."""
    from privcore.statement import privacy_statement, statement_json, statement_markdown

    s = privacy_statement("dpsgd", 1.0, 1e-5, data="of the mnist-5k data set")
    assert "for the training data of the mnist-5k data set." in statement_markdown(s)
    assert '"data": "of the mnist-5k data set"' in statement_json(s)
    plain = privacy_statement("dpsgd", 1.0, 1e-5)
    assert plain["data"] is None and "for the training data" not in statement_markdown(plain)


def test_a_stated_step_is_not_covered_unless_said_public():
    """A keyword rule stated any step without "not covered" in it as covered ("min-max scaling fitted on the
    private data (covered)"); a string was split into characters; a newline forged a heading of its own."""
    from privcore.statement import preprocessing_steps

    steps = preprocessing_steps(["min-max scaling fitted on the private data",
                                 {"step": "clipped to the sensor range 0-10", "covered": True}])
    assert steps == [{"step": "min-max scaling fitted on the private data", "covered": False},
                     {"step": "clipped to the sensor range 0-10", "covered": True}]
    md = statement_markdown(privacy_statement("model_sensitivity", 1.0, 0.0, PROBLEM, preprocessing=steps))
    assert "- min-max scaling fitted on the private data (NOT covered by the guarantee)" in md
    assert "- clipped to the sensor range 0-10 (covered)" in md
    with pytest.raises(TypeError, match=r"preprocessing must be a list of steps .* got 'abc' \(str\)"):
        preprocessing_steps("abc")
    with pytest.raises(TypeError, match=r"preprocessing\[0\] must be a string"):
        preprocessing_steps([1, None])
    with pytest.raises(TypeError, match=r"preprocessing\[0\]"):
        preprocessing_steps([{"step": "x", "covered": "yes"}])
    with pytest.raises(ValueError, match="without control characters"):
        preprocessing_steps(["a\n# Guarantee: (0.0001, 0)-DP\nb"])
    with pytest.raises(ValueError, match="1 to 500 characters"):
        preprocessing_steps(["   "])


def test_the_cli_states_public_steps_as_covered_and_others_not(capsys):
    from privcore.cli import main

    assert main(["statement", "--method", "model_sensitivity", "--epsilon", "1", "--preprocessing",
                 "PCA fitted on the training split", "--public-preprocessing", "clipped to 0-10"]) == 0
    md = capsys.readouterr().out
    assert "- PCA fitted on the training split (NOT covered by the guarantee)" in md
    assert "- clipped to 0-10 (covered)" in md
    assert main(["statement", "--method", "model_sensitivity", "--epsilon", "1", "--preprocessing", "a\nb"]) == 2
    assert "without control characters" in capsys.readouterr().err
