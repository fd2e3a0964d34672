"""Exponential, Gumbel and Laplace draws whose tails are not cut off by the uniforms they come from.

The usual recipes map one float64 uniform u = k 2^-53 to a draw: Gumbel -log(-log u), Laplace by the inverse
CDF. Such a u is never closer to 0 or 1 than 2^-53, so every Gumbel draw lies in [-3.6, 36.7] and a difference
of two never exceeds about 43: a report-noisy-max (exponential mechanism) releases a class that trails by more
than 43 / beta with probability exactly 0 instead of about e^(-beta gap). Two neighbouring vote counts can then
give one outcome probability 0 under one and more than delta under the other (at epsilon = 40, delta = 1e-12,
B = 1 with three teachers), and a pure-DP claim fails at every epsilon (Mironov 2012 found the same for the
Laplace mechanism). An inverse-CDF Laplace also draws exactly -inf when u = 0.

Here an Exp(1) draw E is built from a uniform W = f 2^-e with every binade reached: e >= 1 geometric (the
number of leading zero bits of an unending random bit string, drawn 52 bits at a time) and f = 1 + m 2^-52
(m uniform on 52 bits), so W is uniform on (0, 1) to float64's relative precision however small it is. A fair
bit then picks the half of Exp(1) (memorylessness): E = -log1p(-W / 2) on [0, ln 2) or ln 2 - log W on
[ln 2, inf). log W = log f - e ln 2 is taken in that form, so neither tail underflows or saturates: E reaches
e ln 2 for any e the bits give, and the Gumbel -log E is computed from log W where E is below 2^-60 (E = W / 2
to float64 precision there). The remaining error is float64 rounding, relative, of about 1e-16 in each draw:
no outcome of positive probability becomes impossible.

Every draw comes from the explicit generator, on its device; the loop that extends an all-zero 52-bit word
runs with probability 2^-52 per draw.
"""

from __future__ import annotations

import math

import torch

__all__ = ["uniform_parts", "log_uniform", "exponential_from", "gumbel_from", "exponential", "gumbel", "laplace",
           "normal", "gaussian_noise", "bernoulli"]

_BITS = 52
_LN2 = math.log(2.0)
#: Below this W (so E below 2^-61), the Gumbel -log E is computed as -(log W - ln 2): E = W / 2 (1 + W / 4 + ...).
_SMALL_EXP = 60
#: gaussian_noise: a radius from one 53-bit uniform V where V > 2^-20 (E = -log V below 20 ln 2, R below 5.27);
#: at or below it, E = 20 ln 2 + an exact Exp(1) (memorylessness: P(V <= 2^-20) = 2^-20 exactly).
_BULK_BITS = 20


def _check(shape: tuple[int, ...], generator: torch.Generator) -> torch.device:
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if not isinstance(shape, tuple) or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in shape):
        raise ValueError(f"shape must be a tuple of integers >= 0, got {shape!r}")
    return generator.device


def uniform_parts(shape: tuple[int, ...], generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor,
                                                                                torch.Tensor]:
    """(e, f, half): W = f 2^-e uniform on (0, 1) with e >= 1 (int64) geometric and f in [1, 2); and a
    fair bit (bool) for the half of Exp(1). Three draws of 52 bits per number, plus one more for each
    all-zero word (probability 2^-52)."""
    device = _check(shape, generator)
    top = 1 << _BITS
    word = torch.randint(0, top, shape, generator=generator, device=device, dtype=torch.int64)
    zeros = torch.zeros(shape, dtype=torch.int64, device=device)
    empty = word == 0
    while bool(empty.any()):  # an all-zero word: 52 more leading zeros, and the next word decides
        zeros = zeros + _BITS * empty
        again = torch.randint(0, top, (int(empty.sum()),), generator=generator, device=device, dtype=torch.int64)
        word = word.masked_scatter(empty, again)
        empty = word == 0
    _, length = torch.frexp(word.to(torch.float64))  # bit length of word (exact: word < 2^53)
    e = 1 + zeros + (_BITS - length.to(torch.int64))
    mantissa = torch.randint(0, top, shape, generator=generator, device=device, dtype=torch.int64)
    f = 1.0 + mantissa.to(torch.float64) * 2.0 ** -_BITS  # exact: m < 2^52
    half = torch.randint(0, 2, shape, generator=generator, device=device, dtype=torch.int64) == 1
    return e, f, half


