"""One training of a deep run, where it runs (this process or a Dask worker): the unit of work.

:func:`privcore.deep.run.run_deep` plans a :class:`DeepUnit` per missing training (the T teachers once,
the non-private reference, DP-SGD per epsilon) and hands them to an executor
(:mod:`privcore.engine.executor`), which calls :func:`execute_deep_unit` with each. The unit loads its
images, checks it has the driver's data and cache schema, trains, and returns its result as plain
numbers; only the driver writes the cache. Nothing here calls back into the driver's module.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

import torch

from ..device import make_generator, resolve_device
from ..engine.cache import SCHEMA_VERSION, point_key
from ..methods import BASELINE, get_method
from ..types import PrivacyBudget, Problem
from .data import load_images
from .dpsgd import SGDConfig, evaluate_model, train_dpsgd
from .images import ImageData
from .loop import Poller
from .models import build_model
from .spec import DeepRow, DeepSpec
from .teachers import teacher_predictions, train_teachers

__all__ = ["DeepUnit", "execute_deep_unit", "unit_key", "deep_dir", "dpsgd_problem", "model_fn"]


def deep_dir() -> Path:
    """``deep`` in the cache folder (:func:`privcore.paths.cache_dir`): checkpoints and the teachers' predictions."""
    from ..data.mnist_download import default_cache_dir

    return default_cache_dir() / "deep"


def dpsgd_problem(spec: DeepSpec, data: ImageData) -> Problem:
    c, h, w = data.shape
    return Problem(n=len(data.y_train), dim=c * h * w, classes=data.classes, batch_size=spec.batch_size,
                   epochs=spec.epochs, clip=spec.clip, learning_rate=spec.lr)


def model_fn(spec: DeepSpec, data: ImageData, device: torch.device) -> Callable[[torch.Generator], torch.nn.Module]:
    # The models' own builder, bound (a lambda here would be called back from the training loops).
    return partial(build_model, spec.model, data.channels, data.classes, device=device, size=data.shape[1])


@dataclass(frozen=True)
class DeepUnit:
    """One training of a deep run as a unit of work for an executor (:mod:`privcore.engine.executor`):
    ``work`` is ("teachers",), ("baseline",) or ("dpsgd", method, epsilon); ``key`` its cache key (the
    teachers' tag); ``resources``: the Dask worker resources it needs (``{"GPU": 1}`` on CUDA: start GPU
    workers with ``--resources GPU=1``)."""

    index: int
    spec: DeepSpec
    work: tuple
    key: str
    fingerprint: str
    schema: int
    label: str = ""
    resources: dict | None = None
    batched_teachers: bool | None = None
    checkpoint_every: float = 60.0

    @property
    def method(self) -> str:
        return str(self.work[1]) if self.work[0] == "dpsgd" else str(self.work[0])


def unit_key(spec: DeepSpec, work: tuple, fingerprint: str) -> str:
    point = {"teachers": spec.teacher_point, "baseline": spec.baseline_point}.get(work[0])
    return point_key(point() if point is not None else spec.dpsgd_point(work[1], work[2]), fingerprint)


def execute_deep_unit(unit: DeepUnit, poll: Any = None) -> Any:
    """Train one unit where it runs (this process or a Dask worker) and return a
    :class:`~privcore.engine.executor.UnitOutcome`: (key, the row as plain numbers), or for the teachers
    (tag, their test-set predictions as an int16 tensor). Stores nothing but its own checkpoints; the
    images loaded here must have the driver's fingerprint, the code its cache schema."""
    from ..engine.executor import ClusterError, UnitOutcome

    t0 = time.perf_counter()
    if unit.schema != SCHEMA_VERSION:
        raise ClusterError(f"this worker's privcore writes cache schema {SCHEMA_VERSION}, the driver's "
                           f"{unit.schema}: install the same privcore version on the driver and the workers")
    spec, work = unit.spec, unit.work
    data = load_images(spec.dataset, spec.n_train, spec.n_test)
    if data.fingerprint != unit.fingerprint or unit_key(spec, work, data.fingerprint) != unit.key:
        raise ClusterError(f"{unit.label}: the images loaded here differ from the driver's (fingerprint "
                           f"{data.fingerprint[:12]} vs {unit.fingerprint[:12]}); give the workers the same data")
    device = resolve_device(spec.device)
    poll = poll if isinstance(poll, Poller) else Poller(None, None)
    ckpt_dir = deep_dir() / "checkpoints"
    if work[0] == "teachers":
        batched = device.type == "cuda" if unit.batched_teachers is None else unit.batched_teachers
        params = train_teachers(model_fn(spec, data, device), data,
                                SGDConfig(spec.teacher_epochs, spec.teacher_batch, spec.teacher_lr, spec.momentum,
                                          spec.augment, amp=spec.amp),
                                spec.teachers, spec.seed, device, batched=batched,
                                checkpoint=ckpt_dir / f"{unit.key[:32]}.pt", tag=unit.key,
                                checkpoint_every=unit.checkpoint_every, poll=poll)
        model = model_fn(spec, data, device)(make_generator(0, "unused", device=device))
        value: dict[str, Any] = {"predictions": teacher_predictions(model, params, data, device).to(torch.int16).cpu()}
        (ckpt_dir / f"{unit.key[:32]}.pt").unlink(missing_ok=True)
    else:
        y_test = torch.tensor(data.y_test, device=device)
        if work[0] == "baseline":
            row = _train_baseline(spec, data, device, ckpt_dir, poll, unit.checkpoint_every, y_test)
        else:
            row = _train_dpsgd(spec, data, work[1], work[2], device, ckpt_dir, poll, unit.checkpoint_every, y_test)
        value = row.to_dict()
    return UnitOutcome(index=unit.index, results=[(unit.key, value)], seconds=time.perf_counter() - t0,
                       where=str(device))


