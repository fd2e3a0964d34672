"""ui/setting.py (no Streamlit): the setting's defaults, what can run at it, its spec and its Problem."""

from __future__ import annotations

import pytest

from privcore.engine.specs import SweepSpec
from privcore.knobs import LAM_AUTO_STANDIN, knob
from ui import setting
from ui.setting import DataInfo, Setting, SidebarSettings

INFO = DataInfo("synthetic", 1600, 400, 20, 10)
SIDE = SidebarSettings("synthetic", None, 2, "corrected", "cpu", INFO)


def test_setting_defaults_are_the_knobs_first_view():
    s = Setting()
    assert (s.eps, s.delta, s.budget, s.lam, s.teachers) == tuple(
        knob(k).first_view for k in ("epsilon", "delta", "budget", "lam", "teachers"))
    assert s.effective_n(INFO) == 1600 and Setting(n=500).effective_n(INFO) == 500 and s.effective_n(None) is None


def test_make_spec_carries_every_knob_and_leaves_out_what_cannot_run():
    s = Setting(eps=2.0, delta=0.0, budget=7, n=800, teachers=8, lam=1e-2, clip=0.3, epochs=2, batch_size=64,
                methods=("model_sensitivity", "dpsgd"))
    spec = setting.make_spec(SIDE, s, epsilons=(s.eps,))
    assert isinstance(spec, SweepSpec)
    assert spec.methods == ("model_sensitivity",)  # DP-SGD needs delta > 0
    assert (spec.delta, spec.budget, spec.lam, spec.teachers, spec.clip, spec.epochs, spec.batch_size) == (
        0.0, 7, 1e-2, 8, 0.3, 2, 64)
    assert (spec.data.name, spec.data.n, spec.repeats, spec.accounting, spec.device) == (
        "synthetic", 800, 2, "corrected", "cpu")
    errors, warnings = setting.setting_problems(SIDE, s)
    assert not errors and any("left out" in w for w in warnings)


def test_the_n_map_leaves_out_methods_without_a_guarantee_at_this_delta():
    """Who wins' epsilon x N map at delta = 0: DP-SGD is left out of the spec (the page's top box says so),
    instead of the engine warning once per method under the map; varying delta keeps every method."""
    s = Setting(delta=0.0, methods=("model_sensitivity", "dpsgd", "subsample_aggregate"))
    spec = setting.make_spec(SIDE, s, epsilons=(1.0,), vary="n", values=(400, 800))
    assert spec.methods == ("model_sensitivity", "subsample_aggregate")
    spec = setting.make_spec(SIDE, s, epsilons=(1.0,), vary="delta", values=(0.0, 1e-5))
    assert "dpsgd" in spec.methods
    s = Setting(delta=1e-5, methods=("model_sensitivity", "dpsgd"))
    assert setting.make_spec(SIDE, s, epsilons=(1.0,), vary="n", values=(400,)).methods == ("model_sensitivity", "dpsgd")


def test_setting_problems_errors_when_nothing_can_run():
    errors, _ = setting.setting_problems(SIDE, Setting(delta=0.0, methods=("dpsgd",)))
    assert any("None of the chosen methods" in e for e in errors)
    errors, _ = setting.setting_problems(SIDE, Setting(methods=()))
    assert errors == ["Choose at least one method."]


def test_setting_problem_uses_the_data_set_and_the_auto_stand_in():
    p = setting.setting_problem(INFO, Setting(lam="auto", budget=3, teachers=4000), fit_n=True)
    assert (p.n, p.dim, p.classes, p.lam, p.budget, p.teachers) == (1600, 20, 10, LAM_AUTO_STANDIN, 3, 1600)
    with pytest.raises(ValueError, match="budget"):
        setting.setting_problem(INFO, Setting(budget=0))


def test_available_methods_and_min_train_size_follow_the_registry():
    s = Setting(delta=1e-5, teachers=64, batch_size=32, methods=("subsample_aggregate", "dpsgd", "model_sensitivity"))
    assert setting.available_methods(s, 50) == ("dpsgd", "model_sensitivity")  # T = 64 > N = 50
    assert setting.min_train_size(s) >= 64


def test_curve_epsilons_and_grids():
    assert setting.curve_epsilons(1.0, 10.0, current=2.0) == (1.0, 2.0, 3.0, 10.0)
    # the curve always covers the current epsilon: the range grows to include it
    assert setting.curve_epsilons(0.1, 100.0, current=0.01)[0] == 0.01
    assert setting.curve_epsilons(0.1, 100.0, current=1000.0)[-1] == 1000.0
    assert 300.0 in setting.curve_epsilons(0.1, 100.0, current=1000.0)
    assert setting.with_value((1, 10), 5) == [1, 5, 10] and setting.with_value(("auto", 1e-3), 1e-2) == ["auto", 1e-3, 1e-2]
    assert setting.nearest((1, 10, 100), 30) == 10 and setting.nearest(("all", 5), "x") == "all"


