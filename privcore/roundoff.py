"""DP-SGD's clipped sum as computed, not as written: float rounding bounds behind its sensitivity.

The accountant assumes that replacing one example moves the summed clipped gradients by at most 2C.
In exact arithmetic that holds when every scaled example has norm at most C. Computed in float32, two
roundings can break it for a chosen input, whatever order the library sums in:

1. **Norms.** A float32 sum of K squares may be short of the true one by gamma_{K-1} relative (Higham,
   *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Lemma 3.1 and (3.5)): 2.2e-3 for a
   layer of 36,864 weights, three hundred times the clip margin. Here the squares are summed in float32
   blocks of NORM_BLOCK whose sums are added in float64 (:func:`squared_norms`): relative error at most
   gamma_{NORM_BLOCK+1} in float32 plus float64's, inside :func:`privcore.precision.clip_margin`.
2. **Sums.** A dot product of k terms is off by at most gamma_k |x|^T |y| in any order (Higham (3.5)), so
   a float32 sum of b clipped examples x_i can be off by gamma_b sum_i ||x_i|| <= gamma_b b C in norm:
   quadratic in the batch, 2.1 % of C at b = 600. Every clipped sum is therefore formed as float32
   partial sums of at most :data:`SUM_CHUNK` examples, added in float64 (:func:`weighted_sum`,
   :func:`outer_sum`), and is off by at most eta(b) b C' with eta = :func:`sum_error` (about
   (SUM_CHUNK + 1) 2^-24). Replacing one example then moves the computed sum by at most
   2 C' (1 + eta(b) b). Each step clips to C' = C / (1 + eta(b) b) (:func:`step_clip`), so the computed
   sum moves by at most 2C. b is the step's Poisson batch size: drawn independently of the data, the same
   for both neighbours.

The noise is added to the sum in float64 (a correctly rounded addition of the computed sum and the
noise); every rounding after that is post-processing. ``docs/spec.md`` ("The clipped sum in floating
point") has the derivation; ``tests/test_roundoff.py`` shows a float32 summation order that breaks 2C
without these bounds.
"""

from __future__ import annotations

import math

import torch

__all__ = ["NORM_BLOCK", "SUM_CHUNK", "GRAM_CAP", "GRAM_SUM_POSITIONS", "gamma", "sum_error", "step_clip", "squared_norms",
           "weighted_sum", "outer_sum"]

#: Squares per float32 block sum of a norm: gamma_{65} = 3.9e-6 relative in float32 (half that in the norm),
#: inside the clip margin of 64 eps = 7.6e-6 (:func:`privcore.precision.clip_margin`).
NORM_BLOCK = 64
#: Examples per float32 partial sum. Smaller is tighter (eta about (SUM_CHUNK + 1) 2^-24) and moves more
#: partial sums: 32 gives C' = C / 1.0012 at a batch of 600.
SUM_CHUNK = 32
#: The Gram (ghost-norm) route's clipped sum rounds by up to gamma sum_i c_i M_i, where M_i = sum over
#: output positions of ||a_is|| ||b_is|| can exceed example i's gradient norm without bound (its
#: positions may cancel). Each example's factor is capped so that c_i M_i <= GRAM_CAP C' (a per-example
#: map: never binding unless the positions cancel by more than 4,096 times), which bounds that term.
GRAM_CAP = 4096.0
#: At most this many (example, position) pairs per float64 weight backward on the Gram route.
GRAM_SUM_POSITIONS = 1 << 16


def gamma(k: int, dtype: torch.dtype) -> float:
    """Higham's gamma_k = k u / (1 - k u), u = half of ``dtype``'s machine epsilon: the relative error
    bound of any sum (or dot product) of k terms in that precision."""
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    u = torch.finfo(dtype).eps / 2
    if k * u >= 0.5:
        raise ValueError(f"gamma_k needs k u < 1/2; got k = {k} in {dtype}")
    return k * u / (1 - k * u)


