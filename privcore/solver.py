"""Batched L2-regularised softmax regression: many problems solved together as one.

Problem p minimises, over theta_p in R^{D x C},

    f_p(theta) = (1/n) sum_i CE(x_i^T theta, y_i) + (lam_p / 2) ||theta||_F^2 + <G_p, theta>

where the data are shared by all problems (x: [n, D], y: [n]) or given per problem
(x: [P, n, D], y: [P, n]; subsample-and-aggregate's teachers). ``lam_p`` is the total L2 weight in
average form and ``G_p`` an optional linear term (loss perturbation's tr(B^T theta) / N).

Method: L-BFGS with a per-problem Armijo backtracking line search, all problems advancing in
lockstep, in the eigenbasis of X^T X / n. Directions in the null space of the data (pixels never
lit in training, for instance) carry no data term: there the objective is
(lam_p / 2) ||theta||^2 + <G_p, theta>, minimised in closed form by -G_p / lam_p, so the
iterations run only over the data's row space (651 of 784 dimensions on mnist-5k). In that basis
the initial inverse Hessian of L-BFGS is diagonal: by default the Hessian's own diagonal at the
start point, (1/n) sum_i p_ic (1 - p_ic) x_ik^2 + lam_p (a Jacobi preconditioner in the eigenbasis,
fewer iterations than the alternative: bench/bench_solve_cost.py), or Bohning's bound
H <= 0.5 (I_C - 11^T/C) (x) X^T X / n + lam_p I (Bohning 1992; ``scaling="bohning"``), a majoriser
whose eigenvalues are 0.5 evals + lam_p. Either removes most of the ill-conditioning of small lam,
where plain gradient methods need thousands of iterations.
Converged problems drop out of the batch, and every step, line search and curvature decision is
taken per problem. With shared data a problem therefore follows the same path alone or in a batch
(up to floating-point rounding in the products). With per-problem data the basis is either pooled
from all problems' rows (:meth:`Preconditioner.rows`: the path, not the answer, then depends on the
other problems' data) or per problem (:func:`privcore.parts.part_preconditioner`): then the batch is
fixed -- a converged problem is frozen, not dropped, and line searches evaluate every problem -- so
each problem's numbers depend on its own data and the public shapes only, bit for bit. Teachers of
the teacher-vote methods must be solved that way (:mod:`privcore.parts`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from .lbfgs import Objective, backtrack, descent_direction, push_pair

__all__ = ["SolveResult", "solve_softmax", "softmax_objective", "Preconditioner", "skinny_mm"]

_F32_FLOOR = 1e-7
#: Largest float64 copy of the rotated data :meth:`Preconditioner.float64` makes (N = 4,000: 21 MB).
FLOAT64_COPY_BYTES = 256 << 20
#: Anchored products (solve_softmax's ``exact``): share of gtol the float32 step may round the gradient by.
ANCHOR_SHARE = 0.05
#: Anchored products: iterations without a 10 % drop of the gradient norm after which a problem stops.
STALL_ITERATIONS = 30


#: Products a @ b with at most this many columns in b run as (b^T a^T)^T on the CPU (see skinny_mm).
SKINNY_COLUMNS = 16
#: Calls of :func:`solve_softmax` in this process. The time model (:mod:`privcore.engine.cost`)
#: prices the first one's warm-up (bench/bench_solve_cost.py) only while this is 0.
SOLVES_RUN = 0


def skinny_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a [n, k] @ b [k, m], contiguous; for m <= SKINNY_COLUMNS on the CPU computed as (b^T a^T)^T.

    One problem's products (m = C = 10: the non-private model every method shares) are several times
    faster that way with MKL, both for x @ theta and for x^T @ resid (bench/bench_profile.py); same
    arithmetic up to the order of the sums. From about 20 columns on the plain product is as fast.
    """
    if b.shape[1] <= SKINNY_COLUMNS and a.device.type == "cpu":
        return (b.T.contiguous() @ a.T).T.contiguous()
    return a @ b


