"""The progress fraction of a sweep: the share of its predicted work done, inside units too.

:func:`privcore.engine.runner.run_sweep` reports a fraction that a progress bar draws and that
:func:`privcore.engine.cost.eta` turns into an ETA. The ETA is only as good as that fraction: when
it lags the true share of the work, the ETA runs long late in a run (2.5x was seen). The fraction
here is the share of the cost model's predicted seconds (:mod:`privcore.engine.cost`) done:

* a finished unit counts its predicted seconds (a job found in the cache counts at once);
* inside a unit that says nothing of its progress (a batched solve), the unit's predicted seconds
  stretched by the *pace* of the units before it (seconds taken per predicted second, once a
  tenth of the work is done), short of the end (95 %): a machine twice as slow as predicted no
  longer fills the unit at half time and then stalls;
* a loop that reports its own fraction (DP-SGD's steps) covers what is left of the unit when it
  starts: the accountant's import and calibration before it are not thrown back to zero;
* it never goes backwards.

Without predicted seconds (no cost model) every job weighs 1 and the fraction moves only between
units, as before.

:class:`RunProgress` is a run's reporter: the runner, the executor and the unit's inner loops call it
(between units, while waiting for a cluster, at every solver iteration or DP-SGD step), so none of them
calls back into the runner.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from ..jobs import JobCancelled, ProgressFn

__all__ = ["WorkProgress", "RunProgress", "job_weights", "STALL_SHARE", "PACE_RANGE", "CLOCK", "REPORT_S"]

#: A unit's share that the clock alone may fill (the rest comes when it ends).
STALL_SHARE = 0.95
#: Bounds of the pace (seconds per predicted second) applied inside a unit.
PACE_RANGE = (0.5, 3.0)
#: The clock of a run (wall seconds). bench/bench_cold_updates.py --cpu sets ``time.process_time``
#: to time a run in CPU seconds, a quiet machine's wall time measured on a loaded one.
CLOCK: Callable[[], float] = time.perf_counter


class WorkProgress:
    """Share of ``total`` predicted work done. ``timed``: the weights are predicted seconds (the
    clock may then move the fraction inside a unit). ``clock``: seconds (tests pass a fake one)."""

    def __init__(self, total: float, *, timed: bool, clock: Callable[[], float] | None = None) -> None:
        self.total = max(float(total), 1e-9)
        self.timed = timed
        self.clock = clock or CLOCK
        self.start = self.clock()
        self.done = 0.0
        self.weight = 1.0
        self.pace = 1.0
        self._unit_start = self.start
        self._base: float | None = None
        self._high = 0.0

    def finish(self, weight: float) -> None:
        """A unit (or a cached job) of ``weight`` is done."""
        self.done += weight
        self._high = 0.0

    def start_unit(self, weight: float) -> None:
        """A unit of ``weight`` starts now."""
        self.weight = weight
        if self.timed and self.done > 0.1 * self.total:
            lo, hi = PACE_RANGE
            self.pace = min(max((self.clock() - self.start) / self.done, lo), hi)
        self._unit_start = self.clock()
        self._base, self._high = None, 0.0

    def between(self) -> float:
        """The fraction between units."""
        return min(self.done / self.total, 1.0)

    def inside(self, reported: float | None = None) -> float:
        """The fraction inside the current unit; ``reported``: the unit's own fraction, if it has one."""
        timed = (min(STALL_SHARE, (self.clock() - self._unit_start) / max(self.weight * self.pace, 1e-9))
                 if self.timed else 0.0)
        if reported is not None:
            if self._base is None:
                self._base = max(timed, self._high)
            within = self._base + (1.0 - self._base) * min(max(float(reported), 0.0), 1.0)
        else:
            within = timed
        self._high = max(within, self._high)
        return min((self.done + self._high * self.weight) / self.total, 1.0)


#: Seconds between two progress reports from inside a unit (a UI's bar is also where it can stop the run).
REPORT_S = 0.25


def job_weights(estimate: Any) -> dict[Any, float]:
    """Predicted seconds per job of an :class:`~privcore.engine.cost.Estimate`, the progress weights:
    the fraction is then the share of predicted work done, so an ETA drawn from it follows the model.
    A cached job still takes a moment (a floor of 2 % of the mean job). Empty when nothing is predicted."""
    if estimate is None or estimate.seconds <= 0:
        return {}
    floor = 0.02 * max(estimate.seconds, 1e-9) / max(len(estimate.jobs), 1)
    return {k: v + floor for k, v in estimate.jobs.items()}


class RunProgress:
    """The progress and cancel of one run, handed to everything that runs inside it.

    ``progress(fraction, message)`` and ``cancel()`` are the caller's (either may be None);
    ``weights``: job -> predicted seconds (:func:`job_weights`; empty: every job weighs 1). Raises
    :class:`~privcore.jobs.JobCancelled` with ``cancelled`` as its message when ``cancel()`` is true."""

    def __init__(self, progress: ProgressFn | None, cancel: Callable[[], bool] | None,
                 cancelled: str = "sweep cancelled; finished points are cached") -> None:
        self.progress, self.cancel, self.cancelled = progress, cancel, cancelled
        self.weights: Mapping[Any, float] = {}
        self.work = WorkProgress(1, timed=False)
        self.message = ""  # the message of the unit under way
        self._last = time.perf_counter()

    def weigh(self, weights: Mapping[Any, float], jobs: int) -> None:
        """Start counting the run's ``jobs`` jobs with these ``weights``."""
        self.weights = weights
        self.work = WorkProgress(sum(weights.values()) if weights else jobs, timed=bool(weights))

    def weight(self, job: Any) -> float:
        return self.weights.get(job, 0.0) if self.weights else 1.0

    def start(self, job: Any) -> None:
        """The unit of ``job`` starts now."""
        self.work.start_unit(self.weight(job))

    def finish(self, job: Any) -> None:
        """``job`` is done (its unit came back, or the cache held it)."""
        self.work.finish(self.weight(job))

    def check(self) -> None:
        """Raise :class:`~privcore.jobs.JobCancelled` when the run was cancelled."""
        if self.cancel is not None and self.cancel():
            raise JobCancelled(self.cancelled)

    def loading(self, message: str) -> None:
        """Before the work is counted (the plan loading data): fraction 0."""
        if self.progress is not None:
            self.progress(0.0, message)
        self.check()

    def tick(self, message: str) -> None:
        """Between units: report the fraction done with the next unit's ``message``."""
        self.message = message
        if self.progress is not None:
            self.progress(self.work.between(), message)
            self._last = time.perf_counter()
        self.check()

    def __call__(self, fraction: float | None) -> None:
        """Inside a unit (every solver iteration, every DP-SGD step; ``fraction``: the unit's own,
        or None) or while waiting for a cluster: cancel at once, report at most every :data:`REPORT_S`."""
        if self.progress is not None and time.perf_counter() - self._last >= REPORT_S:
            self.progress(self.work.inside(fraction), self.message)
            self._last = time.perf_counter()
        self.check()

    def note(self, message: str) -> None:
        """The message of the next report (an executor's, a cache's wait)."""
        self.message = message

    def done(self) -> None:
        if self.progress is not None:
            self.progress(1.0, "done")
