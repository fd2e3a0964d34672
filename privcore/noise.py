"""Noise samplers on a given device with an explicit generator (no global RNG state).

* Laplace-like noise: density prop. to exp(-beta ||b||_2) on R^d. Its radius ||b|| has density
  prop. to r^(d-1) e^(-beta r), i.e. Gamma(shape=d, scale=1/beta), and its direction is uniform on
  the sphere, so b = (g / ||g||) * r with g standard normal. This is *not* i.i.d. Laplace per
  coordinate (SPEC "Setting and notation").
* Gaussian noise: i.i.d. N(0, sigma^2).

torch's Gamma sampler takes no generator, so the Gamma(d, 1) radius is drawn with the
Marsaglia-Tsang method from our own normal and uniform draws: reproducible per seed on a given
device. (CPU and CUDA generators produce different streams, so the same seed gives different,
equally distributed draws on the two.)
"""

from __future__ import annotations

import math

import torch

__all__ = ["sample_gamma", "sample_laplace_like", "sample_gaussian"]


def sample_gamma(shape: float, size: tuple[int, ...], generator: torch.Generator,
                 dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Gamma(shape, scale=1) samples of the given size, on the generator's device.

    Marsaglia and Tsang (2000) squeeze method for shape >= 1; shape < 1 uses the boost
    Gamma(a) = Gamma(a + 1) * U^(1/a). Vectorised rejection: redraw only the rejected entries.
    """
    if shape <= 0:
        raise ValueError(f"shape must be > 0, got {shape!r}")
    device = generator.device
    a = shape + 1.0 if shape < 1.0 else shape
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    out = torch.empty(size, dtype=dtype, device=device)
    flat = out.view(-1)
    todo = torch.arange(flat.numel(), device=device)
    while todo.numel() > 0:
        m = todo.numel()
        x = torch.randn(m, generator=generator, dtype=dtype, device=device)
        u = torch.rand(m, generator=generator, dtype=dtype, device=device)
        v = (1.0 + c * x) ** 3
        ok = (v > 0) & (torch.log(u.clamp_min(1e-300)) < 0.5 * x * x + d - d * v + d * torch.log(v.clamp_min(1e-300)))
        flat[todo[ok]] = d * v[ok]
        todo = todo[~ok]
    if shape < 1.0:
        u = torch.rand(size, generator=generator, dtype=dtype, device=device)
        out = out * u.pow(1.0 / shape)
    return out


def sample_laplace_like(beta: float | torch.Tensor, count: int, dim: int, generator: torch.Generator,
                        dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``count`` draws of d = ``dim`` dimensional noise with density prop. to exp(-beta ||b||_2).

    ``beta`` is a float or a tensor of shape [count] (one scale per draw). Returns [count, dim].
    """
    device = generator.device
    direction = torch.randn(count, dim, generator=generator, dtype=torch.float64, device=device)
    direction = direction / direction.norm(dim=1, keepdim=True)
    radius = sample_gamma(float(dim), (count,), generator)
    beta_t = torch.as_tensor(beta, dtype=torch.float64, device=device).reshape(-1)
    return (direction * (radius / beta_t).unsqueeze(1)).to(dtype)


def sample_gaussian(sigma: float | torch.Tensor, count: int, dim: int, generator: torch.Generator,
                    dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``count`` draws of i.i.d. N(0, sigma^2) noise in ``dim`` dimensions. Returns [count, dim].

    ``sigma`` is a float or a tensor of shape [count].
    """
    device = generator.device
    z = torch.randn(count, dim, generator=generator, dtype=torch.float64, device=device)
    sigma_t = torch.as_tensor(sigma, dtype=torch.float64, device=device).reshape(-1, 1)
    return (z * sigma_t).to(dtype)
