"""Sparse-vector subsample-and-aggregate (Bassily, Thakkar, Thakurta, NeurIPS 2018).

The T teachers of subsample-and-aggregate vote on each query. The vote's distance to instability
d = max(ceil(m/2) - 1, 0), m = (top count - runner-up count), is the number of teachers that can
change without changing the unique plurality; one replaced training example changes one teacher,
so d has sensitivity 1. A stream of B queries goes through the sparse vector technique:

    stable   iff d_i + Lap(2c/eps_2) >= w + Lap(1/eps_1)   (one threshold draw per stream)
    stable   -> the teachers' plain majority, for free (it is the same on every neighbour when d_i >= 1);
    unstable -> a noisy vote (exponential mechanism, inverse temperature beta), at most c per stream;
    after c unstable queries the stream stops answering: the rest of its queries abstain (-1, wrong).

Calibration (:func:`privcore.accounting.pate.svt_calibration`): eps/2 and delta/2 to the test
(Lyu, Su, Li 2017, Algorithm 1, plus the probability delta/2 that a query with d = 0 passes), eps/2
and delta/2 to the c noisy votes (zCDP of 2 beta-bounded-range mechanisms, valid for adaptively
chosen queries). The cap is c = ceil(B/4), a fixed rule. Needs delta > 0. ``paper``, ``corrected``
and ``tight`` are the same (no published calibration to reproduce; the optimal bounded-range
composition of ``tight`` S&A assumes non-adaptive queries, and the unstable ones are chosen by the
data). The evaluation cuts the test set, in a seeded order per repetition, into streams of B queries.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from ..accounting.pate import distance_to_instability, svt_calibration
from ..types import NoiseScale, PrivacyBudget, Problem
from ..validation import format_value as _fmt
from .teachers import TeacherVoteMethod
from .base import WinContext
from .card import MethodCard
from .forward import NoiseInput, noise_value
from .fields import ABSTENTION_FIELDS, CAP, TEST_NOISE, THRESHOLD

if TYPE_CHECKING:  # pragma: no cover - torch is imported where used (start-up stays light)
    import torch

    from ..context import TrainContext

__all__ = ["SparseVectorAggregate", "CAP_FRACTION", "svt_cap", "svt_labels"]

#: The cap on paid (unstable) answers per stream of B queries: c = ceil(CAP_FRACTION * B).
CAP_FRACTION: float = 0.25


def svt_cap(budget: int) -> int:
    """c = ceil(B / 4): the most unstable queries a stream of B pays for before it stops."""
    return max(1, math.ceil(CAP_FRACTION * int(budget)))


def _unit_laplace(count: int, gen: torch.Generator, device) -> torch.Tensor:  # noqa: ANN001
    """``count`` i.i.d. Laplace(0, 1) draws, tails not cut off by a 53-bit uniform (:mod:`privcore.tails`;
    the inverse CDF of one uniform capped them at 36.7 and drew -inf for u = 0). ``device``: the generator's."""
    from ..tails import laplace

    return laplace((count,), gen)


def svt_labels(votes: torch.Tensor, order: torch.Tensor, nu: torch.Tensor, rho: torch.Tensor, gumbel: torch.Tensor,
               threshold: float, query_scale: float, threshold_scale: float, cap: int, beta: float,
               stream: int) -> torch.Tensor:
    """One repetition's labels [M] (-1: abstained) for votes [M, C] answered in ``order`` [M].

    nu [M]: unit Laplace per position; rho [streams]: unit Laplace per stream; gumbel [M, C] per row.
    Position p of ``order`` belongs to stream p // ``stream``; see the module docstring.
    """
    import torch
    m = votes.shape[0]
    v = votes[order]
    d = distance_to_instability(v)
    pos = torch.arange(m, device=votes.device)
    sid = pos // stream
    stable = d + query_scale * nu >= threshold + threshold_scale * rho[sid]
    unstable = (~stable).to(torch.int64)
    cum = unstable.cumsum(0)
    start = sid * stream
    before_stream = torch.where(start > 0, cum[(start - 1).clamp(min=0)], torch.zeros_like(cum))
    unstable_before = cum - unstable - before_stream  # unstable queries earlier in the same stream
    answered = unstable_before < cap
    majority = v.argmax(dim=1)
    noisy = (beta * v + gumbel[order]).argmax(dim=1)
    label = torch.where(stable, majority, noisy)
    label = torch.where(answered, label, torch.full_like(label, -1))
    out = torch.empty_like(label)
    out[order] = label
    return out