def test_explore_specs_are_the_point_then_the_curve():
    point, curve = setting.explore_specs(INFO, {"dataset": "synthetic", "eps": 1.0, "eps_min": 1.0, "eps_max": 10.0})
    assert point.epsilons == (1.0,) and curve.epsilons == (1.0, 3.0, 10.0)


def test_explore_plan_is_the_pages_order_with_the_same_quick_spec(tmp_path, monkeypatch):
    """The warm-up runs the page's own specs in its order: a first visitor waits for the warm-up's
    run of each (identical keys) instead of computing the quick methods a second time beside it."""
    from privcore.methods import REGISTRY
    from ui import progress

    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))  # nothing cached: the page would draw the quick part
    values = {"dataset": "synthetic", "eps": 1.0, "eps_min": 1.0, "eps_max": 10.0}
    point, quick, curve = setting.explore_plan(INFO, values)
    assert [point.key, curve.key] == [s.key for s in setting.explore_specs(INFO, values)]
    assert quick.key == progress.quick_part(curve).key
    assert set(quick.methods) == {m for m in curve.methods if not REGISTRY[m].trains_per_release}
    assert 0 < len(quick.methods) < len(curve.methods)


def test_augmentation_caveat_names_group_privacy():
    from ui.setting import augmentation_caveat

    text = augmentation_caveat(4000, 16000, 1.0)
    assert "16,000 exceeds the 4,000 real" in text
    assert "up to k = 4 rows" in text and "group privacy" in text and "ε = 4 instead of 1" in text
    # The largest group sets the cost: 50,000 rows from 4,000 images is 13 rows for some image, not 12.5.
    assert "up to k = 13 rows" in augmentation_caveat(4000, 50000, 3.0) and "ε = 39 instead of 3" in augmentation_caveat(4000, 50000, 3.0)


def test_no_real_image_shapes_more_rows_than_the_caveat_says():
    """Sources drawn independently gave some images far more copies than the average (the group privacy cost
    is the largest group): each round of sources is a permutation of the images."""
    import numpy as np

    from privcore.data.augment import choose_sources, rows_per_original

    for m, n in ((4000, 50000), (7, 100), (10, 10), (5, 6)):
        picks = choose_sources(m, n - m, seed=3)
        assert len(picks) == n - m and 1 + np.bincount(picks, minlength=m).max() <= rows_per_original(m, n)
    drawn = np.random.default_rng(0).integers(0, 4000, size=46000)  # the old, independent draws
    assert 1 + np.bincount(drawn, minlength=4000).max() > rows_per_original(4000, 50000)


def test_checked_n_snaps_like_the_n_slider():
    info = DataInfo("digits", 1437, 360, 64, 10)
    assert setting.checked_n(info, None) == (None, None)
    assert setting.checked_n(info, 1000) == (1000, None)
    n, note = setting.checked_n(info, 10_000_000)
    assert n is None and "10,000,000" in note and "1,437" in note
    n, note = setting.checked_n(info, 1001)
    assert n == 1000 and note




def test_pca_is_labelled_as_not_covered_by_the_guarantee():
    from types import SimpleNamespace

    from ui.setting import DataInfo, Setting, setting_problems

    side = SimpleNamespace(info=DataInfo("digits", 1438, 359, 64, 10))
    _, warnings = setting_problems(side, Setting(dim=10))
    assert any("PCA" in w and "does not cover" in w for w in warnings)
    _, plain = setting_problems(side, Setting(dim=None))
    assert not any("PCA" in w for w in plain)


