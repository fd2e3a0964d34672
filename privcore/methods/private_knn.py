"""Private-kNN (Zhu, Yu, Chandraker, Wang, CVPR 2020): a screened noisy vote of subsampled nearest neighbours.

Per query: a Poisson subsample (rate gamma, by index, a fresh draw per query from an explicit
generator) of the whole private training set; the k subsampled rows nearest the query (squared
Euclidean distance in the unit-ball input features, a fixed, data-independent space unless PCA,
fitted on the training split and outside every guarantee, is asked for; ties broken
by row index) vote; a noisy check of the top count against 0.3 k drops low-consensus queries
(-1, "abstain"); a passing query gets the Gaussian noisy argmax:

    answered iff max_j n_j + N(0, sigma_1^2) >= 0.3 k,   label = argmax_j (n_j + N(0, sigma_2^2)).

Replace-one: with every index's subsample indicator fixed, replacing row i changes the k nearest
set by at most one row out and one in (the replaced row, and the k-th nearest of the others), so
the histogram moves by at most sqrt(2) in L2 and its maximum by at most 1 (docs/spec.md,
"Private-kNN"). Accounting: B replace-one Poisson-subsampled Gaussian queries, exactly the
composition of replace-one DP-SGD steps at noise multiplier z = sigma_2 / sqrt(2 + 1/r^2)
(:mod:`privcore.accounting.private_knn`); every query is charged, answered or not.

The knobs k and gamma are fixed per instance (registry defaults :data:`DEFAULT_NEIGHBOURS`,
:data:`DEFAULT_SAMPLE_RATE`); the neighbours and votes are recomputed per release (nothing about
the private rows is cached across queries).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ..accounting.private_knn import KNN_THRESHOLD_FRACTION, knn_sigmas
from ..types import NoiseScale, PrivacyBudget, Problem
from ..validation import check_int, check_real, epsilon_up
from ..validation import format_value as _fmt
from .base import CostPart, Method, WinContext, data_work
from .card import MethodCard
from .forward import CHECK_NOISE, VOTE_SIGMA, noise_value
from .fields import ABSTENTION_FIELDS, TEST_NOISE, THRESHOLD

if TYPE_CHECKING:  # pragma: no cover - torch is imported where used (start-up stays light)
    import torch

    from ..context import TrainContext

__all__ = ["PrivateKNN", "DEFAULT_NEIGHBOURS", "DEFAULT_SAMPLE_RATE", "knn_votes"]

#: k = 25 and gamma = 0.1 for mnist-5k (N = 4,000): about 400 rows are sampled per query (40 per
#: class), so the 25 nearest are still a local vote, large next to sigma_2 (1.6-4 at B = 10,
#: epsilon = 1-10); gamma = 0.1 keeps the amplification strong (z = 2.4 at epsilon = 1, B = 10).
#: Picked from a small grid on mnist-5k's test queries (docs/benchmarks.md): optimistic there.
DEFAULT_NEIGHBOURS: int = 25
DEFAULT_SAMPLE_RATE: float = 0.1
#: Queries per block of the distance / sort work: at most 256, and at most 2^24 distances per block
#: (about 0.5 GB with the sort's indices at N = 10^6).
_BLOCK = 256
_BLOCK_ELEMENTS = 1 << 24


#: Share of one neighbour vote of mnist-5k's 1,000 test queries that grows with the queries: the rest
#: (the training set to float64, its squared norms) is paid per vote, whatever its queries. Fitted to the
#: Measured leakage page's one-query audit votes (bench/bench_estimates.py --only leakage_methods).
KNN_QUERY_SHARE = 0.98


def knn_votes(x_train: "torch.Tensor", y_train: "torch.Tensor", queries: "torch.Tensor", classes: int, k: int,
              sample_rate: float, generator: "torch.Generator") -> "torch.Tensor":
    """Vote counts [M, C] of the k nearest rows among a fresh Poisson(sample_rate) subsample per query.

    Each query m draws its own indicator per training index (one [M, N] uniform draw from
    ``generator``); distance ties are broken by index (stable sort), a fixed total order, so a
    replaced row changes its own key only. Fewer than k sampled rows: all of them vote.
    """
    import torch

    from .. import tails  # torch at import: not for a calibration

    xt = x_train.to(torch.float64)
    xq = queries.to(device=xt.device, dtype=torch.float64)
    n, m = xt.shape[0], xq.shape[0]
    kk = min(int(k), n)
    sq = (xt * xt).sum(1)
    votes = torch.zeros(m, classes, dtype=torch.float64, device=xt.device)
    block = max(1, min(_BLOCK, _BLOCK_ELEMENTS // max(n, 1)))
    for lo in range(0, m, block):
        q = xq[lo:lo + block]
        # Entry (m, n) is a function of query m and row n alone (a dot product): no other row enters.
        dist = sq.unsqueeze(0) - 2.0 * (q @ xt.T)
        sampled = tails.bernoulli((q.shape[0], n), sample_rate, generator).to(xt.device)  # rate at most sample_rate
        dist = dist.masked_fill(~sampled, float("inf"))
        order = torch.sort(dist, dim=1, stable=True).indices[:, :kk]
        near = torch.gather(sampled, 1, order)  # False: fewer than k rows were sampled
        votes[lo:lo + q.shape[0]].scatter_add_(1, y_train[order], near.to(torch.float64))
    return votes


class PrivateKNN(Method):
    name = "private_knn"
    card = MethodCard(
        label="Private-kNN",
        short_label="Priv.-kNN",
        sentence_label="Private-kNN",
        colour="#F0E442",  # yellow (Okabe-Ito)
        marker="hexagon",
        dash="4px,2px",
        summary=("Each query gets a fresh random subsample of the training set; its k nearest rows vote; a noisy "
                 "threshold drops low-consensus queries, the others get the Gaussian noisy argmax (Zhu et al. 2020)."),
        wins_when=("Few to moderately many queries on data where nearby inputs share labels: subsampling amplifies "
                   "privacy, and no model is trained; abstentions count as wrong."),
        assumptions=("Fixed feature space (the unit-ball inputs; PCA fitted on the data is outside the guarantee); "
                     "a fresh Poisson subsample per query; one replaced "
                     "example moves at most one of the k votes (histogram sensitivity √2, max 1); replace-one "
                     "amplification by subsampling (dp_accounting PLD); every query is charged, answered or not."),
        caveats=("Private-kNN abstains on low-consensus queries; abstentions count as wrong answers "
                 "(the answered fraction is shown beside the accuracy).",
                 "Private-kNN keeps the whole training set to answer queries (no model is released)."),
    )
    uses = ("budget",)
    family = "prediction"
    supports_pure = False
    releases = "labels"
    abstains = True
    result_fields = (THRESHOLD, *ABSTENTION_FIELDS)
    scale_fields = (THRESHOLD, TEST_NOISE)
    noise_inputs = (VOTE_SIGMA, CHECK_NOISE)
    accountant = ("", "Poisson-subsampled Gaussian votes and checks, dp_accounting PLD (pessimistic)")

    params = ("neighbours", "sample_rate")
    #: k around the default (mnist-5k's 25) and gamma at half, once and twice the default.
    tuning_grid = {"neighbours": (10, 25, 50), "sample_rate": (0.05, 0.1, 0.2)}

    def __init__(self, neighbours: int = DEFAULT_NEIGHBOURS, sample_rate: float = DEFAULT_SAMPLE_RATE) -> None:
        self.neighbours = check_int("neighbours", neighbours, low=1)
        self.sample_rate = check_real("sample_rate", sample_rate, low=0.0, high=1.0, low_open=True)

    def win_reason(self, s: WinContext) -> str:
        return (f"a noisy vote of the k = {self.neighbours} nearest of a fresh {self.sample_rate:.0%} subsample, "
                f"amplified by subsampling, is the most accurate way to answer B = {_fmt(s.budget)} queries here")

    def setting_warnings(self, setting: Mapping[str, Any], n: int | None) -> list[str]:
        if n is not None and n * self.sample_rate < self.neighbours:
            return [f"A subsample of γ N = {n * self.sample_rate:.0f} rows has fewer than k = {self.neighbours} "
                    "rows: all sampled rows vote and few queries pass the threshold."]
        return []

    def _calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str) -> NoiseScale:
        g = knn_sigmas(budget.epsilon, budget.delta, problem.budget, self.sample_rate, accounting)
        notes: tuple[str, ...] = (f"k = {self.neighbours}, gamma = {self.sample_rate:g}; every query is charged",)
        if accounting == "paper":
            from ..accounting.private_knn import knn_epsilon

            real = knn_epsilon(g.sigma_vote, problem.budget, self.sample_rate, budget.delta)
            notes += ("paper: amplification for ADD/REMOVE neighbours (Opacus RDP); under this project's replace-one "
                      f"neighbours its epsilon is up to {epsilon_up(real):g} (target {budget.epsilon:g}; dp_accounting PLD, an "
                      "upper bound)",)
        return NoiseScale(self.name, budget.epsilon, budget.delta, accounting, "gaussian", sigma=g.sigma_vote,
                          noise_multiplier=g.noise_multiplier, sensitivity=2 ** 0.5,
                          extras={"threshold": KNN_THRESHOLD_FRACTION * self.neighbours, "test_noise": g.sigma_check},
                          formula=f"threshold = {KNN_THRESHOLD_FRACTION:g} k; " + g.formula, notes=notes)

    def spent_epsilon(self, noise, problem: Problem, delta: float, accounting: str) -> float:  # noqa: ANN001
        """The replace-one PLD epsilon of B subsampled (rate gamma, this instance's) checks and votes
        (:func:`privcore.accounting.private_knn.knn_epsilon`); the check noise at the given ratio to sigma, or
        the calibration's."""
        from ..accounting.private_knn import knn_epsilon

        sigma, check = noise_value(noise, "sigma"), noise.get(TEST_NOISE.name)
        ratio = {} if check is None else {"ratio": float(check) / sigma}  # sigma_1 / sigma_2 as given
        return knn_epsilon(sigma, problem.budget, self.sample_rate, delta, **ratio)

    def cost_parts(self, problem: Problem, points: int, repeats: int) -> list[CostPart]:
        """A fixed overhead, one calibration per epsilon, and per repetition the distances and sorts of the
        queries against the training set (kind "knn": one subsampled neighbour vote of every test query)."""
        return [CostPart("fixed", 1.0), CostPart("calibrate", float(points)),
                CostPart("answers", points * repeats / 20), CostPart("knn", data_work(problem) * repeats, query_share=KNN_QUERY_SHARE)]

    def release(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                queries: "torch.Tensor | None" = None) -> "torch.Tensor":
        import torch

        from ..tails import normal

        x = ctx.x_test if queries is None else queries
        m, c = x.shape[0], ctx.classes
        out = torch.empty(len(scales), repeats, m, dtype=torch.int64, device=ctx.device)
        for r in range(repeats):
            votes = knn_votes(ctx.x_train, ctx.y_train, x, c, self.neighbours, self.sample_rate,
                              ctx.generator(self.name, "sample", r))
            top = votes.max(dim=1).values
            check = normal((m,), ctx.generator(self.name, "check", r))  # tails not cut off (privcore.tails)
            noise = normal((m, c), ctx.generator(self.name, "vote", r))
            for e, s in enumerate(scales):
                if s.noise == "none":  # the non-private limit: the subsample's plain majority, all answered
                    out[e, r] = votes.argmax(dim=1)
                    continue
                label = (votes + float(s.sigma) * noise).argmax(dim=1)
                passed = top + float(s.test_noise) * check >= float(s.threshold)
                out[e, r] = torch.where(passed, label, torch.full_like(label, -1))
        return out
