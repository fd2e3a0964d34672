"""A method's pieces of compute for the time model (:mod:`privcore.engine.cost`): what each method's
:meth:`~privcore.methods.base.Method.cost_parts` returns, and the pieces several methods share."""

from __future__ import annotations

from dataclasses import dataclass

from ..types import Problem

__all__ = ["CostPart", "solver_iterations", "data_work", "nonprivate_part", "teacher_part"]


@dataclass(frozen=True)
class CostPart:
    """One piece of a method's compute, for the time model of :mod:`privcore.engine.cost`.

    ``kind`` names a fitted constant (seconds per unit of work), ``work`` is the size of the piece
    (1 = the reference piece on mnist-5k: N = 4,000, D = 784, C = 10, lambda = 1e-3, 20 releases),
    ``shared`` a key other methods of the same run may need too (counted once), None for own work.
    ``query_share``: for a piece that answers queries, the share of its work that grows with the query
    rows of each answer (the rest is paid per answer, whatever its rows); ``work`` prices one answer
    of the test set per release. None: not a query piece (the leakage estimate rescales query pieces).
    """

    kind: str
    work: float
    shared: tuple | None = None
    query_share: float | None = None


def solver_iterations(lam: float) -> float:
    """L-BFGS iterations at ``lam`` relative to lambda = 1e-3 (measured on mnist-5k: 15 at 1e-3,
    34 at 1e-4, 63 at 1e-5, 110 at 1e-6)."""
    return (2.0 + 13.0 * (1e-3 / max(float(lam), 1e-12)) ** 0.3) / 15.0


def data_work(problem: Problem) -> float:
    """One pass over the training data (N x D x C), relative to mnist-5k's."""
    return problem.n * problem.dim * problem.classes / (4000 * 784 * 10)


def nonprivate_part(problem: Problem) -> CostPart:
    """The non-private solve at the problem's lambda (shared by every method that perturbs it)."""
    return CostPart("solve", data_work(problem) * solver_iterations(problem.lam), ("np", float(problem.lam)))


def teacher_part(problem: Problem) -> CostPart:
    """The T teachers' solves (shared by the teacher-vote methods at the same T and lambda).

    Measured with S&A alone (bench/bench_cost_pieces.py --only teachers: mnist-5k, lambda = 1e-6 ...
    1e-1, T = 16 / 40 / 100, N = 1,000 and 4,000): on a few thousand rows the T batched problems' own
    per-iteration work (T x D x C) outweighs the data's (N = 1,000 takes 0.7x of N = 4,000), and T costs
    more than linearly (T = 100: 5.7x T = 16, T = 40: 2.1x). Against lambda = 1e-3 the time goes as about
    (1e-3 / lambda)^0.33 (T = 16: 7.3 / 4.5 / 2.4 / 1 / 0.48 / 0.26x), except that teachers with fewer
    examples stop earlier below 1e-3 (T = 40: 4.7x at 1e-6; T = 100: 4.0x), so that exponent shrinks with
    (28 / (T + 12))^0.35."""
    lam = max(float(problem.lam), 1e-12)
    power = 0.33 if lam >= 1e-3 else 0.33 * min(1.0, (28.0 / (problem.teachers + 12)) ** 0.35)
    size = 0.25 * data_work(problem) + 0.75 * problem.dim * problem.classes / 7840
    return CostPart("teachers", size * (1e-3 / lam) ** power * ((problem.teachers + 12) / 28) ** 1.4,
                    ("teachers", int(problem.teachers), float(problem.lam)))
