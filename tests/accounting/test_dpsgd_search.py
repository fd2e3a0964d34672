"""DP-SGD calibration from an approximate start (issue 16 / 14: fewer replace-one PLD evaluations).

``dpsgd_noise_multiplier`` starts its verified search at privcore/accounting/pld_approx.py's
estimate. Checked here: the returned multiplier meets the target by an independent accountant
(a fresh ``PLDAccountant`` on a finer grid) and 1 % less noise does not; it agrees with the old
start (CLT guess + coarse-grid pass, still the fallback) within the search tolerance; it needs
far fewer accountant evaluations (counted); and a wrong start (the approximation off by a
factor of two either way, or failing) still gives a verified multiplier: the guarantee comes from
the PLD check, never from the approximation.
"""

from __future__ import annotations

import math

import pytest

from privcore.accounting import dpsgd

from test_dpsgd_replace_one import reference_epsilon  # tests/accounting is on sys.path (rootdir import)

CASES = [(0.064, 79, 3.0), (0.064, 79, 0.5), (0.01, 300, 1.0), (0.5, 10, 8.0), (0.002, 500, 2.0), (0.2, 1, 1.0)]


@pytest.fixture
def counted(monkeypatch, accountant_calls):
    """A fresh, counting memo around the accountant; the result memo cleared before and after."""
    monkeypatch.setenv("PRIVCORE_CALIBRATION_MEMO", "off")  # count the accountant, not the on-disk memo
    return accountant_calls


def _ref(z: float, q: float, k: int, eps: float) -> float:
    return reference_epsilon(z, q, k, 1e-5, eps * 2e-3 / math.sqrt(k))


@pytest.mark.parametrize("q, k, eps", CASES)
def test_meets_target_is_tight_and_needs_few_evaluations(counted, monkeypatch, q, k, eps):
    z = dpsgd.dpsgd_noise_multiplier(eps, 1e-5, q, k)
    new_calls = len(counted)
    assert _ref(z, q, k, eps) <= eps  # independent accountant, finer grid
    assert _ref(z * 0.99, q, k, eps) > eps  # 1 % less noise fails: tight
    # The old start (CLT guess + coarse pass): same answer to the search tolerance, more calls.
    monkeypatch.setattr(dpsgd, "_approx_start", lambda *a: None)
    dpsgd.dpsgd_noise_multiplier.cache_clear()
    counted.clear()
    z_old = dpsgd.dpsgd_noise_multiplier(eps, 1e-5, q, k)
    assert abs(z / z_old - 1) <= 1.001e-3
    assert new_calls <= 3 and new_calls * 2 < len(counted), (new_calls, len(counted))


@pytest.mark.parametrize("factor", [0.5, 2.0, None])
def test_a_wrong_start_still_gives_a_verified_multiplier(counted, monkeypatch, factor):
    q, k, eps = 0.064, 79, 2.0
    good = dpsgd._approx_start(eps, 1e-5, q, k, 1.0)
    assert good is not None
    if factor is None:  # the approximation fails: the old path
        monkeypatch.setattr(dpsgd, "_approx_start", lambda *a: None)
    else:  # the approximation is off by 2x: the bracket search moves until the PLD agrees
        monkeypatch.setattr(dpsgd, "_approx_start", lambda *a: (good[0] * factor, good[1]))
    z = dpsgd.dpsgd_noise_multiplier(eps, 1e-5, q, k)
    assert dpsgd._pld_epsilon.__wrapped__(z, q, k, 1e-5, "replace_one", dpsgd.pld_interval(eps, k, z, q)) <= eps
    assert _ref(z, q, k, eps) <= eps and _ref(z * 0.99, q, k, eps) > eps
    assert abs(z / good[0] - 1) < 0.005  # lands on the same root


def test_tight_grid_keeps_its_answer(counted):
    q, k, eps = 0.064, 79, 1.0
    z = dpsgd.dpsgd_noise_multiplier(eps, 1e-5, q, k, grid="fine")
    assert _ref(z, q, k, eps) <= eps and _ref(z * 0.99, q, k, eps) > eps
    assert z <= dpsgd.dpsgd_noise_multiplier(eps, 1e-5, q, k) * (1 + 1e-12)


@pytest.mark.parametrize("grid, relation, start", [("moderate", "replace_one", "approx"), ("fine", "replace_one", "approx"),
                                                   ("moderate", "replace_one", "none"), ("moderate", "add_remove", "none"),
                                                   ("moderate", "replace_one", "far")])
def test_the_returned_multiplier_is_one_the_accountant_accepted(monkeypatch, grid, relation, start):
    """Review, s4: whatever the path (approximate start, a far-off one, none, the fine grid, either
    relation), the z returned is exactly a point the pessimistic PLD evaluated, with epsilon <= target."""
    monkeypatch.setenv("PRIVCORE_CALIBRATION_MEMO", "off")
    seen: dict[float, float] = {}
    raw = dpsgd._pld_epsilon.__wrapped__

    def record(sigma, q, steps, delta, rel, interval):
        e = raw(sigma, q, steps, delta, rel, interval)
        assert rel == relation  # the relation asked for, never another
        seen[sigma] = min(e, seen.get(sigma, float("inf")))  # any pessimistic grid is an upper bound
        return e

    monkeypatch.setattr(dpsgd, "_pld_epsilon", record)
    if start == "none":
        monkeypatch.setattr(dpsgd, "_approx_start", lambda *a: None)
    elif start == "far":
        monkeypatch.setattr(dpsgd, "_approx_start", lambda *a: (40.0, -1.0))
    dpsgd.dpsgd_noise_multiplier.cache_clear()
    try:
        z = dpsgd.dpsgd_noise_multiplier(0.7, 1e-5, 0.05, 60, relation=relation, grid=grid)
    finally:
        dpsgd.dpsgd_noise_multiplier.cache_clear()
    assert z in seen, "returned a multiplier the accountant never evaluated"
    assert seen[z] <= 0.7
    # The check can fail: a point just below z (what an interpolating search might return) was not evaluated.
    assert z * (1 - 1e-9) not in seen
