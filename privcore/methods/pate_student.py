"""A pay-once student (PATE's semi-supervised step in its simplest form).

The T teachers of subsample-and-aggregate label P = 500 public, unlabelled rows with the Gaussian
noisy argmax (GNMax, no threshold); a linear softmax student (same lam, same solver) is trained on
those rows and their noisy labels and then answers any number of queries: its accuracy is flat in
B. The student depends on the private training data only through the P noisy labels, so the
privacy cost is that of P GNMax queries (data-independent: rho = P / sigma^2 zCDP; the three
accounting modes as for Confident-GNMax). The threshold check of Confident-GNMax is left out: with
data-independent accounting it only adds cost (dropping low-consensus labels pays off only under
PATE's data-dependent analysis, which privcore shows for
Confident-GNMax beside its guarantee but never uses as one).

The public rows, by a fixed rule: the test set is split by a seeded permutation (seed only, the same
for every repetition and epsilon) into two halves; the first P rows of each half are one student's
public set (its labels are bought from the teachers; its true labels are never used), and each test
row is predicted by the student that did not see it (2-fold cross-fitting). So every method is
scored on the same test rows, the other methods lose no training data, and the student pays with
P test rows' features, which it must be allowed to treat as public (the same rows the prediction
methods answer queries on). With fewer than 2P test rows a student gets fewer labels than it paid
for (its guarantee still holds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..accounting.pate import gnmax_sigmas
from ..types import NoiseScale, PrivacyBudget, Problem
from ..validation import format_value as _fmt
from .teachers import TeacherVoteMethod
from .base import CostPart, WinContext, solver_iterations
from .card import MethodCard
from .forward import NoiseInput, noise_value

if TYPE_CHECKING:  # pragma: no cover - torch is imported where used (start-up stays light)
    import torch

    from ..context import TrainContext

__all__ = ["PateStudent", "PUBLIC_LABELS", "public_split"]

#: Labels the student buys from the teachers (the P GNMax queries its guarantee covers).
PUBLIC_LABELS: int = 500


def public_split(ctx: "TrainContext") -> tuple[torch.Tensor, torch.Tensor]:
    """The two halves of the test rows (index tensors), by a permutation that depends on the seed only."""
    import torch
    m = ctx.x_test.shape[0]
    perm = torch.randperm(m, generator=ctx.generator("pate_student_public_split"), device=ctx.device)
    return perm[: m // 2], perm[m // 2:]


class PateStudent(TeacherVoteMethod):
    name = "pate_student"
    card = MethodCard(
        label="PATE student (pay once)",
        short_label="Student",
        sentence_label="the PATE student",
        colour="#999999",  # grey
        marker="cross",
        dash="1px,5px",
        summary=(f"Teachers label {PUBLIC_LABELS} public rows with the Gaussian noisy argmax once; a linear student "
                 "trained on them answers any number of queries for free."),
        wins_when=("Many predictions (large B) with many accurate teachers and enough public, unlabelled data; "
                   "its accuracy does not depend on B."),
        assumptions=(f"Public unlabelled rows from the data's distribution (here {PUBLIC_LABELS} per student, carved "
                     "from the test set by a fixed seeded rule, 2-fold cross-fitted); teachers on disjoint parts, each trained "
                     "on its own part alone; one example changes one vote."),
        covers="the released student model (trained on public rows labelled by the private teachers)",
        caveats=(f"The PATE student's {PUBLIC_LABELS} public rows per student come from the test set (split in two "
                 "halves by a fixed seeded rule; each row is scored by the student that did not see it).",),
    )
    uses = ("lam", "teachers")
    #: The labelling teachers: from the default to PATE's hundreds.
    couples_queries = True  # see Method.couples_queries
    tuning_grid = {"teachers": (16, 64, 256)}
    family = "training"
    supports_pure = False
    trains_per_release = True  # one student per release (all of them in one batched solve)
    releases = "labels"
    noise_inputs = (NoiseInput("sigma", "σ (vote noise)", "the Gaussian vote noise's std (noisy argmax)",
                               kind="gaussian"),)
    accountant = ("", "data-independent GNMax zCDP/RDP over the student's public labels")

    def win_reason(self, s: WinContext) -> str:
        return (f"with B = {_fmt(s.budget)} predictions, paying once for {PUBLIC_LABELS} noisy teacher labels and "
                "answering with the student beats paying for every answer")

    def _calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str) -> NoiseScale:
        self.check_teachers(problem)
        g = gnmax_sigmas(budget.epsilon, budget.delta, PUBLIC_LABELS, accounting, ratio=None)
        return NoiseScale(self.name, budget.epsilon, budget.delta, accounting, "gaussian", sigma=g.sigma_vote, sensitivity=2 ** 0.5,
                          formula=f"P = {PUBLIC_LABELS} GNMax labels, whatever B; {g.formula.replace('B', 'P')}",
                          notes=("data-independent GNMax accounting for the P labels (PATE's data-dependent "
                                 "analysis is not implemented)",))

    def spent_epsilon(self, noise, problem: Problem, delta: float, accounting: str) -> float:  # noqa: ANN001
        """GNMax accounting of the P public labels (no check), whatever B: the student answers for free."""
        from ..accounting.pate import gnmax_epsilon

        return gnmax_epsilon(noise_value(noise, "sigma"), None, PUBLIC_LABELS, delta, accounting)

    def cost_parts(self, problem, points: int, repeats: int) -> list[CostPart]:  # noqa: ANN001 - Problem
        """The teachers (shared), then per fold an eigenbasis of the public rows and E x R students.
        Measured with the student alone, teachers held (bench/bench_cost_pieces.py --only student,
        lambda = 1e-5 / 1e-3 / 0.1): 0.31 / 0.26 / 0.29 s for one student, 0.76 / 0.40 / 0.36 s for 20,
        3.4 / 1.3 / 0.8 s for 100
        (20 repetitions x 5 epsilons): about 0.25 s of its own, then the batch's iterations, which
        grow as lambda shrinks more slowly than the full data's (power 0.8)."""
        batch = points * repeats
        per_fold = problem.dim * problem.classes / 7840 * solver_iterations(problem.lam) ** 0.8 * (batch + 4) / 32
        return super().cost_parts(problem, points, repeats) + [
            CostPart("student", 2 * per_fold), CostPart("eig", 0.8 * (problem.dim / 784) ** 3)]

    def _students(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int, rows: torch.Tensor,
                  fold: int) -> torch.Tensor:
        """Student models [E * R, D, C] trained on ``rows`` of the test set with noisy teacher labels."""
        import torch
        votes = ctx.teacher_votes(ctx.problem.teachers, ctx.problem.lam)[rows]  # [P, C]
        p, c = votes.shape
        from ..tails import normal  # tails not cut off (privcore.tails)

        noise = torch.stack([normal((p, c), ctx.generator(self.name, "vote", fold, r)) for r in range(repeats)])  # [R, P, C]
        labels = []
        for s in scales:
            labels.append(votes.argmax(dim=1).expand(repeats, p) if s.noise == "none"
                          else (votes + float(s.sigma) * noise).argmax(dim=2))
        y = torch.cat(labels)  # [E * R, P]
        x = ctx.x_test[rows]
        # All E * R students in one batched solve on the shared rows: the label term of the softmax
        # loss is linear in theta, so labels y_k enter as the linear term X^T (onehot(y0) - onehot(y_k)) / P
        # against fixed labels y0. y0 is a public constant (class 0 everywhere), so each student is a
        # function of its own labels only: the first student's labels (another repetition's, or the
        # noiseless majority of an epsilon = inf point) would enter every student's solve.
        y0 = torch.zeros(p, dtype=y.dtype, device=y.device)
        onehot = torch.nn.functional.one_hot(y, c).to(torch.float64)  # [K, P, C]
        diff = torch.nn.functional.one_hot(y0, c).to(torch.float64).unsqueeze(0) - onehot
        linear = torch.einsum("pd,kpc->kdc", x.double(), diff) / p
        lam = torch.full((y.shape[0],), float(ctx.problem.lam), dtype=torch.float64, device=ctx.device)
        from ..solver import solve_softmax

        res = solve_softmax(x, y0, lam, linear, classes=ctx.classes, gtol=ctx.gtol, callback=ctx.checkpoint,
                            precond=ctx.test_rows_preconditioner(rows))  # the rows' eigenbasis, built once
        return res.theta

    def query_answers(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                      queries: torch.Tensor) -> torch.Tensor:
        """[E, R, 1, M]: one student per repetition, its label for each query row. A student answers any
        number of queries from one guarantee, so one answer per row says all; B students would be B
        releases (B times the P labels' privacy cost)."""
        return self.release(ctx, scales, repeats, queries).unsqueeze(2)

    def release(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                queries: torch.Tensor | None = None) -> torch.Tensor:
        """With ``queries``: one student's answers (one release). Without: the 2-fold evaluation, two
        students each paying for its own P labels, so their joint output is two releases; it scores
        the accuracy one student reaches and is never published as one (docs/spec.md)."""
        import torch
        halves = public_split(ctx)
        e = len(scales)
        if queries is not None:  # the first half's student answers arbitrary queries
            theta = self._students(ctx, scales, repeats, halves[0][:PUBLIC_LABELS], 0)
            return ctx.logits(theta, queries).argmax(dim=2).view(e, repeats, -1)
        m = ctx.x_test.shape[0]
        out = torch.empty(e, repeats, m, dtype=torch.int64, device=ctx.device)
        for fold, (own, other) in enumerate((halves, halves[::-1])):
            theta = self._students(ctx, scales, repeats, own[:PUBLIC_LABELS], fold)
            out[:, :, other] = ctx.logits(theta, ctx.x_test[other]).argmax(dim=2).view(e, repeats, -1)
        return out
