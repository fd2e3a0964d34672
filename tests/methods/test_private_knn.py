"""Private-kNN: the replace-one sensitivity of its subsampled k-nearest vote, calibration and release."""

from __future__ import annotations

import pytest
import torch

from privcore.context import TrainContext
from privcore.data import load_dataset
from privcore.methods.private_knn import PrivateKNN, knn_votes
from privcore.types import CalibrationError, PrivacyBudget, Problem

CPU = torch.device("cpu")


def _world(seed: int, n: int = 40, d: int = 3, classes: int = 4, dup: bool = False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 3, (n, d), generator=g).double() if dup else torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.randint(0, classes, (n,), generator=g)
    return x, y


@pytest.mark.parametrize("dup", [False, True], ids=["distinct", "ties"])
def test_replace_one_moves_at_most_one_vote(dup):
    """Replace row i (anywhere, any label), same subsample draw (36 pairs): the histogram moves one vote at most
    (L1 <= 2, so L2 <= sqrt(2)), its max by at most 1; also against the vote without row i sampled."""
    k, classes = 5, 4
    worst_l1 = 0.0
    for trial in range(36):
        x, y = _world(trial, dup=dup)
        g = torch.Generator().manual_seed(1000 + trial)
        q = torch.randn(30, 3, generator=g, dtype=torch.float64) if not dup else torch.randint(0, 3, (30, 3), generator=g).double()
        i = int(torch.randint(0, x.shape[0], (1,), generator=g))
        x1, y1 = x.clone(), y.clone()
        x1[i] = q[0] if trial % 2 else torch.randn(3, generator=g, dtype=torch.float64)
        y1[i] = int(torch.randint(0, classes, (1,), generator=g))
        rate = [0.2, 0.5, 1.0][trial % 3]
        v0 = knn_votes(x, y, q, classes, k, rate, torch.Generator().manual_seed(trial))
        v1 = knn_votes(x1, y1, q, classes, k, rate, torch.Generator().manual_seed(trial))
        # Row i never sampled: the same draw with row i pushed out of reach (label and place irrelevant).
        far = x.clone()
        far[i] = 1e6
        vu = knn_votes(far, y, q, classes, k, rate, torch.Generator().manual_seed(trial))
        for a, b in ((v0, v1), (v0, vu), (v1, vu)):
            l1 = (a - b).abs().sum(1)
            worst_l1 = max(worst_l1, float(l1.max()))
            assert float(l1.max()) <= 2.0
            assert float((a.max(1).values - b.max(1).values).abs().max()) <= 1.0
        assert torch.equal(v0.sum(1), torch.clamp(v0.sum(1), max=k))
    assert worst_l1 == 2.0  # the bound is reached: one vote out, another in


def test_the_check_can_fail_a_per_rank_subsample():
    """Known-bad variant: sampling by *rank* (the j-th nearest kept with the j-th draw) instead of by index lets one
    replaced row shift every later row's indicator; the same check then sees more than one vote move."""
    k, classes = 5, 4
    caught = False
    for trial in range(40):
        x, y = _world(trial)
        g = torch.Generator().manual_seed(1000 + trial)
        q = torch.randn(30, 3, generator=g, dtype=torch.float64)
        i = int(torch.randint(0, x.shape[0], (1,), generator=g))
        x1 = x.clone()
        x1[i] = q[0]

        def per_rank(xx):
            d = torch.cdist(q, xx)
            order = torch.sort(d, dim=1, stable=True).indices
            keep = torch.rand(order.shape, generator=torch.Generator().manual_seed(trial), dtype=torch.float64) < 0.5
            votes = torch.zeros(q.shape[0], classes, dtype=torch.float64)
            for m in range(q.shape[0]):
                chosen = order[m][keep[m]][:k]
                votes[m].index_add_(0, y[chosen], torch.ones(len(chosen), dtype=torch.float64))
            return votes

        caught |= bool(((per_rank(x) - per_rank(x1)).abs().sum(1) > 2).any())
    assert caught


def test_fresh_subsample_per_query_and_per_draw():
    x, y = _world(3, n=200)
    q = x[:1].repeat(50, 1)  # the same query 50 times: independent subsamples
    v = knn_votes(x, y, q, 4, 5, 0.3, torch.Generator().manual_seed(0))
    assert len({tuple(r.tolist()) for r in v}) > 5
    w = knn_votes(x, y, q, 4, 5, 0.3, torch.Generator().manual_seed(0))
    assert torch.equal(v, w)


@pytest.fixture(scope="module")
def ctx():
    ds = load_dataset("digits")
    problem = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, budget=10)
    return TrainContext.from_dataset(ds, problem, 0, CPU)


def test_calibration_and_release(ctx):
    m = PrivateKNN(10, 0.2)
    p = ctx.problem
    scales = [m.calibrate(PrivacyBudget(e, 1e-5), p, "corrected") for e in (1.0, 10.0, float("inf"))]
    assert scales[0].sigma > scales[1].sigma and scales[0].threshold == pytest.approx(3.0)
    assert scales[0].sensitivity == pytest.approx(2 ** 0.5) and scales[2].noise == "none"
    out = m.release(ctx, scales, 2)
    assert out.shape == (3, 2, ctx.x_test.shape[0]) and out.dtype == torch.int64
    acc = (out == ctx.y_test).double().mean(dim=(1, 2))
    assert acc[2] > 0.85 and acc[1] > 0.6 and acc[1] >= acc[0] - 0.05
    assert bool((out[2] >= 0).all()) and bool((out[0] == -1).any())
    assert torch.equal(out, m.release(ctx, scales, 2))  # seeded, deterministic
    assert torch.equal(out[:, :1], m.release(ctx, scales, 1))  # repetition r does not depend on the batch


def test_refusals_name_the_parameter():
    with pytest.raises(CalibrationError, match="delta"):
        PrivateKNN().calibrate(PrivacyBudget(1.0, 0.0), Problem(), "corrected")
    with pytest.raises(ValueError, match="sample_rate"):
        PrivateKNN(5, 0.0)
    with pytest.raises(ValueError, match="neighbours"):
        PrivateKNN(0, 0.1)


def test_small_subsample_warns():
    assert PrivateKNN(25, 0.01).setting_warnings({}, 1000)
    assert not PrivateKNN(25, 0.1).setting_warnings({}, 4000)


def test_the_formula_states_each_noise_once_and_defines_r():
    """A walk-through saw sigma_1 = 2 sigma_2 twice and r undefined in Calibrate's Private-kNN formula."""
    from privcore.calibration import calibrate
    from privcore.types import PrivacyBudget, Problem

    for accounting in ("corrected", "tight"):
        formula = calibrate("private_knn", PrivacyBudget(3.0, 1e-5), Problem(), accounting).formula
        assert formula.count("sigma_1 =") == 1 and "r = 2" in formula, formula
        gnmax = calibrate("confident_gnmax", PrivacyBudget(3.0, 1e-5), Problem(), accounting).formula
        assert gnmax.count("sigma_1 =") == 1 and "r = 3.75" in gnmax, gnmax  # its tight formula uses r too
