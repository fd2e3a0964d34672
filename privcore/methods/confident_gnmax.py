"""PATE's Confident-GNMax aggregator (Papernot et al., ICLR 2018), answering B queries directly.

The T teachers of subsample-and-aggregate (the same disjoint parts and solves) vote on each query.
A noisy check of the largest vote count against a threshold drops low-consensus queries (the
release is -1, "abstain", counted as a wrong answer; the answered fraction is stored beside the
accuracy); a passing query gets the noisy argmax of the votes with Gaussian noise:

    answered iff max_j n_j + N(0, sigma_1^2) >= 0.8 T,   label = argmax_j (n_j + N(0, sigma_2^2)).

The threshold 0.8 T and the ratio sigma_1 = 3.75 sigma_2 are PATE's published MNIST configuration
(T = 250, threshold 200, sigma_1 = 150, sigma_2 = 40), not tuned here. Replace-one: one changed
example changes one teacher's vote, so the histogram moves by sqrt(2) in L2 and its maximum by at
most 1. Accounting is data-independent and charges both parts on every query (see
:mod:`privcore.accounting.pate`): ``paper`` uses PATE's RDP (alpha/sigma_2^2 + alpha/(2 sigma_1^2) per
query) with the standard conversion, ``corrected`` the same RDP with the improved conversion,
``tight`` the exact composition of Gaussian mechanisms. Data-independently the threshold only
costs budget; its benefit is that wrong low-consensus answers become abstentions.

PATE's data-dependent accounting (answered, unanimous queries cost less;
:mod:`privcore.accounting.pate_dd`) is computed beside it for every point (:meth:`extra_results`:
``epsilon_data_dependent`` and the cost of publishing it, ``epsilon_dd_published``). It is NOT the
guarantee: it is a function of the private votes, so it is shown as a labelled extra column and
never used to calibrate the noise. Showing it is itself a release of private information (how much
the teachers agree on these queries) that no epsilon of the row covers: every place that shows it
says so (:data:`DATA_DEPENDENT_DISCLOSURE`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..accounting.pate import GNMAX_SIGMA_RATIO, GNMAX_THRESHOLD_FRACTION, gnmax_sigmas
from ..types import NoiseScale, PrivacyBudget, Problem
from ..validation import check_real, format_value as _fmt
from .teachers import TeacherVoteMethod
from .base import CostPart, WinContext
from .card import MethodCard
from .forward import CHECK_NOISE, VOTE_SIGMA, noise_value
from .fields import ABSTENTION_FIELDS, TEST_NOISE, THRESHOLD, ResultField

if TYPE_CHECKING:  # pragma: no cover - torch is imported where used (start-up stays light)
    import torch

    from ..context import TrainContext

__all__ = ["ConfidentGNMax", "DATA_INDEPENDENT_NOTE", "DATA_DEPENDENT_DISCLOSURE"]

#: Said wherever PATE's data-dependent epsilon is shown (noise table, notes, method card, docs).
DATA_DEPENDENT_DISCLOSURE = ("showing the data-dependent ε is itself a release of private information (it is computed "
                             "from the private votes), covered by no guarantee of the row; publish it only through "
                             "its smooth-sensitivity release, whose cost is the 'ε to publish' column")

DATA_INDEPENDENT_NOTE = ("data-independent accounting (the guarantee): every query pays for the check and the answer; "
                         "PATE's data-dependent epsilon (cheaper for unanimous votes) is shown beside it, but it is a "
                         "function of the private votes and needs smooth-sensitivity noise to publish, so it is not "
                         "the guarantee; " + DATA_DEPENDENT_DISCLOSURE)


#: PATE's data-dependent epsilon of B queries like the test set's (NOT a guarantee: a function of the
#: private votes, so showing it is itself a release of private information; ``epsilon`` is the guarantee)
#: and the epsilon of publishing it with smooth-sensitivity noise (privcore.accounting.pate_dd).
EPSILON_DATA_DEPENDENT = ResultField(
    "epsilon_data_dependent", "ε data-dependent (not a guarantee)", "ε dd",
    "PATE's data-dependent epsilon: a function of the private votes, not the guarantee; showing it is itself a "
    "release of private information")
EPSILON_DD_PUBLISHED = ResultField(
    "epsilon_dd_published", "ε to publish the data-dependent ε", "ε publ.",
    "what publishing the data-dependent epsilon itself would cost (smooth sensitivity), if it were published; not "
    "spent: the guarantee stays the ε "
    "above")


class ConfidentGNMax(TeacherVoteMethod):
    name = "confident_gnmax"
    card = MethodCard(
        label="PATE Confident-GNMax",
        short_label="Conf.-GNMax",
        sentence_label="PATE's Confident-GNMax",
        colour="#56B4E9",  # sky blue
        marker="triangle-down",
        dash="longdashdot",
        summary=("Teachers on disjoint parts vote; a noisy threshold on the top vote drops low-consensus queries, the "
                 "others get the Gaussian noisy argmax (PATE, Papernot et al. 2018)."),
        wins_when=("Many teachers that agree and few queries; data-independently it pays for every query, so it rarely "
                   "beats the noisy vote of subsample-and-aggregate; abstentions count as wrong."),
        assumptions=("Disjoint parts, each teacher trained on its own part alone; one example changes one vote "
                     "(histogram sensitivity √2, max 1); threshold "
                     "0.8 T and σ₁ = 3.75 σ₂ as in PATE's MNIST setting; the guarantee covers B queries. PATE's "
                     "data-dependent ε (lower when the teachers agree) is shown beside it, not as the guarantee."),
        caveats=("Confident-GNMax abstains on low-consensus queries; abstentions count as wrong answers "
                 "(the answered fraction is shown beside the accuracy).",
                 "Confident-GNMax: " + DATA_DEPENDENT_DISCLOSURE[0].upper() + DATA_DEPENDENT_DISCLOSURE[1:] + "."),
    )
    uses = ("lam", "budget", "teachers")
    family = "prediction"
    supports_pure = False
    releases = "labels"
    abstains = True
    result_fields = (THRESHOLD, *ABSTENTION_FIELDS, EPSILON_DATA_DEPENDENT, EPSILON_DD_PUBLISHED)
    scale_fields = (THRESHOLD, TEST_NOISE)
    noise_inputs = (VOTE_SIGMA, CHECK_NOISE)
    accountant = ("", "data-independent GNMax zCDP/RDP (every query charged)")

    params = ("threshold_fraction", "sigma_ratio")
    #: T from few to PATE's hundreds, the threshold at PATE's 0.8 T and lower, the check noise at PATE's
    #: ratio and at half of it.
    tuning_grid = {"teachers": (16, 64, 256), "threshold_fraction": (0.6, 0.8), "sigma_ratio": (1.875, 3.75)}

    def __init__(self, threshold_fraction: float = GNMAX_THRESHOLD_FRACTION,
                 sigma_ratio: float = GNMAX_SIGMA_RATIO) -> None:
        self.threshold_fraction = check_real("threshold_fraction", threshold_fraction, low=0.0, high=1.0,
                                             low_open=True)
        self.sigma_ratio = check_real("sigma_ratio", sigma_ratio, low=0.0, low_open=True)

    def win_reason(self, s: WinContext) -> str:
        return (f"the Gaussian noisy argmax over T = {_fmt(s.teachers)} teachers, answering only confident queries, "
                f"is the most accurate way to answer B = {_fmt(s.budget)} queries here")

    def _calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str) -> NoiseScale:
        self.check_teachers(problem)
        g = gnmax_sigmas(budget.epsilon, budget.delta, problem.budget, accounting, self.sigma_ratio)
        notes = (DATA_INDEPENDENT_NOTE,)
        if accounting == "paper":
            notes += ("paper: PATE's data-independent RDP with the standard RDP-to-(eps, delta) conversion",)
        return NoiseScale(self.name, budget.epsilon, budget.delta, accounting, "gaussian", sigma=g.sigma_vote, sensitivity=2 ** 0.5,
                          extras={"threshold": self.threshold_fraction * problem.teachers, "test_noise": g.sigma_check},
                          formula=(f"sigma_1 = r sigma_2 (check noise), r = {self.sigma_ratio:g}, threshold = {self.threshold_fraction:g} T; "
                                   f"{g.formula}"), notes=notes)

    def forward_noise(self, given, problem: Problem) -> dict:  # noqa: ANN001 - a mapping
        """The given noise; without a check noise, this instance's fixed ratio to the vote noise (as calibrated)."""
        noise = super().forward_noise(given, problem)
        if noise.get(TEST_NOISE.name) is None and noise.get("sigma") is not None:
            noise[TEST_NOISE.name] = self.sigma_ratio * noise["sigma"]
        return noise

    def spent_epsilon(self, noise, problem: Problem, delta: float, accounting: str) -> float:  # noqa: ANN001
        """Data-independent GNMax accounting of B checks and answers (:func:`privcore.accounting.pate.gnmax_epsilon`):
        every query is charged, answered or not."""
        from ..accounting.pate import gnmax_epsilon

        return gnmax_epsilon(noise_value(noise, "sigma"), noise_value(noise, TEST_NOISE.name), problem.budget, delta,
                             accounting)

    def cost_parts(self, problem: Problem, points: int, repeats: int) -> list[CostPart]:
        """The teacher methods' pieces, plus PATE's data-dependent epsilon once per point (its smooth
        sensitivity over the test queries, at the Renyi order B selects). Measured on mnist-5k's 1,000
        test queries (bench/bench_cost_pieces.py --only pate_dd: Confident-GNMax alone, 6 epsilons, teachers
        held): 0.04 / 0.08 / 0.19 / 0.19 s per point at B = 1 / 100 / 1,000 / 10,000, so a point costs
        0.37 + 2 sqrt(min(B, 1000) / 1000)
        times the B = 100 point that the ``pate_dd`` constant measures."""
        per_point = 0.37 + 2.0 * math.sqrt(min(int(problem.budget), 1000) / 1000.0)
        return super().cost_parts(problem, points, repeats) + [CostPart("pate_dd", points * per_point)]

    def extra_results(self, ctx: "TrainContext", scales: list[NoiseScale],
                      released: torch.Tensor) -> list[dict[str, float]]:
        """PATE's data-dependent epsilon of B queries like the test set's, per scale (NOT a guarantee)."""
        from ..accounting.pate_dd import confident_gnmax_data_dependent

        votes = ctx.teacher_votes(ctx.problem.teachers, ctx.problem.lam).detach().cpu().numpy()
        out: list[dict[str, float]] = []
        for e, s in enumerate(scales):
            if s.noise == "none" or s.delta <= 0:
                out.append({})
                continue
            answered = (released[e] >= 0).cpu().numpy()
            dd = confident_gnmax_data_dependent(votes, answered, float(s.sigma), float(s.test_noise),
                                                float(s.threshold), ctx.problem.budget, float(s.delta))
            out.append({EPSILON_DATA_DEPENDENT.name: dd.epsilon, EPSILON_DD_PUBLISHED.name: dd.epsilon_published})
        return out

    def release(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                queries: torch.Tensor | None = None) -> torch.Tensor:
        import torch

        from ..tails import normal  # tails not cut off (privcore.tails)

        votes = ctx.teacher_votes(ctx.problem.teachers, ctx.problem.lam, queries)  # [M, C]
        m, c = votes.shape
        top = votes.max(dim=1).values
        check = torch.stack([normal((m,), ctx.generator(self.name, "check", r)) for r in range(repeats)])  # [R, M]
        noise = torch.stack([normal((m, c), ctx.generator(self.name, "vote", r)) for r in range(repeats)])  # [R, M, C]
        out = torch.empty(len(scales), repeats, m, dtype=torch.int64, device=ctx.device)
        for e, s in enumerate(scales):
            if s.noise == "none":  # the non-private limit: the plain majority, every query answered
                out[e] = votes.argmax(dim=1).expand(repeats, m)
                continue
            label = (votes + float(s.sigma) * noise).argmax(dim=2)
            passed = top + float(s.test_noise) * check >= float(s.threshold)
            out[e] = torch.where(passed, label, torch.full_like(label, -1))
        return out
