"""Models on disjoint parts of the data, each a function of its own part only -- bit for bit.

The teacher-vote methods (subsample-and-aggregate, Confident-GNMax, sparse vector, the PATE
student) rest on one fact: replacing one training example changes the model of the one teacher
whose part holds it, and no other. That must hold in the arithmetic, not only on paper: a basis,
preconditioner, normalisation, stopping rule or batch composition shared by the parts makes every
teacher a function of every part, and a query chosen by linear programming can then flip all of
them at once (docs/spec.md, "Teachers depend on their own part only").

So here every part gets its own eigenbasis, built from its own rows by batched LAPACK calls that
treat each matrix separately:

* m <= D rows: from the eigenpairs of its m x m Gram matrix X_t X_t^T / m (cheaper than D x D);
* m > D: the eigenvectors of Sigma_t = X_t^T X_t / m, accumulated in float64 over blocks of rows.

:func:`privcore.solver.solve_softmax` solves a batch with per-problem bases in a fixed
composition: no problem leaves the batch when it converges (it is frozen), and the line search
evaluates the whole batch, so even the shapes of the kernels part t's numbers go through are
public. Parts are grouped by a byte budget computed from public sizes (T, m, D) only.
"""

from __future__ import annotations

from typing import Callable

import torch

from .solver import Preconditioner, SolveResult, solve_softmax

__all__ = ["part_preconditioner", "solve_parts", "PART_GROUP_BYTES"]

#: float64 bytes of the parts whose bases are built and solved together (a public budget: the
#: grouping depends on T, m and D only). At N = 1e6 one float64 copy of all parts would be 6 GB.
PART_GROUP_BYTES = 256 << 20
#: Rows of one part accumulated at a time into its float64 Gram matrix (m > D).
_ROW_BLOCK = 1 << 14


def _eigh_each(mats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.eigh`` of every matrix of mats [P, k, k], each a function of its own matrix.

    On the CPU a batched call runs LAPACK on each matrix separately. On CUDA, PyTorch hands batches
    of matrices of size <= 32 to cuSOLVER's batched Jacobi solver, whose documentation does not say
    that its sweeps stop per matrix; such small matrices are decomposed one at a time there.
    """
    if mats.device.type == "cpu" or mats.shape[-1] > 32:
        return torch.linalg.eigh(mats)
    pairs = [torch.linalg.eigh(a) for a in mats]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def part_preconditioner(x: torch.Tensor, null_tol: float = 1e-12) -> Preconditioner:
    """Per-part eigenbases of x [P, m, D]: ``basis`` [P, D, r], ``evals`` [P, r], ``x`` [P, m, r].

    r = min(m, D) for every part (a public shape). Each part's basis, eigenvalues and rotated rows
    are computed from that part's rows only: every batched product and LAPACK call handles each
    matrix on its own.

    m <= D: the eigenpairs (U, mu) of the part's Gram matrix X X^T / m give Sigma's eigenvectors
    X^T u_k / sqrt(m mu_k) and the rotated rows X V = U diag(sqrt(m mu)) in closed form. Directions
    with mu_k <= ``null_tol`` are zeroed (a zero column: its coordinate stays 0); there the data
    gradient is at most sqrt(2 mu_k) < 2e-6, and the kept vectors are orthonormal to about
    1e-16 sqrt(max mu / null_tol) = 1e-10. m > D: the eigenvectors of Sigma = X^T X / m, all kept.
    """
    if x.dim() != 3:
        raise ValueError(f"part_preconditioner needs x of shape [parts, rows, D], got {tuple(x.shape)}")
    p, m, d = x.shape
    pre = object.__new__(Preconditioner)
    if m <= d:
        x64 = x.to(torch.float64)
        evals, u = _eigh_each(x64 @ x64.transpose(1, 2) / m)  # [P, m], [P, m, m]
        keep = evals > null_tol
        scale = torch.where(keep, (m * evals.clamp_min(null_tol)).rsqrt(), torch.zeros_like(evals))
        pre.basis = x64.transpose(1, 2) @ (u * scale.unsqueeze(1))  # [P, D, m]
        pre.evals = torch.where(keep, evals, torch.zeros_like(evals))
        pre.x = (u * (m * pre.evals).sqrt().unsqueeze(1)).to(x.dtype)  # X V, exact in closed form
        return pre
    sigma = torch.zeros(p, d, d, dtype=torch.float64, device=x.device)
    for start in range(0, m, _ROW_BLOCK):
        block = x[:, start:start + _ROW_BLOCK].to(torch.float64)
        sigma += block.transpose(1, 2) @ block
    evals, basis = _eigh_each(sigma / m)
    pre.evals = evals.clamp_min(0.0)  # rounding can leave a null direction's eigenvalue at -1e-17
    pre.basis = basis
    pre.x = torch.bmm(x, basis.to(x.dtype))
    return pre


def solve_parts(x: torch.Tensor, y: torch.Tensor, parts: torch.Tensor, lam: float, classes: int,
                gtol: float = 1e-5, callback: Callable[[], None] | None = None,
                group_bytes: int | None = None) -> SolveResult:
    """Regularised softmax models on the parts: x [N, D] and y [N] the data, ``parts`` [T, m] row indices.

    Model t minimises the objective of :mod:`privcore.solver` on rows ``parts[t]`` alone, to
    gradient norm ``gtol`` (plus the float32 floor) in that part's own basis, in groups of parts
    whose float64 rows fit ``group_bytes`` (default PART_GROUP_BYTES). Returns theta [T, D, C].
    """
    if parts.dim() != 2 or parts.shape[1] < 1:
        raise ValueError(f"parts must be [T, m] row indices with m >= 1, got shape {tuple(parts.shape)}")
    t_total, m = parts.shape
    d = x.shape[1]
    budget = PART_GROUP_BYTES if group_bytes is None else group_bytes
    per_group = max(1, min(t_total, budget // max(1, m * d * 8)))
    results = []
    for first in range(0, t_total, per_group):
        idx = parts[first:first + per_group]
        pre = part_preconditioner(x[idx.flatten()].view(idx.shape[0], m, d))
        lam_t = torch.full((idx.shape[0],), float(lam), dtype=torch.float64, device=x.device)
        results.append(solve_softmax(pre.x, y[idx], lam_t, classes=classes, gtol=gtol, precond=pre, callback=callback))
        del pre
    if len(results) == 1:
        return results[0]
    return SolveResult(*(torch.cat(t) for t in zip(*((r.theta, r.grad_norm, r.iterations, r.converged)
                                                      for r in results))))
