"""The values that cross the executor seam (:mod:`privcore.engine.executor`): a sweep's unit of work,
any unit's outcome, and the signatures of the work function and the run's poll.

The runner makes the units, the executor hands them to the work function where they run (this
process or a Dask worker), and the outcomes come back to the runner: frozen, picklable, plain values,
so none of the three calls another to build or read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["WorkUnit", "UnitOutcome", "Work", "Poll"]

#: Poll = the run's reporter (a sweep's :class:`~privcore.engine.progress.RunProgress`): called with the
#: fraction done of the current unit (or None), reports progress and raises
#: :class:`~privcore.jobs.JobCancelled` on cancel.
Poll = Callable[[Any], None]


@dataclass(frozen=True)
class WorkUnit:
    """One method's missing epsilons x all repetitions in one variant of a sweep (frozen values, picklable).

    Made from a job of the sweep's plan (:mod:`privcore.engine.plan`); a worker computes it without
    planning anything. ``spec``: the variant's :class:`~privcore.engine.specs.SweepSpec` (no varied
    axis: the data to load and the settings); ``problem``: its :class:`~privcore.types.Problem` as the
    driver planned it; ``epsilons``: the missing epsilons (``float('inf')`` for the baseline);
    ``points`` and ``keys``: their cache identities and keys, aligned with ``epsilons``;
    ``fingerprint``: the data set the driver planned with (a worker that loads other data refuses the
    unit); ``schema``: the driver's cache schema version (a worker with other code refuses the unit).
    """

    index: int
    spec: Any
    problem: Any
    method: str
    epsilons: tuple[float, ...]
    points: tuple[dict, ...]
    keys: tuple[str, ...]
    fingerprint: str
    schema: int
    label: str = ""


@dataclass
class UnitOutcome:
    """What a unit sends back: ``results`` is one (key, value) per epsilon of the unit, value a plain
    JSON-able dict or None (not computed: see ``warnings``); ``seconds`` the unit's wall time where it ran."""

    index: int
    results: list[tuple[str, dict | None]]
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    where: str = "local"


#: work(unit, poll) -> outcome; the runner's ``execute_unit`` (module-level, so a worker can import it).
Work = Callable[[WorkUnit, Any], UnitOutcome]