def log_uniform(e: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """log W = log f - e ln 2, never -inf however large e is."""
    return torch.log(f) - e.to(torch.float64) * _LN2


def _small_half(e: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """-log1p(-W / 2), E on [0, ln 2); W / 2 = f 2^-(e+1) (0 below float64's range, e > 1,074)."""
    return -torch.log1p(-torch.ldexp(f, -(e + 1).clamp(max=1100).to(torch.float64)))


def exponential_from(e: torch.Tensor, f: torch.Tensor, half: torch.Tensor) -> torch.Tensor:
    """Exp(1) from the parts of :func:`uniform_parts`."""
    return torch.where(half, _small_half(e, f), _LN2 - log_uniform(e, f))


def gumbel_from(e: torch.Tensor, f: torch.Tensor, half: torch.Tensor) -> torch.Tensor:
    """Gumbel -log E from the parts of :func:`uniform_parts` (see :func:`gumbel`)."""
    large = -torch.log(_LN2 - log_uniform(e, f))  # E on [ln 2, inf): -log E <= -log ln 2
    tiny = e >= _SMALL_EXP  # E = W / 2 to float64 precision: -log E = ln 2 - log W
    small = torch.where(tiny, _LN2 - log_uniform(e, f), -torch.log(_small_half(e, f).clamp_min(1e-300)))
    return torch.where(half, small, large)


def exponential(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Exp(1) draws, float64: the upper tail reaches e ln 2 for any e the bits give (no cap at 36.7)."""
    return exponential_from(*uniform_parts(shape, generator))


def gumbel(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Standard Gumbel draws -log E, float64, with E = Exp(1) as :func:`exponential`: the upper tail (E near
    0) from log W itself, so it is not capped at 36.7 (nor at float64's underflow near 745)."""
    return gumbel_from(*uniform_parts(shape, generator))


def laplace(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Standard Laplace draws (density e^-|x| / 2), float64: a fair sign times :func:`exponential`, so
    neither tail is capped at 36.7 and no draw is infinite."""
    device = _check(shape, generator)
    magnitude = exponential(shape, generator)
    sign = torch.randint(0, 2, shape, generator=generator, device=device, dtype=torch.int64)
    return torch.where(sign == 1, magnitude, -magnitude)


def normal(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Standard normal draws, float64, by Box-Muller from :func:`exponential`: sqrt(2 E) cos(2 pi V) with V
    uniform (its 53 bits only set the angle). R^2 / 2 of a standard normal pair is Exp(1), so the tails
    reach wherever E does; from one 53-bit uniform they stop near 8.6 standard deviations."""
    device = _check(shape, generator)
    radius = torch.sqrt(2.0 * exponential(shape, generator))
    angle = torch.rand(shape, generator=generator, dtype=torch.float64, device=device)
    return radius * torch.cos(2.0 * math.pi * angle)


def gaussian_noise(size: int, generator: torch.Generator, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``size`` standard normals in ``dtype`` for DP-SGD, whose tails are not cut off: Box-Muller pairs
    sqrt(2 E) (cos, sin)(2 pi V) with E = Exp(1) built as follows (V, which sets only the direction, is a
    float32 uniform unless ``dtype`` is float64).

    torch.randn cuts its tails where its uniforms stop: measured over 1e9 float32 draws on a CPU, the
    largest |z| stayed below 5.7681 = sqrt(2 * 24 ln 2) (a 24-bit uniform), where a true normal exceeds 5.77
    eight times on average. A step of DP-SGD whose sensitivity is 2 noise standard deviations then has
    an outcome of probability Q(3.77) = 8e-5 under one neighbour and 0 under the other.

    Here E = -log1p(-r) = -log U with r a 53-bit uniform (U = 1 - r is exact) where U > 2^-20, and
    otherwise (probability 2^-20, exactly) E = 20 ln 2 + an exact Exp(1) draw (:func:`exponential`):
    conditioned on E > 20 ln 2, E - 20 ln 2 is Exp(1) and independent (memorylessness). Below 20 ln 2 the radius has U's grid (relative
    2^-33 at worst), beyond it float64's relative precision however far out. The exact draws are made only
    where needed, which reads the positions back to the host (one sync on a GPU: deep DP-SGD draws its noise
    before the clipping's launches, when little is queued). About 2.5 torch.randn on a CPU (docs/benchmarks.md)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"size must be an integer >= 0, got {size!r}")
    device = _check((size,), generator)
    pairs = (size + 1) // 2
    r = torch.rand(pairs, generator=generator, dtype=torch.float64, device=device)  # U = 1 - r, exact (r >= 1/2)
    e = torch.log1p(r.neg_())  # -E; r is now -r, U <= 2^-b where -r <= 2^-b - 1
    where = (r <= 2.0 ** -_BULK_BITS - 1.0).nonzero().flatten()
    if where.numel():
        e[where] = -(_BULK_BITS * _LN2 + exponential((where.numel(),), generator))
    angle_dtype = torch.float64 if dtype == torch.float64 else torch.float32  # the angle sets no tail
    radius = e.mul_(-2.0).sqrt_().to(angle_dtype)
    angle = torch.rand(pairs, generator=generator, dtype=angle_dtype, device=device).mul_(2.0 * math.pi)
    return torch.cat((radius * torch.cos(angle), radius * torch.sin(angle)))[:size].to(dtype)


def bernoulli(shape: tuple[int, ...], p: float, generator: torch.Generator) -> torch.Tensor:
    """Independent booleans, each True with probability floor(p 2^53) 2^-53: at most ``p``, never above.

    Poisson sampling's amplification is accounted at rate p and grows with it. ``torch.rand(n) < p`` on
    float32 uniforms (k 2^-24) is True with probability ceil(p 2^24) 2^-24, above p by up to 2^-24 (p is
    even rounded to float32 first): at p = 0.0128, 4.6e-6 of the rate, unaccounted. Here a 53-bit uniform
    u = k 2^-53 is True where u + 2^-53 <= p (exact in float64), that is for floor(p 2^53) of the 2^53 k."""
    device = _check(shape, generator)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be a probability in [0, 1], got {p!r}")
    u = torch.rand(shape, generator=generator, dtype=torch.float64, device=device)
    return u.add_(2.0 ** -53) <= float(p)
