"""privcore/methods/loss_perturbation.py: the objective noise is the float64 draw at its calibrated scale (review, s4).

A float32 product unit * sigma can round the noise scale down by up to 2^-24 relative, more than the
calibration's own safety margins; the draw is therefore scaled in float64.
"""

from __future__ import annotations

import pytest
import torch

from privcore.context import TrainContext
from privcore.data import load_dataset
from privcore.methods import REGISTRY
from privcore.methods.base import noise_multiplier_of, unit_noise
from privcore.types import PrivacyBudget, Problem


@pytest.mark.slow
@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_the_linear_term_is_the_float64_noise_at_its_scale(monkeypatch, delta):
    ds = load_dataset("synthetic", seed=0)
    ctx = TrainContext.from_dataset(ds, Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=1e-2), 2, torch.device("cpu"))
    m = REGISTRY["loss_perturbation"]
    scales = [m.calibrate(PrivacyBudget(eps, delta), ctx.problem) for eps in (0.7, 3.0)]
    seen = {}
    solve = ctx.solve

    def spy(lam, linear=None, init=None, tol=None):
        seen["linear"] = linear
        return solve(lam, linear, init, tol)

    monkeypatch.setattr(ctx, "solve", spy)
    m.release(ctx, scales, 2)
    d, c = ds.dim, ds.classes
    unit = unit_noise(ctx, m.name, scales[0].noise, 2, 1, d * c, dtype=torch.float64).view(2, d, c)
    want = torch.cat([unit * noise_multiplier_of(s) / ds.n for s in scales])
    got = seen["linear"]
    assert got.dtype == torch.float64
    rel = float(((got - want).abs() / want.abs().clamp_min(1e-300)).max())
    assert rel < 1e-14  # float32 scaling gave errors up to 6e-8
