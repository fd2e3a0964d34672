"""What every teacher-vote method shares: T teachers on disjoint parts of floor(N/T) examples.

Subsample-and-aggregate, Confident-GNMax, sparse-vector aggregation and the PATE student all train
their teachers with :meth:`privcore.context.TrainContext.teacher_thetas`; under replace-one
neighbours one changed example changes one teacher's vote. Their rules on T live here once.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..types import CalibrationError, Problem
from .base import CostPart, Method, teacher_part

__all__ = ["TeacherVoteMethod"]


class TeacherVoteMethod(Method):
    """A method answering from the votes of T teachers (abstract: subclasses are the methods)."""

    def min_train_size(self, setting: Mapping[str, Any]) -> int:
        return int(setting.get("teachers", 1))  # each teacher needs at least one example

    def setting_warnings(self, setting: Mapping[str, Any], n: int | None) -> list[str]:
        t = int(setting.get("teachers", 1))
        if n is not None and n >= t and n // t < 10:
            return [f"Each of the T = {t} teachers sees only ⌊N/T⌋ = {n // t} examples: its votes will be close "
                    "to random."]
        return []

    def cost_parts(self, problem: Problem, points: int, repeats: int) -> list[CostPart]:
        """A fixed overhead, the T teachers' solves (shared by the teacher-vote methods), noisy votes."""
        return [CostPart("fixed", 1.0), teacher_part(problem), CostPart("answers", points * repeats / 20)]

    def check_teachers(self, problem: Problem) -> None:
        """T <= N, or a :class:`CalibrationError` naming the method, the limit and the value."""
        if problem.teachers > problem.n:
            raise CalibrationError(f"{self.name} teachers must be at most N = {problem.n:,}, got "
                                   f"T = {problem.teachers:,}: each teacher needs at least one example")
