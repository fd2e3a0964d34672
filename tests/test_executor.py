"""The executor seam without Dask: a unit is refused where the data or the code differ from the driver's."""

from __future__ import annotations

import dataclasses

import pytest

from privcore.engine import context
from privcore.engine.cache import SCHEMA_VERSION, ResultCache, point_key
from privcore.engine.executor import ClusterError, Executor, LocalExecutor, WorkUnit
from privcore.engine.runner import execute_unit, run_sweep
from privcore.engine.specs import DataSpec, SweepSpec

SPEC = SweepSpec(data=DataSpec(name="digits"), methods=("model_sensitivity",), epsilons=(1.0, 10.0), repeats=2,
                 device="cpu", baseline=False)


class Recording(Executor):
    """The local executor, keeping the units it was given."""

    def __init__(self) -> None:
        self.units: list[WorkUnit] = []

    def run(self, units, work, poll, note):
        for unit in units:
            self.units.append(unit)
            yield work(unit, poll)


def test_units_are_plain_and_a_worker_with_other_data_or_code_refuses_them(tmp_path):
    rec = Recording()
    result = run_sweep(SPEC, cache=ResultCache(tmp_path / "c"), executor=rec)
    assert len(rec.units) == 1 and rec.units[0].epsilons == (1.0, 10.0)  # one batch: both epsilons
    unit = rec.units[0]
    outcome = execute_unit(unit)
    assert [k for k, _ in outcome.results] == [point_key(p, unit.fingerprint) for p in unit.points]
    stored = ResultCache(tmp_path / "c")
    assert result.computed == 2
    assert [v["accuracies"] for _, v in outcome.results] == [stored.get(k)["accuracies"] for k, _ in outcome.results]
    assert unit.keys == tuple(k for k, _ in outcome.results)  # the unit carries its keys: the worker plans nothing
    for bad, why in ((dataclasses.replace(unit, fingerprint="0" * 64), "data set loaded here differs"),
                     (dataclasses.replace(unit, problem=dataclasses.replace(unit.problem, n=unit.problem.n - 1)),
                      "data set loaded here differs"),
                     (dataclasses.replace(unit, schema=SCHEMA_VERSION + 1), "cache schema"),
                     (dataclasses.replace(unit, points=({**unit.points[0], "repeats": 3}, unit.points[1])),
                      "describes the points differently")):
        with pytest.raises(ClusterError, match=why):
            execute_unit(bad)


@pytest.mark.slow
def test_the_default_executor_is_the_local_one(tmp_path):
    a = run_sweep(SPEC, cache=ResultCache(tmp_path / "a"))
    context.clear()
    b = run_sweep(SPEC, cache=ResultCache(tmp_path / "b"), executor=LocalExecutor())
    strip = lambda res: [{k: v for k, v in r.items() if k != "seconds"} for r in res.rows]  # noqa: E731
    assert strip(a) == strip(b) and a.device == b.device == "cpu"


@pytest.mark.parametrize("content, fragment", [(None, "does not exist"), ("{not json", "not valid JSON"),
                                               ('{"id": 1}', "holds no scheduler address")])
def test_a_missing_or_bad_scheduler_file_is_refused_at_once(tmp_path, content, fragment):
    # Once: distributed polled for a missing file forever, and a bad one ended in UnboundLocalError.
    import signal

    pytest.importorskip("distributed")
    from privcore.engine.executor import DaskExecutor

    path = tmp_path / "scheduler.json"
    if content is not None:
        path.write_text(content)

    def stop(*_):
        raise TimeoutError("the client kept waiting for the scheduler file")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(10)
    try:
        with pytest.raises(ValueError, match=fragment) as info:
            DaskExecutor(scheduler=str(path)).client
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert str(tmp_path) not in str(info.value) and "'scheduler.json'" in str(info.value)


def test_a_result_lost_with_its_worker_after_it_finished_waits_for_its_recomputation():
    # Once: a unit finished, then its worker died before the result was fetched; fetching it timed out
    # and the sweep failed with a bare TimeoutError instead of waiting (or saying that no worker is left).
    pytest.importorskip("distributed")
    from privcore.engine.executor import DaskExecutor

    class Lost:  # a future the scheduler reports done whose result went with its worker
        status = "finished"

        def done(self):
            return True

        def result(self, timeout=None):
            raise TimeoutError(f"timed out after {timeout} s.")

    fut, unit = Lost(), object()
    pending = {fut: unit}
    executor = DaskExecutor.__new__(DaskExecutor)
    executor.worker_wait = 0.01
    assert list(executor._collect(pending, None, 0, 1)) == []
    assert pending == {fut: unit}  # still waited for: the run's watch decides whether any worker is left
