"""privcore.parts: each model on a part is a function of its own part only, bit for bit."""

from __future__ import annotations

import pytest
import torch

from privcore.parts import part_preconditioner, solve_parts
from privcore.solver import Preconditioner, solve_softmax


def _data(n: int, d: int, classes: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    x[:, -3:] = 0.0  # never-lit coordinates, as on MNIST's border pixels
    x = x / x.norm(dim=1, keepdim=True).clamp_min(1.0) * 0.9
    return x, torch.randint(0, classes, (n,), generator=g)


def _replacements(x: torch.Tensor, y: torch.Tensor, row: int, classes: int):
    """The ways one row is replaced: another example, a never-lit coordinate, -x, another label."""
    other = x.clone(), y.clone()
    other[0][row], other[1][row] = x[row + 1], y[row + 1]
    unlit = x.clone(), y.clone()
    unlit[0][row] = 0.0
    unlit[0][row, -1] = 1.0
    neg = x.clone(), y.clone()
    neg[0][row] = -x[row]
    label = x.clone(), y.clone()
    label[1][row] = (y[row] + 1) % classes
    return {"another example": other, "never-lit coordinate": unlit, "-x": neg, "label": label}


@pytest.mark.slow
@pytest.mark.parametrize("n, d, teachers", [(240, 40, 8), (400, 12, 4)], ids=["m<=D (Gram)", "m>D (covariance)"])
def test_replacing_a_row_of_one_part_leaves_every_other_model_bitwise_identical(n, d, teachers):
    x, y = _data(n, d, 3)
    parts = torch.randperm(n, generator=torch.Generator().manual_seed(1)).view(teachers, -1)
    base = solve_parts(x, y, parts, 1e-3, 3).theta
    row = int(parts[0, 5])
    for kind, (x2, y2) in _replacements(x, y, row, 3).items():
        theta = solve_parts(x2, y2, parts, 1e-3, 3).theta
        assert not torch.equal(theta[0], base[0]), kind  # the part holding the row did change
        for t in range(1, teachers):
            assert torch.equal(theta[t], base[t]), f"{kind}: teacher {t} moved"


def test_models_are_the_minimisers_of_their_own_parts():
    x, y = _data(240, 40, 3)
    parts = torch.arange(240).view(4, 60)
    res = solve_parts(x, y, parts, 1e-2, 3, gtol=1e-7)
    assert bool(res.converged.all())
    for t in range(4):  # the same problem solved alone, with the part's own full basis
        alone = solve_softmax(x[parts[t]], y[parts[t]], torch.tensor([1e-2], dtype=torch.float64), classes=3,
                              gtol=1e-7, precond=Preconditioner(x[parts[t]]))
        assert torch.allclose(res.theta[t], alone.theta[0], atol=2 * 1e-7 / 1e-2 + 1e-6)


@pytest.mark.slow
def test_groups_give_the_same_models_within_the_solver_tolerance():
    x, y = _data(240, 40, 3)
    parts = torch.arange(240).view(8, 30)
    together = solve_parts(x, y, parts, 1e-2, 3, gtol=1e-7).theta
    grouped = solve_parts(x, y, parts, 1e-2, 3, gtol=1e-7, group_bytes=3 * 30 * 40 * 8).theta  # groups of 3, 3, 2
    assert torch.allclose(grouped, together, atol=4 * 1e-7 / 1e-2 + 1e-6)


def test_a_part_basis_is_orthonormal_on_its_rows_and_zero_elsewhere():
    x, _ = _data(60, 80, 3)  # m = 60 <= D = 80: the Gram route
    x[10:] = x[:10].repeat(5, 1)  # rank 10 of 60 rows: 50 null directions
    pre = part_preconditioner(x.view(1, 60, 80))
    kept = pre.evals[0] > 0
    assert int(kept.sum()) == 10
    v = pre.basis[0][:, kept]
    assert torch.allclose(v.T @ v, torch.eye(10, dtype=torch.float64), atol=1e-9)
    assert torch.equal(pre.basis[0][:, ~kept], torch.zeros(80, int((~kept).sum()), dtype=torch.float64))
    assert torch.allclose(pre.x[0].double(), x.double() @ pre.basis[0], atol=1e-5)


def test_bad_shapes_are_refused_by_name():
    with pytest.raises(ValueError, match="parts must be"):
        solve_parts(torch.zeros(4, 2), torch.zeros(4, dtype=torch.int64), torch.arange(4), 1e-2, 2)
    with pytest.raises(ValueError, match="part_preconditioner"):
        part_preconditioner(torch.zeros(4, 2))


@pytest.mark.slow
def test_the_bitwise_check_catches_a_basis_shared_by_the_parts():
    """Known-bad: the parts solved in the pooled data's basis (the old coupling) move other models."""
    x, y = _data(240, 40, 3)
    parts = torch.randperm(240, generator=torch.Generator().manual_seed(1)).view(8, -1)

    def pooled(xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        shared = Preconditioner(xs)
        sub = object.__new__(Preconditioner)
        sub.evals, sub.basis = shared.evals, shared.basis
        sub.x = shared.x[parts.flatten()].view(8, 30, -1)
        lam = torch.full((8,), 1e-3, dtype=torch.float64)
        return solve_softmax(sub.x, ys[parts], lam, classes=3, precond=sub).theta

    x2 = x.clone()  # (-x would leave X^T X, and so the pooled basis, unchanged)
    x2[int(parts[0, 5])] = x[int(parts[1, 5])]
    a, b = pooled(x, y), pooled(x2, y)
    assert any(not torch.equal(a[t], b[t]) for t in range(1, 8))
