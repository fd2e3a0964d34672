"""The training contexts this process keeps alive between sweeps (the class itself is :mod:`privcore.context`).

One context per data set, kept across variants and across calls in this process (or a Dask worker):
what depends only on the data (non-private solves, teacher votes, the eigenbasis) is trained once, so
moving the epsilon slider re-draws noise but re-trains nothing. One data set at a time stays on the
device (N = 1e6 is 3 GB). The plan (:mod:`privcore.engine.plan`) asks what a live context holds
(:func:`live_context`), the runner asks for one (:func:`context_for`), and
:func:`privcore.engine.release.release_data_file` drops a user file's (:func:`forget`).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Iterable

from .. import device as _device
from ..context import TrainContext, accuracy, unit_ball_float32
from ..data import Dataset
from ..types import Problem

if TYPE_CHECKING:
    import torch

__all__ = ["TrainContext", "accuracy", "unit_ball_float32", "context_for", "secure_context", "live_context", "forget",
           "clear"]

#: (data fingerprint, seed, device) -> the last training context of this process.
_CONTEXTS: dict[tuple[str, int, str], TrainContext] = {}
_LOCK = threading.Lock()


def context_for(ds: Dataset, problem: Problem, seed: int, device, poll) -> TrainContext:  # noqa: ANN001
    """The training context of ``ds`` for ``problem``, with this call's ``poll`` (progress and cancel);
    its data-only work is the live context's, which is kept (without the poll) for the next call."""
    key = (ds.fingerprint, seed, str(device))
    with _LOCK:
        known = _CONTEXTS.get(key)
    fresh = TrainContext.from_dataset(ds, problem, seed, device) if known is None else known.with_problem(problem)
    with _LOCK:
        _CONTEXTS.clear()  # keep one data set on the device at a time
        _CONTEXTS[key] = fresh  # stored without a poll: it must not keep this call's callbacks
    mine = fresh.with_problem(problem)  # same data and solves, this call's progress and cancel
    mine.poll = poll
    return mine


def secure_context(ds: Dataset, problem: Problem, device: "torch.device",
                   poll: Callable[[float | None], None] | None) -> TrainContext:
    """A training context of ``ds`` whose every generator derives from a fresh :func:`~privcore.device.secure_seed`.

    Kept nowhere: the secret seed lives only as long as this release, and nothing data-only is shared
    with another context's seed."""
    ctx = TrainContext.from_dataset(ds, problem, _device.secure_seed(), device)
    ctx.poll = poll
    return ctx


def live_context(fingerprint: str, seed: int, device: str) -> TrainContext | None:
    """The context this process keeps for (data set, seed, device), or None."""
    with _LOCK:
        return _CONTEXTS.get((fingerprint, seed, str(device)))


def forget(fingerprints: Iterable[str]) -> None:
    """Drop the live contexts of these data sets."""
    prints = set(fingerprints)
    with _LOCK:
        for key in [k for k in _CONTEXTS if k[0] in prints]:
            del _CONTEXTS[key]


def clear() -> None:
    """Drop every live context (tests and benchmarks that time a cold run)."""
    with _LOCK:
        _CONTEXTS.clear()
