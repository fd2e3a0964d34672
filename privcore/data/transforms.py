"""Seeded, shape-preserving steps of the data pipeline: split, subsample, PCA, norm clip.

All randomness comes from ``numpy.random.default_rng(derive_seed(seed, <purpose>))`` so each step
has its own stream: changing ``n`` never changes which rows land in the test split.
Steps that touch every row work in chunks so that a million-row training set never needs a second
full-size temporary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - torch is imported where used (start-up stays light)
    import torch

from ..device import derive_seed

__all__ = [
    "seeded_split",
    "seeded_subsample",
    "pca_fit",
    "pca_apply",
    "clip_to_unit_ball",
    "max_row_norm",
    "unit_ball_float32",
]

_ROWS_PER_CHUNK = 65536


def seeded_split(rows: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split the row indices ``0..rows-1`` into (train, test) index arrays by a permutation drawn from
    the seed alone: ``round(rows * test_fraction)`` rows, clamped to ``[1, rows - 1]``, go to the test
    split; both come back in the permutation's order.

    Which split a row lands in, and at which position, depends on its index, the row count and the
    seed only, never on any row's content, so replacing one row of a data set replaces at most one
    training example (the replace-one neighbours every guarantee is stated for). A split stratified
    by label does not have that property: one changed label moved dozens of rows between the splits
    and every teacher's part (tests/data/test_label_independence.py).
    """
    if rows < 2:
        raise ValueError(f"a train/test split needs at least 2 rows, got {rows}")
    perm = np.random.default_rng(derive_seed(seed, "split")).permutation(rows)
    k = min(max(int(np.floor(rows * test_fraction + 0.5)), 1), rows - 1)
    return perm[k:], perm[:k]


def seeded_subsample(rows: int, n: int, seed: int) -> np.ndarray:
    """Indices of ``n`` of ``rows`` rows (``n <= rows``), drawn without replacement by a permutation from
    the seed alone (label-independent, as :func:`seeded_split`): a smaller ``n`` takes a prefix of a
    larger one's rows, so the points of an N sweep share their rows."""
    if not 0 <= n <= rows:
        raise ValueError(f"a subsample of n={n} rows needs 0 <= n <= {rows}")
    return np.random.default_rng(derive_seed(seed, "subsample")).permutation(rows)[:n]


