"""The steps of a batched, per-problem L-BFGS: direction, line search, curvature history.

Shared by the mixed-precision solver (:func:`privcore.solver.solve_softmax`) and the float64
polish of :mod:`privcore.certify`. Tensors are batched over problems on their first axis
([P, ...]); every decision (curvature pair kept or not, step length, stop) is taken per problem,
so no problem's path depends on the others in its batch.
"""

from __future__ import annotations

from typing import Callable

import torch

__all__ = ["descent_direction", "accept", "backtrack", "push_pair", "Objective"]

#: f(theta, rows) -> (values [P'], gradients [P', ...]) of the problems ``rows`` (None: all) at theta [P', ...].
Objective = Callable[[torch.Tensor, "torch.Tensor | None"], "tuple[torch.Tensor, torch.Tensor]"]


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-problem inner product [P] of a, b [P, ...]."""
    return (a * b).sum(dim=tuple(range(1, a.dim())))


def descent_direction(g: torch.Tensor, s_hist: list[torch.Tensor], y_hist: list[torch.Tensor],
                      h0: Callable[[torch.Tensor], torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(direction, slope = <g, direction>) from the two-loop recursion (Nocedal and Wright, Alg. 7.4).

    ``h0`` applies the initial inverse Hessian. A pair a problem rejected is stored as zeros with
    rho = 0 and leaves the recursion unchanged. Where the result is not a descent direction
    (rounding), the problem falls back to -h0(g).
    """
    q = g.clone()
    alphas = []
    rhos = []
    for sv, yv in zip(s_hist, y_hist):
        curv = _dot(sv, yv)
        rhos.append(torch.where(curv > 0, 1.0 / curv.clamp_min(1e-300), torch.zeros_like(curv)))
    shape = (-1,) + (1,) * (g.dim() - 1)
    for sv, yv, rho in zip(reversed(s_hist), reversed(y_hist), reversed(rhos)):
        a = rho * _dot(sv, q)
        q = q - a.view(shape) * yv
        alphas.append(a)
    r = h0(q)
    for (sv, yv, rho), a in zip(zip(s_hist, y_hist, rhos), reversed(alphas)):
        b = rho * _dot(yv, r)
        r = r + sv * (a - b).view(shape)
    direction = -r
    slope = _dot(g, direction)
    bad = slope >= 0
    if bad.any():
        direction[bad] = -h0(g)[bad]
        slope = _dot(g, direction)
    return direction, slope


def accept(new_f: torch.Tensor, new_g: torch.Tensor, f: torch.Tensor, gn: torch.Tensor, step: torch.Tensor,
           slope: torch.Tensor) -> torch.Tensor:
    """Armijo sufficient decrease, or a clear drop of the gradient norm.

    Near the optimum the expected decrease falls below the rounding of f, and Armijo alone would
    stall; there, strong convexity makes a smaller gradient norm an equally safe sign of progress.
    """
    armijo = new_f <= f + 1e-4 * step * slope
    return armijo | (new_g.flatten(1).norm(dim=1) <= 0.9 * gn)


def backtrack(objective: Objective, theta: torch.Tensor, direction: torch.Tensor, f: torch.Tensor,
              g: torch.Tensor, gn: torch.Tensor, slope: torch.Tensor,
              halvings: int = 20, whole_batch: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-problem backtracking from step 1; returns (theta, f, g, stalled).

    A problem with no acceptable step after ``halvings`` halvings keeps its point and is marked
    stalled (it sits at the precision limit). ``whole_batch``: a retry evaluates every problem (those
    already accepted at their accepted step), never a subset, so the batch a problem's products run
    in never depends on the other problems' values (per-part solves, :mod:`privcore.parts`).
    """
    shape = (-1,) + (1,) * (theta.dim() - 1)
    step = torch.ones_like(f)
    new_theta = theta + direction
    new_f, new_g = objective(new_theta, None)
    for _ in range(halvings):
        fail = ~accept(new_f, new_g, f, gn, step, slope)
        if not fail.any():
            break
        step = torch.where(fail, step * 0.5, step)
        if whole_batch:
            cand = theta + step.view(shape) * direction
            fs, gs = objective(cand, None)
            mask = fail.view(shape)
            new_theta = torch.where(mask, cand, new_theta)
            new_f, new_g = torch.where(fail, fs, new_f), torch.where(mask, gs, new_g)
            continue
        sub = fail.nonzero().squeeze(1)
        cand = theta[sub] + step[sub].view(shape) * direction[sub]
        fs, gs = objective(cand, sub)
        new_theta[sub], new_f[sub], new_g[sub] = cand, fs, gs
    stalled = ~accept(new_f, new_g, f, gn, step, slope)
    new_theta[stalled], new_f[stalled], new_g[stalled] = theta[stalled], f[stalled], g[stalled]
    return new_theta, new_f, new_g, stalled


def push_pair(s_hist: list[torch.Tensor], y_hist: list[torch.Tensor], s_new: torch.Tensor, y_new: torch.Tensor,
              memory: int, min_curvature: float = 1e-20) -> None:
    """Append a curvature pair; a problem whose pair has <s, y> <= ``min_curvature`` gets a zero pair."""
    ok = (_dot(s_new, y_new) > min_curvature).view((-1,) + (1,) * (s_new.dim() - 1))
    s_hist.append(torch.where(ok, s_new, torch.zeros_like(s_new)))
    y_hist.append(torch.where(ok, y_new, torch.zeros_like(y_new)))
    if len(s_hist) > memory:
        s_hist.pop(0)
        y_hist.pop(0)
