"""Model sensitivity (output perturbation; Chaudhuri et al. 2011, paper Algorithms 1 and 3).

Release theta* + noise, where theta* minimises J = (1/N) sum loss + lam/2 ||theta||^2 and
||theta*(D) - theta*(D')||_F <= Delta = 2K / (N lam) (paper Theorem 5, replace-one neighbours).
delta = 0: Laplace-like noise on the D*C matrix with beta = N lam eps / (2K) (paper Theorem 1).
delta > 0: i.i.d. Gaussian, sigma = analytic Gaussian sigma at (eps, delta, Delta) (Theorem 2).
Trained once; the noise is drawn per repetition.

Inexact solver (``corrected`` and ``tight``): the released theta_hat has gradient norm at most
g = problem.solver_tolerance (certified in float64 by :mod:`privcore.certify`), so Delta is
2K / (N lam) + 2 g / lam (:attr:`Problem.certified_sensitivity`; 1 % above the exact-minimiser
value). ``paper`` keeps 2K / (N lam), which assumes the exact minimiser, and says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..accounting.gaussian import analytic_gaussian_sigma
from ..validation import format_value as _fmt
from ..types import NoiseScale, PrivacyBudget, Problem
from .base import CostPart, Method, noisy_release, nonprivate_part, sensitivity_of, WinContext
from .card import MethodCard
from .forward import SENSITIVITY_INPUTS, noise_value

if TYPE_CHECKING:  # pragma: no cover - torch is imported where used (start-up stays light)
    import torch

    from ..context import TrainContext

__all__ = ["ModelSensitivity"]


class ModelSensitivity(Method):
    name = "model_sensitivity"
    card = MethodCard(
        label="Model sensitivity",
        short_label="Model sens.",
        sentence_label="model sensitivity",
        colour="#0072B2",  # blue
        marker="circle",
        dash="solid",
        summary="Train the regularised model (to a certified gradient norm), then add noise to its weights once.",
        wins_when="N λ is large (noise shrinks as 1/(N λ ε)), D·C small, many predictions needed, δ > 0.",
        assumptions="Convex loss, K-Lipschitz (K = √2), λ > 0, ‖x‖ ≤ 1, solver gradient norm certified.",
    )
    from_paper = True
    paper_assumes_exact_minimiser = True
    uses = ("lam",)
    #: The average-form L2 weight over the lam = auto grid (engine.specs.LAM_AUTO_GRID).
    tuning_grid = {"lam": (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 0.5)}
    family = "training"
    noise_inputs = SENSITIVITY_INPUTS
    accountant = ("Laplace-like mechanism at the certified L2 sensitivity",
                  "analytic Gaussian mechanism (Balle and Wang 2018) at the certified L2 sensitivity")

    def win_reason(self, s: WinContext) -> str:
        core = (f"large N λ (N = {_fmt(s.n)}, λ = {_fmt(s.lam)}) shrinks the sensitivity methods' noise "
                f"2K/(N λ ε), so perturbing the trained weights once is enough")
        return core + (f", whatever the number of predictions (B = {_fmt(s.budget)})" if s.many else "")

    def _calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str) -> NoiseScale:
        delta_s, tol, notes, what = sensitivity_of(problem, accounting)
        if budget.is_pure:
            beta = budget.epsilon / delta_s
            return NoiseScale(self.name, budget.epsilon, budget.delta, accounting, "laplace_like", beta=beta,
                              sensitivity=delta_s, solver_tolerance=tol, notes=notes,
                              formula=f"beta = eps / Delta, Delta = {what}, density exp(-beta ||b||_F) of the noise b")
        sigma = analytic_gaussian_sigma(budget.epsilon, budget.delta, delta_s)
        return NoiseScale(self.name, budget.epsilon, budget.delta, accounting, "gaussian", sigma=sigma,
                          sensitivity=delta_s, solver_tolerance=tol, notes=notes,
                          formula=f"sigma = analytic Gaussian(eps, delta, Delta) with Delta = {what}")  # breakable: KaTeX does not wrap

    def spent_epsilon(self, noise, problem: Problem, delta: float, accounting: str) -> float:  # noqa: ANN001
        """beta Delta (Laplace-like, paper Theorem 1) or the analytic Gaussian epsilon of sigma, at the certified
        sensitivity: the released output is the certified solver's (a ``paper`` scale assumed the exact one)."""
        from ..accounting.forward import gaussian_epsilon, laplace_like_epsilon

        if noise.get("noise") == "laplace_like":
            return laplace_like_epsilon(noise_value(noise, "beta"), problem.certified_sensitivity)
        return gaussian_epsilon(noise_value(noise, "sigma"), delta, problem.certified_sensitivity)

    def cost_parts(self, problem, points: int, repeats: int) -> list[CostPart]:  # noqa: ANN001 - Problem
        """A fixed overhead and the non-private solve it perturbs (shared)."""
        return [CostPart("fixed", 1.0), nonprivate_part(problem)]

    def release(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                queries: torch.Tensor | None = None) -> torch.Tensor:
        theta = ctx.nonprivate_theta(ctx.problem.lam)  # [D, C], float64 as certified
        d, c = theta.shape
        # Noise added to the float64 weights, rounded once after (base.noisy_release).
        return noisy_release(theta.reshape(1, d * c), ctx, self.name, scales, repeats).view(len(scales), repeats, d, c)
