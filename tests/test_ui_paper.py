"""ui/paper.py: which of a paper figure's methods can run at a setting (issue 14: methods fail alone)."""

from __future__ import annotations

from ui import paper
from ui.setting import DataInfo, Setting

INFO = DataInfo("synthetic", 1600, 400, 20, 10, class_counts=(160,) * 10)


def figure(key: str, **kw) -> paper.PaperFigure:
    return next(f for f in paper.paper_figures(INFO.n_train, INFO.dim, INFO.classes, image=False, **kw) if f.key == key)


def test_every_method_runs_at_the_defaults():
    for fig in paper.paper_figures(INFO.n_train, INFO.dim, INFO.classes, image=False, min_n=64):
        methods, notes, partly = paper.runnable_methods(fig, Setting(teachers=64, batch_size=64), INFO)
        assert methods == fig.methods and not notes and not partly, fig.key


def test_a_method_that_cannot_run_anywhere_is_left_out_with_its_reason():
    fig = figure("1b")
    methods, notes, partly = paper.runnable_methods(fig, Setting(batch_size=2048), INFO)
    assert "dpsgd" in fig.methods and "dpsgd" not in methods
    assert set(methods) == set(fig.methods) - {"dpsgd"} and not partly
    assert notes == ["DP-SGD is left out of Figure 1b: DP-SGD batch size 2,048 is larger than N = 1,600: lower the "
                     "batch size."]


def test_a_method_left_out_at_some_points_of_the_axis_still_runs_at_the_others():
    fig = figure("4", min_n=1)  # N = 100, 250, 500, 1000, 1600
    methods, notes, partly = paper.runnable_methods(fig, Setting(teachers=300), INFO)
    assert methods == fig.methods and partly == ("subsample_aggregate",)
    assert len(notes) == 1 and notes[0].startswith("Subsample-and-aggregate is left out at N = 100, 250:")
    # the number of classes sets N too (160 rows a class): T = 400 fits from C = 3 on
    fig = figure("5b")
    methods, notes, partly = paper.runnable_methods(fig, Setting(teachers=400), INFO)
    assert partly == ("subsample_aggregate",) and "at C = 2:" in notes[0]
    # delta on the axis: a method needing delta > 0 is left out only at delta = 0
    fig3 = figure("3")
    fig3.values = (0.0, 1e-5)
    methods, notes, partly = paper.runnable_methods(fig3, Setting(), INFO)
    assert "dpsgd" in partly and "prediction_sensitivity" not in partly


def test_the_note_on_methods_left_out_at_delta_zero_agrees_in_number():
    from ui import paper

    if len(paper._LEFT_OUT) == 1:
        assert paper._PURE_NOTE.endswith(" needs δ > 0 and is left out.")
    else:
        assert paper._PURE_NOTE.endswith(" need δ > 0 and are left out.")
    assert paper._PURE_NOTE.startswith(paper._LEFT_OUT[0])


def test_noise_ratios_come_from_the_calibrations():
    """The Reproduce page once said DP-SGD 'is the same in both' accountings while its chart moved: the
    note is now each method's noise ratio, computed from its calibrations (tested against them here)."""
    from privcore import PrivacyBudget, calibrate
    from privcore.types import Problem
    import pytest

    from ui.paper import noise_ratios, ratio_text

    problem = Problem(n=1438, dim=64, classes=10, budget=100)
    names = ["model_sensitivity", "loss_perturbation", "dpsgd", "subsample_aggregate"]
    r = noise_ratios(problem, names, 1.0, 1e-5, ["paper", "corrected", "tight"])
    assert set(r) == {(m, mode) for m in names for mode in ("corrected", "tight")}
    paper_dp = calibrate("dpsgd", PrivacyBudget(1.0, 1e-5), problem, "paper").noise_multiplier
    fixed_dp = calibrate("dpsgd", PrivacyBudget(1.0, 1e-5), problem, "corrected").noise_multiplier
    assert r[("dpsgd", "corrected")] == pytest.approx(fixed_dp / paper_dp) and abs(r[("dpsgd", "corrected")] - 1) > 0.05
    pure = noise_ratios(problem, ["dpsgd", "subsample_aggregate"], 1.0, 0.0, ["paper", "corrected"])
    paper_sa = calibrate("subsample_aggregate", PrivacyBudget(1.0, 0.0), problem, "paper").beta
    fixed_sa = calibrate("subsample_aggregate", PrivacyBudget(1.0, 0.0), problem, "corrected").beta
    assert pure[("subsample_aggregate", "corrected")] == pytest.approx(paper_sa / fixed_sa) and paper_sa > fixed_sa  # β inverted
    assert pure[("dpsgd", "corrected")] is None and ratio_text(None) == "-"  # no pure-DP calibration
    assert ratio_text(r[("model_sensitivity", "corrected")]).startswith("×1.0")  # the certified residual, not 'same'
    assert ratio_text(1.001) == "same" and ratio_text(3.0) == "×3.00"
