"""Loss perturbation (objective perturbation; Chaudhuri et al. 2011, Kifer et al. 2012; paper
Algorithms 4 and 5), multi-class.

Minimise (1/N) [ sum_n loss_n + lam_s R(theta) + tr(B^T theta) + (rho/2) ||theta||_F^2 ] with
lam_s = N lam (so the slider lam means the same average-form weight as for every other method)
and rho = 2 L C / eps (L = 1/2), which bounds the Jacobian-determinant ratio by e^(eps/2)
(paper Eqs. 26-29).

Correction (``corrected`` and ``tight``). The paper's noise scale comes from Kifer et al.'s proof
for add/remove neighbours, where b' - b is one example's gradient (norm <= K, paper Eq. 31).
Under the replace-one relation used for every other method here (and for its Delta = 2K/(N lam)),
b' - b is the difference of two examples' gradients, of norm <= 2K. The noise part must then use
sensitivity 2K at privacy eps/2:
  delta = 0: Laplace-like with beta = eps / (4K) (the paper's eps/(2K) gives e^(1.5 eps));
  delta > 0: Gaussian with sigma from :func:`multiclass_gaussian_sigma`. The shift b' - b depends
  on the released theta and spans up to 2C directions, so the one-dimensional Gaussian tail of
  the binary proof is replaced by a chi_{2C} tail.
``paper`` keeps the published beta = eps/(2K) and sigma = (K/eps) sqrt(8 ln(2/delta) + 4 eps),
labelled as add/remove calibration.

Inexact solver (``corrected`` and ``tight``): approximate minima perturbation (Iyengar et al. 2019,
"Towards practical differentially private convex optimization", Algorithm 1). The solver certifies
||grad J_b(theta_hat)|| <= g (:mod:`privcore.certify`), so ||theta_hat - theta*|| <= g / Lam with
Lam = lam + rho/N the strong convexity of the perturbed average-form objective. theta* is
(eps1, delta1)-DP; given theta* = t (which fixes b for each data set), theta_hat - t is a function
of the data set of norm <= g / Lam, so releasing theta_hat + Z with Z calibrated at sensitivity
2 g / Lam for (eps2, delta2) is, by adaptive composition and post-processing,
(eps1 + eps2, delta1 + delta2)-DP. Here eps2 = AMP_FRACTION * eps (delta likewise) and
g = LP_TOLERANCE_FACTOR * problem.solver_tolerance, so Z is far smaller than the objective noise.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..accounting.gaussian import analytic_gaussian_sigma
from ..validation import format_value as _fmt
from ..types import K_LIPSCHITZ, L_HESSIAN, NoiseScale, PrivacyBudget, Problem
from .base import EXACT_MINIMISER_NOTE, CostPart, Method, data_work, nonprivate_part, solver_iterations, scaled_noise, unit_noise, WinContext
from .card import MethodCard
from .forward import SENSITIVITY_INPUTS, NoiseInput, noise_value

if TYPE_CHECKING:  # pragma: no cover - torch is imported where used (start-up stays light)
    import torch

    from ..context import TrainContext

__all__ = ["LossPerturbation", "multiclass_gaussian_sigma", "gamma_upper_quantile", "AMP_FRACTION", "LP_TOLERANCE_FACTOR"]

#: Share of epsilon (and delta) paying for the output noise of approximate minima perturbation.
AMP_FRACTION = 0.01
#: Loss perturbation's certified gradient norm, as a fraction of Problem.solver_tolerance.
LP_TOLERANCE_FACTOR = 0.1


def multiclass_gaussian_sigma(epsilon: float, delta: float, classes: int) -> float:
    """Gaussian std for multi-class loss perturbation under replace-one neighbours.

    The noise part of the privacy loss at output theta is (2 <b, Delta> + ||Delta||^2) / (2 sigma^2)
    with Delta = x'(p' - y')^T - x(p - y)^T. Delta depends on theta, so a one-dimensional Gaussian
    tail (the binary-case argument of Kifer et al. 2012) does not apply; but Delta always lies in
    the fixed subspace {x u^T + x' v^T} of dimension <= 2C, so |<b, Delta>| <= ||P b|| 2K with
    ||P b|| ~ sigma chi_{2C}. Requiring the loss <= eps/2 whenever chi_{2C} <= r (probability
    >= 1 - delta) gives 2K r / sigma + 2K^2 / sigma^2 <= eps/2, i.e.
    sigma = 2K (sqrt(r^2 + eps) + r) / eps. The other eps/2 pays for the Jacobian (rho = 2LC/eps).
    """
    # Upper delta-quantile of chi with 2C degrees of freedom: chi^2_{2C} / 2 ~ Gamma(C, 1).
    r = math.sqrt(2.0 * gamma_upper_quantile(classes, delta))
    return 2.0 * K_LIPSCHITZ * (math.sqrt(r * r + epsilon) + r) / epsilon


def _log_gamma_sf(c: int, x: float) -> float:
    """log P(Gamma(c, 1) > x) for integer c: the Poisson sum e^-x sum_{k<c} x^k / k!, in log space."""
    if x <= 0.0:
        return 0.0
    logs = [k * math.log(x) - x - math.lgamma(k + 1.0) for k in range(c)]
    top = max(logs)
    return top + math.log(sum(math.exp(v - top) for v in logs))


def gamma_upper_quantile(classes: int, delta: float) -> float:
    """Smallest x (rounded up, to 1e-10 relative) with P(Gamma(classes, 1) > x) <= delta.

    Standard library only (``scipy.special.gammainccinv`` without importing scipy, so the CLI starts
    light). The survival function of an integer-shape Gamma is a Poisson sum, decreasing in x; a
    bisection keeps the upper end. The float64 log-sum has an absolute error of about
    classes * log(x) * 1e-16 (3.5e-12 relative in the tail at classes = 5,000, enough to put the
    bisection's end below the true quantile), so the end is raised by 1e-10 relative, which lowers
    the tail by at least ~1e-10 sqrt(classes) relative: the chi radius is never below the quantile.
    """
    c = int(classes)
    if c != classes or c < 1:
        raise ValueError(f"classes must be an integer >= 1, got {classes!r}")
    log_delta = math.log(delta)
    lo, hi = 0.0, float(c) + 1.0
    while _log_gamma_sf(c, hi) > log_delta:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-13 * hi:
        mid = 0.5 * (lo + hi)
        if _log_gamma_sf(c, mid) <= log_delta:
            hi = mid
        else:
            lo = mid
    return hi * (1.0 + 1e-10)

_PAPER_NOTE = ("as published: calibrated for add/remove neighbours (||b - b'|| <= K) and, for delta > 0, a one-"
               "dimensional Gaussian tail; under replace-one neighbours with C classes the guarantee is weaker than "
               "stated (delta = 0: only 1.5 eps)")


class LossPerturbation(Method):
    name = "loss_perturbation"
    card = MethodCard(
        label="Loss perturbation",
        short_label="Loss pert.",
        sentence_label="loss perturbation",
        colour="#E69F00",  # orange
        marker="diamond",
        dash="dot",
        summary="Add a random linear term (and extra L2 weight ρ) to the objective, solve it to a certified tolerance.",
        wins_when="Small ε at δ = 0 and many predictions; gains quickly as N grows.",
        assumptions="Convex, twice-differentiable loss with Hessian ≤ L = 1/2, ‖x‖ ≤ 1; solver gradient norm certified (approximate minima perturbation).",
    )
    paper_figure6_axis = "lam"
    from_paper = True
    paper_assumes_exact_minimiser = True
    uses = ("lam",)
    #: The average-form L2 weight over the lam = auto grid (engine.specs.LAM_AUTO_GRID).
    tuning_grid = {"lam": (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 0.5)}
    family = "training"
    trains_per_release = True
    noise_inputs = (*SENSITIVITY_INPUTS, NoiseInput("rho", "ρ (extra L2)", "the extra L2 weight rho"),
                    NoiseInput("output_scale", "output noise scale", "the output noise's scale (approximate minima "
                               "perturbation)", shown=False,
                               absent="the exact minimiser is assumed (a solver's output needs the output noise)"))
    accountant = ("objective perturbation (Laplace-like, replace-one ||b - b'|| <= 2K) plus approximate minima "
                  "perturbation", "objective perturbation (Gaussian, chi_{2C} tail) plus approximate minima "
                  "perturbation")

    def win_reason(self, s: WinContext) -> str:
        if s.pure and s.epsilon is not None and float(s.epsilon) <= 3:
            return (f"at small ε = {_fmt(s.epsilon)} with δ = 0, loss perturbation wins: its noise enters the objective "
                    "and is damped by the extra regulariser ρ instead of landing directly on the weights")
        if s.many:
            return (f"many predictions (B = {_fmt(s.budget)}) rule out the prediction methods, and loss perturbation's "
                    "objective noise hurts least among the private-training methods here")
        if not s.pure:
            return (f"at ε = {_fmt(s.epsilon)} loss perturbation's Gaussian noise enters the objective, where its extra "
                    "regulariser ρ damps it, and hurts less than the alternatives' noise")
        return (f"large N λ (N = {_fmt(s.n)}, λ = {_fmt(s.lam)}) shrinks the sensitivity methods' noise, and loss "
                f"perturbation's objective noise hurts least at ε = {_fmt(s.epsilon)}")

    def _calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str) -> NoiseScale:
        eps = budget.epsilon
        rho = 2.0 * L_HESSIAN * problem.classes / eps
        if accounting == "paper":
            if budget.is_pure:
                return NoiseScale(self.name, eps, 0.0, accounting, "laplace_like", beta=eps / (2.0 * K_LIPSCHITZ), rho=rho,
                                  sensitivity=K_LIPSCHITZ, notes=(_PAPER_NOTE, EXACT_MINIMISER_NOTE),
                                  formula="beta = eps / (2K), rho = 2 L C / eps (as published)")
            sigma = (K_LIPSCHITZ / eps) * math.sqrt(8.0 * math.log(2.0 / budget.delta) + 4.0 * eps)
            return NoiseScale(self.name, eps, budget.delta, accounting, "gaussian", sigma=sigma, rho=rho,
                              sensitivity=K_LIPSCHITZ, notes=(_PAPER_NOTE, EXACT_MINIMISER_NOTE),
                              formula="sigma = (K/eps) sqrt(8 ln(2/delta) + 4 eps), rho = 2 L C / eps (as published)")
        eps1, dlt1 = (1.0 - AMP_FRACTION) * eps, (1.0 - AMP_FRACTION) * budget.delta
        eps2, dlt2 = AMP_FRACTION * eps, AMP_FRACTION * budget.delta
        rho = 2.0 * L_HESSIAN * problem.classes / eps1
        tol = LP_TOLERANCE_FACTOR * problem.solver_tolerance
        out_sens = 2.0 * tol / (problem.lam + rho / problem.n)  # 2 g / Lam
        amp = (f"; output noise at sensitivity 2g/(lam + rho/N) = {out_sens:.3g} with {AMP_FRACTION:g} of eps"
               f"{' and delta' if not budget.is_pure else ''} (approximate minima perturbation)")
        if budget.is_pure:
            return NoiseScale(self.name, eps, 0.0, accounting, "laplace_like", beta=eps1 / (4.0 * K_LIPSCHITZ), rho=rho,
                              sensitivity=2.0 * K_LIPSCHITZ, solver_tolerance=tol, output_scale=out_sens / eps2,
                              formula="beta = eps1 / (4K) (replace-one: ||b - b'|| <= 2K), rho = 2 L C / eps1, "
                                      f"eps1 = {1 - AMP_FRACTION:g} eps" + amp)
        sigma = multiclass_gaussian_sigma(eps1, dlt1, problem.classes)
        return NoiseScale(self.name, eps, budget.delta, accounting, "gaussian", sigma=sigma, rho=rho,
                          sensitivity=2.0 * K_LIPSCHITZ, solver_tolerance=tol,
                          output_scale=analytic_gaussian_sigma(eps2, dlt2, out_sens),
                          formula="sigma = 2K (sqrt(r^2 + eps1) + r) / eps1, r = chi_{2C} quantile at 1 - delta1; "
                                  f"rho = 2 L C / eps1, (eps1, delta1) = {1 - AMP_FRACTION:g} (eps, delta)" + amp)

    def forward_noise(self, given, problem: Problem) -> dict:  # noqa: ANN001 - a mapping
        """The given noise; with an output noise, the certified gradient norm g its sensitivity needs (the
        one :meth:`_calibrate` certifies: ``LP_TOLERANCE_FACTOR`` times the problem's solver tolerance)."""
        noise = super().forward_noise(given, problem)
        if noise.get("output_scale") is not None:
            noise["solver_tolerance"] = LP_TOLERANCE_FACTOR * problem.solver_tolerance
        return noise

    def spent_epsilon(self, noise, problem: Problem, delta: float, accounting: str) -> float:  # noqa: ANN001
        """The privacy-loss bound of :func:`privcore.accounting.forward.loss_perturbation_epsilon` (noise term at
        replace-one sensitivity 2K, Jacobian L C / rho, and the output noise where there is one)."""
        from ..accounting.forward import loss_perturbation_epsilon

        kind = noise.get("noise")
        scale = 1.0 / noise_value(noise, "beta") if kind == "laplace_like" else noise_value(noise, "sigma")
        out = noise.get("output_scale")
        return loss_perturbation_epsilon(kind, scale, noise_value(noise, "rho"), problem.classes, delta, n=problem.n,
                                         lam=problem.lam, solver_tolerance=noise.get("solver_tolerance"),
                                         output_scale=None if out is None else float(out))

    def cost_parts(self, problem, points: int, repeats: int) -> list[CostPart]:  # noqa: ANN001 - Problem
        """The non-private solve (its warm start, shared) and one perturbed solve per release, batched.

        A batch costs an offset of up to 3.4 releases' worth plus one unit per release, linear in the batch
        (bench/bench_cold_updates.py --cpu --trace times the jobs of cold runs); and the perturbed
        problems' regulariser lam + rho/N keeps them better conditioned than the non-private solve as
        lam shrinks, so their time grows with the solver's iteration ratio to the power 0.6, not 1
        (bench/bench_cost_pieces.py --only lp_lambda)."""
        batch = points * repeats
        offset = min(3.4, 0.17 * batch)  # a single release (lambda = auto's candidates) costs far less than 4.4 releases' worth
        return [CostPart("fixed", 1.0), nonprivate_part(problem),
                CostPart("perturbed", data_work(problem) * solver_iterations(problem.lam) ** 0.6 * (batch + offset) / 17.3)]

    def release(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                queries: torch.Tensor | None = None) -> torch.Tensor:
        import torch
        n, lam = ctx.x_train.shape[0], ctx.problem.lam
        theta_np = ctx.nonprivate_theta(lam, released=False)  # only the warm start
        d, c = theta_np.shape
        # Noise b in the sum-form objective; divided by N it is the linear term of the average form.
        b = scaled_noise(ctx, self.name, scales, repeats, 1, d * c, dtype=torch.float64).view(len(scales) * repeats, d, c)
        rho = torch.tensor([s.rho or 0.0 for s in scales], dtype=torch.float64, device=ctx.device)
        lam_total = (lam + rho / n).repeat_interleave(repeats)
        linear = b / n
        # Warm start: one preconditioned Newton-like step from the non-private solution, where the
        # gradient of the perturbed objective is the linear term (plus rho/N theta*).
        pre = ctx.preconditioner
        pull = linear + (rho / n).repeat_interleave(repeats).view(-1, 1, 1) * theta_np.unsqueeze(0)
        init = theta_np.unsqueeze(0) - pre.from_basis(pre.apply(pre.to_basis(pull), lam_total))
        tols = [s.solver_tolerance for s in scales if s.solver_tolerance is not None]
        res = ctx.solve(lam_total, linear, init, tol=min(tols) if tols else None)
        theta = res.theta.view(len(scales), repeats, d, c)
        # Approximate minima perturbation: output noise of the objective noise's kind, per repetition.
        for kind in {s.noise for s in scales if s.output_scale}:
            unit = unit_noise(ctx, self.name, kind, repeats, 1, d * c, stream=kind + ":output",
                              dtype=torch.float64).view(repeats, d, c)
            for e, s in enumerate(scales):
                if s.noise == kind and s.output_scale:
                    theta[e] += float(s.output_scale) * unit
        return theta.float()
