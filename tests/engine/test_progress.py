"""privcore/engine/progress.py: the progress fraction behind the dashboard's ETA (issue 14, point 2)."""

from __future__ import annotations

import pytest

from privcore.engine import cost
from privcore.engine.progress import STALL_SHARE, WorkProgress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def lagging_run(clock: Clock):  # generator of (elapsed, fraction, true seconds left)
    """A run predicted at 9 s that takes 12 s: unit A (3 s predicted) takes 4 s; unit B (6 s
    predicted) spends 2 s on imports and calibration, then 6 s in a loop that reports its own
    fraction (DP-SGD's steps). Yields the tracker's fraction every 0.25 s."""
    work = WorkProgress(9.0, timed=True, clock=clock)
    work.start_unit(3.0)
    while clock.t < 4.0:
        yield clock.t, work.inside(None), 12.0 - clock.t
        clock.t += 0.25
    work.finish(3.0)
    work.start_unit(6.0)
    while clock.t < 6.0:
        yield clock.t, work.inside(None), 12.0 - clock.t
        clock.t += 0.25
    while clock.t < 12.0:
        yield clock.t, work.inside((clock.t - 6.0) / 6.0), 12.0 - clock.t
        clock.t += 0.25
    work.finish(6.0)
    yield clock.t, work.between(), 0.0


def test_the_eta_of_a_lagging_run_stays_within_a_factor_1_5():
    trace = list(lagging_run(Clock()))
    fractions = [f for _, f, _ in trace]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0  # never backwards
    for share in (0.1, 0.25, 0.5, 0.75):
        elapsed, f, left = [(e, f, left) for e, f, left in trace if e <= share * 12.0][-1]
        assert 1 / 1.5 <= cost.eta(9.0, f, elapsed) / left <= 1.5, (share, f)
    # Before: unit B's loop fraction counted from zero (the clock filled units at the predicted
    # speed), and the ETA trusted the observed speed at twice the share done. On the same run its
    # ETA ran 1.67x long at half time.
    old_f = (3.0 + 0.0 * 6.0) / 9.0
    speed, trust = 6.0 / (9.0 * old_f), min(1.0, 2.0 * old_f)
    assert 9.0 * (1 - old_f) * ((1 - trust) + trust * speed) / 6.0 > 1.5
    assert cost.eta(9.0, old_f, 6.0) / 6.0 < 1.5  # the lagging fraction alone, with today's trust


def test_inside_a_silent_unit_the_clock_follows_the_pace_of_the_units_before():
    clock = Clock()
    work = WorkProgress(10.0, timed=True, clock=clock)
    work.start_unit(4.0)
    clock.t = 2.0
    assert work.inside() == pytest.approx(0.2)                  # half of a unit of 4 predicted seconds
    clock.t = 8.0
    assert work.inside() == pytest.approx(STALL_SHARE * 0.4)    # never the whole unit before it ends
    work.finish(4.0)                                            # it took 8 s: twice as slow as predicted
    work.start_unit(6.0)
    assert work.pace == pytest.approx(2.0)
    clock.t = 14.0                                              # 6 s into 6 predicted seconds at pace 2
    assert work.inside() == pytest.approx((4.0 + 0.5 * 6.0) / 10.0)


def test_without_predicted_seconds_the_fraction_moves_between_units_only():
    clock = Clock()
    work = WorkProgress(3, timed=False, clock=clock)
    work.start_unit(1.0)
    clock.t = 100.0
    assert work.inside() == 0.0
    assert work.inside(0.5) == pytest.approx(0.5 / 3)           # a loop's own fraction still counts
    work.finish(1.0)
    assert work.between() == pytest.approx(1 / 3)


def test_the_runs_reporter_weighs_by_the_estimate_and_stops_on_cancel():
    from privcore.engine.cost import Estimate
    from privcore.engine.progress import RunProgress, job_weights
    from privcore.jobs import JobCancelled

    est = Estimate(3.0, {(0, "a"): 3.0, (0, "b"): 0.0})
    floor = 0.02 * 3.0 / 2                                       # a cached job still takes a moment
    assert job_weights(est) == {(0, "a"): 3.0 + floor, (0, "b"): floor}
    assert job_weights(Estimate(0.0, {(0, "a"): 0.0})) == {} and job_weights(None) == {}
    seen, stop = [], [False]
    report = RunProgress(lambda f, m: seen.append((f, m)), lambda: stop[0], cancelled="stopped here")
    report.weigh(job_weights(est), 2)
    report.tick("b")
    report.finish((0, "b"))
    report.tick("a")
    report.start((0, "a"))
    assert seen == [(0.0, "b"), (pytest.approx(floor / (3.0 + 2 * floor)), "a")]
    stop[0] = True
    with pytest.raises(JobCancelled, match="stopped here"):
        report(0.5)                                              # inside a unit: cancel at once
    unweighted = RunProgress(None, None)
    unweighted.weigh({}, 4)
    unweighted.finish((0, "x"))
    assert unweighted.work.between() == pytest.approx(0.25)      # without weights every job weighs 1