def _train_dpsgd(spec: DeepSpec, data: ImageData, method: str, eps: float, device: torch.device, ckpt_dir: Path,
                 poll: Poller, checkpoint_every: float, y_test: torch.Tensor) -> DeepRow:
    t0 = time.perf_counter()
    problem = dpsgd_problem(spec, data)
    scale = get_method(method).calibrate(PrivacyBudget(eps, spec.delta), problem, spec.accounting)
    tag = point_key(spec.dpsgd_point(method, eps), data.fingerprint)
    model = model_fn(spec, data, device)(make_generator(spec.seed, "deep-dpsgd", "init", device=device))
    cfg = SGDConfig(spec.epochs, spec.batch_size, spec.lr, spec.momentum, spec.augment, spec.physical_batch, amp=spec.amp)
    if cfg.steps(problem.n) != problem.steps:  # the accountant composes exactly the steps we run
        raise RuntimeError("internal: DP-SGD steps differ from the accounted steps")
    path = ckpt_dir / f"{tag[:32]}.pt"
    params = train_dpsgd(model, data, cfg, spec.clip, float(scale.noise_multiplier), spec.seed, device,
                         checkpoint=path, tag=tag, checkpoint_every=checkpoint_every, poll=poll)
    acc = float((evaluate_model(model, params, data, device) == y_test).double().mean())
    path.unlink(missing_ok=True)
    return DeepRow(spec.dataset, spec.model, method, eps, spec.delta, 0, None, spec.accounting, problem.n,
                   len(data.y_test), acc, 0.0, 1, time.perf_counter() - t0, str(device),
                   noise_multiplier=float(scale.noise_multiplier), sigma=float(scale.sigma), steps=problem.steps,
                   formula=scale.formula)


def _train_baseline(spec: DeepSpec, data: ImageData, device: torch.device, ckpt_dir: Path, poll: Poller,
                    checkpoint_every: float, y_test: torch.Tensor) -> DeepRow:
    """One non-private model on all training images (a single "teacher"), its test accuracy."""
    t0 = time.perf_counter()
    tag = point_key(spec.baseline_point(), data.fingerprint)
    cfg = SGDConfig(spec.teacher_epochs, spec.teacher_batch, spec.teacher_lr, spec.momentum, spec.augment, amp=spec.amp)
    params = train_teachers(model_fn(spec, data, device), data, cfg, 1, spec.seed, device, batched=False,
                            checkpoint=ckpt_dir / f"{tag[:32]}.pt", tag=tag, checkpoint_every=checkpoint_every,
                            poll=poll)
    model = model_fn(spec, data, device)(make_generator(0, "unused", device=device))
    acc = float((teacher_predictions(model, params, data, device)[0] == y_test).double().mean())
    (ckpt_dir / f"{tag[:32]}.pt").unlink(missing_ok=True)
    return DeepRow(spec.dataset, spec.model, BASELINE.name, 0.0, 0.0, 0, None, spec.accounting, len(data.y_train),
                   len(data.y_test), acc, 0.0, 1, time.perf_counter() - t0, str(device),
                   formula="non-private: the teachers' training on all images, no noise")
