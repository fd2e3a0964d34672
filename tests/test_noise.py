"""Noise samplers: distribution checks (Kolmogorov-Smirnov, fixed seeds, so deterministic) and
reproducibility per generator, on CPU and (when available) CUDA."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from privcore.noise import sample_gamma, sample_gaussian, sample_laplace_like

P_MIN = 1e-3  # fixed seeds: a correct sampler passes deterministically; a wrong one fails by far


def gen(seed: int, device: str = "cpu") -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def ks_pvalue(sample: torch.Tensor, dist) -> float:
    return float(stats.kstest(sample.detach().cpu().double().numpy().ravel(), dist.cdf).pvalue)


# --------------------------------------------------------------------------------------------
# Gamma
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [0.3, 1.0, 7.5, 7840.0])
def test_gamma_ks(shape):
    x = sample_gamma(shape, (20_000,), gen(11))
    assert x.dtype == torch.float64 and x.shape == (20_000,)
    assert bool((x > 0).all())
    assert ks_pvalue(x, stats.gamma(shape)) > P_MIN
    # A test that can fail: the same draws are far from a neighbouring shape (shape +- 5 %... or
    # 1/sqrt(shape) standard deviations at large shape).
    wrong = shape * (1.05 if shape < 100 else 1.0 + 3.0 / math.sqrt(shape))
    assert ks_pvalue(x, stats.gamma(wrong)) < P_MIN


def test_gamma_shape_and_errors():
    x = sample_gamma(2.0, (3, 4, 5), gen(0))
    assert x.shape == (3, 4, 5)
    with pytest.raises(ValueError):
        sample_gamma(0.0, (3,), gen(0))
    with pytest.raises(ValueError):
        sample_gamma(-1.0, (3,), gen(0))


# --------------------------------------------------------------------------------------------
# Laplace-like noise: radius ~ Gamma(d, 1/beta), direction uniform
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim,count", [(1, 20_000), (10, 20_000), (784 * 10, 1_500)])
@pytest.mark.parametrize("beta", [0.37, 4.0])
def test_laplace_like_radius_is_gamma(dim, count, beta):
    b = sample_laplace_like(beta, count, dim, gen(5), dtype=torch.float64)
    assert b.shape == (count, dim)
    radius = b.norm(dim=1)
    assert ks_pvalue(radius, stats.gamma(dim, scale=1.0 / beta)) > P_MIN
    # Not scale 1/beta with a wrong shape, nor i.i.d. Laplace per coordinate (whose norm differs).
    assert ks_pvalue(radius, stats.gamma(dim, scale=1.1 / beta)) < P_MIN


def test_laplace_like_one_dimension_is_laplace():
    b = sample_laplace_like(2.0, 20_000, 1, gen(6), dtype=torch.float64)
    assert ks_pvalue(b[:, 0], stats.laplace(scale=0.5)) > P_MIN


def test_laplace_like_direction_uniform():
    # Archimedes: one coordinate of a uniform point on the 2-sphere is Uniform(-1, 1).
    b = sample_laplace_like(1.5, 20_000, 3, gen(7), dtype=torch.float64)
    u = b / b.norm(dim=1, keepdim=True)
    for j in range(3):
        assert ks_pvalue(u[:, j], stats.uniform(loc=-1.0, scale=2.0)) > P_MIN
    # Uniform direction: mean direction ~ 0 and second moment I/3.
    cov = (u.T @ u / u.shape[0]).numpy()
    assert np.allclose(cov, np.eye(3) / 3, atol=0.02)
    # Independence of radius and direction (rank correlation near 0).
    r = b.norm(dim=1).numpy()
    assert abs(stats.spearmanr(r, u[:, 0].numpy()).statistic) < 0.03


def test_laplace_like_per_draw_beta():
    betas = torch.tensor([0.5, 50.0] * 5_000, dtype=torch.float64)
    b = sample_laplace_like(betas, 10_000, 4, gen(8), dtype=torch.float64)
    radius = b.norm(dim=1)
    assert ks_pvalue(radius[0::2], stats.gamma(4, scale=2.0)) > P_MIN
    assert ks_pvalue(radius[1::2], stats.gamma(4, scale=0.02)) > P_MIN


def test_laplace_like_default_dtype_float32():
    b = sample_laplace_like(1.0, 10, 5, gen(9))
    assert b.dtype == torch.float32 and bool(torch.isfinite(b).all())


# --------------------------------------------------------------------------------------------
# Gaussian
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sigma", [1e-3, 1.0, 37.0])
def test_gaussian_moments_and_ks(sigma):
    z = sample_gaussian(sigma, 2_000, 50, gen(10), dtype=torch.float64)
    assert z.shape == (2_000, 50)
    n = z.numel()
    assert abs(float(z.mean())) < 4 * sigma / math.sqrt(n)
    assert float(z.std()) == pytest.approx(sigma, rel=4 * math.sqrt(0.5 / n) + 1e-12)
    assert ks_pvalue(z, stats.norm(scale=sigma)) > P_MIN


def test_gaussian_per_draw_sigma():
    sig = torch.tensor([0.1, 10.0] * 1_000, dtype=torch.float64)
    z = sample_gaussian(sig, 2_000, 20, gen(12), dtype=torch.float64)
    assert float(z[0::2].std()) == pytest.approx(0.1, rel=0.03)
    assert float(z[1::2].std()) == pytest.approx(10.0, rel=0.03)


# --------------------------------------------------------------------------------------------
# Reproducibility
# --------------------------------------------------------------------------------------------

SAMPLERS = {
    "gamma": lambda g: sample_gamma(0.7, (500,), g),
    "laplace_like": lambda g: sample_laplace_like(2.0, 50, 17, g),
    "gaussian": lambda g: sample_gaussian(3.0, 50, 17, g),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_same_seed_same_draws_different_seed_different(name):
    f = SAMPLERS[name]
    a, b, c = f(gen(123)), f(gen(123)), f(gen(124))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    # The global RNG is not used: reseeding it changes nothing.
    torch.manual_seed(0)
    x = f(gen(5))
    torch.manual_seed(1)
    assert torch.equal(x, f(gen(5)))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_cuda_same_seed_same_draws(name):
    f = SAMPLERS[name]
    a, b, c = f(gen(123, "cuda")), f(gen(123, "cuda")), f(gen(124, "cuda"))
    assert a.device.type == "cuda"
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_distributions():
    x = sample_gamma(7.5, (20_000,), gen(11, "cuda"))
    assert ks_pvalue(x, stats.gamma(7.5)) > P_MIN
    b = sample_laplace_like(4.0, 5_000, 10, gen(5, "cuda"), dtype=torch.float64)
    assert ks_pvalue(b.norm(dim=1), stats.gamma(10, scale=0.25)) > P_MIN
