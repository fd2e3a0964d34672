"""Prediction sensitivity (paper Algorithms 6 and 7): noise on each released logit vector.

Logits theta*^T x have L2 sensitivity Delta = 2K / (N lam) (paper Eq. 45); B queries compose.
delta = 0: Laplace-like noise on the C logits, beta = N lam eps / (2 K B) (basic composition).
delta > 0, ``paper``/``corrected``: sigma = min(sigma_basic, sigma_adv) with the delta' search
(paper Algorithm 7; :func:`privcore.accounting.composition.advanced_gaussian_sigma`).
delta > 0, ``tight``: exact Gaussian composition, sigma = sqrt(B) * analytic sigma at (eps, delta, Delta).
Delta includes the certified solver residual in ``corrected`` and ``tight`` (see model_sensitivity).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..accounting.composition import advanced_gaussian_sigma, exact_gaussian_sigma
from ..accounting.gaussian import analytic_gaussian_epsilon
from ..validation import format_value as _fmt
from ..types import NoiseScale, PrivacyBudget, Problem
from .base import CostPart, Method, noisy_release, nonprivate_part, sensitivity_of, WinContext
from .card import MethodCard
from .forward import SENSITIVITY_INPUTS, noise_value

if TYPE_CHECKING:  # pragma: no cover - torch is imported where used (start-up stays light)
    import torch

    from ..context import TrainContext

__all__ = ["PredictionSensitivity"]


class PredictionSensitivity(Method):
    name = "prediction_sensitivity"
    card = MethodCard(
        label="Prediction sensitivity",
        short_label="Pred. sens.",
        sentence_label="prediction sensitivity",
        colour="#CC79A7",  # reddish purple
        marker="square",
        dash="dashdot",
        summary="Train non-privately; add noise to every released logit vector (B answers).",
        wins_when="Rarely: few predictions (small B), large N λ; tight Gaussian accounting helps it most.",
        assumptions="As model sensitivity; the guarantee covers B predictions only.",
    )
    from_paper = True
    paper_assumes_exact_minimiser = True
    uses = ("lam", "budget")
    #: The average-form L2 weight over the lam = auto grid (engine.specs.LAM_AUTO_GRID).
    tuning_grid = {"lam": (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 0.5)}
    family = "prediction"
    releases = "logits"
    noise_inputs = SENSITIVITY_INPUTS
    accountant = ("Laplace-like mechanism, basic composition over B answers",
                  "Gaussian mechanism, basic/advanced composition over B answers (corrected) or exact Gaussian "
                  "composition (tight)")

    def win_reason(self, s: WinContext) -> str:
        return (f"few predictions (B = {_fmt(s.budget)}) and large N λ = {_fmt(s.n_lam)} keep the per-answer logit "
                "noise of prediction sensitivity small")

    def _calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str) -> NoiseScale:
        b = problem.budget
        delta_s, tol, notes, what = sensitivity_of(problem, accounting)
        if budget.is_pure:
            beta = budget.epsilon / (b * delta_s)
            return NoiseScale(self.name, budget.epsilon, 0.0, accounting, "laplace_like", beta=beta,
                              per_query_epsilon=budget.epsilon / b, per_query_delta=0.0, sensitivity=delta_s,
                              solver_tolerance=tol, notes=notes,
                              formula=f"beta = eps / (B Delta), Delta = {what} (basic composition over B queries)")
        if accounting == "tight":
            sigma = exact_gaussian_sigma(budget.epsilon, budget.delta, b, delta_s)
            pq_delta = budget.delta / b
            return NoiseScale(self.name, budget.epsilon, budget.delta, accounting, "gaussian", sigma=sigma,
                              per_query_epsilon=analytic_gaussian_epsilon(sigma, pq_delta, delta_s),
                              per_query_delta=pq_delta, sensitivity=delta_s, solver_tolerance=tol, notes=notes,
                              formula="sigma = sqrt(B) * analytic Gaussian(eps, delta, Delta) (exact Gaussian composition)")
        adv = advanced_gaussian_sigma(budget.epsilon, budget.delta, b, delta_s)
        formula = ("sigma = analytic Gaussian(eps/B, delta/B, Delta) (basic composition)" if adv.branch == "basic" else
                   f"sigma = analytic Gaussian(eps*, delta*, Delta), eps* = sqrt(2/B)(sqrt(ln 1/d' + eps) - sqrt(ln 1/d')), "
                   f"delta* = (delta - d')/B, d' = {adv.delta_prime:.3g}")
        return NoiseScale(self.name, budget.epsilon, budget.delta, accounting, "gaussian", sigma=adv.sigma,
                          per_query_epsilon=adv.per_query_epsilon, per_query_delta=adv.per_query_delta,
                          sensitivity=delta_s, solver_tolerance=tol, notes=notes, formula=formula)

    def spent_epsilon(self, noise, problem: Problem, delta: float, accounting: str) -> float:  # noqa: ANN001
        """B answers at the certified sensitivity: B beta Delta (Laplace-like, basic composition); Gaussian:
        the exact composition's epsilon (tight, or B = 1), else the basic/advanced composition inverted by
        bisection on its calibration (upper end of the bracket), starting from the exact one."""
        from ..accounting.forward import bisect_epsilon, gaussian_epsilon, laplace_like_epsilon

        sens, queries = problem.certified_sensitivity, problem.budget
        if noise.get("noise") == "laplace_like":
            return laplace_like_epsilon(noise_value(noise, "beta"), sens, queries)
        sigma = noise_value(noise, "sigma")
        if queries == 1 or accounting == "tight":
            return gaussian_epsilon(sigma, delta, sens, queries)
        # Exact Gaussian composition is tighter than basic/advanced: its epsilon is a lower end to start from.
        return bisect_epsilon(lambda e: advanced_gaussian_sigma(e, delta, queries, sens).sigma, sigma,
                              lo=gaussian_epsilon(sigma, delta, sens, queries))

    def cost_parts(self, problem, points: int, repeats: int) -> list[CostPart]:  # noqa: ANN001 - Problem
        """A fixed overhead, the non-private solve (shared) and noisy logits for every answer."""
        return [CostPart("fixed", 1.0), nonprivate_part(problem),
                CostPart("answers", points * repeats / 20 * (problem.dim / 784) ** 0.5)]

    def release(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                queries: torch.Tensor | None = None) -> torch.Tensor:
        import torch
        theta = ctx.nonprivate_theta(ctx.problem.lam).to(torch.float64)
        x = ctx.x_test if queries is None else queries.to(device=ctx.device)
        # The logits in float64 (a float32 product errs by up to ~D 2^-24 ||theta|| per logit vector,
        # a data-dependent shift the sensitivity does not cover); the noise is added in float64 and
        # the noisy logits rounded once (base.noisy_release). Each of the M queries gets its own draw.
        # The logit sensitivity Delta needs ||x|| <= 1 for the *query* too (||(theta - theta')^T x|| <=
        # ||theta - theta'|| ||x||): a row outside the unit ball (an attacker's, or a float32 test row a
        # hair over 1) is scaled into it, in float64, by the same fixed rule as the data, x / max(1, ||x||).
        def rows(i: int) -> torch.Tensor:
            part = x[i:i + 8192].to(torch.float64)
            return part / part.norm(dim=1, keepdim=True).clamp_min(1.0)

        logits = torch.cat([rows(i) @ theta for i in range(0, x.shape[0], 8192)]
                           or [theta.new_zeros(0, theta.shape[1])])  # [M, C]
        return noisy_release(logits, ctx, self.name, scales, repeats)  # [E, R, M, C]
