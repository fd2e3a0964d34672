"""One plan per sweep (issue 31): the estimate, the run, read_cached and the units read the same plan."""

from __future__ import annotations

import dataclasses

import pytest

from privcore.engine import cost
from privcore.engine.cache import ResultCache
from privcore.engine.executor import LocalExecutor
from privcore.engine.plan import make_plan
from privcore.engine.runner import read_cached, run_sweep
from privcore.engine.specs import DataSpec, SweepSpec

SPEC = SweepSpec(data=DataSpec(name="digits", n=400), methods=("model_sensitivity", "subsample_aggregate"),
                 epsilons=(1.0, 4.0), delta=0.0, repeats=2, teachers=4, device="cpu", vary="budget", values=(5, 20))


class Recording(LocalExecutor):
    def __init__(self) -> None:
        self.units = []

    def run(self, units, work, poll, note):
        for unit in units:
            self.units.append(unit)
            yield work(unit, poll)


def _numbers(result):
    return [{k: v for k, v in r.to_dict().items() if k not in ("seconds", "cached")} for r in result.rows]


def test_a_plan_names_every_point_once_and_the_run_follows_it(tmp_path):
    store = ResultCache(tmp_path / "c")
    plan = make_plan(SPEC, store)
    assert plan.cache is store and plan.complete and not plan.all_cached()
    by_job = {(j.variant, j.method): j for j in plan.jobs}
    # model sensitivity ignores B: the second variant's points are the first's, computed once
    assert by_job[(1, "model_sensitivity")].keys == by_job[(0, "model_sensitivity")].keys
    assert by_job[(1, "model_sensitivity")].shared == [0, 1] and not by_job[(1, "model_sensitivity")].missing
    assert by_job[(1, "subsample_aggregate")].missing == [0, 1]  # subsample-and-aggregate depends on B
    estimate = cost.estimate_plan(plan)
    assert cost.estimate_plan(plan) is estimate  # made once: the page's estimate is the run's weights
    rec = Recording()
    result = run_sweep(SPEC, plan=plan, executor=rec, progress=lambda f, m: None)
    # units carry their points and keys: one per job with misses, in the plan's order
    assert [(u.method, u.keys) for u in rec.units] == [(j.method, tuple(j.keys[i] for i in j.missing))
                                                       for j in plan.jobs if j.missing]
    again = read_cached(SPEC, store)
    assert again is not None and _numbers(again) == _numbers(result)
    assert make_plan(SPEC, store).all_cached() and cost.estimate_spec(SPEC, store).seconds == 0.0


def test_a_plan_of_another_spec_is_refused_and_of_another_cache_made_again(tmp_path):
    a, b = ResultCache(tmp_path / "a"), ResultCache(tmp_path / "b")
    with pytest.raises(ValueError, match="plan must be"):
        run_sweep(dataclasses.replace(SPEC, seed=9), plan=make_plan(SPEC, a), cache=a)
    run_sweep(SPEC, cache=a)
    stale = make_plan(SPEC, a)  # everything cached in a, nothing in b
    result = run_sweep(SPEC, cache=b, plan=stale)
    assert result.computed > 0 and b.keys()  # planned again against b: computed and stored there
