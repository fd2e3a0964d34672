"""Certified solver residual: the gradient-norm bound the sensitivity proofs may rely on.

Model sensitivity, prediction sensitivity and loss perturbation release (a function of) the
minimiser of a lambda-strongly convex objective J. A solver returns theta_hat, not theta*, and by
strong convexity ||theta_hat - theta*||_F <= ||grad J(theta_hat)||_F / lambda. If the solver
*guarantees* ||grad J(theta_hat)|| <= g on every input, the released theta_hat has replace-one
sensitivity at most 2K / (N lambda) + 2 g / lambda (the triangle inequality through theta*(D) and
theta*(D')). That g is :attr:`privcore.types.Problem.solver_tolerance`, fixed before the data are
seen; this module makes it hold:

1. the batched mixed-precision solver (:func:`privcore.solver.solve_softmax`) runs first;
2. :func:`exact_gradient` recomputes every problem's gradient in float64 on the data exactly as
   the mechanism uses them (the float32 rows, upcast chunk by chunk, in the original coordinates:
   no rotated or rounded copy), so the checked norm is the true one up to float64 rounding, far
   below any tolerance used here (a margin of 1e-3 of the tolerance covers it);
3. where the data's float64 rotated copy fits (:meth:`privcore.solver.Preconditioner.float64`,
   N up to about 50,000 at D = 784), the mixed-precision solver first carries on with anchored
   products (float32 products of the step from a float64 anchor: no floor growing with ||theta||,
   2-2.5x cheaper than float64 products; at lam = 1e-6 on mnist-5k it replaces 50-100 float64
   polish iterations). This only saves time: the exact check of step 2 decides, on its result;
4. problems still above the tolerance are polished by :func:`polish`: first Newton steps whose
   linear systems are solved by conjugate gradients with float32 Hessian-vector products
   (mixed-precision iterative refinement: the residual, the exact gradient, stays float64; only
   the correction is computed in float32, and a step is kept only where the exact gradient norm
   falls; this is what large N, where no float64 copy fits, relies on; above 2 x 65,536 rows the
   Hessian is averaged over every k-th row only, a sub-sampled Newton step that needs more steps
   but far fewer products), then an L-BFGS in float64 with the same exact gradients for anything
   left, per problem;
5. a problem still above the tolerance (the budgets of steps 3-4 are fixed) is not refused: whether
   a solve certifies depends on the data, so a refusal would be a data-dependent event nobody
   accounts. It goes to :func:`_guaranteed_descent` instead: Nesterov's accelerated gradient
   method for a number of steps computed from public quantities only (lam, C, the tolerance, the
   norm of a perturbation's linear term, the unit-ball row bound), which by its convergence
   theorem ends within tol / lam of the minimiser on *every* input, the distance the sensitivity
   includes. Either path releases a point within tol / lam of theta*, so the sensitivity bound
   holds for every pair of neighbours whichever path each took, and the output does not show which
   (only the running time does: a timing side channel this library does not close).
   The only refusal left is decided before the data are read: a tolerance below what float64
   arithmetic can guarantee for that lam and C (:func:`fallback_steps`).

How the point is found does not matter to the guarantee: only the float64 check of step 2, or the
fallback's theorem, does.
Cost: one float64 pass over the data per problem batch and per Newton step (usually one), the
float32 conjugate-gradient products (each about a third of a float64 pass), and, rarely, L-BFGS
iterations. ``bench/bench_large_n.py`` reports it.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from .lbfgs import backtrack, descent_direction, push_pair
from .solver import Preconditioner, SolveResult, hessian_diagonal, skinny_mm, solve_softmax

__all__ = ["SolverCertificationError", "exact_objective", "exact_gradient", "polish", "certify"]

#: Relative margin kept below the tolerance for float64 rounding in the check itself.
CHECK_MARGIN = 1e-3
#: Bytes of one [n, P, C] float32 buffer of the Newton steps: problems are refined in groups this size.
NEWTON_GROUP_BYTES = 256 << 20
#: Rows the Newton steps' Hessian is taken over, at least: above twice this many, every
#: ``n // NEWTON_HESSIAN_ROWS``-th row only (a sub-sampled Newton method; Roosta-Khorasani and
#: Mahoney 2019, Byrd et al. 2011). Only the step's quality depends on it: the exact float64
#: gradient judges every step, on all rows.
NEWTON_HESSIAN_ROWS = 1 << 16
#: Iterations and L-BFGS memory of the float64 stage in the eigenbasis before the exact check.
FLOAT64_ITERATIONS = 300
FLOAT64_MEMORY = 10
#: The fallback promises no distance below ROUNDING_SAFETY u sqrt(kappa) R (u = 2^-52, R the public
#: bound on ||theta*||, kappa = L / lam): each step errs by about u R and the contracting momentum
#: recurrence sums such errors to at most about sqrt(kappa) of them. A float32 replica of the steps
#: stays within 0.7-3 u R of the float64 ones at kappa = 50-5,000 (docs/spec.md), far inside
#: this. Model and prediction sensitivity's g = 0.01 K / N (N up to 10^6) ask for over 10^5 times it.
ROUNDING_SAFETY = 64.0


class SolverCertificationError(RuntimeError):
    """The solver could not reach the certified gradient-norm bound: the release is refused."""


def exact_objective(x: torch.Tensor, y: torch.Tensor, theta: torch.Tensor, lam: torch.Tensor,
                    linear: torch.Tensor | None, with_grad: bool = True,
                    budget: int = 1 << 22) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Objective [P] and gradient [P, D, C] of the shared-data problems, all in float64.

    x [n, D] (any float dtype; upcast ``budget / (P C)`` rows at a time, so no float64 copy of the
    data is made), y [n], theta [P, D, C], lam [P], linear [P, D, C] or None.
    """
    p, d, c = theta.shape
    n = x.shape[0]
    th = theta.to(torch.float64).permute(1, 0, 2).reshape(d, p * c)
    rows = min(n, max(256, min(budget // max(p * c, 1), 8192)))
    loss = torch.zeros(p, dtype=torch.float64, device=x.device)
    grad = torch.zeros(d, p * c, dtype=torch.float64, device=x.device) if with_grad else None
    # One float64 buffer, refilled per chunk: a fresh 100 MB allocation per chunk costs more in page
    # faults than the products themselves.
    buffer = torch.empty(rows, d, dtype=torch.float64, device=x.device)
    for start in range(0, n, rows):
        xs = buffer[: min(rows, n - start)]
        xs.copy_(x[start:start + rows])
        ys = y[start:start + rows]
        m = xs.shape[0]
        logits = skinny_mm(xs, th).view(m, p, c)
        logp = logits - torch.logsumexp(logits, dim=2, keepdim=True)
        loss -= logp.gather(2, ys.view(m, 1, 1).expand(m, p, 1)).squeeze(2).sum(dim=0)
        if grad is not None:
            resid = logp.exp()
            resid.scatter_add_(2, ys.view(m, 1, 1).expand(m, p, 1),
                               torch.full((m, p, 1), -1.0, dtype=torch.float64, device=x.device))
            grad += skinny_mm(xs.T, resid.view(m, p * c))
    theta64 = theta.to(torch.float64)
    lam64 = lam.to(torch.float64).view(-1, 1, 1)
    f = loss / n + 0.5 * lam64.view(-1) * theta64.pow(2).sum(dim=(1, 2))
    if linear is not None:
        f = f + (linear.to(torch.float64) * theta64).sum(dim=(1, 2))
    if grad is None:
        return f, None
    g = grad.view(d, p, c).permute(1, 0, 2) / n + lam64 * theta64
    if linear is not None:
        g = g + linear.to(torch.float64)
    return f, g


def exact_gradient(x: torch.Tensor, y: torch.Tensor, theta: torch.Tensor, lam: torch.Tensor,
                   linear: torch.Tensor | None = None) -> torch.Tensor:
    """The float64 gradient [P, D, C] of :func:`exact_objective`."""
    return exact_objective(x, y, theta, lam, linear)[1]


def _hessian_product(xr: torch.Tensor, prob: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The loss Hessian's data term at probabilities ``prob`` [n, P, C] (float32) times v [P, r, C].

    (1/n) sum_i x_i x_i^T v_i (diag(p_i) - p_i p_i^T) in basis coordinates, the products in float32
    on v scaled to unit norm per problem (so its rounding is relative to v, however small v is).
    """
    n = xr.shape[0]
    p, r, c = v.shape
    scale = v.flatten(1).norm(dim=1).clamp_min(1e-300).view(-1, 1, 1)
    u = skinny_mm(xr, (v / scale).to(xr.dtype).permute(1, 0, 2).reshape(r, p * c)).view(n, p, c)
    u.mul_(prob)
    u.addcmul_(prob, u.sum(dim=2, keepdim=True), value=-1.0)
    return (u.view(n, p * c).T @ xr).view(p, c, r).transpose(1, 2).double() * scale / n


def _newton_step(xr: torch.Tensor, basis: torch.Tensor, theta: torch.Tensor, g: torch.Tensor, lam: torch.Tensor,
                 target: float, max_cg: int = 200, callback: Callable[[], None] | None = None) -> torch.Tensor:
    """A Newton correction [P, D, C] at theta [P, D, C] with exact gradient g, lam [P].

    Row space: H d = -g by preconditioned conjugate gradients (Jacobi in the eigenbasis), per problem,
    the Hessian products in float32 (:func:`_hessian_product`), until the residual is below
    ``target`` or has fallen by 1e-6 (float32's floor). Null space: -g / lam, exact.
    Above 2 :data:`NEWTON_HESSIAN_ROWS` rows the Hessian (and its diagonal) is the average over
    every ``n // NEWTON_HESSIAN_ROWS``-th row: an unbiased estimate whose error only slows the
    convergence of the steps (the exact gradient that each step is judged by covers all rows).
    """
    p, c = theta.shape[0], theta.shape[2]
    stride = max(1, xr.shape[0] // NEWTON_HESSIAN_ROWS)
    xr = xr[::stride] if stride > 1 else xr  # a strided view: rows in any order are sampled evenly
    n, r = xr.shape[0], basis.shape[1]
    lam3 = lam.view(-1, 1, 1)
    th_r = torch.einsum("dk,pdc->pkc", basis, theta)
    g_r = torch.einsum("dk,pdc->pkc", basis, g)
    step = -(g - torch.einsum("dk,pkc->pdc", basis, g_r)) / lam3
    prob = skinny_mm(xr, th_r.to(xr.dtype).permute(1, 0, 2).reshape(r, p * c)).view(n, p, c)
    prob.sub_(torch.logsumexp(prob, dim=2, keepdim=True)).clamp_min_(-80.0).exp_()
    minv = 1.0 / (hessian_diagonal(xr, th_r) + lam3)
    sol, res = torch.zeros_like(g_r), -g_r
    z = res * minv
    direction, rz = z.clone(), (res * z).sum(dim=(1, 2))
    floor = 1e-6 * g_r.flatten(1).norm(dim=1)
    for _ in range(max_cg):
        rn = res.flatten(1).norm(dim=1)
        live = (rn > target) & (rn > floor)
        if not live.any():
            break
        if callback is not None:
            callback()
        hd = _hessian_product(xr, prob, direction) + lam3 * direction
        curv = (direction * hd).sum(dim=(1, 2))
        live &= curv > 0
        alpha = torch.where(live, rz / curv.clamp_min(1e-300), torch.zeros_like(rz)).view(-1, 1, 1)
        sol += alpha * direction
        res -= alpha * hd
        z = res * minv
        rz_new = (res * z).sum(dim=(1, 2))
        beta = torch.where(live, rz_new / rz.clamp_min(1e-300), torch.zeros_like(rz)).view(-1, 1, 1)
        direction, rz = z + beta * direction, torch.where(live, rz_new, rz)
    return step + torch.einsum("dk,pkc->pdc", basis, sol)


def _refine(x: torch.Tensor, y: torch.Tensor, theta: torch.Tensor, f: torch.Tensor, g: torch.Tensor,
            lam: torch.Tensor, linear: torch.Tensor | None, tol: float, precond: Preconditioner, steps: int,
            callback: Callable[[], None] | None) -> None:
    """Newton steps (:func:`_newton_step`) on the problems above ``tol``, in place on theta, f, g.

    Every step is judged by the exact float64 gradient: a problem keeps it only where the exact
    gradient norm fell, and otherwise leaves the Newton steps (L-BFGS takes over).
    """
    basis = precond.basis.to(torch.float64)
    xr, c = precond.x, theta.shape[2]
    per = max(1, NEWTON_GROUP_BYTES // max(1, xr.shape[0] * c * xr.element_size()))
    gn = g.flatten(1).norm(dim=1)
    trying = gn > tol
    for _ in range(steps):
        active = torch.nonzero(trying).squeeze(1)
        if active.numel() == 0:
            return
        for first in range(0, active.numel(), per):
            idx = active[first:first + per]
            cand = theta[idx] + _newton_step(xr, basis, theta[idx], g[idx], lam[idx], 0.2 * tol, callback=callback)
            fc, gc = exact_objective(x, y, cand, lam[idx], None if linear is None else linear[idx])
            gnc = gc.flatten(1).norm(dim=1)
            better = gnc < gn[idx]
            keep = idx[better]
            theta[keep], f[keep], g[keep], gn[keep] = cand[better], fc[better], gc[better], gnc[better]
            trying[idx[~better]] = False
        trying &= gn > tol


def polish(x: torch.Tensor, y: torch.Tensor, theta: torch.Tensor, lam: torch.Tensor, linear: torch.Tensor | None,
           tol: float, precond: Preconditioner, max_iter: int = 200, memory: int = 5,
           callback: Callable[[], None] | None = None, newton_steps: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """Drive every problem's exact gradient norm to at most ``tol``.

    Starts from ``theta`` [P, D, C] (the mixed-precision solution); up to ``newton_steps`` Newton
    steps (:func:`_refine`; 0: none; a problem leaves them once under ``tol``: sub-sampled steps at
    N = 250,000 needed 3) first, then a float64 L-BFGS for the problems still above ``tol``.
    Its initial inverse Hessian: the loss Hessian's diagonal at the start in the data's eigenbasis
    plus lam, and 1/lam on the data's null space. Each problem keeps its own history, steps and
    stopping. Returns (theta [P, D, C], exact gradient norms [P]).
    """
    theta = theta.to(torch.float64).clone()
    lam = lam.to(torch.float64)
    basis = precond.basis.to(torch.float64)
    f, g = exact_objective(x, y, theta, lam, linear)
    if newton_steps > 0 and precond.x.dim() == 2 and precond.x.shape[0] == x.shape[0]:
        _refine(x, y, theta, f, g, lam, linear, tol, precond, newton_steps, callback)
    out_gn = g.flatten(1).norm(dim=1)
    active = torch.nonzero(out_gn > tol).squeeze(1)
    if active.numel() == 0:
        return theta, out_gn
    curv = hessian_diagonal(precond.x, torch.einsum("dk,pdc->pkc", basis, theta))  # [P, r, C]

    def direction0(g: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        gb = torch.einsum("dk,pdc->pkc", basis, g)
        row = torch.einsum("dk,pkc->pdc", basis, gb)
        return (torch.einsum("dk,pkc->pdc", basis, gb / (curv[idx] + lam[idx].view(-1, 1, 1)))
                + (g - row) / lam[idx].view(-1, 1, 1))

    s_hist: list[torch.Tensor] = []
    y_hist: list[torch.Tensor] = []
    fa, ga = f[active], g[active]
    for _ in range(max_iter):
        if active.numel() == 0:
            break
        if callback is not None:
            callback()
        lam_a, lin_a, idx = lam[active], None if linear is None else linear[active], active

        def objective(th: torch.Tensor, rows: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
            if rows is None:
                return exact_objective(x, y, th, lam_a, lin_a)
            return exact_objective(x, y, th, lam_a[rows], None if lin_a is None else lin_a[rows])

        th = theta[active]
        direction, slope = descent_direction(ga, s_hist, y_hist, lambda v: direction0(v, idx))
        gna = ga.flatten(1).norm(dim=1)
        new_th, new_f, new_g, stuck = backtrack(objective, th, direction, fa, ga, gna, slope, halvings=30)
        push_pair(s_hist, y_hist, new_th - th, new_g - ga, memory, min_curvature=0.0)
        theta[active], fa, ga = new_th, new_f, new_g
        new_gn = ga.flatten(1).norm(dim=1)
        out_gn[active] = new_gn
        keep = (new_gn > tol) & ~stuck
        if not keep.all():
            active, fa, ga = active[keep], fa[keep], ga[keep]
            s_hist[:] = [sv[keep] for sv in s_hist]
            y_hist[:] = [yv[keep] for yv in y_hist]
    return theta, out_gn


def _public_bounds(lam: torch.Tensor, linear: torch.Tensor | None, classes: int, row_norm_sq: float
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """(radius R [P], smoothness L [P]) of the objectives, from public quantities.

    R bounds ||theta*||: the loss is >= 0 and equals log C at theta = 0, so J(theta*) <= J(0) gives
    lam/2 ||theta*||^2 - ||b|| ||theta*|| <= log C, i.e. ||theta*|| <= (||b|| + sqrt(||b||^2 + 2 lam log C)) / lam
    with b the linear term. L = L_HESSIAN max ||x||^2 + lam bounds J's Hessian (Boehning: the softmax
    cross-entropy Hessian in the logits is at most 1/2).
    """
    from .types import L_HESSIAN

    lam = lam.to(torch.float64)
    b = torch.zeros_like(lam) if linear is None else linear.to(torch.float64).flatten(1).norm(dim=1)
    radius = (b + torch.sqrt(b * b + 2.0 * lam * math.log(classes))) / lam
    return radius, L_HESSIAN * max(1.0, row_norm_sq) + lam


def fallback_steps(lam: torch.Tensor, linear: torch.Tensor | None, classes: int, target: float,
                   row_norm_sq: float = 1.0) -> torch.Tensor:
    """Steps [P] after which :func:`_guaranteed_descent` is within ``target`` / lam of theta*, on any data.

    Nesterov's method on a mu-strongly convex, L-smooth f from y_1 with ||y_1 - x*|| <= R gives
    f(y_t) - f* <= (mu + L)/2 R^2 exp(-(t - 1) / sqrt(kappa)), kappa = L / mu (Bubeck 2015,
    "Convex optimization: algorithms and complexity", Theorem 3.18), and strong convexity
    ||y_t - x*||^2 <= 2 (f(y_t) - f*) / mu. So t = 1 + sqrt(kappa) log((mu + L) R^2 / (mu d^2))
    reaches distance d = target / mu. Every input is public: lam (mu), C, the tolerance, ||b|| and
    the unit-ball bound on the rows. Raises :class:`SolverCertificationError` (before any data are
    read) when d is below the rounding floor (:data:`ROUNDING_SAFETY`): float64 could not keep
    that promise.
    """
    radius, smooth = _public_bounds(lam, linear, classes, row_norm_sq)
    mu = lam.to(torch.float64)
    dist, root = target / mu, torch.sqrt(smooth / mu)
    floor = ROUNDING_SAFETY * 2.0 ** -52 * root.clamp_min(1.0) * radius
    if bool((dist < floor).any()):
        raise SolverCertificationError(
            f"float64 arithmetic cannot guarantee the certified bound {target:.3g} at lam = {float(mu.min()):.3g} "
            f"with C = {classes} (a distance to the minimiser of {float((dist / radius).min()):.2g} of its bound "
            f"{float(radius.max()):.3g}): the release is refused whatever the data; use a larger tolerance or lambda")
    ratio = ((mu + smooth) * radius ** 2 / (mu * dist ** 2)).clamp_min(1.0)
    return (1.0 + root * torch.log(ratio)).ceil().to(torch.int64)


def _guaranteed_descent(x: torch.Tensor, y: torch.Tensor, theta: torch.Tensor, gn: torch.Tensor, lam: torch.Tensor,
                        linear: torch.Tensor | None, steps: torch.Tensor, row_norm_sq: float,
                        callback: Callable[[], None] | None = None) -> torch.Tensor:
    """Nesterov's accelerated gradient (constant momentum, step 1/L) for ``steps`` [P] steps per problem.

    Starts from theta where its exact gradient norm ``gn`` puts it within the public radius R of the
    minimiser (||theta - theta*|| <= gn / lam by strong convexity), else from 0 (||theta*|| <= R),
    so :func:`fallback_steps` applies from either. Float64 throughout, exact gradients on all rows.
    """
    radius, smooth = _public_bounds(lam, linear, theta.shape[2], row_norm_sq)
    lam64 = lam.to(torch.float64)
    start = torch.where(((gn / lam64) <= radius).view(-1, 1, 1), theta.to(torch.float64),
                        torch.zeros_like(theta, dtype=torch.float64))
    root = torch.sqrt(smooth / lam64)
    momentum = ((root - 1.0) / (root + 1.0)).view(-1, 1, 1)
    step = (1.0 / smooth).view(-1, 1, 1)
    ahead, out = start.clone(), start.clone()  # Bubeck's x_s (where the gradient is taken) and y_s
    for t in range(int(steps.max()) if steps.numel() else 0):
        live = torch.nonzero(steps > t).squeeze(1)
        if callback is not None:
            callback()
        g = exact_gradient(x, y, ahead[live], lam64[live], None if linear is None else linear[live])
        new = ahead[live] - step[live] * g
        ahead[live] = new + momentum[live] * (new - out[live])
        out[live] = new
    return out


def certify(x: torch.Tensor, y: torch.Tensor, res: SolveResult, lam: torch.Tensor, linear: torch.Tensor | None,
            tol: float, precond: Preconditioner, callback: Callable[[], None] | None = None) -> SolveResult:
    """Bring every problem of ``res`` within ``tol`` / lam of its minimiser, on every input.

    Checked (and if needed polished) until every exact gradient norm is at most ``tol``; a problem
    the fixed budgets leave above it goes to :func:`_guaranteed_descent`, whose step count is
    public. Never refuses on the data: only an unreachable ``tol`` is refused, before the data are
    read (:func:`fallback_steps`). The returned grad_norm is the exact norm reached (after the
    fallback it may exceed ``tol``; the distance bound holds by the fallback's theorem).
    """
    if not (isinstance(tol, float) and math.isfinite(tol) and tol > 0.0):
        raise ValueError(f"tol must be a finite float > 0, got {tol!r}")
    check = tol * (1.0 - CHECK_MARGIN)
    # Public: rows in the unit ball (the context enforces it; a larger row only lengthens the fallback).
    row_norm_sq = 1.0
    steps = fallback_steps(lam, linear, res.theta.shape[2], check, row_norm_sq)  # refuses before any data
    theta = res.theta
    fine = precond.float64(x) if x.dtype != torch.float64 else None
    if fine is not None and bool((res.grad_norm > 0.5 * check).any()):  # the solver stopped at its float32 floor
        # Anchored iterations in the eigenbasis first (float32 products of the step from a float64
        # anchor: no float32 floor): a problem already under the bound stops at once, the others carry
        # on from the mixed-precision point. Only speed depends on this; the exact check below decides.
        theta = solve_softmax(precond.x, y, lam, linear, classes=theta.shape[2], init=theta, gtol=0.9 * check,
                              max_iter=FLOAT64_ITERATIONS, memory=FLOAT64_MEMORY, precond=precond,
                              callback=callback, exact=fine).theta
    theta, gn = polish(x, y, theta, lam, linear, check, precond, callback=callback)
    over = torch.nonzero(~(gn <= check)).squeeze(1)  # NaN included
    if over.numel():
        lin = None if linear is None else linear[over]
        rows = float(x.to(torch.float64).pow(2).sum(dim=1).max()) if x.shape[0] else 0.0
        if rows > row_norm_sq * (1.0 + 1e-6):  # rows outside the unit ball: the bound the steps need
            row_norm_sq = rows
            steps = fallback_steps(lam, linear, res.theta.shape[2], check, row_norm_sq)
        theta = theta.clone()
        theta[over] = _guaranteed_descent(x, y, theta[over], gn[over], lam[over], lin, steps[over], row_norm_sq,
                                          callback)
        gn = gn.clone()
        gn[over] = exact_gradient(x, y, theta[over], lam[over], lin).flatten(1).norm(dim=1)
        if not bool(torch.isfinite(theta[over]).all()):  # pragma: no cover - finite data, finite lam
            raise SolverCertificationError("internal: the guaranteed fallback produced a non-finite model")
    return SolveResult(theta, gn, res.iterations, torch.ones_like(res.converged))
