"""ui/inverse.py: the inverse view says where a target accuracy is unreachable, and why."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from ui.inverse import _best_means, unreachable_text


def test_a_target_above_the_non_private_model_is_unreachable_whatever_the_epsilon():
    text = unreachable_text(0.95, 0.81, 100.0, 0.88)
    assert text == "above non-private (0.88)"


def test_a_target_below_the_non_private_model_names_the_largest_epsilon_and_the_best_mean():
    text = unreachable_text(0.85, 0.812, 100.0, 0.88)
    assert text == "not by ε = 100 (best 0.81)"
    assert unreachable_text(0.85, None, 30.0, None) == "not by ε = 30"
    # walk-throughs saw longer texts cut off, or a wide column push the band off-screen, at 800 px
    assert len(text) <= 26


def test_best_means_per_method_and_the_baseline():
    rows = [{"method": "dpsgd", "accuracy_mean": 0.5}, {"method": "dpsgd", "accuracy_mean": 0.7},
            {"method": "non_private", "accuracy_mean": 0.9}, {"method": "dpsgd"}]
    best, baseline = _best_means(rows)
    assert best == {"dpsgd": 0.7} and baseline == 0.9


_PAGE = """
from ui.inverse import target_section
rows = [{"method": m, "epsilon": e, "accuracy_mean": a, "accuracy_std": 0.01}
        for m, accs in (("model_sensitivity", (0.5, 0.7, 0.9)), ("dpsgd", (0.3, 0.5, 0.6)))
        for e, a in zip((1.0, 10.0, 100.0), accs)] + [{"method": "non_private", "epsilon": float("inf"),
                                                       "accuracy_mean": 0.92, "accuracy_std": 0.0}]
target_section(rows, 10, 1000, False)
"""


def test_the_table_says_unreachable_where_the_curve_never_reaches_the_target():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string(_PAGE, default_timeout=60)
    at.query_params["target"] = "0.8"
    at.run()
    assert not at.exception
    cells = dict(zip(at.dataframe[0].value["Method"], at.dataframe[0].value["Smallest ε"]))
    assert cells["DP-SGD"] == "not by ε = 100 (best 0.60)", cells
    assert not cells["Model sensitivity"].startswith(("not by", "above", ">")), cells
    at.number_input(key="w:target").set_value(0.95).run()  # above the non-private model's 0.92
    cells = at.dataframe[0].value["Smallest ε"].tolist()
    assert cells == ["above non-private (0.92)"] * 2, cells
