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

from ..device import make_generator, resolve_device, secure_seed
from ..engine.cache import SCHEMA_VERSION, point_key
from ..methods import BASELINE, get_method
from ..types import PrivacyBudget, Problem
from .data import load_images
from .dpsgd import SGDConfig, evaluate_model, train_dpsgd
from .images import ImageData
from .loop import Poller, TrainingCancelled
from .models import build_model
from .spec import DeepRow, DeepSpec
from .teachers import teacher_predictions, train_teachers

__all__ = ["DeepUnit", "plan_units", "execute_deep_unit", "unit_key", "deep_dir", "predictions_path", "dpsgd_problem",
           "model_fn"]


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


def predictions_path(spec: DeepSpec, fingerprint: str) -> Path:
    """Where the driver keeps the T teachers' test-set predictions of ``spec`` (next to the checkpoints)."""
    return deep_dir() / f"teachers-{point_key(spec.teacher_point(), fingerprint)[:32]}.pt"


def plan_units(spec: DeepSpec, works: list[tuple], fingerprint: str, labels: list[str], *,
               batched_teachers: bool | None = None, checkpoint_every: float = 60.0) -> list[DeepUnit]:
    """The units of ``works`` (in order; ``labels`` their progress messages), each with its cache key and the
    worker resources a CUDA spec needs."""
    resources = {"GPU": 1} if spec.device.startswith("cuda") else None
    return [DeepUnit(index, spec, work, unit_key(spec, work, fingerprint), fingerprint, SCHEMA_VERSION, label,
                     resources, batched_teachers, checkpoint_every)
            for index, (work, label) in enumerate(zip(works, labels))]


def _config(spec: DeepSpec, work: tuple) -> SGDConfig:
    """The optimiser settings of one unit: DP-SGD's, or the teachers' (the non-private reference is one teacher)."""
    if work[0] == "dpsgd":
        return SGDConfig(spec.epochs, spec.batch_size, spec.lr, spec.momentum, spec.augment, spec.physical_batch,
                         amp=spec.amp)
    return SGDConfig(spec.teacher_epochs, spec.teacher_batch, spec.teacher_lr, spec.momentum, spec.augment, amp=spec.amp)


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
    trained_from = time.perf_counter()  # a row's seconds: its training's, not the images' load
    device = resolve_device(spec.device)
    poll = poll if isinstance(poll, Poller) else Poller(None, None)
    checkpoint = deep_dir() / "checkpoints" / f"{unit.key[:32]}.pt"
    cfg = _config(spec, work)
    y_test = torch.tensor(data.y_test, device=device)
    build = model_fn(spec, data, device)
    if work[0] == "dpsgd":
        value = _train_dpsgd(spec, data, work[1], work[2], cfg, build, device, checkpoint, unit, poll, y_test,
                             trained_from)
    else:  # the T teachers, or the non-private reference: one teacher on all images, never vmapped
        teachers = work[0] == "teachers"
        batched = (device.type == "cuda" if unit.batched_teachers is None else unit.batched_teachers) and teachers
        params = train_teachers(build, data, cfg, spec.teachers if teachers else 1, spec.seed, device, batched=batched,
                                checkpoint=checkpoint, tag=unit.key, checkpoint_every=unit.checkpoint_every, poll=poll)
        predictions = teacher_predictions(build(make_generator(0, "unused", device=device)), params, data, device)
        value = ({"predictions": predictions.to(torch.int16).cpu()} if teachers
                 else _baseline_row(spec, data, predictions[0], y_test, device, trained_from).to_dict())
    checkpoint.unlink(missing_ok=True)
    return UnitOutcome(index=unit.index, results=[(unit.key, value)], seconds=time.perf_counter() - t0,
                       where=str(device))


def _train_dpsgd(spec: DeepSpec, data: ImageData, method: str, eps: float, cfg: SGDConfig,
                 build: Callable[[torch.Generator], torch.nn.Module], device: torch.device, checkpoint: Path,
                 unit: DeepUnit, poll: Poller, y_test: torch.Tensor, t0: float) -> dict[str, Any]:
    problem = dpsgd_problem(spec, data)
    scale = get_method(method).calibrate(PrivacyBudget(eps, spec.delta), problem, spec.accounting)
    model = build(make_generator(spec.seed, "deep-dpsgd", "init", device=device))
    # Secure noise: the batches' sampling (its amplification needs it secret), the noise and the
    # augmentation come from a secret seed drawn here, on the machine that trains; no checkpoint, as it
    # would store that seed's generators.
    secure = spec.secure_noise
    try:
        params = train_dpsgd(model, data, cfg, spec.clip, float(scale.noise_multiplier),
                             secure_seed() if secure else spec.seed, device, checkpoint=None if secure else checkpoint,
                             tag=unit.key, checkpoint_every=unit.checkpoint_every, poll=poll,
                             accounted_steps=problem.steps)  # the accountant composes exactly the steps we run
    except TrainingCancelled:
        if secure:
            raise TrainingCancelled("training cancelled; a secure run keeps no checkpoint (it would store its "
                                    "secret seed), so the next run starts again") from None
        raise
    acc = float((evaluate_model(model, params, data, device) == y_test).double().mean())
    return DeepRow(spec.dataset, spec.model, method, eps, spec.delta, 0, None, spec.accounting, problem.n,
                   len(data.y_test), acc, 0.0, 1, time.perf_counter() - t0, str(device),
                   noise_multiplier=float(scale.noise_multiplier), sigma=float(scale.sigma), steps=problem.steps,
                   formula=spec.stated(scale.formula)).to_dict()


def _baseline_row(spec: DeepSpec, data: ImageData, predictions: torch.Tensor, y_test: torch.Tensor,
                  device: torch.device, t0: float) -> DeepRow:
    """The non-private reference's row: one model trained on all images, its test accuracy."""
    acc = float((predictions == y_test).double().mean())
    return DeepRow(spec.dataset, spec.model, BASELINE.name, 0.0, 0.0, 0, None, spec.accounting, len(data.y_train),
                   len(data.y_test), acc, 0.0, 1, time.perf_counter() - t0, str(device),
                   formula="non-private: the teachers' training on all images, no noise")
