"""ui/leakage.py: the per-method table reads honestly. An audit whose trials saw no false positive has an
infinite plug-in estimate for any method; it is said in words, never shown as 'estimate ∞' beside a claim."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

pytest.importorskip("pandas")
from privcore.leakage.stats import EpsilonBound  # noqa: E402
from ui.leakage import leakage_table  # noqa: E402


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
    table = leakage_table([_result("dpsgd", 3.0, fp=0, fn=20), _result("model_sensitivity", 3.0, fp=8, fn=20),
                           _result("non_private", math.inf, fp=0, fn=2)])
    measured = list(table["Measured ε ≥ (95 %)"])
    assert not any("∞" in m for m in measured), measured
    assert measured[0] == "0.00 (no point estimate: no false positive in 32 trials)", measured
    assert measured[1].startswith("0.00 (estimate ") and "∞" not in measured[1], measured
    claimed = list(table["Claimed ε"])
    assert claimed == ["3", "3", "none (∞)"], claimed  # short enough for the column
