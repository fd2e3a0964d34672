"""recommend(): winner, margin, significance and the plain-English reason on hand-made rows."""

from __future__ import annotations

import math

import pytest

from privcore.recommend import Recommendation, recommend, significance_threshold


def row(method, mean, std=0.01, *, eps=1.0, delta=0.0, budget=100, n=4000, lam=1e-3, teachers=16, classes=10,
        repeats=20):
    return {"method": method, "accuracy_mean": mean, "accuracy_std": std, "epsilon": eps, "delta": delta,
            "budget": budget, "n": n, "lam": lam, "teachers": teachers, "classes": classes, "repeats": repeats}


def test_winner_runner_up_margin_and_threshold():
    rows = [row("model_sensitivity", 0.60, 0.02), row("loss_perturbation", 0.70, 0.03),
            row("subsample_aggregate", 0.75, 0.04), row("non_private", 0.89, 0.0, eps=math.inf)]
    rec = recommend(rows)
    assert isinstance(rec, Recommendation)
    assert rec.winner == "subsample_aggregate"      # non_private is a reference, never the winner
    assert rec.runner_up == "loss_perturbation"
    assert rec.margin == pytest.approx(0.05)
    assert rec.threshold == pytest.approx(2 * math.sqrt(0.04 ** 2 + 0.03 ** 2) / math.sqrt(20))
    assert rec.significant                           # 0.05 > 0.0224
    assert set(rec.accuracies) == {"model_sensitivity", "loss_perturbation", "subsample_aggregate"}
    assert "subsample-and-aggregate" in rec.summary


def test_not_significant_when_margin_within_repetition_noise():
    rows = [row("dpsgd", 0.80, 0.05, delta=1e-5, repeats=5), row("loss_perturbation", 0.79, 0.05, delta=1e-5, repeats=5)]
    rec = recommend(rows)
    assert rec.winner == "dpsgd"
    assert rec.margin == pytest.approx(0.01)
    assert not rec.significant
    assert "within the repetition noise" in rec.reason
    assert rec.reason.endswith(".")


def test_threshold_uses_the_smaller_repeat_count_and_needs_two_repeats():
    assert significance_threshold(0.03, 0.04, 4) == pytest.approx(2 * 0.05 / 2)
    with pytest.raises(ValueError):
        significance_threshold(0.1, 0.1, 0)
    rec = recommend([row("dpsgd", 0.9, 0.0, repeats=1, delta=1e-5), row("model_sensitivity", 0.5, 0.0, repeats=1)])
    assert rec.winner == "dpsgd" and not rec.significant   # R = 1: no spread to judge by


def test_reason_few_predictions_pure_dp_favours_subsample_and_aggregate():
    rows = [row("subsample_aggregate", 0.86, budget=10), row("prediction_sensitivity", 0.41, budget=10),
            row("loss_perturbation", 0.33, budget=10), row("model_sensitivity", 0.19, budget=10)]
    rec = recommend(rows)
    assert rec.winner == "subsample_aggregate" and rec.significant
    assert "B = 10" in rec.reason and "δ = 0" in rec.reason and "subsample-and-aggregate" in rec.reason


def test_reason_delta_positive_dpsgd():
    rows = [row("dpsgd", 0.84, delta=1e-5, budget=1000), row("loss_perturbation", 0.78, delta=1e-5, budget=1000)]
    rec = recommend(rows)
    assert rec.winner == "dpsgd"
    assert "δ > 0" in rec.reason and "DP-SGD" in rec.reason and "B = 1,000" in rec.reason


def test_reason_large_n_lambda_model_sensitivity():
    rows = [row("model_sensitivity", 0.81, delta=1e-5, lam=1e-2), row("loss_perturbation", 0.70, delta=1e-5, lam=1e-2)]
    rec = recommend(rows)
    assert rec.winner == "model_sensitivity"
    assert "N λ" in rec.reason and "λ = 0.01" in rec.reason and "N = 4,000" in rec.reason


def test_reason_small_epsilon_pure_loss_perturbation():
    rows = [row("loss_perturbation", 0.35, eps=1.0), row("model_sensitivity", 0.2, eps=1.0)]
    assert "small ε" in recommend(rows).reason


def test_reason_near_chance():
    rows = [row("loss_perturbation", 0.11, eps=0.01), row("model_sensitivity", 0.10, eps=0.01)]
    rec = recommend(rows)
    assert "chance" in rec.reason and "ε = 0.01" in rec.reason


