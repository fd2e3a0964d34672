"""Test support: worst-case neighbouring data sets and attack scores for each method, run through its own ``release``.

Every audit here builds two neighbouring data sets D and D' (replace-one: the same rows except
one, the canary), runs the method's :meth:`~privcore.methods.base.Method.release` many times on
each (batched: one call per data set; for the prediction methods, many identical query rows of one
release are independent answers too), scores every output and hands the two score samples to
:func:`privcore.audit.audit`. D and D' get different seeds, so their runs are independent.

The cases (C = 2 classes, tiny data so that the batched runs are quick):

* model sensitivity, prediction sensitivity, loss perturbation: D = a few rows on input
  coordinate 0 plus a canary at coordinate 1, never lit by any other row, labelled 0; D' relabels
  the canary 1. The score is the log-likelihood ratio of the output under the two noise
  distributions centred where the auditor (non-privately) knows the outputs lie: released model,
  canary logits, or (loss perturbation) the noise vector b that produced the released minimiser,
  b(theta) = -(sum_n grad loss_n(theta) + (N lam + rho) theta), recovered exactly for each data set.
  For Gaussian noise the score is the projection on theta(D') - theta(D), the optimal statistic.
* DP-SGD: the same data with sampling rate q = 1 (batch = N). At a small learning rate the
  canary's row of theta stays near 0 and every clipped canary gradient has norm exactly ``clip``,
  along (1, -1) for label 0 and (-1, 1) for label 1: each step is a Gaussian mechanism with
  sensitivity 2 clip (the replace-one worst case) and only the canary's row sees it. Score: the
  projection of that row on (1, -1).
* subsample-and-aggregate: T = N teachers of one example each, all at the same input, B = 1; the
  vote histogram is the label count, and D' moves one vote from class 0 to class 1. Score: the
  released label (1 is the minority class in both).

The methods beyond the paper (issue 10), on the same one-example teachers (``vote_data``, C = 2):

* Confident-GNMax: B = 1, many copies of the canary query per release; D has ``ones`` votes for
  class 1, D' one more. Score per answer: 0 for label 0, 1 for an abstention, 2 for label 1 (both
  of the latter are likelier on D').
* sparse vector: streams of B identical queries; the votes put the distance to instability near
  the threshold w, D' one vote closer to a tie. Score per stream: the number of answered queries
  (the stream stops after c unstable ones, so it reveals where the test failed).
* PATE student: the public rows are all the canary, so the student's logit gap at the canary is
  a function of how many of its P noisy labels are 1. Score: that gap (the student's own solve).

What these canaries reach (an audit cannot exceed it): the label flip moves theta* by K/(N lam),
half the replace-one bound 2K/(N lam) (for C = 2 both gradients lie on (1, -1) and the model is
not confidently wrong on a never-lit canary), and moves loss perturbation's noise vector by K,
half of its bound 2K; S&A and DP-SGD reach their bounds exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from privcore.audit import AuditResult, audit
from privcore.context import TrainContext
from privcore.methods import get_method
from privcore.types import NoiseScale, PrivacyBudget, Problem

__all__ = ["AuditCase", "canary_data", "audit_problem", "audit_method", "method_scores", "SEEDS"]

#: Seeds of the D and D' contexts (different: independent randomness in the two worlds).
SEEDS = (1001, 2002)


@dataclass(frozen=True)
class AuditCase:
    """An audit's inputs and outcome: the scale the mechanism ran with and the bound found."""

    method: str
    accounting: str
    scale: NoiseScale
    result: AuditResult

    @property
    def claimed_epsilon(self) -> float:
        return self.scale.epsilon


def canary_data(base: int = 7) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [N, 2] and labels of D and D' (N = base + 1): ``base`` rows at e_0 with alternating labels,
    then the canary at e_1 (never lit by another row), labelled 0 in D and 1 in D'."""
    x = torch.zeros(base + 1, 2)
    x[:base, 0] = 1.0
    x[base, 1] = 1.0
    y = torch.tensor([i % 2 for i in range(base)] + [0], dtype=torch.int64)
    y1 = y.clone()
    y1[base] = 1
    return x, y, y1


