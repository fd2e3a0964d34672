"""DP-SGD for the deep models: per-example gradients with ``torch.func``, clipping, Gaussian noise.

One step (Abadi et al. 2016), with this project's conventions (:mod:`privcore.methods.dpsgd`):
every training example joins the batch independently with probability q = batch_size / N
(Poisson sampling, as the accountant assumes), its gradient is clipped to norm ``clip``
(:func:`clip_and_sum`), the sum gets N(0, (z clip)^2) noise per coordinate (:func:`add_noise`) and
is divided by the expected batch size q N (:func:`scale`). z comes from the registry's DP-SGD
calibration (replace-one, dp_accounting PLD; see :mod:`privcore.deep.run`) for
steps = ceil(epochs N / batch_size). Momentum and the learning-rate schedule act on the released
noisy gradients only (post-processing).

Per-example gradients: ``vmap(grad(loss))`` over the examples of a physical batch with
``functional_call`` (GroupNorm keeps examples independent), or, for models made of Linear, Conv2d
and GroupNorm layers only, book-keeping ghost clipping (:mod:`privcore.deep.ghost`: the same clipped
sum from one backward pass, without per-example gradients of the whole model); ``SGDConfig.clipping``
chooses ("auto": ghost for the project's ResNet-20 and small CNN). Sampling, noise and augmentation draw
from three generators on the model's device; with them the state checkpointed every
``checkpoint_every`` seconds (:mod:`privcore.deep.loop`) resumes to the same result.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.nn import functional as F

from ..device import make_generator
from .. import tails
from .ghost import ghost_clip_and_sum, supports_ghost
from .images import ImageData, augment_batch, to_float
from ..precision import clip_factors, exact_fp32
from ..roundoff import squared_norms, step_clip, weighted_sum
from .models import ResNet20, SmallCNN
from .loop import (generator_states, load_checkpoint, lr_at, momentum_step, restore_generators,
                   save_checkpoint)

__all__ = ["SGDConfig", "CLIPPING_METHODS", "per_sample_grads", "clip_and_sum", "clipped_sum", "draw_noise", "add_noise", "scale",
           "dpsgd_step", "train_dpsgd", "channels_last",
           "evaluate_model"]


CLIPPING_METHODS = ("auto", "ghost", "torch-func", "mixed")
#: Whether "auto" takes ghost clipping for the project's models, per device type, by speed: on a CPU
#: ghost clipping is faster than torch.func; on CUDA the per-layer route chosen by cost ("mixed") is
#: faster than torch.func at the paper's batch of 600 for both models and level with it at 2,048 on
#: ResNet-20 (``bench/bench_deep.py``; the H200 figures in docs/benchmarks.md and docs/gpu.md), so
#: "auto" on CUDA is "mixed".
AUTO_GHOST: dict[str, bool] = {"cpu": True, "cuda": True}


@dataclass(frozen=True)
class SGDConfig:
    """One training run's optimiser settings (``batch_size`` is DP-SGD's expected Poisson batch)."""

    epochs: int
    batch_size: int
    lr: float = 0.1
    momentum: float = 0.9
    augment: bool = False
    physical_batch: int = 1024  # see DeepSpec.physical_batch
    lr_drops: int = 3
    amp: bool = False  # bfloat16 autocast on CUDA (an option, off: no faster on an H100, docs/gpu.md)
    clipping: str = "auto"  # one of CLIPPING_METHODS: how the clipped sum is computed (same result)
    # Images and convolution weights in channels-last memory order (the same values and results up to
    # float rounding; a speed option for CUDA, off by default, never chosen by "auto").
    channels_last: bool = False

    def __post_init__(self) -> None:
        if self.clipping not in CLIPPING_METHODS:
            raise ValueError(f"clipping must be one of {', '.join(CLIPPING_METHODS)}, got {self.clipping!r}")

    def steps(self, n: int) -> int:
        """ceil(epochs n / batch_size): the number of steps the accountant composes."""
        return math.ceil(self.epochs * n / self.batch_size)


def per_sample_grads(model: nn.Module, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor],
                     x: torch.Tensor, y: torch.Tensor, amp: bool = False) -> dict[str, torch.Tensor]:
    """Gradient of each example's own cross-entropy loss: ``{name: [b, *shape]}``."""
    dev = x.device.type

    def loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=amp and dev == "cuda"):
            out = functional_call(model, (p, buffers), (xi.unsqueeze(0),))
        return F.cross_entropy(out.to(torch.promote_types(out.dtype, torch.float32)), yi.unsqueeze(0))  # bf16 -> fp32

    return vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)


