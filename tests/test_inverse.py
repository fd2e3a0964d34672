"""privcore/inverse.py: answered-only scoring, the smallest epsilon for a target accuracy, the risk line."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privcore.engine.rows import ResultRow
from privcore.inverse import epsilon_for_accuracy, max_true_positive_rate, risk_sentence, score_rows
from privcore.methods import BASELINE, REGISTRY

A, B = list(REGISTRY)[:2]  # any two private methods: the functions never look at names


def _row(method, eps, mean, std=0.0, **kw):
    return dict(method=method, epsilon=eps, accuracy_mean=mean, accuracy_std=std, **kw)


def test_first_crossing_interpolates_in_log_epsilon():
    rows = [_row(A, 0.1, 0.2), _row(A, 1.0, 0.6), _row(A, 10.0, 0.9)]
    (res,) = epsilon_for_accuracy(rows, 0.4)
    assert res.epsilon == pytest.approx(math.sqrt(0.1 * 1.0))  # halfway in log epsilon
    assert not res.at_smallest and res.eps_range == (0.1, 10.0)
    (res,) = epsilon_for_accuracy(rows, 0.9)
    assert res.epsilon == pytest.approx(10.0)
    (res,) = epsilon_for_accuracy(rows, 0.95)
    assert res.epsilon is None  # not reached within the sweep
    (res,) = epsilon_for_accuracy(rows, 0.1)
    assert res.epsilon == 0.1 and res.at_smallest


def test_band_brackets_the_mean_and_first_crossing_wins():
    rows = [_row(A, 1.0, 0.5, 0.1), _row(A, 2.0, 0.7, 0.1), _row(A, 4.0, 0.65, 0.1), _row(A, 8.0, 0.9, 0.1),
            _row(B, 1.0, 0.1), _row(BASELINE.name, math.inf, 0.95), _row(A, math.inf, 0.99)]
    res = {r.method: r for r in epsilon_for_accuracy(rows, 0.7)}
    assert set(res) == {A, B}  # the baseline and eps = inf rows are left out
    a = res[A]
    assert a.epsilon == pytest.approx(2.0)  # the first crossing, although the curve dips after it
    assert a.low <= a.epsilon <= a.high
    assert a.low == pytest.approx(2 ** 0.5) and a.high == pytest.approx(4.0 * (8.0 / 4.0) ** (0.15 / 0.25))
    assert res[B].epsilon is None and res[B].low is None


def test_rows_in_any_order_and_bad_target():
    rows = [_row(A, 10.0, 0.9), _row(A, 0.1, 0.2), _row(A, 1.0, 0.6)]
    assert epsilon_for_accuracy(rows, 0.6)[0].epsilon == pytest.approx(1.0)
    with pytest.raises(ValueError, match="target accuracy"):
        epsilon_for_accuracy(rows, 1.5)


def _result_row(method, among=None, among_std=None):
    return ResultRow(method=method, epsilon=1.0, delta=1e-5, budget=10, n=100, dim=2, classes=2, lam=0.1, teachers=5,
                     accounting="corrected", vary=None, value=None, accuracy_mean=0.4, accuracy_std=0.05, repeats=3,
                     seconds=0.0, device="cpu", cached=False,
                     extras={"answered_fraction": None if among is None else 0.5, "accuracy_answered": among,
                             "accuracy_answered_std": among_std})


def test_score_rows_default_counts_abstentions_as_wrong():
    rows = [_result_row(A, among=0.8, among_std=0.02), _result_row(B)]
    assert score_rows(rows) == rows
    got = score_rows(rows, answered_only=True)
    assert isinstance(got[0], ResultRow) and got[0].accuracy_mean == 0.8 and got[0].accuracy_std == 0.02
    assert got[0].answered_fraction == 0.5 and got[1] is rows[1]
    cached = score_rows([dict(_result_row(A, among=0.7).to_dict(), accuracy_answered_std=None)], True)[0]
    assert cached["accuracy_mean"] == 0.7 and cached["accuracy_std"] == 0.05  # no spread stored: the old one


def test_max_tpr_hand_checked():
    assert max_true_positive_rate(1.0, 0.0, 0.05) == pytest.approx(math.e * 0.05)
    assert max_true_positive_rate(0.0, 0.0, 0.05) == pytest.approx(0.05)  # no better than guessing
    # large eps: the complementary bound 1 - e^-eps (1 - delta - fpr) is the smaller one
    assert max_true_positive_rate(3.0, 1e-5, 0.05) == pytest.approx(1 - math.exp(-3.0) * (1 - 1e-5 - 0.05))
    assert max_true_positive_rate(50.0, 1e-5, 0.05) == pytest.approx(1.0)
    assert max_true_positive_rate(math.inf, 0.0, 0.05) == 1.0


def test_max_tpr_is_the_dp_region_by_direct_check():
    """Independent check: the bound is attained by randomised response's likelihood-ratio test at delta = 0."""
    eps = 0.7
    p = math.exp(eps) / (1 + math.exp(eps))  # randomised response: member says 1 w.p. p, non-member w.p. 1 - p
    fpr = 1 - p  # test "say member iff 1"
    assert max_true_positive_rate(eps, 0.0, fpr) == pytest.approx(p)