def vote_data(teachers: int = 10, ones: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """S&A: ``teachers`` rows at the same input; D has ``ones`` labels 1, D' has ``ones + 1``."""
    x = torch.zeros(teachers, 1)
    x[:, 0] = 1.0
    y = torch.zeros(teachers, dtype=torch.int64)
    y[:ones] = 1
    y1 = y.clone()
    y1[ones] = 1
    return x, y, y1


def _teacher_vote_method(method: str) -> bool:
    from privcore.methods.teachers import TeacherVoteMethod

    return isinstance(get_method(method), TeacherVoteMethod)


def audit_problem(method: str, **overrides: object) -> Problem:
    """The small problem each audit runs: lam large enough that theta stays near 0 at the canary,
    B = 1 (the claim of one answer is the full epsilon), DP-SGD with q = 1, clip 0.1 and a step
    size small enough that every canary gradient is clipped."""
    if _teacher_vote_method(method):
        fields: dict[str, object] = dict(n=10, dim=1, classes=2, lam=1e-2, budget=1, teachers=10, batch_size=10)
    else:
        fields = dict(n=8, dim=2, classes=2, lam=4.0, budget=1, teachers=1, batch_size=8, epochs=2, clip=0.1,
                      learning_rate=0.05)
    fields.update(overrides)
    return Problem(**fields)  # type: ignore[arg-type]


def _context(x: torch.Tensor, y: torch.Tensor, problem: Problem, seed: int) -> TrainContext:
    return TrainContext(x, y, x[:1].clone(), y[:1].clone(), problem.classes, problem, seed, torch.device("cpu"),
                        )


def _llr(out: torch.Tensor, c0: torch.Tensor, c1: torch.Tensor, noise: str) -> torch.Tensor:
    """Log-likelihood ratio (up to a positive factor) of outputs [S, d] under noise centred at c1 vs c0.

    Gaussian: (||y - c0||^2 - ||y - c1||^2) / 2, affine in the projection on c1 - c0. Laplace-like
    (density prop. to exp(-beta ||b||)): ||y - c0|| - ||y - c1||.
    """
    out, c0, c1 = out.double(), c0.double().reshape(1, -1), c1.double().reshape(1, -1)
    if noise == "gaussian":
        return 0.5 * (((out - c0) ** 2).sum(1) - ((out - c1) ** 2).sum(1))
    return (out - c0).norm(dim=1) - (out - c1).norm(dim=1)


def _loss_gradient_sum(x: torch.Tensor, y: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """sum_n x_n (softmax(theta^T x_n) - e_{y_n})^T for models theta [S, D, C] -> [S, D, C] (float64)."""
    x = x.double()
    probs = torch.softmax(torch.einsum("nd,sdc->snc", x, theta), dim=2)
    probs[:, torch.arange(x.shape[0]), y] -= 1.0
    return torch.einsum("nd,snc->sdc", x, probs)


def student_scores(scale: NoiseScale, problem: Problem, runs: int, ones: int) -> tuple[np.ndarray, np.ndarray]:
    """The PATE student's logit gap (class 1 - class 0) at the canary, trained on public rows that all
    are the canary, for ``runs`` students on D (``ones`` votes for 1) and on D' (one more)."""
    from privcore.methods.pate_student import PUBLIC_LABELS

    m = get_method("pate_student")
    x, y0, y1 = vote_data(problem.n, ones)
    out = []
    for y, seed in ((y0, SEEDS[0]), (y1, SEEDS[1])):
        ctx = TrainContext(x, y, x[:1].repeat(2 * PUBLIC_LABELS, 1), torch.zeros(2 * PUBLIC_LABELS, dtype=torch.int64),
                           problem.classes, problem, seed, torch.device("cpu"))
        rows = torch.arange(PUBLIC_LABELS)
        theta = m._students(ctx, [scale], runs, rows, 0)  # [R, D, C]: the method's own batched solve
        logits = ctx.logits(theta, x[:1])[:, 0, :]
        out.append((logits[:, 1] - logits[:, 0]).double().numpy())
    return out[0], out[1]


def method_scores(method: str, scale: NoiseScale, problem: Problem, runs: int,
                  queries_per_run: int = 1, ones: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Scores of ``runs`` (x ``queries_per_run`` for prediction methods) releases on D and on D'.

    ``ones``: for the teacher-vote methods, the votes for class 1 on D (D' has one more).
    """
    m = get_method(method)
    if method == "pate_student":
        return student_scores(scale, problem, runs, ones if ones is not None else 1)
    if _teacher_vote_method(method):
        x, y0, y1 = vote_data(problem.n, ones=ones if ones is not None else (problem.n - 4) // 2)  # S&A: margin 4, 2
    else:
        x, y0, y1 = canary_data(problem.n - 1)
    ctx0, ctx1 = _context(x, y0, problem, SEEDS[0]), _context(x, y1, problem, SEEDS[1])
    canary = x[-1:].clone()
    scores = []
    if m.releases == "model":
        outs = [m.release(ctx, [scale], runs)[0] for ctx in (ctx0, ctx1)]  # [R, D, C] each
        if method == "dpsgd":
            u = torch.tensor([1.0, -1.0]) / math.sqrt(2.0)
            return tuple(o[:, -1, :].double().matmul(u.double()).numpy() for o in outs)  # type: ignore[return-value]
        if method == "model_sensitivity":
            c0, c1 = ctx0.nonprivate_theta(problem.lam), ctx1.nonprivate_theta(problem.lam)
            return tuple(_llr(o.reshape(runs, -1), c0, c1, scale.noise).numpy() for o in outs)  # type: ignore[return-value]
        # Loss perturbation: the noise vector that produced each released minimiser, under D and D'.
        total = problem.n * problem.lam + float(scale.rho or 0.0)
        for o in outs:
            theta = o.double()
            b0 = -(_loss_gradient_sum(x, y0, theta) + total * theta).reshape(runs, -1)
            b1 = -(_loss_gradient_sum(x, y1, theta) + total * theta).reshape(runs, -1)
            # log p(b1) - log p(b0) for the noise density centred at 0.
            if scale.noise == "gaussian":
                scores.append((0.5 * ((b0 ** 2).sum(1) - (b1 ** 2).sum(1))).numpy())
            else:
                scores.append((b0.norm(dim=1) - b1.norm(dim=1)).numpy())
        return scores[0], scores[1]
    queries = canary.repeat(queries_per_run, 1)
    for ctx in (ctx0, ctx1):
        out = m.release(ctx, [scale], runs, queries)[0]  # [R, M, C] logits or [R, M] labels
        if method == "sparse_vector":  # answered queries per stream of B, streams in the method's seeded order
            b, mq = problem.budget, out.shape[1]
            order = torch.stack([torch.randperm(mq, generator=ctx.generator(method, "order", r)) for r in range(runs)])
            streams = torch.gather(out, 1, order)[:, : (mq // b) * b].reshape(-1, b)
            scores.append((streams >= 0).double().sum(1).numpy())
        elif m.abstains:  # 0: label 0, 1: abstained, 2: label 1 (the latter two likelier on D')
            scores.append(torch.where(out == 0, 0.0, torch.where(out < 0, 1.0, 2.0)).reshape(-1).double().numpy())
        elif m.releases == "labels":
            scores.append(out.reshape(-1).double().numpy())
        else:
            c0 = ctx0.logits(ctx0.nonprivate_theta(problem.lam).unsqueeze(0), canary)[0]
            c1 = ctx1.logits(ctx1.nonprivate_theta(problem.lam).unsqueeze(0), canary)[0]
            b = problem.budget  # B answers to the same query: one sample is the sum of their LLRs
            llr = _llr(out.reshape(-1, out.shape[-1]), c0, c1, scale.noise).view(runs, -1)
            scores.append(llr[:, : (llr.shape[1] // b) * b].reshape(runs, -1, b).sum(2).reshape(-1).numpy())
    return scores[0], scores[1]


def audit_method(method: str, budget: PrivacyBudget, accounting: str = "corrected", runs: int = 20000,
                 queries_per_run: int = 1, alpha: float = 0.05, problem: Problem | None = None,
                 scale: NoiseScale | None = None, ones: int | None = None) -> AuditCase:
    """Audit ``method`` at ``budget``: calibrate it (or use ``scale``, e.g. a deliberately broken
    one) on the audit problem, run it on D and D', and bound epsilon from below (see the module)."""
    problem = problem if problem is not None else audit_problem(method)
    m = get_method(method)
    scale = scale if scale is not None else m.calibrate(budget, problem, accounting)
    s0, s1 = method_scores(method, scale, problem, runs, queries_per_run, ones)
    return AuditCase(method, accounting, scale, audit(s0, s1, delta=budget.delta, alpha=alpha))
