"""T non-private teachers on disjoint parts of the training set, for the teacher-vote methods.

The partition is a seeded permutation cut into T parts of floor(N/T) examples (as
:meth:`privcore.context.TrainContext.teacher_thetas` does for the linear model), so under
replace-one neighbours one changed example changes one teacher, and one vote. Teacher t is
initialised, shuffled and augmented from its own generators, so the teachers do not depend on how
they are trained:

* ``batched=True``: the T models' parameters stacked (``torch.func.stack_module_state``) and one
  ``vmap``'d forward over [T, b] batches; the summed loss's gradient with respect to the stacked
  tensors is each teacher's own gradient, so one momentum step on the stacks is T independent ones.
* ``batched=False``: one teacher after the other (the reference; faster where a single model
  already fills the device).

Both checkpoint their state (:mod:`privcore.deep.loop`) and resume from it.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from torch.nn import functional as F

from ..device import make_generator
from .dpsgd import SGDConfig
from .images import ImageData, augment_batch, to_float
from .loop import (generator_states, load_checkpoint, lr_at, momentum_step, restore_generators,
                   save_checkpoint)

__all__ = ["teacher_parts", "train_teachers", "teacher_predictions", "votes_from_predictions"]

ModelFn = Callable[[torch.Generator], nn.Module]


def teacher_parts(n: int, teachers: int, seed: int, device: torch.device) -> torch.Tensor:
    """[T, floor(N/T)] row indices: a seeded permutation of the N rows cut into T parts."""
    if isinstance(teachers, bool) or not isinstance(teachers, int) or not 1 <= teachers <= n:
        raise ValueError(f"teachers must be an integer in [1, {n:,}] (one example each at least), got {teachers!r}")
    m = n // teachers
    perm = torch.randperm(n, generator=make_generator(seed, "deep-partition", teachers, device=device), device=device)
    return perm[: teachers * m].view(teachers, m)


def _gens(seed: int, t: int, device: torch.device) -> dict[str, torch.Generator]:
    return {k: make_generator(seed, "deep-teacher", t, k, device=device) for k in ("init", "order", "augment")}


def _batch_rows(part: torch.Tensor, order: torch.Tensor, s: int, b: int) -> torch.Tensor:
    return part[order[s * b:(s + 1) * b]]


def train_teachers(model_fn: ModelFn, data: ImageData, cfg: SGDConfig, teachers: int, seed: int,
                   device: torch.device, *, batched: bool = True, checkpoint: Path | None = None, tag: str = "",
                   checkpoint_every: float = 60.0, poll: Callable[[float], None] | None = None,
                   stop_after: int | None = None) -> dict[str, torch.Tensor]:
    """Train T teachers; returns their stacked parameters ``{name: [T, *shape]}``.

    ``model_fn(generator)`` builds one initialised model on ``device``. Every teacher runs
    ``epochs`` passes over its part in batches of ``batch_size`` (its last batch smaller), with the
    learning-rate schedule of :func:`privcore.deep.loop.lr_at`. ``stop_after`` ends after that
    many steps (summed over teachers in loop mode), checkpointing first.
    """
    x_u8 = torch.tensor(data.x_train, device=device)
    y = torch.tensor(data.y_train, device=device)
    parts = teacher_parts(y.shape[0], teachers, seed, device)
    m = parts.shape[1]
    b = min(cfg.batch_size, m)
    per_epoch = math.ceil(m / b)
    steps = cfg.epochs * per_epoch
    gens = [_gens(seed, t, device) for t in range(teachers)]
    models = [model_fn(g["init"]) for g in gens]
    base = models[0]
    params, buffers = stack_module_state(models)
    params = {k: v.detach().clone() for k, v in params.items()}
    buf = {k: torch.zeros_like(v) for k, v in params.items()}
    orders: list[torch.Tensor | None] = [None] * teachers
    pad = 4 if data.shape[1] >= 32 else 2

    def batch(t: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
        if s % per_epoch == 0:
            orders[t] = torch.randperm(m, generator=gens[t]["order"], device=device)
        rows = _batch_rows(parts[t], orders[t], s % per_epoch, b)
        xb = to_float(x_u8[rows], data.mean, data.std)
        if cfg.augment:
            xb = augment_batch(xb, gens[t]["augment"], pad)
        return xb, y[rows]

    # Progress: (teacher done in loop mode, step within). Batched mode trains all at once (teacher 0).
    start_t, start_s = 0, 0
    state = load_checkpoint(checkpoint, tag, device)
    if state is not None and bool(state["batched"]) == batched:
        params, buf = state["params"], state["momentum"]
        start_t, start_s = int(state["teacher"]), int(state["step"])
        for g, st in zip(gens, state["gens"]):
            restore_generators(g, st)
        orders = [o if o.numel() else None for o in state["orders"]]

    def save(t: int, s: int) -> None:
        if checkpoint is not None:
            save_checkpoint(checkpoint, {"tag": tag, "batched": batched, "teacher": t, "step": s, "params": params,
                                         "momentum": buf, "gens": [generator_states(g) for g in gens],
                                         "orders": [o if o is not None else torch.zeros(0, dtype=torch.int64)
                                                    for o in orders]})

    def forward_one(p: dict[str, torch.Tensor], bu: dict[str, torch.Tensor], xb: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.amp and device.type == "cuda"):
            return functional_call(base, (p, bu), (xb,)).float()

    last, done, total = time.perf_counter(), 0, (steps if batched else steps * teachers)
    t, s = start_t, start_s
    try:
        if batched:
            fwd = vmap(forward_one)
            while s < steps:
                if stop_after is not None and done >= stop_after:
                    save(0, s)
                    return params
                xs, ys = zip(*(batch(i, s) for i in range(teachers)))
                leaves = {k: v.requires_grad_(True) for k, v in params.items()}
                out = fwd(leaves, buffers, torch.stack(xs))  # [T, b, C]
                loss = F.cross_entropy(out.flatten(0, 1), torch.stack(ys).flatten(), reduction="sum") / out.shape[1]
                grads = dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))
                params = {k: v.detach() for k, v in leaves.items()}
                momentum_step(params, grads, buf, lr_at(s, steps, cfg.lr, cfg.lr_drops), cfg.momentum)
                s, done = s + 1, done + 1
                if checkpoint is not None and time.perf_counter() - last >= checkpoint_every:
                    save(0, s)
                    last = time.perf_counter()
                if poll is not None:
                    poll(s / steps)
            return params
        while t < teachers:
            p = {k: v[t] for k, v in params.items()}  # views: updated in place
            bt = {k: v[t] for k, v in buf.items()}
            bu = {k: v[t] for k, v in buffers.items()}
            while s < steps:
                if stop_after is not None and done >= stop_after:
                    save(t, s)
                    return params
                xb, yb = batch(t, s)
                leaves = {k: v.detach().requires_grad_(True) for k, v in p.items()}
                loss = F.cross_entropy(forward_one(leaves, bu, xb), yb)
                grads = dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))
                momentum_step(p, grads, bt, lr_at(s, steps, cfg.lr, cfg.lr_drops), cfg.momentum)
                s, done = s + 1, done + 1
                if checkpoint is not None and time.perf_counter() - last >= checkpoint_every:
                    save(t, s)
                    last = time.perf_counter()
                if poll is not None:
                    poll((t * steps + s) / total)
            t, s = t + 1, 0
        return params
    except BaseException:  # cancelled or stopped: keep what was done
        if done:
            save(t if not batched else 0, s)
        raise


@torch.no_grad()
def teacher_predictions(model: nn.Module, params: dict[str, torch.Tensor], data: ImageData, device: torch.device,
                        batch: int = 1000) -> torch.Tensor:
    """Each teacher's predicted labels on the test images: [T, M] (one vmapped forward per batch)."""
    x = torch.tensor(data.x_test, device=device)
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    teachers = next(iter(params.values())).shape[0]
    stacked_buffers = {k: v.expand(teachers, *v.shape) for k, v in buffers.items()}

    def one(p: dict[str, torch.Tensor], bu: dict[str, torch.Tensor], xb: torch.Tensor) -> torch.Tensor:
        return functional_call(model, (p, bu), (xb,))

    fwd = vmap(one, in_dims=(0, 0, None))
    out = [fwd(params, stacked_buffers, to_float(x[i:i + batch], data.mean, data.std)).argmax(2)
           for i in range(0, x.shape[0], batch)]
    return torch.cat(out, dim=1)


def votes_from_predictions(pred: torch.Tensor, classes: int) -> torch.Tensor:
    """Vote counts [M, C] (float64, as the teacher-vote methods expect) from predictions [T, M]."""
    votes = torch.zeros(pred.shape[1], classes, dtype=torch.float64, device=pred.device)
    return votes.scatter_add_(1, pred.T.contiguous(), torch.ones(pred.T.shape, dtype=torch.float64, device=pred.device))