@dataclass(frozen=True)
class SolveResult:
    """theta: [P, D, C]; grad_norm: [P] final ||grad f_p||_F; iterations: [P] per problem."""

    theta: torch.Tensor
    grad_norm: torch.Tensor
    iterations: torch.Tensor
    converged: torch.Tensor


def softmax_objective(x: torch.Tensor, y: torch.Tensor, theta: torch.Tensor, lam: torch.Tensor,
                      linear: torch.Tensor | None, with_grad: bool = True,
                      anchor: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Objective values [P] and (optionally) gradients [P, D, C] of the batched problems above.

    Mixed precision: the two matrix products with the data run in the data's dtype (float32 is
    2x faster and its rounding, ~1e-7 of an O(1) loss gradient, is far below the tolerance),
    while theta, the regulariser, the linear term and all sums are float64. In float32 alone the
    quadratic term of a heavily perturbed problem (||theta|| in the hundreds) swamps the Armijo
    test and the solver stalls. Shared data are processed in the layout [n, P, C], so the products
    are single GEMMs and the softmax runs over contiguous memory.

    ``anchor`` (shared data only): (theta0 [P, D, C], logits0 [n, P, C]), both float64, logits0 the
    exact float64 logits at theta0. The logits are then logits0 + x (theta - theta0), the product in
    x's dtype, so float32 rounds only the (small) step from the anchor, not theta itself, and the
    softmax runs in float64: the float32 floor of ``solve_softmax`` shrinks with ||theta - theta0||.
    """
    p, d, c = theta.shape
    th = theta.to(x.dtype)
    if x.dim() == 2:
        n = x.shape[0]
        if anchor is not None:
            step = (theta - anchor[0]).to(x.dtype)
            th = step  # only the step is rounded to x's dtype
        logits = skinny_mm(x, th.permute(1, 0, 2).reshape(d, p * c)).view(n, p, c)
        if anchor is not None:
            logits = anchor[1] + logits
        # logits - logsumexp is ~2x faster than log_softmax for C = 10 on CPU. In place (here and for
        # resid below: the same arithmetic): one [n, P, C] buffer instead of four (3.2 GB at N = 1e6, P = 20).
        logp = logits.sub_(torch.logsumexp(logits, dim=2, keepdim=True))
        picked = logp.gather(2, y.view(n, 1, 1).expand(n, p, 1)).squeeze(2)  # [n, P]
        loss = -picked.double().sum(dim=0) / n
    else:
        n = x.shape[1]
        logp = torch.log_softmax(torch.bmm(x, th), dim=2)  # [P, n, C]
        picked = logp.gather(2, y.unsqueeze(2)).squeeze(2)  # [P, n]
        loss = -picked.double().sum(dim=1) / n
    f = loss + 0.5 * lam * theta.pow(2).sum(dim=(1, 2))
    if linear is not None:
        f = f + (linear * theta).sum(dim=(1, 2))
    if not with_grad:
        return f, None
    # Clamp before exp: saturated softmaxes otherwise produce subnormal floats, which make the
    # following matrix product ~100x slower on CPUs. e^-80 is still a normal float32 and far
    # below any tolerance we use.
    resid = logp.clamp_min_(-80.0).exp_()  # logp is not needed any more
    if x.dim() == 2:
        resid.scatter_add_(2, y.view(n, 1, 1).expand(n, p, 1), torch.full((n, p, 1), -1.0, dtype=resid.dtype, device=resid.device))
        grad_loss = skinny_mm(x.T, resid.view(n, p * c).to(x.dtype)).view(d, p, c).permute(1, 0, 2)
    else:
        resid.scatter_add_(2, y.unsqueeze(2), torch.full((p, n, 1), -1.0, dtype=resid.dtype, device=resid.device))
        grad_loss = torch.bmm(resid.transpose(1, 2), x).transpose(1, 2)
    g = grad_loss.double() / n + lam.view(-1, 1, 1) * theta
    if linear is not None:
        g = g + linear
    return f, g


class Preconditioner:
    """The data's eigenbasis and the inverse of 0.5 (I - 11^T/C) (x) Sigma + lam I in it.

    Sigma = X^T X / n of the shared data (or of all rows pooled, for per-problem data) has
    eigenvalues ``evals`` [r] and eigenvectors ``basis`` [D, r]; directions whose eigenvalue is at
    most ``null_tol`` are the null space and are left out (``null_tol`` = 1e-14 bounds what they
    could add to any gradient by sqrt(2 D 1e-14), below 1e-5 for D <= 5,000 and data in the unit
    ball). ``x`` holds the data in the basis, [n, r] or [P, n, r], in the data's dtype.
    """

    def __init__(self, x: torch.Tensor, null_tol: float = 1e-14, chunk: int = 1 << 16) -> None:
        rows = x.reshape(-1, x.shape[-1])
        sigma = torch.zeros(rows.shape[1], rows.shape[1], dtype=torch.float64, device=x.device)
        for start in range(0, rows.shape[0], chunk):  # float64 in chunks: a full copy is 6 GB at N = 1e6
            part = rows[start:start + chunk].double()
            sigma += part.T @ part
        sigma /= rows.shape[0]
        evals, evecs = torch.linalg.eigh(sigma)
        keep = evals > null_tol
        keep[-1] = True  # at least one direction, even for all-zero data
        self.evals = evals[keep]
        self.basis = evecs[:, keep]
        self.x = x @ self.basis.to(x.dtype)

    def float64(self, x: torch.Tensor, max_bytes: int = FLOAT64_COPY_BYTES) -> "Preconditioner | None":
        """The same basis over the shared rows x [n, D] rotated in float64 (built once, then kept).

        For iterations whose products must not round theta to float32 (:func:`privcore.certify.certify`
        uses it before its exact check). None when the copy would exceed ``max_bytes`` or the data
        are per-problem.
        """
        if x.dim() != 2 or x.shape[0] * self.basis.shape[1] * 8 > max_bytes:
            return None
        cached = getattr(self, "_float64", None)
        if cached is None:
            basis = self.basis.to(torch.float64)
            rotated = torch.empty(x.shape[0], basis.shape[1], dtype=torch.float64, device=x.device)
            for start in range(0, x.shape[0], 1 << 14):
                rotated[start:start + (1 << 14)] = x[start:start + (1 << 14)].to(torch.float64) @ basis
            cached = object.__new__(Preconditioner)
            cached.evals, cached.basis, cached.x = self.evals, self.basis, rotated
            self._float64 = cached
        return cached

    def rows(self, index: torch.Tensor, groups: int) -> "Preconditioner":
        """The same basis over a subset of rows split into ``groups`` equal parts: x [groups, m, r].

        For problems whose dependence on the other rows is harmless (the non-private reference
        models of an audit): the data's null space lies in every part's null space, so the basis
        stays exact, and no unrotated copy of the parts is ever made. Never for the teachers of a
        teacher-vote method: the pooled basis makes each a function of every part
        (:mod:`privcore.parts` gives each part its own).
        """
        sub = object.__new__(Preconditioner)
        sub.evals, sub.basis = self.evals, self.basis
        sub.x = self.x[index].view(groups, -1, self.x.shape[-1])
        return sub

    @property
    def per_problem(self) -> bool:
        """True for per-problem bases (:func:`privcore.parts.part_preconditioner`): basis [P, D, r]."""
        return self.basis.dim() == 3

    def to_basis(self, t: torch.Tensor) -> torch.Tensor:
        """Coordinates [P, r, C] of t [P, D, C] in the basis (the null-space part is dropped)."""
        if self.per_problem:
            return torch.bmm(self.basis.transpose(1, 2), t.to(self.basis.dtype))
        return torch.einsum("dk,pdc->pkc", self.basis, t.to(self.basis.dtype))

    def from_basis(self, t: torch.Tensor) -> torch.Tensor:
        """t [P, r, C] in basis coordinates back to [P, D, C]."""
        if self.per_problem:
            return torch.bmm(self.basis, t)
        return torch.einsum("dk,pkc->pdc", self.basis, t)

    def apply(self, g: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
        """Preconditioned g [P, r, C] (basis coordinates): diagonal per eigen-direction."""
        mean = g.mean(dim=2, keepdim=True)  # component along the all-ones class direction
        evals = self.evals.unsqueeze(-1) if self.per_problem else self.evals.view(1, -1, 1)
        return (g - mean) / (0.5 * evals + lam.view(-1, 1, 1)) + mean / lam.view(-1, 1, 1)


def hessian_diagonal(x: torch.Tensor, theta: torch.Tensor, rows: int = 1 << 16) -> torch.Tensor:
    """Diagonal [P, r, C] of the loss Hessian at theta [P, r, C], in basis coordinates.

    The Hessian of (1/n) sum_i CE is (1/n) sum_i (diag(p_i) - p_i p_i^T) (x) x_i x_i^T; its diagonal
    entry for (direction k, class c) is (1/n) sum_i p_ic (1 - p_ic) x_ik^2. x: [n, r] or [P, n, r],
    processed ``rows`` examples at a time so the temporaries stay small at N = 1e6.
    """
    p, r, c = theta.shape
    th = theta.to(x.dtype)
    n = x.shape[-2]
    diag = torch.zeros(p, r, c, dtype=torch.float64, device=x.device)
    for start in range(0, n, rows):
        if x.dim() == 2:
            xs = x[start:start + rows]
            m = xs.shape[0]
            prob = torch.softmax(skinny_mm(xs, th.permute(1, 0, 2).reshape(r, p * c)).view(m, p, c), dim=2)
            part = skinny_mm((xs * xs).T, (prob * (1 - prob)).view(m, p * c)).view(r, p, c).permute(1, 0, 2)
        else:
            xs = x[:, start:start + rows]
            prob = torch.softmax(torch.bmm(xs, th), dim=2)
            part = torch.bmm((prob * (1 - prob)).transpose(1, 2), xs * xs).transpose(1, 2)
        diag += part.double()
    return diag / n


def _batch_objective(xa: torch.Tensor, ya: torch.Tensor, lam_a: torch.Tensor, lin_a: torch.Tensor | None,
                     per_problem: bool, anchor: tuple[torch.Tensor, torch.Tensor] | None = None) -> Objective:
    """The active problems' objective for :func:`privcore.lbfgs.backtrack` (rows: a subset of them)."""

    def objective(theta: torch.Tensor, rows: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        if rows is None:
            return softmax_objective(xa, ya, theta, lam_a, lin_a, anchor=anchor)
        xs, ys = (xa[rows], ya[rows]) if per_problem else (xa, ya)
        sub = None if anchor is None else (anchor[0][rows], anchor[1][:, rows])
        return softmax_objective(xs, ys, theta, lam_a[rows], None if lin_a is None else lin_a[rows], anchor=sub)

    return objective


def _exact_logits(exact: Preconditioner, theta: torch.Tensor) -> torch.Tensor:
    """float64 logits [n, P, C] of theta [P, r, C] (basis coordinates) on the float64 rotated rows."""
    p, r, c = theta.shape
    return skinny_mm(exact.x, theta.permute(1, 0, 2).reshape(r, p * c)).view(-1, p, c)


def solve_softmax(x: torch.Tensor, y: torch.Tensor, lam: torch.Tensor, linear: torch.Tensor | None = None,
                  classes: int | None = None, init: torch.Tensor | None = None, gtol: float = 1e-5,
                  max_iter: int = 500, memory: int = 5, precond: "Preconditioner | None" = None,
                  scaling: str = "diagonal", callback: "Callable[[], None] | None" = None,
                  exact: "Preconditioner | None" = None) -> SolveResult:
    """Solve P problems (see module docstring) to ||grad f_p||_F <= ``gtol``.

    x: [n, D] shared or [P, n, D]; y: [n] or [P, n] int64 labels in [0, C); lam: [P] > 0;
    linear: [P, D, C] or None; init: [P, D, C] start (zeros by default); precond: a
    :class:`Preconditioner` built from the same x (pass one to reuse its eigendecomposition and
    rotated data; x itself is then used only for its dtype, device and number of dimensions, so
    ``precond.x`` may stand in for it); callback: called once per iteration (it may raise, e.g. to
    cancel); exact: the same basis over float64 rotated rows (:meth:`Preconditioner.float64`,
    shared data only): the products then run in x's dtype around a float64 anchor per problem
    (see :func:`softmax_objective`), re-anchored when the step from it could round the gradient by
    more than ANCHOR_SHARE * gtol, so there is no float32 floor on the tolerance.
    Returns a :class:`SolveResult` with theta [P, D, C]; its grad_norm is that of
    the full objective (the null-space part of the gradient is zero by construction).
    """
    global SOLVES_RUN
    SOLVES_RUN += 1
    device, dtype = x.device, torch.float64  # theta and all reductions in float64
    p_total = lam.shape[0]
    c = classes if classes is not None else int(y.max().item()) + 1
    precond = precond if precond is not None else Preconditioner(x)
    r = precond.basis.shape[-1]
    # Per-problem bases (disjoint parts): a fixed batch, so no part's numbers depend on another's.
    fixed = precond.per_problem
    # Iterate in the basis: theta = basis @ theta_r + theta_null, theta_null = -G_null / lam.
    theta_all = (torch.zeros(p_total, r, c, device=device, dtype=dtype) if init is None
                 else precond.to_basis(init.to(device=device, dtype=dtype)))
    grad_norm_all = torch.full((p_total,), math.inf, device=device, dtype=torch.float64)
    iters_all = torch.zeros(p_total, dtype=torch.int64, device=device)

    active = torch.arange(p_total, device=device)
    xa, ya = precond.x, y
    lam_a = lam.to(device=device, dtype=dtype)
    lin_full = None if linear is None else linear.to(device=device, dtype=dtype)
    lin_a = None if lin_full is None else precond.to_basis(lin_full)
    lin_basis = lin_a
    theta = theta_all.clone()
    anchor = None if exact is None else (theta.clone(), _exact_logits(exact, theta))
    f, g = softmax_objective(xa, ya, theta, lam_a, lin_a, anchor=anchor)
    # Initial inverse Hessian of L-BFGS, diagonal in (eigen-direction, class) coordinates.
    if scaling == "diagonal":
        curv = hessian_diagonal(xa, theta)
    elif scaling == "bohning":
        evals = precond.evals if fixed else precond.evals.view(1, -1)
        curv = (0.5 * evals).unsqueeze(-1).expand(p_total, -1, c)
    else:
        raise ValueError(f"scaling must be one of ('diagonal', 'bohning'), got {scaling!r}")
    s_hist: list[torch.Tensor] = []
    y_hist: list[torch.Tensor] = []

    stalled = torch.zeros(p_total, dtype=torch.bool, device=device)
    finished = torch.zeros(p_total, dtype=torch.bool, device=device)
    # Anchored products still round the residuals to float32 (about 6e-8 of (1/n) sum ||x_i|| ||p_i - y_i||):
    # a problem whose gradient norm has not dropped by 10 % in STALL_ITERATIONS iterations is at that floor.
    best = torch.full((p_total,), math.inf, dtype=torch.float64, device=device)
    since = torch.zeros(p_total, dtype=torch.int64, device=device)
    for it in range(max_iter + 1):
        if callback is not None:
            callback()
        gn = g.flatten(1).norm(dim=1)
        # float32 data products evaluate the loss gradient at theta rounded to float32, an error of
        # about 0.5 * 6e-8 * ||theta||: a tolerance below that floor is unreachable, so it is added.
        floored = x.dtype == torch.float32 and anchor is None
        tol = gtol + _F32_FLOOR * theta.flatten(1).norm(dim=1) if floored else torch.full_like(gn, gtol)
        if anchor is not None:
            better = gn <= 0.9 * best
            best, since = torch.where(better, gn, best), torch.where(better, 0, since + 1)
            stalled = stalled | (since >= STALL_ITERATIONS)
        done = (gn <= tol) | stalled
        if it == max_iter:
            done = torch.ones_like(done)
        if fixed:  # record newly finished problems; they stay in the batch, frozen
            new = done & ~finished
            if new.any():
                theta_all[new], grad_norm_all[new], iters_all[new] = theta[new], gn[new], it
                finished = finished | done
            if bool(finished.all()):
                break
        elif done.any():
            idx = active[done]
            theta_all[idx] = theta[done]
            grad_norm_all[idx] = gn[done]
            iters_all[idx] = it
            keep = ~done
            if not keep.any():
                break
            # Compact the batch: converged problems leave, their history with them.
            active, theta, f, g, lam_a = active[keep], theta[keep], f[keep], g[keep], lam_a[keep]
            curv = curv[keep]
            stalled, gn, best, since = stalled[keep], gn[keep], best[keep], since[keep]
            if lin_a is not None:
                lin_a = lin_a[keep]
            if anchor is not None:
                anchor = (anchor[0][keep], anchor[1][:, keep])
            if x.dim() == 3:
                xa, ya = xa[keep], ya[keep]
            s_hist = [s[keep] for s in s_hist]
            y_hist = [v[keep] for v in y_hist]

        # Two-loop recursion with the preconditioner as the initial inverse Hessian, then an
        # Armijo backtracking per problem (usually step 1 is accepted at once).
        h0_diag = curv + lam_a.view(-1, 1, 1)
        direction, slope = descent_direction(g, s_hist, y_hist, lambda v: v / h0_diag)
        objective = _batch_objective(xa, ya, lam_a, lin_a, per_problem=x.dim() == 3, anchor=anchor)
        new_theta, f_new, g_new, stalled = backtrack(objective, theta, direction, f, g, gn, slope, whole_batch=fixed)
        if fixed:  # finished problems keep their point (their pair is then rejected: s = 0)
            keep = finished.view(-1, 1, 1)
            new_theta, f_new, g_new = (torch.where(keep, theta, new_theta), torch.where(finished, f, f_new),
                                       torch.where(keep, g, g_new))
            stalled = stalled & ~finished
        s_new, y_new = new_theta - theta, g_new - g
        theta, f, g = new_theta, f_new, g_new
        push_pair(s_hist, y_hist, s_new, y_new, memory)
        if anchor is not None:  # per problem: its own drift decides (no path depends on the batch)
            far = (_F32_FLOOR * (theta - anchor[0]).flatten(1).norm(dim=1) > ANCHOR_SHARE * gtol).nonzero().squeeze(1)
            if far.numel():
                anchor[0][far] = theta[far]
                anchor[1][:, far] = _exact_logits(exact, theta[far])

    floor = _F32_FLOOR * theta_all.flatten(1).norm(dim=1) if x.dtype == torch.float32 and exact is None else 0.0
    theta_out = precond.from_basis(theta_all)
    if lin_full is not None:  # the null-space part in closed form (exact: no data term there)
        lam_v = lam.to(device=device, dtype=dtype).view(-1, 1, 1)
        theta_out = theta_out - (lin_full - precond.from_basis(lin_basis)) / lam_v
    return SolveResult(theta_out, grad_norm_all, iters_all, grad_norm_all <= gtol + floor)
