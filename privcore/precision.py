"""Full float32 (no TF32) where a privacy bound rests on float32 arithmetic.

On NVIDIA GPUs since Ampere, PyTorch lets cuDNN convolutions use TF32 by default (operands rounded to
a 10-bit mantissa: a relative error bound of about 1e-3 per product instead of float32's 6e-8).
DP-SGD's clipping promises that every example adds at most ``clip`` to the released sum; with ghost
clipping the norms (Gram matrices or per-example weight gradients) and the weighted sum (a
convolution weight backward) come from different kernels, so their rounding errors do not cancel.
Random rounding errors barely move a norm, so a test on ordinary inputs need not show TF32 breaking
the bound (tests/deep/test_deep_gpu.py clips ResNet-20 examples one by one and checks each against the
clip); the bound that holds for any input is what this module keeps:
:func:`exact_fp32` turns TF32 off for cuDNN (all of it: convolutions, their backward, RNNs) and CUDA
matrix products inside its block
and restores the previous setting after the last block that is still open leaves (a lock and a
count, so concurrent trainings in one process never switch it back under each other). It slows ghost
clipping on CUDA (``bench/bench_deep.py --gpu-variants`` measures it), one reason why "auto" clipping
uses torch.func there. The forward and the backward to the layer outputs
may keep TF32: they define which function's gradient is clipped, and the norms and the sum are both
computed from their outputs.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import torch

__all__ = ["exact_fp32", "clip_margin", "clip_factors"]

_lock = threading.Lock()
_depth = 0
_saved: tuple | None = None


def _new_api() -> bool:
    return all(hasattr(t, "fp32_precision") for t in _targets_new())


def _targets_new() -> tuple:
    b = torch.backends
    # The CUDA-wide setting (torch.backends.cudnn.fp32_precision) first: the op settings may follow it.
    return (b.cudnn, getattr(b.cudnn, "conv", None), getattr(b.cudnn, "rnn", None), b.cuda.matmul)


def _read() -> tuple:
    if _new_api():
        return ("new", *(t.fp32_precision for t in _targets_new()))
    return ("old", torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)


def _write(state: tuple, restore: bool = False) -> None:
    """Set the flags to ``state``, writing only those that read differently. The getters give effective
    values, not whether a setting is inherited, so a restore tries "none" (inherit) before an explicit
    value: writing back every value read would pin, e.g., cuDNN convolutions to TF32 for good, against
    a later ``torch.backends.fp32_precision = "ieee"`` (torch 2.13; tests/test_precision.py)."""
    if state[0] == "new":
        for target, value in zip(_targets_new(), state[1:]):
            if target.fp32_precision == value:
                continue
            if restore:
                target.fp32_precision = "none"
                if target.fp32_precision == value:
                    continue
            target.fp32_precision = value
    else:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = state[1], state[2]


def _strict(state: tuple) -> tuple:
    return ("new", "ieee", "ieee", "ieee", "ieee") if state[0] == "new" else ("old", False, False)


@contextlib.contextmanager
def exact_fp32(device: torch.device | str = "cuda") -> Iterator[None]:
    """Within the block, float32 matrix products and convolutions on CUDA round as float32 (no TF32).

    A no-op for other devices (CPU kernels never use TF32)."""
    global _depth, _saved
    if torch.device(device).type != "cuda":
        yield
        return
    with _lock:
        if _depth == 0:
            _saved = _read()
            _write(_strict(_saved))
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                _write(_saved, restore=True)
                _saved = None


#: Units in the last place (of the working precision) by which the clip is tightened. The norms are float32
#: block sums of at most 64 squares added in float64 (:func:`privcore.roundoff.squared_norms`): short of the
#: true squared norm by at most gamma_65 = 3.9e-6 in float32 (1.95e-6 in the norm) plus float64's gamma_{K+3}
#: for K terms (added below for any K, for float64 models), and the factor's rounding to float32 adds one
#: unit: 64 units (7.6e-6) cover them, the margin earlier versions used.
_MARGIN_EPS = 64


def clip_margin(dtype: torch.dtype, terms: int = 0) -> float:
    """The fraction of ``clip`` an example is scaled to, so that rounding never lets it exceed ``clip``.

    DP-SGD's sensitivity is the clip only if every scaled example has norm at most the clip *as a real
    number*; a computed norm short of the true one gives min(1, C / norm) a factor a little too large
    (an independent audit measured norms of C (1 + 2.2e-7) after clipping with float32 norms).
    Scaling to C (1 - 64 eps - 2 gamma_{terms+3}) instead (eps of ``dtype``, gamma in float64 for the
    ``terms`` squares summed: 7.6e-6 relative in float32) keeps every example inside the ball; the
    accountant still charges C.
    """
    from .roundoff import gamma
    return 1.0 - _MARGIN_EPS * torch.finfo(dtype).eps - 2 * gamma(terms + 3, torch.float64)


def clip_factors(norms: torch.Tensor, clip: float | torch.Tensor, dtype: torch.dtype | None = None,
                 terms: int = 0) -> torch.Tensor:
    """min(1, C' / norm) per example for the computed ``norms`` (float64 from
    :func:`privcore.roundoff.squared_norms`, or any dtype), with C' = clip x :func:`clip_margin` of the
    working ``dtype`` (default: the norms') and ``terms`` squares; returned in ``dtype``. ``clip`` may be a
    tensor broadcasting against ``norms`` (one clip per repetition)."""
    dtype = dtype or norms.dtype
    exact = torch.clamp(clip * clip_margin(dtype, terms) / norms.clamp_min(1e-12), max=1.0)
    # A factor below dtype's smallest normal number would round with an absolute error (2^-150 in float32), not
    # the relative one the margin allows: such an example contributes nothing (a per-example map, still sound).
    return torch.where(exact < torch.finfo(dtype).tiny, torch.zeros_like(exact), exact).to(dtype)