def test_edge_cases():
    empty = recommend([row("non_private", 0.9)])
    assert empty.winner is None and not empty.significant and empty.reason
    single = recommend([row("dpsgd", 0.8, delta=1e-5)])
    assert single.winner == "dpsgd" and single.runner_up is None and single.margin == 0.0
    with pytest.raises(ValueError, match="more than once"):
        recommend([row("dpsgd", 0.8), row("dpsgd", 0.7)])
    # ties are broken deterministically by name
    tie = recommend([row("model_sensitivity", 0.5), row("loss_perturbation", 0.5)])
    assert tie.winner == "loss_perturbation" and tie.margin == 0.0 and not tie.significant


def test_works_on_real_runner_rows():
    from privcore.engine.runner import RESULT_COLUMNS

    base = {k: None for k in RESULT_COLUMNS}
    rows = [dict(base, **row("prediction_sensitivity", 0.5)), dict(base, **row("subsample_aggregate", 0.6))]
    assert recommend(rows).winner == "subsample_aggregate"


def test_no_method_is_useful_near_chance():
    from privcore.recommend import near_chance, recommend

    rows = [{"method": "model_sensitivity", "accuracy_mean": 0.174, "accuracy_std": 0.02, "repeats": 20,
             "classes": 10, "epsilon": 3.0, "delta": 0.0, "budget": 10000, "n": 4000},
            {"method": "subsample_aggregate", "accuracy_mean": 0.11, "accuracy_std": 0.01, "repeats": 20,
             "classes": 10, "epsilon": 3.0, "delta": 0.0, "budget": 10000, "n": 4000}]
    rec = recommend(rows)
    assert not rec.useful and rec.reason.startswith("No method is useful here")
    assert "fewer predictions than B = 10,000" in rec.reason
    assert near_chance(0.18, 0.1) and not near_chance(0.2, 0.1)
    rows[0]["accuracy_mean"] = 0.6
    assert recommend(rows).useful


def test_winner_map_marks_chance_cells():
    from ui.figures import winner_map_figure

    rows = [{"method": m, "epsilon": e, "budget": 10, "accuracy_mean": a, "accuracy_std": 0.0, "repeats": 5,
             "classes": 10} for m, e, a in (("model_sensitivity", 1.0, 0.12), ("subsample_aggregate", 1.0, 0.11),
                                            ("model_sensitivity", 10.0, 0.8), ("subsample_aggregate", 10.0, 0.5))]
    fig = winner_map_figure(rows, "epsilon", "budget")
    texts = [t for row in fig.data[0].text for t in row]
    assert any(t.startswith("≈ chance") for t in texts) and any(t.startswith("Model sens.") for t in texts)


@pytest.mark.parametrize("newcomer", ["pate_student", "confident_gnmax", "sparse_vector"])
def test_a_method_added_after_the_paper_can_be_recommended_with_its_reason(newcomer):
    # issue 10: the recommendation may pick one of the newer methods when it is best (B = 1,000, delta > 0)
    rows = [row("dpsgd", 0.40, 0.02, delta=1e-5, budget=1000), row("subsample_aggregate", 0.30, 0.02, delta=1e-5, budget=1000),
            row(newcomer, 0.70, 0.02, delta=1e-5, budget=1000)]
    rec = recommend(rows)
    assert rec.winner == newcomer and rec.significant
    assert rec.reason and rec.reason.endswith(".")
    assert newcomer not in rec.summary  # the label is shown, never the code name


def test_recommendation_states_the_real_epsilon_of_a_paper_row():
    from privcore.recommend import recommend as _recommend

    base = dict(delta=0.0, budget=10, n=4000, lam=1e-3, teachers=10, classes=10, repeats=5, epsilon=3.0)
    rows = [dict(base, method="subsample_aggregate", accuracy_mean=0.8, accuracy_std=0.01, accounting="paper",
                 real_epsilon=6.0),
            dict(base, method="model_sensitivity", accuracy_mean=0.5, accuracy_std=0.01, accounting="paper",
                 real_epsilon=3.03)]
    rec = _recommend(rows)
    assert rec.winner == "subsample_aggregate" and "really guarantees ε = 6" in rec.reason
    assert "not the ε = 3" in rec.reason
    sound = _recommend([dict(r, accounting="corrected", real_epsilon=None) for r in rows])
    assert "really guarantees" not in sound.reason


def test_the_reason_speaks_of_the_winners_own_knobs():
    """In a tuned comparison each method runs at its own T and lambda: the reason said "a vote over T = 16
    teachers" for a winner that ran at T = 64 (the first row's T; a walk-through finding)."""
    rows = [row("model_sensitivity", 0.5, budget=10, teachers=16), row("subsample_aggregate", 0.86, budget=10, teachers=64)]
    rec = recommend(rows)
    assert rec.winner == "subsample_aggregate" and "T = 64" in rec.reason and "T = 16" not in rec.reason
