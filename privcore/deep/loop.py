"""What the DP-SGD and teacher training loops share: the learning-rate schedule, the momentum
step, cancellation and checkpoints.

Checkpoints are this project's own files: a dict of tensors, ints and strings written with
``torch.save`` to a temporary file in the target folder and moved into place with ``os.replace``
(a crash never leaves a half-written checkpoint), read back with ``torch.load(weights_only=True)``
(no arbitrary unpickling). A checkpoint carries a ``tag`` (the run's cache key) and is ignored
when the tag differs, so a changed setting never resumes from another run's state.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import torch

from ..atomic import atomic_write
from ..jobs import JobCancelled, ProgressFn

__all__ = ["lr_at", "momentum_step", "TrainingCancelled", "Poller", "save_checkpoint", "load_checkpoint",
           "CHECKPOINT_VERSION"]

CHECKPOINT_VERSION = 1


#: Raised when the cancel callable returned True (the state was checkpointed first): the one
#: cancellation of every job kind (:class:`privcore.jobs.JobCancelled`), under its old name.
TrainingCancelled = JobCancelled


def lr_at(step: int, steps: int, lr: float, drops: int = 3) -> float:
    """``lr`` divided by 10 ``drops`` times after equally spaced parts of the run (paper Section 4.3)."""
    return lr * 0.1 ** min(drops, (drops + 1) * step // max(steps, 1))


@torch.no_grad()
def momentum_step(params: dict[str, torch.Tensor], grads: dict[str, torch.Tensor],
                  buf: dict[str, torch.Tensor], lr: float, momentum: float, weight_decay: float = 0.0) -> None:
    """Heavy-ball SGD in place: buf = momentum buf + g (+ wd p); p -= lr buf (post-processing of g).

    Each line is one multi-tensor (``_foreach``) operation over all parameters: the same elementwise
    arithmetic, in the same order, as a loop over them, with a few kernel launches instead of four per
    parameter (on a GPU a step of the small models is bound by launches). Elementwise, so a teacher's
    slice of stacked parameters is still updated from its own values only."""
    keys = list(params)
    ps, bs = [params[k] for k in keys], [buf[k] for k in keys]
    gs = [grads[k] for k in keys]
    if weight_decay:
        gs = torch._foreach_add(gs, torch._foreach_mul(ps, weight_decay))
    torch._foreach_mul_(bs, momentum)
    torch._foreach_add_(bs, gs)
    torch._foreach_sub_(ps, torch._foreach_mul(bs, lr))


class Poller:
    """Calls ``progress`` at most every 0.25 s and raises :class:`TrainingCancelled` when ``cancel()``.

    ``fraction`` is the share done of the span [start, start + width] of the bar; None (an executor
    waiting for a cluster) reports the span's start: only the message and the cancel check."""

    def __init__(self, progress: ProgressFn | None, cancel: Callable[[], bool] | None, start: float = 0.0,
                 width: float = 1.0, message: str = "") -> None:
        self.progress, self.cancel, self.start, self.width, self.message = progress, cancel, start, width, message
        self._last = 0.0

    def __call__(self, fraction: float | None, force: bool = False) -> None:
        now = time.perf_counter()
        if self.progress is not None and (force or now - self._last >= 0.25):
            share = 0.0 if fraction is None else min(max(fraction, 0.0), 1.0)
            self.progress(min(self.start + self.width * share, 1.0), self.message)
            self._last = now
        if self.cancel is not None and self.cancel():
            raise TrainingCancelled("training cancelled; its checkpoint is kept and the next run resumes from it")


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` atomically (temporary file + ``os.replace``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda fh: torch.save({"version": CHECKPOINT_VERSION, **state}, fh))


def load_checkpoint(path: Path | None, tag: str, device: torch.device) -> dict[str, Any] | None:
    """The state saved at ``path`` for ``tag`` (tensors moved to ``device``), or None when there is
    none, it is unreadable, or it belongs to another run."""
    if path is None or not Path(path).is_file():
        return None
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception:  # noqa: BLE001 - a corrupt or foreign file is simply not resumed from
        return None
    if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION or state.get("tag") != tag:
        return None
    return state


def generator_states(gens: dict[str, torch.Generator]) -> dict[str, torch.Tensor]:
    return {k: g.get_state() for k, g in gens.items()}


def restore_generators(gens: dict[str, torch.Generator], states: dict[str, torch.Tensor]) -> None:
    for k, g in gens.items():
        g.set_state(states[k].to("cpu"))
