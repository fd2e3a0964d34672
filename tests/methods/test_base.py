"""privcore/methods/base.py: ``noisy_release`` (review, s4).

Model and prediction sensitivity's bounds hold for the float64 certified minimiser and its float64
logits. Rounding those to float32 before the noise is added (as the code did) is a data-dependent
shift of up to 2^-24 of their norm (for weights up to 2^-24 N times the certified sensitivity),
which no bound accounts for; a float32 logit product errs by more. The release must be the noisy
float64 value, rounded once: every released number within half a float32 ulp of it.
"""

from __future__ import annotations

import pytest
import torch

from privcore.context import TrainContext
from privcore.data import load_dataset
from privcore.methods import REGISTRY
from privcore.methods.base import noise_multiplier_of, unit_noise
from privcore.types import PrivacyBudget, Problem

CPU = torch.device("cpu")
BUDGETS = (PrivacyBudget(1.0, 0.0), PrivacyBudget(1.0, 1e-5), PrivacyBudget(30.0, 1e-5))


@pytest.fixture(scope="module")
def ctx():
    ds = load_dataset("synthetic", seed=0)
    problem = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=1e-3, budget=10)
    return TrainContext.from_dataset(ds, problem, 4, CPU)


def _rounded_once(out: torch.Tensor, exact: torch.Tensor) -> bool:
    """Is every float32 entry of ``out`` the float64 ``exact`` value correctly rounded (half an ulp)?"""
    assert out.dtype == torch.float32
    return bool(((out.double() - exact).abs() <= exact.abs() * 2.0 ** -24 * (1 + 1e-9) + 1e-300).all())


def _exact(ctx, name: str, scales, base: torch.Tensor, repeats: int) -> torch.Tensor:
    """base [count, dim] (float64) plus each scale's unit draw times its factor, all in float64."""
    count, dim = base.shape
    out = []
    for s in scales:
        unit = unit_noise(ctx, name, s.noise, repeats, count, dim, dtype=torch.float64)
        out.append(base + unit * noise_multiplier_of(s))
    return torch.stack(out)


@pytest.mark.slow
def test_model_sensitivity_adds_the_noise_to_the_float64_weights(ctx):
    m = REGISTRY["model_sensitivity"]
    scales = [m.calibrate(b, ctx.problem) for b in BUDGETS]
    theta = ctx.nonprivate_theta(ctx.problem.lam)
    assert theta.dtype == torch.float64  # what the certificate covers
    d, c = theta.shape
    out = m.release(ctx, scales, 3)
    exact = _exact(ctx, m.name, scales, theta.reshape(1, d * c), 3).view(len(scales), 3, d, c)
    assert _rounded_once(out, exact)
    # The check can fail: the weights rounded to float32 first, then the float32 noise added.
    early = theta.float().view(1, 1, d, c) + exact.sub(theta.view(1, 1, d, c)).float()
    assert not _rounded_once(early, exact)


def test_prediction_sensitivity_adds_the_noise_to_float64_logits(ctx):
    m = REGISTRY["prediction_sensitivity"]
    scales = [m.calibrate(b, ctx.problem) for b in BUDGETS]
    theta = ctx.nonprivate_theta(ctx.problem.lam)
    logits = ctx.x_test.double() @ theta
    out = m.release(ctx, scales, 2)
    exact = _exact(ctx, m.name, scales, logits, 2)
    assert out.shape == exact.shape and _rounded_once(out, exact)
    queries = ctx.x_test[:7] * 0.5
    assert _rounded_once(m.release(ctx, scales, 2, queries), _exact(ctx, m.name, scales, queries.double() @ theta, 2))
    # The check can fail: float32 logits (the shared GEMM) plus float32 noise.
    early = ctx.logits(theta.unsqueeze(0))[0] + exact.sub(logits).float()
    assert not _rounded_once(early, exact)


def test_prediction_sensitivity_scales_queries_into_the_unit_ball(ctx):
    """The logit sensitivity 2K/(N lam) (+ the solver term) holds for queries of norm <= 1 only: an
    attacker's query of norm 5 would otherwise get 5x the sensitivity at the same noise (review, s4).
    Such a row is answered as x / ||x||, by the same fixed rule as the data."""
    m = REGISTRY["prediction_sensitivity"]
    scales = [m.calibrate(PrivacyBudget(1.0, 1e-5), ctx.problem), m.calibrate(PrivacyBudget(2.0, 0.0), ctx.problem)]
    q = ctx.x_test[:6].clone()
    q = q / q.norm(dim=1, keepdim=True)  # on the unit sphere
    unit = m.release(ctx, scales, 2, q)
    big = m.release(ctx, scales, 2, 5.0 * q)
    assert torch.allclose(big, unit, rtol=1e-6, atol=1e-6)  # the same answers, not 5x the logits
    inside = 0.5 * q
    theta = ctx.nonprivate_theta(ctx.problem.lam)
    assert _rounded_once(m.release(ctx, scales, 2, inside), _exact(ctx, m.name, scales, inside.double() @ theta, 2))


def test_method_prose_uses_the_pages_symbols():
    """The Learn cards showed 'lam > 0', 'K = sqrt 2', '||x|| <= 1' beside typeset formulas."""
    import re

    from privcore.methods import REGISTRY

    for m in REGISTRY.values():
        prose = " ".join([m.summary, m.wins_when, m.assumptions, *m.caveats])
        found = re.findall(r"\b(lam|eps|epsilon|delta|rho|sigma_\d|sqrt)\b|<=|>=|\|\|", prose)
        assert not found, (m.name, found)
