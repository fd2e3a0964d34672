"""Private answers from the deep teachers' votes, by the registry's own teacher-vote methods.

The linear engine's methods take a :class:`~privcore.context.TrainContext`; their ``release``
needs only the vote counts, the problem (T, B), seeded generators and the device. :class:`VoteContext`
provides exactly that for votes computed here, so subsample-and-aggregate, Confident-GNMax and
sparse-vector aggregation calibrate (``Method.calibrate``) and answer (``Method.release``) with
their own code: nothing of their privacy analysis is repeated here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - imported where used (start-up stays light)
    import torch

from .. import knobs
from ..device import make_generator
from ..methods import REGISTRY, get_method
from ..methods.dpsgd import DPSGD
from ..methods.teachers import TeacherVoteMethod
from ..types import NoiseScale, PrivacyBudget, Problem

__all__ = ["VoteContext", "vote_methods", "dpsgd_methods", "deep_methods", "split_methods", "private_vote_accuracy"]


def vote_methods() -> tuple[str, ...]:
    """Registry methods that answer queries from teacher votes alone (no student, no solver)."""
    return tuple(name for name, m in REGISTRY.items()
                 if isinstance(m, TeacherVoteMethod) and m.family == "prediction" and m.releases == "labels")


def dpsgd_methods() -> tuple[str, ...]:
    """Registry methods that are DP-SGD (private training of any differentiable model)."""
    return tuple(name for name, m in REGISTRY.items() if isinstance(m, DPSGD))


def split_methods(methods: tuple[str, ...] | list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the teacher-vote methods, the DP-SGD methods) among ``methods``, in their order: one pass over the
    registry for a whole run (:func:`privcore.deep.run.run_deep` asks once and hands the answer on)."""
    votes, dpsgd = set(vote_methods()), set(dpsgd_methods())
    return tuple(m for m in methods if m in votes), tuple(m for m in methods if m in dpsgd)


def deep_methods() -> tuple[str, ...]:
    """Every method the deep models support, in registry order."""
    ok = set(vote_methods()) | set(dpsgd_methods())
    return tuple(name for name in REGISTRY if name in ok)


class VoteContext:
    """The part of a TrainContext a teacher-vote method's ``release`` reads, over given votes."""

    def __init__(self, votes: torch.Tensor, y_test: torch.Tensor, problem: Problem, seed: int) -> None:
        self.votes, self.y_test, self.problem, self.seed = votes, y_test, problem, seed
        self.device = votes.device
        self.classes = votes.shape[1]

    def teacher_votes(self, teachers: int, lam: float, queries: torch.Tensor | None = None) -> torch.Tensor:
        if queries is not None:
            raise ValueError("a VoteContext answers the test images only")
        return self.votes

    def generator(self, *labels: object) -> torch.Generator:
        return make_generator(self.seed, *labels, device=self.device)

    def checkpoint(self, fraction: float | None = None) -> None:
        return None


def vote_problem(n: int, dim: int, classes: int, budget: int, teachers: int) -> Problem:
    return Problem(n=n, dim=dim, classes=classes, lam=knobs.default("lam"), budget=budget, teachers=teachers)


def private_vote_accuracy(method: str, votes: torch.Tensor, y_test: torch.Tensor, epsilon: float, delta: float,
                          problem: Problem, accounting: str, repeats: int, seed: int
                          ) -> tuple[NoiseScale, torch.Tensor, torch.Tensor]:
    """(scale, accuracy [repeats], answered fraction [repeats]) of ``method``'s private answers to
    every test image at (epsilon, delta) for a budget of B = problem.budget answers.

    Accuracy counts abstentions (label -1) as wrong, as the linear engine does.
    """
    import torch
    m = get_method(method)
    if method not in vote_methods():
        raise ValueError(f"method must be one of {', '.join(vote_methods())} for teacher votes, got {method!r}")
    scale = m.calibrate(PrivacyBudget(epsilon, delta), problem, accounting)
    ctx = VoteContext(votes, y_test, problem, seed)
    labels = m.release(ctx, [scale], repeats)[0]  # [R, M]
    acc = (labels == y_test).to(torch.float64).mean(dim=1)
    answered = (labels >= 0).to(torch.float64).mean(dim=1)
    return scale, acc, answered