def test_risk_sentence():
    text = risk_sentence(1.0, 1e-5)
    assert "δ = 1e-5:" in text, text  # written as in the charts' titles, not Python's 1e-05
    assert "13.6%" in text and "5%" in text
    assert "∞" in risk_sentence(math.inf, 0.0)
    with pytest.raises(ValueError, match="false-positive rate"):
        risk_sentence(1.0, 0.0, 2.0)


@pytest.mark.parametrize("eps,delta", [(0.5, 0.01), (1.0, 1e-5), (3.0, 0.05)])
def test_max_tpr_is_the_exact_tradeoff_of_the_extremal_mechanism(eps, delta):
    """Independent check at delta > 0: the (eps, delta) mechanism of Kairouz, Oh and Viswanath (2015)
    (reveal with probability delta, else randomised response) has the Neyman-Pearson curve through
    (0, delta), ((1-delta)/(1+e^eps), delta + (1-delta) e^eps/(1+e^eps)), (1-delta, 1), (1, 1). The
    risk line must equal it everywhere: with the first bound alone (TPR <= e^eps FPR + delta) it is
    too high past the middle kink."""
    e = math.exp(eps)
    xs = [0.0, (1 - delta) / (1 + e), 1 - delta, 1.0]
    ys = [delta, delta + (1 - delta) * e / (1 + e), 1.0, 1.0]
    for fpr in [0.0, 0.01, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95, 1.0]:
        want = float(np.interp(fpr, xs, ys))
        assert max_true_positive_rate(eps, delta, fpr) == pytest.approx(want, abs=1e-12), fpr


@pytest.mark.parametrize("eps", [709.0, 710.0, 1e5, 2**70])
def test_a_large_epsilon_bounds_the_attacker_by_one_not_an_overflow(eps):
    # Once: OverflowError (math.exp(eps)) at eps >= 710, from the library and the Explore risk line.
    assert max_true_positive_rate(eps, 1e-5, 0.05) == 1.0
    assert max_true_positive_rate(eps, 1e-5, 0.0) == pytest.approx(1e-5)
    assert "catches at most 100.0%" in risk_sentence(eps, 1e-5)


def test_a_tiny_fpr_at_a_large_epsilon_is_still_bounded_by_one():
    # e^700 * 1e-300 = 1e4 > 1: the bound is 1 (a cap on epsilon would have given 0.1, too optimistic).
    assert max_true_positive_rate(700.0, 0.0, 1e-300) == 1.0


@pytest.mark.parametrize("row", [{}, {"method": "dpsgd", "epsilon": "x", "accuracy_mean": 0.5}, 3])
def test_a_malformed_row_is_refused_by_index(row):
    # Once: KeyError 'epsilon' / AttributeError.
    with pytest.raises(ValueError, match=r"rows\[1\] must be a result row"):
        epsilon_for_accuracy([{"method": "dpsgd", "epsilon": 1.0, "accuracy_mean": 0.5}, row], 0.5)