def test_methods_left_out_at_delta_zero_are_named_once_in_words_without_their_caveats():
    s = Setting(eps=1.0, delta=0.0, methods=("model_sensitivity", "dpsgd", "confident_gnmax", "pate_student"))
    errors, warnings = setting.setting_problems(SIDE, s)
    assert not errors
    left = [w for w in warnings if "left out" in w]
    assert left == ["DP-SGD, PATE Confident-GNMax and PATE student (pay once) need δ > 0 and are left out at δ = 0 "
                    "(pure ε-DP); δ = 1e-5, for example, brings them back."], warnings
    assert not any(code in w for w in warnings for code in ("dpsgd", "confident_gnmax", "pate_student", "delta"))
    # no notes about methods that do not run (Confident-GNMax's abstentions, the student's public rows)
    assert not any("abstain" in w or "public rows" in w for w in warnings), warnings
    assert setting.setting_caveats(SIDE, s) == []
    # at delta > 0 they run, and their standing caveats are back (as caveats, not warnings)
    _, warnings = setting.setting_problems(SIDE, Setting(eps=1.0, delta=1e-5, methods=s.methods))
    assert not any("left out" in w or "abstain" in w for w in warnings), warnings
    caveats = setting.setting_caveats(SIDE, Setting(eps=1.0, delta=1e-5, methods=s.methods))
    assert len(caveats) == 3 and "abstain" in caveats[0] and "public rows" in caveats[2], caveats
    assert "release of private information" in caveats[1]  # showing GNMax's data-dependent epsilon


def test_the_default_setting_has_caveats_but_no_warnings():
    """Warnings are about the current setting: the default one has none; the standing caveats of the
    methods that run (true whatever the setting) are listed apart, once each."""
    from privcore.methods import METHOD_NAMES

    default = Setting(methods=tuple(METHOD_NAMES))  # the first view: every method of the registry
    errors, warnings = setting.setting_problems(SIDE, default)
    assert errors == [] and warnings == []
    caveats = setting.setting_caveats(SIDE, default)
    assert caveats and len(set(caveats)) == len(caveats)
    # a setting-dependent note is still a warning: too few examples per teacher
    _, warnings = setting.setting_problems(SIDE, Setting(teachers=400, methods=tuple(METHOD_NAMES)))
    assert any("close to random" in w for w in warnings)


def test_the_delta_advice_never_suggests_the_current_delta():
    """At N = 100,000, δ = 1e-5 = 1/N: the advice said 'Use δ ≪ 1/N (e.g. 1e-5)', the value in use."""
    from dataclasses import replace as _replace

    side = _replace(SIDE, info=_replace(SIDE.info, n_train=200_000))
    for n, delta, suggested in ((100_000, 1e-5, "1e-7"), (1_000, 1e-3, "1e-5"), (1_000, 0.01, "1e-5")):
        _, warnings = setting.setting_problems(side, Setting(eps=1.0, delta=delta, n=n, methods=("model_sensitivity",)))
        advice = [w for w in warnings if "1/N" in w]
        assert len(advice) == 1 and advice[0].endswith(f"(e.g. {suggested}).") and suggested != f"{delta:.0e}".replace("e-0", "e-")


def test_an_extreme_epsilon_gets_its_true_power_of_ten():
    """ε = 5,000 read 'e^ε ≈ 1e304' (exp clamped at 700); e^5000 is about 10^2171."""
    _, warnings = setting.setting_problems(SIDE, Setting(eps=5000.0, delta=0.0, methods=("model_sensitivity",)))
    assert any("e^ε ≈ 10^2,171" in w for w in warnings), warnings
    _, warnings = setting.setting_problems(SIDE, Setting(eps=200.0, delta=0.0, methods=("model_sensitivity",)))
    assert any("e^ε ≈ 7.2e86" in w for w in warnings), warnings


def test_the_neighbours_note_states_the_teachers_independence():
    from ui import setting
    assert "own part alone" in setting.NEIGHBOURS_NOTE and "one teacher" in setting.NEIGHBOURS_NOTE


def test_who_wins_specs_are_the_pages_two_maps():
    from ui.setting import WHO_WINS_B, build_data_info, who_wins_specs

    info = build_data_info("digits")
    (kb, b), (kn, n) = who_wins_specs(info)
    assert (kb, kn) == ("map_b", "map_n")
    assert b.vary == "budget" and tuple(b.values) == WHO_WINS_B
    assert n.vary == "n" and max(n.values) == info.n_train and all(v <= info.n_train for v in n.values)
    assert b.epsilons == n.epsilons == tuple(sorted(b.epsilons))


def test_a_class_filter_is_labelled_for_every_data_set():
    """Dropping rows by their label makes N depend on the labels, for a bundled data set as for a file."""
    from types import SimpleNamespace

    info = DataInfo("digits", 1437, 360, 64, 10, class_counts=(143,) * 10)
    side = SimpleNamespace(info=info, dataset="digits")
    assert any("C = 2 drops rows by their label" in c for c in setting.data_caveats(side, Setting(classes=2)))
    assert not any("drops rows" in c for c in setting.data_caveats(side, Setting(classes=None)))
    caveat = setting.data_caveats(side, Setting(classes=2, n=1000))
    assert any("exceeds the 286 real training examples" in c for c in caveat), caveat
