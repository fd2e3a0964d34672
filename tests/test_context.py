"""The memory-light data path (issue 16): one copy of the data, the same rows and the same results."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import privcore.context as context
import privcore.parts as parts
from privcore.data import load_dataset
from privcore.data.transforms import unit_ball_float32
from privcore.types import Problem


def _ctx(ds, seed: int = 3) -> context.TrainContext:
    return context.TrainContext.from_dataset(ds, Problem(n=ds.n, dim=ds.dim, classes=ds.classes), seed,
                                             torch.device("cpu"))


def _old_unit_ball(x: np.ndarray) -> np.ndarray:
    """The previous context's rule on a private copy, on the whole matrix at once (the reference)."""
    t = torch.from_numpy(x.copy())
    for _ in range(4):
        norms = t.double().norm(dim=1)
        over = norms > 1.0
        if not bool(over.any()):
            break
        t[over] = (t[over].double() / (norms[over] * (1.0 + 2.0 ** -20)).unsqueeze(1)).to(t.dtype)
    return t.numpy()


@pytest.mark.slow
@pytest.mark.parametrize("name,n", [("digits", None), ("mnist-5k", 6000)])
def test_the_context_shares_the_data_and_trains_on_the_same_rows(name, n):
    ds = load_dataset(name, n=n, seed=3)
    before = ds.x_train.copy()
    ctx = _ctx(ds)
    assert np.shares_memory(ctx.x_train.numpy(), ds.x_train)  # no second copy on the CPU
    assert np.array_equal(ctx.x_train.numpy(), _old_unit_ball(ds.x_train))  # the rows the old copy-and-fix gave
    assert np.array_equal(ds.x_train, before)  # and the data set is unchanged
    assert float(np.linalg.norm(ds.x_train.astype(np.float64), axis=1).max()) <= 1.0


def test_a_shared_tensor_is_copied_before_a_row_moves():
    x = np.zeros((5, 3), dtype=np.float32)
    x[2] = np.float32(0.6), np.float32(0.8), np.float32(1e-3)  # norm just above 1
    original = x.copy()
    out = unit_ball_float32(torch.from_numpy(x), shared=True, rows=2)
    assert np.array_equal(x, original)
    assert float(out.double().norm(dim=1).max()) <= 1.0
    assert not np.shares_memory(out.numpy(), x)
    inplace = unit_ball_float32(torch.from_numpy(x))
    assert np.shares_memory(inplace.numpy(), x) and float(torch.from_numpy(x).double().norm(dim=1).max()) <= 1.0


@pytest.mark.slow
def test_teachers_solved_in_groups_vote_as_when_solved_together(monkeypatch):
    ds = load_dataset("mnist-5k", seed=3)
    together = _ctx(ds)
    votes, thetas = together.teacher_votes(16, 1e-3), together.teacher_thetas(16, 1e-3)
    monkeypatch.setattr(parts, "PART_GROUP_BYTES", 2 * (ds.n // 16) * ds.dim * 8)  # 16 teachers in groups of 2
    grouped = _ctx(ds)
    assert torch.equal(grouped.teacher_votes(16, 1e-3), votes)
    # float32 rounding of the products differs with the group's layout, far below the teachers'
    # own solver tolerance gtol / lam = 1e-2
    assert torch.allclose(grouped.teacher_thetas(16, 1e-3), thetas, rtol=0, atol=1e-5)


@pytest.mark.slow
def test_full_data_solves_in_groups_match_one_batch_within_the_certified_tolerance(monkeypatch):
    ds = load_dataset("digits", seed=3)
    lam = torch.tensor([1e-3, 2e-3, 5e-3, 1e-2, 3e-3], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    linear = torch.randn(5, ds.dim, ds.classes, generator=gen, dtype=torch.float64) * 1e-2
    tol = 1e-9
    together = _ctx(ds).solve(lam, linear, tol=tol)
    calls = []
    real = context.solve_softmax

    def counted(*a, **k):
        calls.append(int(a[2].shape[0]))
        return real(*a, **k)

    monkeypatch.setattr(context, "solve_softmax", counted)
    monkeypatch.setattr(context, "SOLVE_GROUP_BYTES", 2 * ds.n * ds.classes * 4)  # two problems a group
    grouped = _ctx(ds).solve(lam, linear, tol=tol)
    assert calls == [2, 2, 1]
    assert bool((grouped.grad_norm <= tol).all()) and grouped.theta.shape == together.theta.shape
    # both within tol / lam of the same unique minimisers
    gap = (grouped.theta - together.theta).flatten(1).norm(dim=1)
    assert bool((gap <= 2 * tol / lam).all())
