"""Sparse-vector aggregation: stable queries free, a cap on paid answers, streams of B queries."""

from __future__ import annotations

import pytest
import torch

from privcore.context import TrainContext
from privcore.data import load_dataset
from privcore.methods import get_method
from privcore.methods.sparse_vector import svt_cap, svt_labels
from privcore.types import CalibrationError, PrivacyBudget, Problem

CPU = torch.device("cpu")
M = get_method("sparse_vector")


@pytest.fixture(scope="module")
def ctx():
    ds = load_dataset("synthetic", seed=0)
    problem = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=1e-2, budget=20, teachers=40)
    return TrainContext.from_dataset(ds, problem, 0, CPU)


def test_calibration_and_cap():
    s = M.calibrate(PrivacyBudget(1.0, 1e-5), Problem(n=4000, budget=1000, teachers=16))
    assert s.cap == svt_cap(1000) == 250 and s.threshold > 1000 and s.beta > 0
    assert svt_cap(1) == 1 and svt_cap(10) == 3
    with pytest.raises(CalibrationError):
        M.calibrate(PrivacyBudget(1.0, 0.0), Problem(n=100, teachers=4))
    same = {(x.beta, x.threshold, x.test_noise, x.cap) for x in
            (M.calibrate(PrivacyBudget(1.0, 1e-5), Problem(budget=10), mode) for mode in ("paper", "corrected", "tight"))}
    assert len(same) == 1  # the same in every mode (see the module docstring)


def _stream_case():
    # 6 queries: rows 0-2 unanimous (d large), rows 3-5 tied (d = 0).
    votes = torch.tensor([[100.0, 0, 0], [0, 100, 0], [0, 0, 100], [50, 50, 0], [0, 50, 50], [50, 0, 50]],
                         dtype=torch.float64)
    order = torch.arange(6)
    zeros = torch.zeros(6, dtype=torch.float64)
    return votes, order, zeros


def test_stable_queries_free_and_cap_halts_the_stream():
    votes, order, zeros = _stream_case()
    gumbel = torch.zeros(6, 3, dtype=torch.float64)
    lab = svt_labels(votes, order, zeros, torch.zeros(1, dtype=torch.float64), gumbel, threshold=10.0, query_scale=1.0,
                     threshold_scale=1.0, cap=1, beta=1.0, stream=6)
    assert lab[:3].tolist() == [0, 1, 2]  # stable: the majority
    assert lab[3] >= 0 and lab[4:].tolist() == [-1, -1]  # one paid answer, then the stream stops
    lab2 = svt_labels(votes, order, zeros, torch.zeros(2, dtype=torch.float64), gumbel, threshold=10.0,
                      query_scale=1.0, threshold_scale=1.0, cap=1, beta=1.0, stream=3)
    assert lab2.tolist()[:3] == [0, 1, 2] and lab2[3] >= 0 and lab2[4:].tolist() == [-1, -1]
    # two streams of 3 with cap 2: rows 3, 4 paid in the second stream, row 5 abstains
    lab3 = svt_labels(votes, torch.tensor([3, 4, 5, 0, 1, 2]), zeros, torch.zeros(2, dtype=torch.float64), gumbel,
                      threshold=10.0, query_scale=1.0, threshold_scale=1.0, cap=2, beta=1.0, stream=3)
    assert lab3[5] == -1 and lab3[3] >= 0 and lab3[4] >= 0 and lab3[:3].tolist() == [0, 1, 2]


@pytest.mark.slow
def test_release_on_data(ctx):
    scales = [M.calibrate(PrivacyBudget(e, 1e-5), ctx.problem) for e in (1.0, 1e4)]
    out = M.release(ctx, scales, 3)
    assert out.shape == (2, 3, ctx.x_test.shape[0]) and out.min() >= -1
    # per stream of B = 20 queries at most c = 5 are paid: at eps = 1 (threshold far above T/2) the
    # rest abstain, so the answered fraction is at most c/B
    answered = (out[0] >= 0).double().mean()
    assert float(answered) <= svt_cap(20) / 20 + 1e-9
    assert float((out[1] >= 0).double().mean()) > float(answered)
    both = M.release(ctx, scales[::-1], 3)
    assert torch.equal(both[1], out[0])  # independent of the batch