def sum_error(batch: int, dtype: torch.dtype = torch.float32, chunk: int = SUM_CHUNK) -> float:
    """eta(b): the computed clipped sum of ``batch`` examples, formed from partial sums of at most ``chunk``
    examples, is within eta sum_i ||c_i g_i|| of the exact one, in norm.

    The terms: a float32 partial sum of k <= chunk products, one more rounding where the factor
    multiplies before the product (:func:`outer_sum`) and the rounding of the layer's sum to ``dtype``
    (gamma_{k+2}); the partial sums of all physical batches added in float64 (gamma_{b+2}, twice for good
    measure); the Gram route's float64 weight backward, at most GRAM_CAP gamma C' per example after the cap
    (3e-8 C': a bound against b C' rather than sum_i ||c_i g_i||, which is what the 2C argument uses; counted
    whether or not a layer takes that route, so that eta depends on b alone)."""
    if batch < 0:
        raise ValueError(f"batch must be >= 0, got {batch}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    k = max(1, min(chunk, batch))
    return (gamma(k + 2, dtype) + 2 * gamma(batch + 2, torch.float64)
            + GRAM_CAP * gamma(GRAM_SUM_POSITIONS + batch + 2, torch.float64) * (1 + gamma(1, dtype)))


def step_clip(clip: float, batch: int, dtype: torch.dtype = torch.float32, chunk: int = SUM_CHUNK) -> float:
    """C' = C / (1 + eta(b) b), rounded down: the clip one step of ``batch`` examples scales to, so that
    its computed sum moves by at most 2 ``clip`` when one example is replaced."""
    if not (clip > 0 and math.isfinite(clip)):
        raise ValueError(f"clip must be a positive finite number, got {clip!r}")
    return math.nextafter(clip / (1 + sum_error(batch, dtype, chunk) * batch), 0.0)


def squared_norms(t: torch.Tensor) -> torch.Tensor:
    """Row-wise sums of squares of ``t`` [n, ...] in float64 [n]: the squares in ``t``'s dtype summed in
    blocks of NORM_BLOCK (float32: relative error at most gamma_{NORM_BLOCK+1} = 3.9e-6, within the clip
    margin), the block sums added in float64. No copy of ``t`` in float64 (a layer's per-example gradients
    can be most of the memory a step uses).

    A square below float32's smallest subnormal counts as 0: the sum may miss K 2^-149 in all, far below
    the clip's margin for any clip the knobs accept (at least 1e-8). A norm that is a product of two such
    sums (ghost clipping's Linear layers) must not use this: an underflow there is multiplied by the other
    factor (``privcore.deep.ghost`` squares those in float64)."""
    n = t.shape[0]
    sq = t.reshape(n, -1).pow(2).contiguous()  # row-major, whatever t's strides: the blocks below are a view
    k = sq.shape[1]
    full = k - k % NORM_BLOCK
    parts = []
    if full:  # a view of the whole blocks of the contiguous squares
        parts.append(sq.as_strided((n, full // NORM_BLOCK, NORM_BLOCK), (k, NORM_BLOCK, 1)).sum(2))
    if full < k or not parts:
        parts.append(sq[:, full:].sum(1, keepdim=True))
    return torch.cat(parts, 1).sum(1, dtype=torch.float64)


def _partials(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """sum_i a_i^T b_i over the rows i of a [n, p] and b [n, K], as float32 partial sums of SUM_CHUNK rows
    [chunks, p, K]: the whole chunks by one batched product on views (no copy of b), the rest by one more."""
    n = a.shape[0]
    full = n - n % SUM_CHUNK
    parts = []
    if full:
        parts.append(torch.bmm(a[:full].reshape(-1, SUM_CHUNK, a.shape[1]).transpose(1, 2),
                               b[:full].reshape(-1, SUM_CHUNK, b.shape[1])))
    if full < n:
        parts.append((a[full:].t() @ b[full:]).unsqueeze(0))
    return torch.cat(parts) if len(parts) > 1 else parts[0]


def weighted_sum(factor: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """sum_i factor_i x_i over the first axis of ``x`` [n, ...], in float64 [...]: float32 (x's dtype)
    partial sums of SUM_CHUNK examples, added in float64 (error bound: :func:`sum_error`)."""
    n = x.shape[0]
    if n == 0:
        return x.new_zeros(x.shape[1:], dtype=torch.float64)
    flat = x.reshape(n, -1)
    partials = _partials(factor.to(flat.dtype).reshape(n, 1), flat)  # [chunks, 1, K]
    return partials[:, 0].sum(0, dtype=torch.float64).view(x.shape[1:])


def outer_sum(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """sum_i u_i v_i^T for u [n, p], v [n, d], in float64 [p, d]: float32 partial sums of SUM_CHUNK
    examples added in float64 (the same bound as :func:`weighted_sum`)."""
    if u.shape[0] == 0:
        return u.new_zeros(u.shape[1], v.shape[1], dtype=torch.float64)
    return _partials(u, v).sum(0, dtype=torch.float64)
