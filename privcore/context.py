"""Training context: one data set on one device, and the non-private solves methods share.

Model sensitivity, prediction sensitivity and the baseline all need the same regularised
minimiser theta*(lam): it is solved once per context and reused, so adding noise after training
costs one solve for any number of repetitions and epsilons.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from .data import Dataset
from .data.transforms import unit_ball_float32
from .device import make_generator
from .certify import certify
from .parts import solve_parts
from .solver import Preconditioner, SolveResult, solve_softmax
from .types import Problem

__all__ = ["TrainContext", "accuracy", "unit_ball_float32"]

_PRECOND_LOCK = threading.Lock()
#: Bytes of one [N, P, C] float32 buffer of a batched solve on the full data: larger batches are split.
SOLVE_GROUP_BYTES = 256 << 20


def accuracy(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean accuracy over the last axis: pred [..., n] vs labels y [n] -> [...]."""
    return (pred == y).to(torch.float64).mean(dim=-1)


@dataclass
class TrainContext:
    """Tensors of one data set on ``device`` (float32 features, int64 labels) plus shared solves.

    x_train [N, D], y_train [N], x_test [M, D], y_test [M]; ``problem`` holds lam, B, T, DP-SGD
    settings; ``seed`` derives every generator; ``gtol`` is the solver's gradient-norm tolerance.
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: int
    problem: Problem
    seed: int
    device: torch.device
    gtol: float = 1e-5
    stats: dict[str, float] = field(default_factory=dict)
    #: Called with the fraction done of the current batch (None when unknown) at every solver
    #: iteration and DP-SGD step; may raise to stop the work (cancel) and reports progress.
    poll: Callable[[float | None], None] | None = field(default=None, repr=False, compare=False)
    #: Largest certified gradient norm among the solves this context's releases used (0: none).
    grad_used: float = field(default=0.0, compare=False)
    _solves: dict[tuple, SolveResult] = field(default_factory=dict, repr=False)
    _votes: dict[tuple, torch.Tensor] = field(default_factory=dict, repr=False)
    _precond: list = field(default_factory=list, repr=False)  # [Preconditioner] once built
    _rows_precond: dict[bytes, Preconditioner] = field(default_factory=dict, repr=False)  # test rows -> basis

    @classmethod
    def from_dataset(cls, ds: Dataset, problem: Problem, seed: int, device: torch.device, gtol: float = 1e-5) -> "TrainContext":
        """Move a :class:`Dataset` to ``device``; ``problem.n`` and ``problem.dim`` must match it."""
        if problem.n != ds.n or problem.dim != ds.dim or problem.classes != ds.classes:
            raise ValueError(f"problem (n={problem.n}, dim={problem.dim}, classes={problem.classes}) does not match "
                             f"the data set (n={ds.n}, dim={ds.dim}, classes={ds.classes})")
        device = torch.device(device)  # a name ("cpu", "cuda:0") or a device
        on_cpu = device.type == "cpu"

        def t(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
            if on_cpu and a.dtype == {torch.float32: np.float32, torch.int64: np.int64}.get(dtype):
                # One copy of the data on the CPU: the tensor shares the data set's (read-only)
                # memory; nothing here writes to it (unit_ball_float32 copies first if it must).
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                    return torch.from_numpy(a)
            return torch.from_numpy(np.array(a, copy=True)).to(device=device, dtype=dtype)

        x_train = t(ds.x_train, torch.float32)
        x_train = unit_ball_float32(x_train, shared=on_cpu)
        return cls(x_train, t(ds.y_train, torch.int64), t(ds.x_test, torch.float32),
                   t(ds.y_test, torch.int64), ds.classes, problem, seed, device, gtol)

    def with_problem(self, problem: Problem) -> "TrainContext":
        """Same data and cached solves, another problem (budget, lam, T, DP-SGD settings)."""
        ctx = TrainContext(self.x_train, self.y_train, self.x_test, self.y_test, self.classes, problem,
                           self.seed, self.device, self.gtol, self.stats)
        ctx._solves, ctx._votes, ctx._precond = self._solves, self._votes, self._precond
        ctx._rows_precond = self._rows_precond
        return ctx

    def use_basis(self, pre: Preconditioner) -> None:
        """Take ``pre`` as this context's eigenbasis of X^T X / N instead of decomposing its rows (a leakage
        game's worlds are subsets of one population, whose basis is exact for every one of them)."""
        if self._precond:
            raise ValueError("use_basis: this context already has its eigenbasis")
        self._precond.append(pre)

    def held_pieces(self) -> set[tuple]:
        """The data-only work this context holds (shared with every context made by :meth:`with_problem`):
        ``("eig",)`` once the eigenbasis of X^T X / N is built, and the key of every non-private solve
        (``("np", lam)``) and teacher set (``("teachers", T, lam)``); the time model does not price them again."""
        out: set[tuple] = {("eig",)} if self._precond else set()
        out.update(key for key in self._solves if key[0] in ("np", "teachers"))
        return out

    def checkpoint(self, fraction: float | None = None) -> None:
        """Let the caller report progress or cancel (see ``poll``) in the middle of a batch."""
        if self.poll is not None:
            self.poll(fraction)

    def generator(self, *labels: object) -> torch.Generator:
        """A generator on this context's device derived from (seed, *labels)."""
        return make_generator(self.seed, *labels, device=self.device)

    def _note_solve(self, res: SolveResult) -> None:
        self.stats["max_grad_norm"] = max(self.stats.get("max_grad_norm", 0.0), float(res.grad_norm.max()))
        self.stats["solver_iterations"] = self.stats.get("solver_iterations", 0.0) + float(res.iterations.max())

    @property
    def preconditioner(self) -> Preconditioner:
        """The training data's eigenbasis, rotated data and Bohning bound (built once per data set)."""
        with _PRECOND_LOCK:  # two threads on one data set (warm-up and a session) build it once
            if not self._precond:  # the eigendecomposition of X^T X / N depends on the data only
                self._precond.append(Preconditioner(self.x_train))
        return self._precond[0]

    def test_rows_preconditioner(self, rows: torch.Tensor) -> Preconditioner:
        """The eigenbasis of the test-set rows ``rows`` [k] (int64), as :func:`privcore.solver.solve_softmax`
        would build it from ``x_test[rows]``: built once per rows and kept with the context's other
        data-only results, so a student trained on public rows (PATE) pays its eigendecomposition once
        per data set, not at every epsilon. It depends on those rows' features only."""
        key = rows.detach().to("cpu", torch.int64).numpy().tobytes()
        with _PRECOND_LOCK:
            if key not in self._rows_precond:
                self._rows_precond[key] = Preconditioner(self.x_test[rows])
            return self._rows_precond[key]

    def solve(self, lam: torch.Tensor, linear: torch.Tensor | None = None, init: torch.Tensor | None = None,
              tol: float | None = None) -> SolveResult:
        """Batched solve on the full training set, certified to gradient norm <= ``tol``.

        ``tol`` defaults to ``problem.solver_tolerance``. The mixed-precision solver
        (:func:`privcore.solver.solve_softmax`) runs first; :func:`privcore.certify.certify` then
        checks every problem's gradient in float64 and polishes it under ``tol``, with a fallback whose
        step count depends on public quantities only (never a data-dependent refusal).
        """
        tol = self.problem.solver_tolerance if tol is None else float(tol)
        # Problems in groups whose [N, P, C] float32 buffers fit SOLVE_GROUP_BYTES (at N = 1e6 the 20
        # perturbed solves of loss perturbation would otherwise hold 1.2 GB of them at once). With
        # shared data every problem follows its own path whatever its batch.
        total = int(lam.shape[0])
        per = max(1, SOLVE_GROUP_BYTES // max(1, self.x_train.shape[0] * self.classes * 4))
        groups = -(-total // per)
        size = -(-total // groups)
        parts = []
        for first in range(0, total, size):
            sl = slice(first, first + size)
            lin = None if linear is None else linear[sl]
            part = solve_softmax(self.x_train, self.y_train, lam[sl], lin, classes=self.classes,
                                 init=None if init is None else init[sl], gtol=min(self.gtol, 0.5 * tol),
                                 precond=self.preconditioner, callback=self.checkpoint)
            parts.append(certify(self.x_train, self.y_train, part, lam[sl], lin, tol, self.preconditioner,
                                 self.checkpoint))
        res = parts[0] if len(parts) == 1 else SolveResult(*(torch.cat(t) for t in zip(
            *((r.theta, r.grad_norm, r.iterations, r.converged) for r in parts))))
        self._note_solve(res)
        self.grad_used = max(self.grad_used, float(res.grad_norm.max()))
        return res

    def nonprivate_theta(self, lam: float, released: bool = True) -> torch.Tensor:
        """theta*(lam) [D, C], the exact minimiser of J (solved once per lam and cached)."""
        key = ("np", float(lam))
        if key not in self._solves:
            lam_t = torch.tensor([lam], dtype=torch.float64, device=self.device)
            before = self.grad_used
            self._solves[key] = self.solve(lam_t)
            self.grad_used = before
        if released:  # a warm start (released=False) is not what the release's sensitivity rests on
            self.grad_used = max(self.grad_used, float(self._solves[key].grad_norm.max()))
        return self._solves[key].theta[0]

    def test_logits(self, theta: torch.Tensor) -> torch.Tensor:
        """Test logits for a batch of models theta [P, D, C] -> [P, M, C] (one GEMM)."""
        return self.logits(theta, None)

    def logits(self, theta: torch.Tensor, queries: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of query rows [M, D] (default: the test set) for models theta [P, D, C] -> [P, M, C]."""
        x = self.x_test if queries is None else queries.to(device=self.device, dtype=self.x_test.dtype)
        p, d, c = theta.shape
        out = x @ theta.to(x.dtype).permute(1, 0, 2).reshape(d, p * c)
        return out.view(-1, p, c).permute(1, 0, 2)

    def teacher_votes(self, teachers: int, lam: float, queries: torch.Tensor | None = None) -> torch.Tensor:
        """Vote counts [M, C] on the query rows (default: the test set) of T teachers trained on
        disjoint parts of floor(N/T) examples.

        The partition is a seeded permutation (same for every method of this seed); all T
        problems are solved together with per-problem data [T, N/T, D].
        """
        def count() -> torch.Tensor:
            pred = self.logits(self.teacher_thetas(teachers, lam), queries).argmax(dim=2)  # [T, M]
            votes = torch.zeros(pred.shape[1], self.classes, dtype=torch.float64, device=self.device)
            return votes.scatter_add_(1, pred.T.contiguous(), torch.ones_like(pred.T, dtype=torch.float64))

        if queries is not None:  # arbitrary queries (an attacker's): not cached
            return count()
        key = (int(teachers), float(lam))
        if key not in self._votes:
            self._votes[key] = count()
        return self._votes[key]

    def teacher_partition(self, teachers: int) -> torch.Tensor:
        """[T, floor(N/T)] row indices of the teachers' disjoint parts: a seeded permutation (public)."""
        n, m = self.x_train.shape[0], self.x_train.shape[0] // teachers
        perm = torch.randperm(n, generator=self.generator("sa_partition", teachers), device=self.device)
        return perm[: teachers * m].view(teachers, m)

    def teacher_thetas(self, teachers: int, lam: float) -> torch.Tensor:
        """The T teachers' models [T, D, C] (solved once per (T, lam) and cached).

        Teacher t is a function of its own part (and of the seed, lam and the shapes) only, bit for
        bit: :func:`privcore.parts.solve_parts` gives each part its own basis and a fixed batch.
        """
        key = ("teachers", int(teachers), float(lam))
        if key not in self._solves:
            res = solve_parts(self.x_train, self.y_train, self.teacher_partition(teachers), lam, self.classes,
                              gtol=self.gtol, callback=self.checkpoint)
            self._note_solve(res)
            self._solves[key] = res
        return self._solves[key].theta
