"""Noise samplers on a given device with an explicit generator (no global RNG state).

* Laplace-like noise: density prop. to exp(-beta ||b||_2) on R^d. Its radius ||b|| has density
  prop. to r^(d-1) e^(-beta r), i.e. Gamma(shape=d, scale=1/beta), and its direction is uniform on
  the sphere, so b = (g / ||g||) * r with g standard normal. This is *not* i.i.d. Laplace per
  coordinate (SPEC "Setting and notation").
* Gaussian noise: i.i.d. N(0, sigma^2).

The normal draws behind both come from :func:`privcore.tails.normal`, whose tails are not cut off where a
53-bit uniform's stop (about 8.6 standard deviations): an outcome the mechanism gives positive probability is
never impossible here (docs/limits.md).

torch's Gamma sampler takes no generator, so the Gamma(d, 1) radius is drawn with the
Marsaglia-Tsang method from our own normal and uniform draws: reproducible per seed on a given
device. (CPU and CUDA generators produce different streams, so the same seed gives different,
equally distributed draws on the two.)
"""

from __future__ import annotations

import math
from typing import Any

import torch

from . import tails
from .validation import check_int, check_real, fmt_value

__all__ = ["sample_gamma", "sample_laplace_like", "sample_gaussian", "MAX_DRAWS"]

#: Most numbers one call draws (2**33: 64 GiB in float64); a larger request is refused up front.
MAX_DRAWS = 2**33


def _generator(generator: Any) -> torch.Generator:
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {fmt_value(generator)} ({type(generator).__name__})")
    return generator


def _draws(count: Any, dim: Any) -> tuple[int, int]:
    n, d = check_int("count", count, low=0), check_int("dim", dim, low=1)
    if n * d > MAX_DRAWS:
        raise ValueError(f"count x dim must be at most {MAX_DRAWS:,} numbers, got {n:,} x {d:,}")
    return n, d


def _scale(name: str, value: Any, count: int, *, positive: bool) -> float | torch.Tensor:
    """A float, or a tensor of one value or ``count`` values, finite and > 0 (``positive``) or >= 0."""
    if isinstance(value, torch.Tensor):
        if not value.dtype.is_floating_point or value.numel() not in (1, count):
            raise TypeError(f"{name} must be a float or a floating tensor of 1 or {count} values, got a "
                            f"{value.dtype} tensor of shape {list(value.shape)}")
        ok = torch.isfinite(value) & ((value > 0) if positive else (value >= 0))
        if not bool(ok.all()):
            raise ValueError(f"{name} must be finite and {'> 0' if positive else '>= 0'} everywhere, got "
                             f"{fmt_value(value.detach().flatten()[~ok.flatten()][0].item())}")
        return value
    return check_real(name, value, low=0.0, low_open=positive)


def _fits(name: str, scale: float | torch.Tensor, reach: float, dtype: torch.dtype, *, inverse: bool) -> None:
    """Refuse a scale whose draws (up to ``reach`` units) would overflow ``dtype`` to infinity."""
    extreme = float(scale.min() if inverse else scale.max()) if isinstance(scale, torch.Tensor) else float(scale)
    if extreme > 0 and (reach / extreme if inverse else reach * extreme) > torch.finfo(dtype).max:
        raise ValueError(f"{name}={extreme!r} gives draws beyond the range of {dtype} (they would be infinite)")


def sample_gamma(shape: float, size: tuple[int, ...], generator: torch.Generator,
                 dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Gamma(shape, scale=1) samples of the given size, on the generator's device.

    Marsaglia and Tsang (2000) squeeze method for shape >= 1; shape < 1 uses the boost
    Gamma(a) = Gamma(a + 1) * U^(1/a). Vectorised rejection: redraw only the rejected entries.
    """
    shape = check_real("shape", shape, low=0.0, low_open=True)  # NaN or inf looped for ever
    if not isinstance(size, tuple):
        raise TypeError(f"size must be a tuple of integers, got {fmt_value(size)} ({type(size).__name__})")
    total = math.prod(check_int("size", s, low=0) for s in size)
    if total > MAX_DRAWS:
        raise ValueError(f"size must hold at most {MAX_DRAWS:,} numbers, got {total:,}")
    device = _generator(generator).device
    a = shape + 1.0 if shape < 1.0 else shape
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    out = torch.empty(size, dtype=dtype, device=device)
    flat = out.view(-1)
    todo = torch.arange(flat.numel(), device=device)
    while todo.numel() > 0:
        m = todo.numel()
        x = tails.normal((m,), generator).to(dtype)  # the radius's upper tail comes from x's
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
    count, dim = _draws(count, dim)
    beta = _scale("beta", beta, count, positive=True)
    _fits("beta", beta, dim + 64.0 * math.sqrt(dim) + 64.0, dtype, inverse=True)  # the radius is Gamma(dim)
    device = _generator(generator).device
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
    count, dim = _draws(count, dim)
    sigma = _scale("sigma", sigma, count, positive=False)
    _fits("sigma", sigma, 64.0, dtype, inverse=False)  # a standard normal draw stays below 64
    device = _generator(generator).device
    z = tails.normal((count, dim), generator)
    sigma_t = torch.as_tensor(sigma, dtype=torch.float64, device=device).reshape(-1, 1)
    return (z * sigma_t).to(dtype)