def pca_fit(x: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Principal components of ``x [M, D]``: returns (mean ``[D]``, components ``[D, dim]``), float32.

    The covariance is accumulated in float64 chunk by chunk (a [D, D] matrix, not an SVD of the
    full data), then diagonalised with ``torch.linalg.eigh``. Component signs are fixed
    (largest-magnitude entry positive) so the projection does not flip between platforms.
    """
    import torch
    m, d = x.shape
    if d > EXACT_PCA_MAX_D and dim < d:
        return _pca_fit_randomized(x, dim)
    total = np.zeros(d)
    gram = np.zeros((d, d))
    for start in range(0, m, _ROWS_PER_CHUNK):
        block = x[start : start + _ROWS_PER_CHUNK].astype(np.float64)
        total += block.sum(axis=0)
        gram += block.T @ block
    mean = total / m
    cov = gram / m - np.outer(mean, mean)
    # torch's (MKL) eigh in float64; a 784x784 problem takes well under a second.
    vals_t, vecs_t = torch.linalg.eigh(torch.from_numpy(cov))
    vals, vecs = vals_t.numpy(), vecs_t.numpy()
    comps = vecs[:, np.argsort(vals, kind="stable")[::-1][:dim]]
    pivot = np.abs(comps).argmax(axis=0)
    comps *= np.sign(comps[pivot, np.arange(comps.shape[1])])
    return mean.astype(np.float32), np.ascontiguousarray(comps, dtype=np.float32)


#: Above this many features, :func:`pca_fit` uses a randomized range finder instead of a D x D
#: eigendecomposition (10,000 features: minutes and gigabytes for the exact path).
EXACT_PCA_MAX_D = 2048


def _pca_fit_randomized(x: np.ndarray, dim: int, oversample: int = 10, power_iters: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Top-``dim`` principal components by a seeded randomized range finder (Halko, Martinsson and
    Tropp 2011, Algorithm 4.4 with power iterations): cost O(M D (dim + oversample)), no D x D matrix.
    Deterministic (fixed seed); signs fixed as in :func:`pca_fit`."""
    m, d = x.shape
    mean = x.mean(axis=0, dtype=np.float64)
    xc = x.astype(np.float64) - mean
    k = min(dim + oversample, m, d)
    omega = np.random.default_rng(0).standard_normal((d, k))
    q, _ = np.linalg.qr(xc @ omega)
    for _ in range(power_iters):
        q, _ = np.linalg.qr(xc.T @ q)
        q, _ = np.linalg.qr(xc @ q)
    _, _, vt = np.linalg.svd(q.T @ xc, full_matrices=False)
    comps = vt[:dim].T.copy()
    if comps.shape[1] < dim:  # fewer rows than components: pad with zero directions
        comps = np.hstack([comps, np.zeros((d, dim - comps.shape[1]))])
    pivot = np.abs(comps).argmax(axis=0)
    signs = np.sign(comps[pivot, np.arange(comps.shape[1])])
    signs[signs == 0] = 1.0
    comps *= signs
    return mean.astype(np.float32), np.ascontiguousarray(comps, dtype=np.float32)


def pca_apply(x: np.ndarray, mean: np.ndarray, comps: np.ndarray) -> np.ndarray:
    """Project ``x [M, D]`` onto the components: ``(x - mean) @ comps`` -> float32 ``[M, dim]``."""
    out = np.empty((x.shape[0], comps.shape[1]), dtype=np.float32)
    for start in range(0, x.shape[0], _ROWS_PER_CHUNK):
        out[start : start + _ROWS_PER_CHUNK] = (x[start : start + _ROWS_PER_CHUNK] - mean) @ comps
    return out


def clip_to_unit_ball(x: np.ndarray) -> int:
    """In place, ``x[i] <- x[i] / max(1, ||x[i]||_2)`` for every row of ``x [M, D]``; returns how many rows changed.

    The rule uses no statistics of the data set, so it is the same map for every example
    (what per-example sensitivity arguments need). Norms are computed in float64.
    """
    changed = 0
    for start in range(0, x.shape[0], _ROWS_PER_CHUNK):
        block = x[start : start + _ROWS_PER_CHUNK]
        norms = np.linalg.norm(block.astype(np.float64), axis=1)
        big = norms > 1.0
        changed += int(big.sum())
        block[big] = (block[big] / norms[big, None]).astype(x.dtype)
    return changed


def max_row_norm(x: np.ndarray) -> float:
    """Largest L2 norm over the rows of ``x [M, D]`` (float64; NaN if any entry is NaN; 0.0 if ``M == 0``)."""
    best = 0.0
    for start in range(0, x.shape[0], _ROWS_PER_CHUNK):
        block = x[start : start + _ROWS_PER_CHUNK].astype(np.float64)
        if block.size:
            top = float(np.sqrt(np.einsum("ij,ij->i", block, block).max()))
            if np.isnan(top):  # Python's max() would silently drop a NaN
                return top
            best = max(best, top)
    return best


def unit_ball_float32(x: "torch.Tensor", *, shared: bool = False, rows: int = 1 << 16) -> "torch.Tensor":
    """Rows of float32 ``x`` with exact (float64-evaluated) norm <= 1.

    Rounding a unit-norm row to float32 can leave its norm a few 1e-8 above 1, outside the ball
    every sensitivity bound assumes; such rows are scaled back inside, in place (a no-op
    otherwise). ``shared``: ``x`` shares memory with arrays that must not change (a memoised data
    set), so it is copied first if (and only if) a row has to move. Norms are taken ``rows`` rows at
    a time (each row's arithmetic is the same as on the whole matrix; no float64 copy of the data).
    """
    for start in range(0, x.shape[0], rows):
        block = x[start:start + rows]
        for attempt in range(5):
            norms = block.double().norm(dim=1)
            over = norms > 1.0
            if not bool(over.any()):
                break
            if attempt == 4:
                raise ValueError("could not bring the training rows into the unit ball in float32")
            if shared:
                x, shared = x.clone(), False
                block = x[start:start + rows]
            block[over] = (block[over].double() / (norms[over] * (1.0 + 2.0 ** -20)).unsqueeze(1)).to(x.dtype)
    return x
