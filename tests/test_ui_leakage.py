"""ui/leakage.py: the per-method table reads honestly. An audit whose trials saw no false positive has an
infinite plug-in estimate for any method; it is said in words, never shown as 'estimate ∞' beside a claim."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

pytest.importorskip("pandas")
from privcore.leakage.stats import EpsilonBound  # noqa: E402
from ui.leakage import leakage_table, no_estimate_note  # noqa: E402


def _result(method: str, epsilon: float, fp: int, fn: int, n: int = 32):  # noqa: ANN202
    from privcore.leakage.stats import epsilon_from_rates

    bound = EpsilonBound(lower=0.0, estimate=epsilon_from_rates(fp / n, fn / n, 1e-5), upper=math.inf,
                         confidence=0.95, threshold=0.5, fpr=fp / n, fnr=fn / n, n_in=n, n_out=n, n_select=n,
                         delta=1e-5)

    def attack(name: str):  # noqa: ANN202
        raise KeyError(name)

    return SimpleNamespace(method=method, accuracy=0.8, epsilon=epsilon, audit=bound, attack=attack, cached=True,
                           seconds=0.0)


def test_zero_false_positives_give_no_infinite_estimate():
    results = [_result("dpsgd", 3.0, fp=0, fn=20), _result("model_sensitivity", 3.0, fp=8, fn=20),
               _result("non_private", math.inf, fp=0, fn=2)]
    table = leakage_table(results)
    assert list(table["Measured ε ≥ (95 %)"]) == [0.0, 0.0, 0.0]  # the bound: a number
    estimates = list(table["ε estimate"])
    assert estimates[0] == "none" and estimates[2] == "none" and not any("∞" in e for e in estimates), estimates
    assert float(estimates[1]) > 0, estimates
    # why there is none is said below the table, not in a cell (cut off at 800 and 1,400 px)
    assert no_estimate_note(results) == ("No point estimate of ε where an error rate was 0 in the audit's trials: "
                                         "DP-SGD, no false positive in 32 trials; Non-private (no noise), no false "
                                         "positive in 32 trials.")
    assert no_estimate_note(results[1:2]) == ""
    claimed = list(table["Claimed ε"])
    assert claimed == ["3", "3", "none (∞)"], claimed  # short enough for the column


def test_leakage_table_cells_are_short_and_the_method_is_pinned():
    """Every cell is one short value (a phrase in a cell was cut off); long explanations are hover help."""
    pytest.importorskip("streamlit")
    from ui.leakage import LEAKAGE_HEADERS, leakage_table_config

    table = leakage_table([_result("dpsgd", 3.0, fp=0, fn=20), _result("non_private", math.inf, fp=0, fn=2)])
    cells = [str(v) for c in table.columns if c != "Method" for v in table[c]]
    assert max(len(v) for v in cells) <= 9, cells
    config = leakage_table_config(table.columns)
    assert config["Method"]["pinned"] is True
    assert config["Measured ε ≥ (95 %)"]["label"] == "Measured ε ≥" and "95 %" in config["Measured ε ≥ (95 %)"]["help"]
    assert all(config[c].get("help") for c in table.columns if c != "Method")
    assert all(len(LEAKAGE_HEADERS[c][0]) <= 15 for c in LEAKAGE_HEADERS)
