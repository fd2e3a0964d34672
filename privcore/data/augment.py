"""InfiMNIST-style deformations: grow an image training set with perturbed copies of its images.

Each new image is a training image under a random small affine map (rotation, scale, shear,
translation) composed with a smooth random elastic displacement field (Simard et al., 2003;
Loosli et al., 2007). Everything runs in torch on the CPU in fixed-size chunks, so memory stays
bounded whatever the count, and each chunk draws from its own generator seeded with
``derive_seed(seed, "augment", chunk_index)``: the output depends only on (images, count, seed).

Geometry constants are stated for 28x28 images and scaled with the image height, so 8x8 digits
get proportionally smaller displacements.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - torch is imported where used (start-up stays light)
    import torch

from ..device import derive_seed
from ..validation import check_int

__all__ = ["deform_images", "deform_rows_into", "choose_sources", "rows_per_original", "CHUNK"]

CHUNK = 8192  # images per torch call; part of the seeding scheme, so changing it changes outputs
MAX_ROTATION_DEG = 10.0
SCALE_RANGE = (0.9, 1.1)
MAX_SHEAR = 0.15  # shear factor, i.e. about +-8.5 degrees
MAX_SHIFT_PX = 2.0  # at 28 px
ELASTIC_ALPHA_PX = 8.0  # at 28 px: amplitude of the smoothed uniform(-1, 1) field
ELASTIC_SIGMA_PX = 3.0  # at 28 px: Gaussian smoothing width of that field


def choose_sources(m: int, count: int, seed: int) -> np.ndarray:
    """Indices ``[count]`` (int64, in ``0..m-1``) of the image each new image is made from: rounds of a
    seeded permutation of the ``m`` images, so no image is the source of more than ceil(count / m) copies.

    A guarantee per row covers an original image only by group privacy over every row it shapes: the
    group is at most :func:`rows_per_original`, where sources drawn independently (as before) gave some
    images far more copies than the average (the largest group sets the cost)."""
    rng = np.random.default_rng(derive_seed(seed, "augment", "sources"))
    rounds = -(-count // m) if m else 0
    if not rounds:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([rng.permutation(m) for _ in range(rounds)])[:count].astype(np.int64)


def rows_per_original(m: int, n: int) -> int:
    """The most training rows one of ``m`` real images shapes in a set grown to ``n`` rows (itself and its
    copies, :func:`choose_sources`): the group size of group privacy, ceil(n / m)."""
    return max(1, -(-n // m))


def deform_images(images: np.ndarray, count: int, seed: int) -> np.ndarray:
    """``count`` deformed copies ``[count, H, W]`` (float32) of images drawn from ``images [M, H, W]``.

    The source image of output ``i`` is ``images[choose_sources(M, count, seed)[i]]``; background
    outside the image is taken as 0, so pixel values should be on a scale where 0 is blank.
    """
    if images.ndim != 3 or images.shape[0] == 0:
        raise ValueError(f"images must be a non-empty array [M, H, W], got shape {images.shape}")
    count = check_int("count", count, low=0)
    m, h, w = images.shape
    out = np.empty((count, h * w), dtype=np.float32)
    flat = images.reshape(m, h * w)
    deform_rows_into(flat, choose_sources(m, count, seed), (h, w), seed, out)
    return out.reshape(count, h, w)


def deform_rows_into(
    rows: np.ndarray, sources: np.ndarray, shape: tuple[int, int], seed: int, out: np.ndarray
) -> None:
    """Write deformations of ``rows[sources]`` (rows ``[M, H*W]``) into ``out [len(sources), H*W]``.

    Works chunk by chunk so that only ``CHUNK`` images are ever gathered at once, which lets a caller
    fill a preallocated (possibly multi-GB) training matrix in place.
    """
    import torch
    h, w = shape
    if out.shape != (sources.shape[0], h * w) or rows.shape[1] != h * w:
        raise ValueError(f"shape mismatch: rows {rows.shape}, sources {sources.shape}, out {out.shape}, image {shape}")
    sigma = ELASTIC_SIGMA_PX * h / 28.0
    smooth_h, smooth_w = _smoothing_matrix(h, sigma), _smoothing_matrix(w, sigma)
    for k, start in enumerate(range(0, sources.shape[0], CHUNK)):
        sel = sources[start : start + CHUNK]
        batch = torch.from_numpy(np.ascontiguousarray(rows[sel], dtype=np.float32)).view(-1, 1, h, w)
        gen = torch.Generator().manual_seed(derive_seed(seed, "augment", k))
        with torch.no_grad():
            res = _deform_batch(batch, gen, smooth_h, smooth_w)
        out[start : start + sel.shape[0]] = res.reshape(sel.shape[0], h * w).numpy()


def _smoothing_matrix(n: int, sigma: float) -> torch.Tensor:
    """``[n, n]`` matrix ``M`` with ``v @ M`` = Gaussian filter of ``v [..., n]``, reflect boundary.

    A separable Gaussian blur as two small matrix products is ~25x faster on a CPU than the
    equivalent single-channel ``conv2d`` (which was the bottleneck of the whole deformation).
    """
    import torch
    import torch.nn.functional as F
    # Radius 3 sigma, but below n because reflect padding needs pad < size.
    radius = max(1, min(math.ceil(3.0 * sigma), n - 1))
    t = torch.arange(-radius, radius + 1, dtype=torch.float32)
    kernel = torch.exp(-0.5 * (t / sigma) ** 2)
    kernel = kernel / kernel.sum()
    # Row j of the result is the filtered unit impulse at j, which is exactly row j of M.
    impulses = torch.eye(n).view(n, 1, n)
    return F.conv1d(F.pad(impulses, (radius, radius), mode="reflect"), kernel.view(1, 1, -1)).view(n, n)


def _deform_batch(
    batch: torch.Tensor, gen: torch.Generator, smooth_h: torch.Tensor, smooth_w: torch.Tensor
) -> torch.Tensor:
    """Deform ``batch [B, 1, H, W]``: random affine map plus smoothed elastic field, bilinear."""
    import torch
    import torch.nn.functional as F
    b, _, h, w = batch.shape
    rel = h / 28.0  # geometry constants are in pixels of a 28x28 image
    u = torch.rand(b, 5, generator=gen) * 2.0 - 1.0  # five independent draws in (-1, 1) per image
    angle = u[:, 0] * math.radians(MAX_ROTATION_DEG)
    lo, hi = SCALE_RANGE
    scale = lo + (hi - lo) * (u[:, 1] + 1.0) / 2.0
    shear = u[:, 2] * MAX_SHEAR
    # affine_grid works in coordinates normalised to [-1, 1], where one pixel is 2 / w (or 2 / h).
    tx = u[:, 3] * MAX_SHIFT_PX * rel * 2.0 / w
    ty = u[:, 4] * MAX_SHIFT_PX * rel * 2.0 / h
    c, s = torch.cos(angle), torch.sin(angle)
    # theta maps output to input coordinates; dividing by scale enlarges content by scale.
    row0 = torch.stack([c / scale, (c * shear - s) / scale, tx], dim=1)
    row1 = torch.stack([s / scale, (s * shear + c) / scale, ty], dim=1)
    theta = torch.stack([row0, row1], dim=1)  # [b, 2, 3]
    grid = F.affine_grid(theta, [b, 1, h, w], align_corners=False)
    noise = torch.rand(b, 2, h, w, generator=gen) * 2.0 - 1.0  # x and y displacement fields
    field = smooth_h.T @ (noise @ smooth_w)
    alpha = ELASTIC_ALPHA_PX * rel
    disp = torch.stack([field[:, 0] * (alpha * 2.0 / w), field[:, 1] * (alpha * 2.0 / h)], dim=-1)
    return F.grid_sample(batch, grid + disp, mode="bilinear", padding_mode="zeros", align_corners=False)
