"""Test support: a known-bad way to train the teachers, to show that the independence tests can fail.

:func:`shared_preconditioner_teacher_thetas` solves the T teachers as ``TrainContext.teacher_thetas`` did
before issue 29: all of them in the eigenbasis of X^T X / N of the WHOLE training set, so every teacher's
model depends, in its last digits, on every part's rows. Replacing one row of teacher 0's part then moves
all the other teachers too, and a query built to sit on their decision boundaries
(tests/methods/adversarial_query.py) flips all of their votes at once: the teacher-vote methods' "one
example changes one vote" fails. Nothing in ``privcore`` may use it.
"""

from __future__ import annotations

import torch

from privcore.context import TrainContext
from privcore.solver import Preconditioner, solve_softmax

__all__ = ["shared_preconditioner_teacher_thetas", "SharedPreconditionerContext"]


def shared_preconditioner_teacher_thetas(ctx: TrainContext, teachers: int, lam: float) -> torch.Tensor:
    """The T teachers' models [T, D, C] on the parts of ``ctx.teacher_partition`` (the real method's), each
    solved in the full training set's eigenbasis; cached in ``ctx`` per (T, lam) as the real method caches."""
    cache = ctx.__dict__.setdefault("_shared_preconditioner_teachers", {})
    key = (int(teachers), float(lam))
    if key not in cache:
        parts = ctx.teacher_partition(teachers)  # [T, m]
        full = Preconditioner(ctx.x_train)  # the coupling: one basis from every part's rows
        sub = object.__new__(Preconditioner)
        sub.evals, sub.basis = full.evals, full.basis
        sub.x = full.x[parts.flatten()].view(parts.shape[0], parts.shape[1], full.x.shape[-1])
        lam_t = torch.full((teachers,), float(lam), dtype=torch.float64, device=ctx.device)
        cache[key] = solve_softmax(sub.x, ctx.y_train[parts], lam_t, classes=ctx.classes, gtol=ctx.gtol, precond=sub)
    return cache[key].theta


class SharedPreconditionerContext(TrainContext):
    """A :class:`TrainContext` whose teachers are the known-bad variant (every method's ``release`` uses them)."""

    def teacher_thetas(self, teachers: int, lam: float) -> torch.Tensor:
        return shared_preconditioner_teacher_thetas(self, teachers, lam)