class SparseVectorAggregate(TeacherVoteMethod):
    name = "sparse_vector"
    card = MethodCard(
        label="Sparse-vector aggregation",
        short_label="Sparse vec.",
        sentence_label="sparse-vector aggregation",
        colour="#6A3D9A",  # deep purple (the goldenrod it had was too close to loss perturbation's orange)
        marker="star",
        dash="12px,4px,2px,4px,2px,4px",
        caveats=("Sparse vector abstains once its budget of unstable queries is spent; abstentions count as wrong "
                 "answers (the answered fraction is shown beside the accuracy), so its accuracy can fall below chance.",),
        summary=("Teachers vote; queries whose majority is stable (far from a tie, tested by the sparse vector "
                 "technique) are answered for free, at most c = B/4 unstable ones pay for a noisy vote "
                 "(Bassily, Thakkar, Thakurta 2018)."),
        wins_when=("Very many teachers (the stability test's threshold grows as (B/ε) ln(B/δ)), so large N; "
                   "then its cost hardly grows with B."),
        assumptions=("Disjoint parts, each teacher trained on its own part alone; one example changes one vote "
                     "(distance to instability has sensitivity 1); "
                     "needs δ > 0; after c = ceil(B/4) unstable queries a stream abstains (counted wrong)."),
    )
    uses = ("lam", "budget", "teachers")
    #: The stability test needs many teachers: from the default to PATE's hundreds.
    couples_queries = True  # see Method.couples_queries
    tuning_grid = {"teachers": (16, 64, 256)}
    family = "prediction"
    supports_pure = False
    releases = "labels"
    abstains = True
    result_fields = (THRESHOLD, *ABSTENTION_FIELDS)
    scale_fields = (THRESHOLD, TEST_NOISE, CAP)
    noise_inputs = (NoiseInput("beta", "β (fallback votes)", "the fallback votes' inverse temperature (exponential "
                               "mechanism)", kind="exponential_mechanism"),
                    NoiseInput.of(TEST_NOISE, "query noise scale", "the stability test's query noise (Laplace scale)"),
                    NoiseInput.of(THRESHOLD, "threshold w", "the stability test's threshold w", low_open=False),
                    NoiseInput.of(CAP, "cap c", "the cap on unstable answers (default ceil(B/4))", shown=False))
    accountant = ("", "sparse vector (Lyu, Su and Li 2017) plus zCDP of the capped fallback votes")

    def win_reason(self, s: WinContext) -> str:
        return (f"most of the B = {_fmt(s.budget)} queries have a stable majority over T = {_fmt(s.teachers)} "
                "teachers and are answered for free; only the unstable ones pay")

    def setting_warnings(self, setting: Mapping[str, Any], n: int | None) -> list[str]:
        t, b = int(setting.get("teachers", 1)), int(setting.get("budget", 1))
        eps, dlt = setting.get("epsilon"), setting.get("delta")
        out = []
        if eps is not None and dlt and math.isfinite(float(eps)):
            w = svt_calibration(float(eps), float(dlt), b, svt_cap(b)).threshold
            if t / 2.0 < w:
                out.append(f"Sparse vector: the stability threshold is about {w:,.0f} teachers' votes but T = {t:,} "
                           "teachers give a distance to instability of at most T/2: almost every query is unstable, "
                           f"and after c = {svt_cap(b):,} of them a stream of B queries abstains.")
        return out

    def spent_epsilon(self, noise, problem: Problem, delta: float, accounting: str) -> float:  # noqa: ANN001
        """The sparse vector's epsilon from its query noise and threshold plus the zCDP of the c fallback votes
        (:func:`privcore.accounting.forward.sparse_vector_epsilon`; c = ceil(B/4) unless given)."""
        from ..accounting.forward import sparse_vector_epsilon

        cap = noise.get(CAP.name)
        cap = svt_cap(problem.budget) if cap is None else int(cap)
        return sparse_vector_epsilon(noise_value(noise, "beta"), noise_value(noise, THRESHOLD.name),
                                     noise_value(noise, TEST_NOISE.name), cap, problem.budget, delta)

    def _calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str) -> NoiseScale:
        self.check_teachers(problem)
        b = problem.budget
        s = svt_calibration(budget.epsilon, budget.delta, b, svt_cap(b))
        notes = ("paper, corrected and tight are the same for sparse vector (zCDP for the noisy votes: the unstable "
                 "queries are chosen by the data, so the non-adaptive optimal composition does not apply)",)
        return NoiseScale(self.name, budget.epsilon, budget.delta, accounting, "exponential_mechanism", beta=s.beta,
                          per_query_epsilon=2.0 * s.beta, sensitivity=1.0,
                          extras={"threshold": s.threshold, "test_noise": s.query_scale, "cap": s.cap},
                          formula=(f"c = ceil(B/4) = {s.cap}; threshold noise Lap({s.threshold_scale:.4g}); " + s.formula),
                          notes=notes)

    def release(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                queries: torch.Tensor | None = None) -> torch.Tensor:
        import torch
        votes = ctx.teacher_votes(ctx.problem.teachers, ctx.problem.lam, queries)  # [M, C]
        m = votes.shape[0]
        b = ctx.problem.budget
        streams = -(-m // b)
        out = torch.empty(len(scales), repeats, m, dtype=torch.int64, device=ctx.device)
        for r in range(repeats):
            order = torch.randperm(m, generator=ctx.generator(self.name, "order", r), device=ctx.device)
            self._streams(ctx, scales, votes, order, streams, (r,), out[:, r])
        return out

    def _streams(self, ctx: "TrainContext", scales: list[NoiseScale], votes: torch.Tensor, order: torch.Tensor,
                 streams: int, labels: tuple, out: torch.Tensor) -> None:
        """One repetition's labels per scale into ``out`` [E, M]: the queries in ``order``, cut into
        streams of B, with noise from the generators (name, kind, *labels)."""
        from .. import tails

        m, c = votes.shape
        b = ctx.problem.budget
        nu = _unit_laplace(m, ctx.generator(self.name, "query", *labels), ctx.device)
        rho = _unit_laplace(streams, ctx.generator(self.name, "threshold", *labels), ctx.device)
        gumbel = tails.gumbel((m, c), ctx.generator(self.name, "gumbel", *labels))  # tails not cut off
        for e, s in enumerate(scales):
            if s.noise == "none":
                out[e] = votes.argmax(dim=1)
                continue
            cal = svt_calibration(s.epsilon, s.delta, b, svt_cap(b))
            out[e] = svt_labels(votes, order, nu, rho, gumbel, cal.threshold, cal.query_scale,
                                cal.threshold_scale, cal.cap, cal.beta, b)

    def query_answers(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                      queries: torch.Tensor) -> torch.Tensor:
        """[E, R, B, M]: each query row asked B times in one stream of its own (one threshold draw, at
        most c paid answers), the B-query release the guarantee covers. B one-query streams (what
        :meth:`release` with B repetitions gives) would be B releases, each (eps, delta)-DP."""
        import torch
        votes = ctx.teacher_votes(ctx.problem.teachers, ctx.problem.lam, queries)  # [M, C]
        m = votes.shape[0]
        b = ctx.problem.budget
        copies = votes.repeat_interleave(b, dim=0)  # [M * B, C]: positions i*B .. i*B + B - 1 ask row i
        order = torch.arange(m * b, device=ctx.device)  # in order, so stream i (p // B) is row i's B copies
        out = torch.empty(len(scales), repeats, m * b, dtype=torch.int64, device=ctx.device)
        for r in range(repeats):
            self._streams(ctx, scales, copies, order, m, ("answers", r), out[:, r])
        return out.view(len(scales), repeats, m, b).transpose(2, 3)
