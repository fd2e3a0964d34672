"""lam = "auto" is a private selection paid for out of the row's epsilon (privcore.engine.tuning)."""

from __future__ import annotations


import pytest

from privcore.engine import tuning
from privcore.engine.cache import ResultCache
from privcore.engine.runner import run_sweep
from privcore.engine.specs import LAM_AUTO_GRID, DataSpec, SweepSpec
from privcore.methods import REGISTRY
from privcore.types import PrivacyBudget, Problem


def _spec(method: str, eps: float, delta: float = 0.0) -> SweepSpec:
    return SweepSpec(data=DataSpec(name="digits"), methods=(method,), epsilons=(eps,), delta=delta, lam="auto",
                     repeats=2, budget=10, teachers=8, batch_size=64, epochs=1, seed=3, baseline=False)


def test_budget_split_composes_to_the_total():
    b = PrivacyBudget(2.0, 1e-5)
    rel, sel = tuning.release_budget(b), tuning.selection_budget(b, len(LAM_AUTO_GRID))
    # k candidate releases (basic composition) + the final release = the row's budget
    assert rel.epsilon + len(LAM_AUTO_GRID) * sel.epsilon == pytest.approx(b.epsilon, rel=1e-12)
    assert rel.delta + len(LAM_AUTO_GRID) * sel.delta == pytest.approx(b.delta, rel=1e-12)
    assert rel.epsilon < b.epsilon  # the release never gets the whole budget


@pytest.mark.parametrize("method,delta", [("model_sensitivity", 0.0), ("prediction_sensitivity", 1e-5)])
def test_auto_row_is_calibrated_at_the_release_share(tmp_path, method, delta):
    res = run_sweep(_spec(method, 4.0, delta), cache=ResultCache(tmp_path))
    row = next(r for r in res.rows if r["method"] == method)
    assert row["epsilon"] == 4.0 and "chosen privately" in row["note"]
    problem = Problem(n=row["n"], dim=row["dim"], classes=row["classes"], lam=row["lam"], budget=10, teachers=8,
                      batch_size=64, epochs=1)
    want = REGISTRY[method].calibrate(tuning.release_budget(PrivacyBudget(4.0, delta)), problem)
    got = row["beta"] if delta == 0.0 else row["sigma"]
    assert got == pytest.approx(want.beta if delta == 0.0 else want.sigma, rel=1e-12)
    full = REGISTRY[method].calibrate(PrivacyBudget(4.0, delta), problem)
    # more noise than a release that had the whole budget: the selection was paid for
    assert (got < full.beta) if delta == 0.0 else (got > full.sigma)


def test_candidates_are_calibrated_for_the_selection_share(monkeypatch, tmp_path):
    seen = []
    m = REGISTRY["prediction_sensitivity"]
    original = type(m).calibrate

    def spy(self, budget, problem, accounting="corrected"):
        seen.append((budget, problem))
        return original(self, budget, problem, accounting)

    monkeypatch.setattr(type(m), "calibrate", spy)
    run_sweep(_spec("prediction_sensitivity", 1.0), cache=ResultCache(tmp_path))
    cands = [(b, p) for b, p in seen if b.epsilon < 0.9]
    assert len(cands) == len(LAM_AUTO_GRID)
    for b, p in cands:
        assert b.epsilon == pytest.approx(0.1 / len(LAM_AUTO_GRID))
        assert p.budget > 10  # a prediction method answers every validation query: B = |V|
    assert any(b.epsilon == pytest.approx(0.9) for b, _ in seen)


def test_noisy_max_picks_the_best_score_only_when_the_budget_allows(monkeypatch):
    import dataclasses

    import torch

    from privcore.data import load_dataset

    ds = load_dataset("digits", seed=3)
    m = REGISTRY["model_sensitivity"]
    best = 2

    def fake_evaluate(self, ctx, scales, repeats):  # candidate `best` scores 1, the others 0
        j = LAM_AUTO_GRID.index(ctx.problem.lam)
        return torch.full((len(scales), repeats), 1.0 if j == best else 0.0, dtype=torch.float64)

    monkeypatch.setattr(type(m), "evaluate", fake_evaluate)

    def mk(d, lam):
        return Problem(n=d.n, dim=d.dim, classes=d.classes, lam=lam, budget=10, teachers=8, batch_size=64, epochs=1)

    picks_large, picks_small = [], []
    for seed in range(12):
        spec = dataclasses.replace(_spec("model_sensitivity", 1.0), seed=seed)
        picks_large += tuning.choose_lams("model_sensitivity", ds, spec, [PrivacyBudget(1e4)], "cpu", mk)
        picks_small += tuning.choose_lams("model_sensitivity", ds, spec, [PrivacyBudget(1e-3)], "cpu", mk)
    # score gap 1 against Laplace(2 / (|V| eps_s)): |V| = 359, eps_s = 1e3 -> no error; eps_s = 1e-4 -> noise ~ 56
    assert all(p == LAM_AUTO_GRID[best] for p in picks_large)
    assert len(set(picks_small)) >= 3
