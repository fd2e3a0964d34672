"""The Measured leakage page's time estimate prices what the run does (privcore/leakage/cost.py, sizes.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from privcore.engine import cost
from privcore.engine.specs import DataSpec
from privcore.leakage import LeakageSpec, run_leakage
from privcore.leakage.cost import estimate_seconds
from privcore.leakage.sizes import MAX_AUDIT_ANSWERS, MAX_OBSERVED, observed
from privcore.methods import get_method
from privcore.methods.base import teacher_part

MNIST = cost.DataSizes(4000, 784, 10, 1000)
@pytest.fixture(autouse=True)
def no_load_factor(monkeypatch):
    monkeypatch.setenv("PRIVCORE_SLOWDOWN", "1")  # seconds of one idle thread, whatever the machine's load


BASE = dict(data=DataSpec(name="mnist-5k"), epsilon=3.0, delta=1e-5, budget=10, teachers=16, references=16,
            canaries=32, worlds=2, repeats=4, audit_trials=512)


def test_observed_caps_releases_rows_and_trials():
    assert observed(False, False, 10, 10, 4032, 32, 4, 512) == observed(False, False, 1, 10, 4032, 32, 4, 512)
    assert observed(False, False, 10, 10, 4032, 32, 4, 512).repeats == 4               # models: no caps
    assert observed(False, True, 10, 10, 4032, 32, 4, 512).repeats == 1                # deterministic
    small = observed(True, False, 10, 10, 4032, 32, 4, 512)
    assert (small.repeats, small.targets, small.trials) == (4, None, 512)
    big = observed(True, False, 2000, 10, 4032, 32, 4, 512)                             # B = 2,000
    assert big.repeats == 1 and big.targets == MAX_OBSERVED // (2000 * 10) and big.trials == MAX_AUDIT_ANSWERS // 2000
    tiny = observed(True, False, 100_000, 10, 4032, 32, 4, 512)
    assert tiny.targets == 64 + 32 and tiny.trials == 8                                 # the floors


def test_the_run_observes_what_the_estimate_prices():
    # A large B makes the run cap its releases, rows and trials: its notes say the numbers observed() gives.
    spec = LeakageSpec(method="prediction_sensitivity", data=DataSpec(name="digits", n=200, dim=16, augment=False),
                       epsilon=3.0, delta=1e-5, budget=4000, references=4, canaries=8, worlds=1, repeats=2,
                       audit_trials=32, accounting="corrected")
    r = run_leakage(spec, use_cache=False)
    population = 200 + 8
    want = observed(True, False, 4000, 10, population, 8, 2, 32)
    notes = " ".join(r.notes)
    assert f"{want.targets:,} of {population:,} rows attacked" in notes
    assert f"audit trials capped at {want.trials}" in notes


def test_a_one_row_audit_is_priced_per_vote_not_per_test_set():
    # Private-kNN's audit answers one query per vote: priced as a test set per vote it was 2.4x the
    # measured time of the whole measurement (219.6 s against 91.0 CPU-s on mnist-5k, one thread).
    knn = get_method("private_knn")
    part = next(p for p in knn.cost_parts(replace_problem(), 1, 1) if p.kind == "knn")
    assert part.query_share is not None and 0.9 < part.query_share < 1.0
    k = cost.coefficients()
    spec = LeakageSpec(method="private_knn", **BASE)
    audit_only = estimate_seconds([spec], MNIST, coeffs={**k, "knn": 0.0})
    total = estimate_seconds([spec], MNIST, coeffs=k)
    world_votes = 2 * 4 * (10 * ((1 - part.query_share) + part.query_share * 4032 / 1000)) + 4   # + the accuracy
    audit_votes = 2 * 512 * 10 * ((1 - part.query_share) + part.query_share / 1000)
    per_vote = k["knn"] * part.work                                                   # one test-set answer
    assert total - audit_only == pytest.approx(per_vote * (world_votes + audit_votes), rel=1e-9)
    assert audit_votes < 0.25 * 2 * 512 * 10                                         # not a test set per vote


def test_reference_ensembles_are_priced_per_ensemble():
    # 16 ensembles of 16 teachers were priced as one ensemble of 256 (13.5 s; measured 1.6 s).
    spec = LeakageSpec(method="subsample_aggregate", **BASE)
    k = cost.coefficients()
    with_refs = estimate_seconds([spec], MNIST, coeffs=k)
    fewer = estimate_seconds([replace(spec, references=8)], MNIST, coeffs=k)
    problem = spec.problem((4000 + 32) // 2, 784, 10)
    assert with_refs - fewer == pytest.approx(8 * k["teachers"] * teacher_part(problem).work, rel=1e-9)


def replace_problem():
    return LeakageSpec(method="private_knn", **BASE).problem(2016, 784, 10)



def test_what_an_earlier_measurement_built_is_not_priced_again():
    # The page measures the quick methods first, then estimates the rest: the worlds, audit data sets
    # and reference models the first part built are kept by the process and cost nothing the second time.
    from privcore.leakage import run as leakage_run

    digits = dict(data=DataSpec(name="digits", n=200, dim=16, augment=False), epsilon=3.0, delta=1e-5, budget=5,
                  teachers=4, batch_size=32, epochs=2, references=4, canaries=8, worlds=2, repeats=2,
                  audit_trials=16, accounting="corrected", seed=911)
    sizes = cost.DataSizes(1000, 16, 10, 797)
    first, later = LeakageSpec(method="model_sensitivity", **digits), LeakageSpec(method="loss_perturbation", **digits)
    leakage_run.forget([leakage_run.load_dataset("digits", seed=911, **digits["data"].load_kwargs()).fingerprint])
    cold = estimate_seconds([later], sizes)
    run_leakage(first, use_cache=False)
    built = leakage_run.warm_pieces(later)
    assert {("world", 0), ("world", 1), ("audit", True), ("audit", False), ("references", 1e-3, 1)} <= built, built
    warm = estimate_seconds([later], sizes)
    assert warm < cold
    leakage_run.forget([leakage_run.load_dataset("digits", seed=911, **digits["data"].load_kwargs()).fingerprint])
    assert estimate_seconds([later], sizes) == pytest.approx(cold)


def test_the_estimate_prices_the_n_the_spec_loads():
    """The estimate used the raw data set's N whatever the spec asked: a walk-through saw "about 86 s" at
    N = 20,000 (augmented) as at 4,000, and a subsample of 1,000 was priced as 4,000."""
    k = cost.coefficients()
    at = {n: estimate_seconds([LeakageSpec(method="model_sensitivity", **{**BASE, "data": DataSpec(
        name="mnist-5k", n=n, augment=n > 4000)})], MNIST, coeffs=k) for n in (1000, 4000, 20000)}
    assert at[1000] < at[4000] < at[20000]
    full = estimate_seconds([LeakageSpec(method="model_sensitivity", **BASE)], MNIST, coeffs=k)
    assert full == at[4000]  # N unset is the whole training split
    spec = LeakageSpec(method="model_sensitivity", **{**BASE, "data": DataSpec(name="mnist-5k", classes=2)})
    assert estimate_seconds([spec], MNIST, coeffs=k) < full  # a class filter keeps fewer rows