def clip_and_sum(grads: dict[str, torch.Tensor], clip: float) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Sum over examples of each gradient scaled to norm at most ``clip``; also the norms [b].

    An example whose gradient is not finite (NaN or inf, e.g. an overflow under autocast)
    contributes zero: otherwise one example could turn the released sum into NaN, an influence that
    no clipping bounds. Zeroing is a fixed per-example map, so each contribution keeps norm <= clip.
    The norms are float64 sums and the sum is formed from float32 partial sums added in float64
    (:mod:`privcore.roundoff`); :func:`dpsgd_step` passes the step clip that makes the rounding safe.
    """
    dtype = next(iter(grads.values())).dtype
    sq = sum(squared_norms(g) for g in grads.values())  # float64: see privcore.roundoff
    norms = sq.sqrt()
    finite = torch.isfinite(norms)
    factor = clip_factors(norms, clip, dtype, sum(g[0].numel() for g in grads.values()))
    factor = torch.where(finite, factor, torch.zeros_like(factor))

    def kept(g: torch.Tensor) -> torch.Tensor:
        return torch.where(finite.view(-1, *([1] * (g.dim() - 1))), g, torch.zeros_like(g))

    with exact_fp32(norms.device):  # the weighted sum in full float32 (no TF32): see privcore.precision
        return {k: weighted_sum(factor, kept(g)).to(g.dtype) for k, g in grads.items()}, norms.to(dtype)


def clipped_sum(model: nn.Module, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor],
                x: torch.Tensor, y: torch.Tensor, clip: float, method: str = "auto", amp: bool = False
                ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The clipped sum and the norms [b] of the examples (x, y), by ``method`` (see ``SGDConfig.clipping``):
    "ghost" (:func:`privcore.deep.ghost.ghost_clip_and_sum`, each convolution by the device's rule), "mixed"
    (ghost clipping with each convolution's route chosen by cost, :mod:`privcore.deep.routes`),
    "torch-func" (:func:`per_sample_grads` then :func:`clip_and_sum`), "auto" (ghost for this project's
    ResNet-20 and small CNN where ``AUTO_GHOST`` says it is the faster on this device, else torch-func)."""
    if method not in CLIPPING_METHODS:
        raise ValueError(f"clipping must be one of {', '.join(CLIPPING_METHODS)}, got {method!r}")
    # "auto": ghost only for the project's own models, whose forward passes are tested against a naive
    # loop (ghost norms would be too small for a forward that used a layer's weight outside its call).
    named = method in ("ghost", "mixed")
    ghost_ok = supports_ghost(model) and (named or (isinstance(model, (ResNet20, SmallCNN))
                                                    and AUTO_GHOST.get(x.device.type, False)))
    if named and not ghost_ok:
        raise ValueError(f"clipping={method!r} needs a model whose parameters all belong to Linear, Conv2d and "
                         f"GroupNorm layers; use 'auto' or 'torch-func' for {type(model).__name__}")
    if ghost_ok and method != "torch-func":
        by_cost = method == "mixed" or (method == "auto" and x.device.type == "cuda")
        return ghost_clip_and_sum(model, params, buffers, x, y, clip, amp, "cost" if by_cost else "device")
    if x.shape[0] == 0:
        return {k: torch.zeros_like(v) for k, v in params.items()}, x.new_zeros(0)
    return clip_and_sum(per_sample_grads(model, params, buffers, x, y, amp), clip)


