"""How much a leakage measurement observes: releases per world, rows attacked and audit trials.

Both the measurement (:mod:`privcore.leakage.run`) and its time estimate (:mod:`privcore.leakage.cost`)
read these caps, so the estimate prices the releases the run really makes. No torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..methods import get_method

__all__ = ["MAX_OBSERVED", "MAX_AUDIT_ANSWERS", "Observed", "observed", "answers_per_release"]

#: At most this many observed numbers (releases x answers x rows x classes) per world: larger B or
#: populations release fewer times, or attack a subsample of the rows (all canaries kept).
MAX_OBSERVED = 1 << 22
#: At most this many answers (trials x B) in the audit of a prediction method.
MAX_AUDIT_ANSWERS = 40_000


@dataclass(frozen=True)
class Observed:
    """Releases per world, rows attacked in each (None: every row), audit trials."""

    repeats: int
    targets: int | None
    trials: int


def observed(prediction: bool, deterministic: bool, answers: int, classes: int, population: int, canaries: int,
             repeats: int, trials: int) -> Observed:
    """What a measurement observes: ``repeats`` releases per world (1 when deterministic) capped so that
    a prediction method's answers x classes x rows stay within :data:`MAX_OBSERVED` (then, if one
    release is still too many, that many rows attacked: the canaries and at least 64 others), and the
    audit's ``trials`` capped at :data:`MAX_AUDIT_ANSWERS` answers (at least 8)."""
    repeats = 1 if deterministic else int(repeats)
    targets = None
    if prediction:
        per_repeat = answers * classes * population
        repeats = max(1, min(repeats, MAX_OBSERVED // per_repeat))
        cap = MAX_OBSERVED // (repeats * answers * classes)
        if cap < population:
            targets = min(population, max(cap - canaries, 64) + canaries)
        if trials * answers > MAX_AUDIT_ANSWERS:
            trials = max(8, MAX_AUDIT_ANSWERS // answers)
    return Observed(repeats, targets, int(trials))


def answers_per_release(method: str, budget: int) -> int:
    """How many answers about one query row one release gives the attacker: B, or 1 for a method
    whose results do not depend on B (the PATE student: one student answers every query alike)."""
    return int(budget) if get_method(method).uses_budget else 1
