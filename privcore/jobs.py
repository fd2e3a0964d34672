"""What every kind of job shares: a sweep, a leakage audit and a deep run are jobs of one protocol.

A job kind is a frozen spec with a ``key`` (its identity in the results cache) and ``to_json``, and a
runner ``run(spec, *, progress, cancel, cache, executor)`` that returns typed rows, reports
``progress(fraction, message)`` and stops with :class:`JobCancelled` when ``cancel()`` says so (what is
finished by then stays cached). :data:`ProgressFn` and :data:`CancelFn` are those callbacks. The kinds
(:mod:`privcore.engine.runner`, :mod:`privcore.leakage.run`, :mod:`privcore.deep.run`) are listed with
their time estimate and cached-result reader in :mod:`privcore.engine.jobkinds`.

This module sits at the bottom of privcore (it imports nothing of it), so the training loops that poll
for cancellation can raise the one exception without importing the engine.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["JobCancelled", "ProgressFn", "CancelFn", "check_callbacks"]

#: progress(fraction done in [0, 1], message)
ProgressFn = Callable[[float, str], None]
#: cancel() -> True to stop the job
CancelFn = Callable[[], bool]


class JobCancelled(RuntimeError):
    """The cancel callable returned True; what was finished is already cached. The one cancellation of
    every job kind: ``SweepCancelled``, ``LeakageCancelled`` and ``TrainingCancelled`` are its old names."""


def check_callbacks(progress: object, cancel: object) -> None:
    """TypeError naming the argument when ``progress`` or ``cancel`` is neither a function nor None."""
    for name, fn in (("progress", progress), ("cancel", cancel)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be a function or None, got {type(fn).__name__}")
