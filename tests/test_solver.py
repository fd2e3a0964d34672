"""privcore.solver's anchored products: float32 work, float64 accuracy (the certify stage's speed-up).

Other solver tests (tolerance, null space, batching, per-problem data) are in tests/test_engine.py.
"""

from __future__ import annotations

import torch

from privcore.certify import exact_gradient
import pytest

from privcore.solver import SKINNY_COLUMNS, Preconditioner, _exact_logits, skinny_mm, softmax_objective, solve_softmax


def _data(n=400, d=16, c=5, seed=0):
    """Rows in the unit ball (with a null space) labelled by a noisy linear teacher: at small lam the
    minimiser has a large norm (the float32 floor of plain products grows with it) and small residuals."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    x[:, -2:] = 0.0
    x = (x / x.norm(dim=1, keepdim=True).clamp_min(1.0)).float()
    y = (x @ torch.randn(d, c, generator=g) + 0.3 * torch.randn(n, c, generator=g)).argmax(dim=1)
    return x, y


def _float64_gradient(xr64, y, theta, lam, lin):
    logp = torch.log_softmax(torch.einsum("nr,prc->pnc", xr64, theta), dim=2)
    resid = logp.exp() - torch.nn.functional.one_hot(y, theta.shape[2]).double()
    return torch.einsum("nr,pnc->prc", xr64, resid) / xr64.shape[0] + lam.view(-1, 1, 1) * theta + lin


def test_float64_copy_is_the_rotated_data_and_respects_its_budget():
    x, _ = _data()
    pre = Preconditioner(x)
    fine = pre.float64(x)
    assert fine.x.dtype == torch.float64 and pre.float64(x) is fine  # built once
    assert torch.allclose(fine.x, x.double() @ pre.basis, rtol=0, atol=1e-14)
    assert pre.float64(x, max_bytes=8) is None or not hasattr(pre, "_float64")
    assert Preconditioner(x).float64(x, max_bytes=x.shape[0] * pre.basis.shape[1] * 8 - 1) is None
    assert pre.float64(x.view(2, -1, x.shape[1])) is None  # per-problem data: no copy


def test_anchored_gradient_is_float64_accurate_where_float32_is_not():
    x, y = _data()
    pre = Preconditioner(x)
    fine = pre.float64(x)
    lam = torch.tensor([1e-5, 1e-4], dtype=torch.float64)
    lin = torch.zeros(2, pre.basis.shape[1], 5, dtype=torch.float64)
    theta = pre.to_basis(solve_softmax(x, y, lam, classes=5, gtol=1e-9, precond=pre).theta)  # ||theta|| ~ 400 and 60
    want = _float64_gradient(fine.x, y, theta, lam, lin)
    g = torch.Generator().manual_seed(1)
    anchor_theta = theta + 1e-3 * torch.randn(theta.shape, generator=g, dtype=torch.float64)
    _, got = softmax_objective(pre.x, y, theta, lam, None, anchor=(anchor_theta, _exact_logits(fine, anchor_theta)))
    _, plain = softmax_objective(pre.x, y, theta, lam, None)
    err_anchored = (got - want).flatten(1).norm(dim=1)
    err_plain = (plain - want).flatten(1).norm(dim=1)
    assert bool((err_anchored < 2e-8).all()) and bool((err_plain > err_anchored).all()), (err_anchored, err_plain)
    # A stale anchor (the logits of another theta) is caught by the same comparison.
    wrong = (anchor_theta, _exact_logits(fine, anchor_theta + 1e-2 * torch.randn(theta.shape, generator=g, dtype=torch.float64)))
    _, bad = softmax_objective(pre.x, y, theta, lam, None, anchor=wrong)
    assert bool(((bad - want).flatten(1).norm(dim=1) > 1e-5).all())


@pytest.mark.slow
def test_anchored_solve_goes_below_the_float32_floor_and_keeps_problems_independent():
    x, y = _data()
    pre = Preconditioner(x)
    fine = pre.float64(x)
    g = torch.Generator().manual_seed(2)
    lam = torch.tensor([1e-5, 1e-4, 1e-3], dtype=torch.float64)
    lin = 1e-3 * torch.randn(3, x.shape[1], 5, generator=g, dtype=torch.float64)
    gtol = 1e-7
    plain = solve_softmax(x, y, lam, lin, classes=5, gtol=gtol, precond=pre)
    plain_gn = exact_gradient(x, y, plain.theta, lam, lin).flatten(1).norm(dim=1)
    assert float(plain_gn[0]) > 10 * gtol  # float32 products stop at their floor, 1e-7 ||theta||
    res = solve_softmax(x, y, lam, lin, classes=5, gtol=gtol, precond=pre, exact=fine, init=plain.theta)
    gn = exact_gradient(x, y, res.theta, lam, lin).flatten(1).norm(dim=1)
    assert bool(res.converged.all()) and bool((gn <= 1.01 * gtol).all()), gn
    alone = solve_softmax(x, y, lam[:1], lin[:1], classes=5, gtol=gtol, precond=pre, exact=fine, init=plain.theta[:1])
    # Same problem alone or in a batch: both within gtol of the minimiser, so within 2 gtol / lam of each other.
    assert float((alone.theta[0] - res.theta[0]).norm()) <= 2 * gtol / float(lam[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("cols", [1, 10, SKINNY_COLUMNS, SKINNY_COLUMNS + 1, 40])
def test_skinny_mm_is_the_matrix_product_in_both_orientations(dtype, cols):
    g = torch.Generator().manual_seed(cols)
    x = torch.randn(300, 24, generator=g, dtype=dtype)
    w = torch.randn(24, cols, generator=g, dtype=dtype)
    r = torch.randn(300, cols, generator=g, dtype=dtype)
    tol = 1e-4 if dtype == torch.float32 else 1e-12
    fwd, bwd = skinny_mm(x, w), skinny_mm(x.T, r)  # x @ theta and x^T @ resid, as the solver uses them
    assert fwd.shape == (300, cols) and bwd.shape == (24, cols) and fwd.is_contiguous() and bwd.is_contiguous()
    assert torch.allclose(fwd.double(), x.double() @ w.double(), rtol=0, atol=tol)
    assert torch.allclose(bwd.double(), x.double().T @ r.double(), rtol=0, atol=tol)