def channels_last(params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The 4-D (convolution) tensors in channels-last memory order; the values are unchanged."""
    return {k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v for k, v in params.items()}


def _std_up(std: float, dtype: torch.dtype) -> float:
    """``std`` in ``dtype``, rounded *up*: a float32 product rounds a Python float to the nearest
    float32, which may be below the noise the accountant accepted (by up to 2^-24 relative)."""
    low = torch.tensor(std, dtype=dtype)
    if float(low) < std:
        low = torch.nextafter(low, torch.tensor(float("inf"), dtype=dtype))
    return float(low)


def draw_noise(like: dict[str, torch.Tensor], std: float, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """N(0, std^2) per coordinate, shaped as ``like``, drawn from ``generator`` (on the tensors' device);
    the std is rounded up to each tensor's dtype, never below ``std``.

    The noise of all tensors of one dtype is one draw of their total size, split in the order of ``like``
    (one draw, not one per parameter: a GPU step of the small models is bound by launches); every
    coordinate is still an independent N(0, std^2), from :func:`privcore.tails.gaussian_noise` (torch.randn's
    tails stop at 5.77 in float32). It reads its far radii's positions back to the host, so a step draws it
    before launching the clipping."""
    groups: dict[tuple[torch.device, torch.dtype], list[str]] = {}
    for k, v in like.items():
        groups.setdefault((v.device, v.dtype), []).append(k)
    out: dict[str, torch.Tensor] = {}
    for (device, dtype), keys in groups.items():
        sizes = [like[k].numel() for k in keys]
        if device != generator.device:
            raise ValueError(f"generator must be on the tensors' device {device}, got {generator.device}")
        unit = tails.gaussian_noise(sum(sizes), generator, dtype)
        out.update((k, n.view(like[k].shape)) for n, k in zip(unit.mul_(_std_up(std, dtype)).split(sizes), keys))
    return {k: out[k] for k in like}


def add_noise(summed: dict[str, torch.Tensor], std: float, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """summed + :func:`draw_noise` (N(0, std^2) per coordinate, never below ``std``)."""
    return add(summed, draw_noise(summed, std, generator))


def add(summed: dict[str, torch.Tensor], noise: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """summed + noise, key by key (one foreach kernel per dtype and device)."""
    keys = list(summed)
    return dict(zip(keys, torch._foreach_add([summed[k] for k in keys], [noise[k] for k in keys]))) if keys else {}


def scale(noisy: dict[str, torch.Tensor], expected_batch: float) -> dict[str, torch.Tensor]:
    """Divide by the expected batch size q N (not the drawn one, which would leak it)."""
    keys = list(noisy)
    return dict(zip(keys, torch._foreach_div([noisy[k] for k in keys], expected_batch))) if keys else {}


def dpsgd_step(model: nn.Module, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor],
               x_u8: torch.Tensor, y: torch.Tensor, data: ImageData, cfg: SGDConfig, clip: float, sigma: float,
               gens: dict[str, torch.Generator]) -> dict[str, torch.Tensor]:
    """The privatised gradient of one step: sample, clip and sum, noise, scale.

    Each example is clipped to :func:`privcore.roundoff.step_clip` of the step's batch size, so that the
    computed sum, rounding included, moves by at most 2 ``clip`` (the sensitivity the accountant charges);
    the physical batches' sums and the noise are added in float64."""
    n = y.shape[0]
    q = cfg.batch_size / n
    chosen = torch.nonzero(tails.bernoulli((n,), q, gens["sample"])).flatten()  # rate at most q
    noise = draw_noise(params, sigma, gens["noise"])  # independent of the data; its read-back precedes the clipping
    total = {k: torch.zeros_like(v, dtype=torch.float64) for k, v in params.items()}
    inner = step_clip(clip, chosen.numel())  # the batch size is a draw of the sampling, not of the data
    for part in chosen.split(cfg.physical_batch):
        xb = to_float(x_u8[part], data.mean, data.std)
        if cfg.augment:
            xb = augment_batch(xb, gens["augment"], 4 if data.shape[1] >= 32 else 2)
        if cfg.channels_last:
            xb = xb.contiguous(memory_format=torch.channels_last)
        summed, _ = clipped_sum(model, params, buffers, xb, y[part], inner, cfg.clipping, cfg.amp)
        for k in total:
            total[k] += summed[k]
    noisy = add(total, {k: v.to(torch.float64) for k, v in noise.items()})  # then rounding is post-processing
    return scale({k: v.to(params[k].dtype) for k, v in noisy.items()}, q * n)


def train_dpsgd(model: nn.Module, data: ImageData, cfg: SGDConfig, clip: float, noise_multiplier: float,
                seed: int, device: torch.device, *, checkpoint: Path | None = None, tag: str = "",
                checkpoint_every: float = 60.0, poll: Callable[[float], None] | None = None,
                stop_after: int | None = None, accounted_steps: int | None = None) -> dict[str, torch.Tensor]:
    """Train ``model`` (initialised) with DP-SGD at noise multiplier z; returns its parameters.

    Resumes from ``checkpoint`` when it holds this ``tag``'s state. ``stop_after`` ends after that
    many steps (a test's interruption), checkpointing first. ``accounted_steps``: the steps the
    calibration of z composed; a run of any other number is refused before it starts.
    """
    x_u8 = torch.tensor(data.x_train, device=device)  # a copy: the arrays are read-only
    y = torch.as_tensor(data.y_train, device=device)
    n = y.shape[0]
    steps = cfg.steps(n)
    if accounted_steps is not None and steps != accounted_steps:
        raise RuntimeError(f"internal: DP-SGD would run {steps} steps, its noise was calibrated for {accounted_steps}")
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    if cfg.channels_last:
        params = channels_last(params)
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    buf = {k: torch.zeros_like(v) for k, v in params.items()}
    gens = {name: make_generator(seed, "deep-dpsgd", name, device=device) for name in ("sample", "noise", "augment")}
    start = 0
    state = load_checkpoint(checkpoint, tag, device)
    if state is not None:
        params, buf, start = state["params"], state["momentum"], int(state["step"])
        restore_generators(gens, state["gens"])

    def save(step: int) -> None:
        if checkpoint is not None:
            save_checkpoint(checkpoint, {"tag": tag, "step": step, "params": params, "momentum": buf,
                                         "gens": generator_states(gens)})

    last = time.perf_counter()
    step = start
    # False while the generators, the parameters and the momentum are between steps (an interrupt there, e.g.
    # inside momentum_step's in-place updates, leaves them out of step with ``step``): such a state is never
    # saved, since resuming it would draw a step's noise anew on parameters that already hold an update, one
    # noisy step more than the accountant composed. The last periodic checkpoint is resumed instead.
    settled = True
    try:
        while step < steps:
            if stop_after is not None and step - start >= stop_after:
                save(step)
                return params
            settled = False
            g = dpsgd_step(model, params, buffers, x_u8, y, data, cfg, clip, noise_multiplier * clip, gens)
            momentum_step(params, g, buf, lr_at(step, steps, cfg.lr, cfg.lr_drops), cfg.momentum)
            step += 1
            settled = True
            if checkpoint is not None and time.perf_counter() - last >= checkpoint_every:
                save(step)
                last = time.perf_counter()
            if poll is not None:
                poll(step / steps)
    except BaseException:  # cancelled (or Streamlit stopped the script): keep what was done, if consistent
        if step > start and settled:
            save(step)
        raise
    return params


@torch.no_grad()
def evaluate_model(model: nn.Module, params: dict[str, torch.Tensor], data: ImageData, device: torch.device,
                   batch: int = 1000) -> torch.Tensor:
    """Predicted labels [M] of the test images."""
    x = torch.tensor(data.x_test, device=device)
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    out = [functional_call(model, (params, buffers), (to_float(x[i:i + batch], data.mean, data.std),)).argmax(1)
           for i in range(0, x.shape[0], batch)]
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.int64, device=device)
