"""Compute (or fetch) the rows of a :class:`~privcore.deep.spec.DeepSpec`.

Work is planned in units: the T teachers (once, for every vote method, epsilon and B) and one
DP-SGD training per epsilon. Each finished unit is stored at once: DP-SGD results and vote-method
rows in the project's JSON result cache (:class:`~privcore.engine.cache.ResultCache`, keyed by the
point, the data fingerprint and :data:`~privcore.deep.spec.DEEP_SCHEMA`), the teachers'
test-set predictions as a tensor file next to the checkpoints. A unit in progress is
checkpointed (``<cache>/deep/checkpoints``) and resumes after a cancel or a crash.

DP-SGD's noise multiplier is the registry's DP-SGD calibration (``Method.calibrate``: replace-one,
dp_accounting PLD for ``corrected``/``tight``) for N = n_train, q = batch_size / N and
ceil(epochs N / batch_size) steps, the numbers :func:`privcore.deep.dpsgd.train_dpsgd` runs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable

import torch

from ..device import make_generator, resolve_device
from ..engine.cache import SCHEMA_VERSION, ResultCache, point_key
from ..jobs import ProgressFn, check_callbacks
from ..methods import BASELINE, get_method
from ..types import PrivacyBudget, Problem
from .data import load_images
from .dpsgd import SGDConfig, evaluate_model, train_dpsgd
from .images import ImageData
from .loop import Poller, TrainingCancelled, load_checkpoint, save_checkpoint
from .models import build_model
from .spec import DeepRow, DeepSpec, check_row, vote_numbers
from .teachers import teacher_predictions, train_teachers, votes_from_predictions
from .votes import dpsgd_methods, private_vote_accuracy, vote_methods, vote_problem

__all__ = ["run_deep", "DeepResult", "DeepUnit", "execute_deep_unit", "missing_units", "deep_dir", "TrainingCancelled",
           "cached_rows", "check_steps"]


@dataclass
class DeepResult:
    rows: list[DeepRow]
    computed: int
    cached: int
    seconds: float
    device: str


def deep_dir() -> Path:
    """``deep`` in the cache folder (:func:`privcore.paths.cache_dir`): checkpoints and the teachers' predictions."""
    from ..data.mnist_download import default_cache_dir

    return default_cache_dir() / "deep"


def _dpsgd_problem(spec: DeepSpec, data: ImageData) -> Problem:
    c, h, w = data.shape
    return Problem(n=len(data.y_train), dim=c * h * w, classes=data.classes, batch_size=spec.batch_size,
                   epochs=spec.epochs, clip=spec.clip, learning_rate=spec.lr)


def _model_fn(spec: DeepSpec, data: ImageData, device: torch.device) -> Callable[[torch.Generator], torch.nn.Module]:
    # The models' own builder, bound (a lambda here would be called back from the training loops).
    return partial(build_model, spec.model, data.channels, data.classes, device=device, size=data.shape[1])


def missing_units(spec: DeepSpec, cache: ResultCache | None = None, data: ImageData | None = None) -> list[tuple]:
    """The units still to compute: ("teachers",) and ("dpsgd", method, epsilon) entries."""
    data = data or load_images(spec.dataset, spec.n_train, spec.n_test)
    store = cache if cache is not None else ResultCache()
    out: list[tuple] = []
    if any(m in vote_methods() for m in spec.methods):
        need = [(m, e, b) for m in spec.methods if m in vote_methods() for e in spec.epsilons for b in spec.budgets]
        if any(store.get(point_key(spec.vote_point(*p), data.fingerprint), validate=check_row) is None for p in need):
            if not (store.enabled and _predictions_path(spec, data).is_file()):  # no cache: retrain
                out.append(("teachers",))
    for m in spec.methods:
        if m in dpsgd_methods():
            for e in spec.epsilons:
                if store.get(point_key(spec.dpsgd_point(m, e), data.fingerprint), validate=check_row) is None:
                    out.append(("dpsgd", m, e))
    if spec.baseline and store.get(point_key(spec.baseline_point(), data.fingerprint), validate=check_row) is None:
        out.append(("baseline",))
    return out


def cached_rows(spec: DeepSpec, cache: ResultCache | None = None) -> tuple[list[DeepRow], int]:
    """(the rows of ``spec`` the cache holds, how many are missing): reads only, trains nothing."""
    data = load_images(spec.dataset, spec.n_train, spec.n_test)
    store = cache if cache is not None else ResultCache()
    rows, missing = [], 0
    for m in spec.methods:
        for e in spec.epsilons:
            if m in dpsgd_methods():
                hit = store.get(point_key(spec.dpsgd_point(m, e), data.fingerprint), validate=check_row)
                if hit is None:
                    missing += len(spec.budgets)
                else:
                    base = DeepRow.from_dict(hit, cached=True)
                    rows.extend(replace(base, budget=b) for b in spec.budgets)
                continue
            for b in spec.budgets:
                hit = store.get(point_key(spec.vote_point(m, e, b), data.fingerprint), validate=check_row)
                if hit is None:
                    missing += 1
                else:
                    rows.append(DeepRow.from_dict(hit, cached=True))
    if spec.baseline:
        hit = store.get(point_key(spec.baseline_point(), data.fingerprint), validate=check_row)
        if hit is not None:
            rows.extend(_spread(DeepRow.from_dict(hit, cached=True), spec))
        else:
            missing += 1
    return rows, missing


def _spread(base: DeepRow, spec: DeepSpec) -> list[DeepRow]:
    """The non-private reference at every (epsilon, B) of ``spec``: a flat line."""
    return [replace(base, epsilon=e, budget=b) for e in spec.epsilons for b in spec.budgets]


def _predictions_path(spec: DeepSpec, data: ImageData) -> Path:
    return deep_dir() / f"teachers-{point_key(spec.teacher_point(), data.fingerprint)[:32]}.pt"


def _weights(spec: DeepSpec, units: list[tuple], n: int) -> list[float]:
    """Relative cost of each unit: a DP-SGD example (ghost clipping) costs about 1.3 plain ones
    (bench/bench_deep.py: 75-78 % of the non-private step's throughput on a CPU)."""
    return [1.3 * spec.epochs * n if u[0] == "dpsgd" else spec.teacher_epochs * n for u in units]


def check_steps(spec: DeepSpec, n: int) -> None:
    """Every training ``spec`` asks for on ``n`` images within :func:`privcore.limits.max_steps`, checked
    before any starts: DP-SGD's ceil(epochs n / batch), the T teachers together (teacher_epochs passes
    over a part of n / T images each) and the non-private reference on all n."""
    from .. import limits

    if any(m in dpsgd_methods() for m in spec.methods):
        limits.check_steps("DP-SGD's training (ceil(epochs x N / batch))", math.ceil(spec.epochs * n / spec.batch_size))
    part = max(n // spec.teachers, 1)
    if any(m in vote_methods() for m in spec.methods):
        limits.check_steps(f"training the {spec.teachers} teachers (teacher epochs x ceil(N / T / teacher batch) x T)",
                           spec.teachers * spec.teacher_epochs * math.ceil(part / min(spec.teacher_batch, part)),
                           advice="use fewer teacher epochs or a larger teacher batch")
    if spec.baseline:
        limits.check_steps("the non-private reference (teacher epochs x ceil(N / teacher batch))",
                           spec.teacher_epochs * math.ceil(n / min(spec.teacher_batch, n)),
                           advice="use fewer teacher epochs or a larger teacher batch")


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


def _unit_key(spec: DeepSpec, work: tuple, fingerprint: str) -> str:
    point = {"teachers": spec.teacher_point, "baseline": spec.baseline_point}.get(work[0])
    return point_key(point() if point is not None else spec.dpsgd_point(work[1], work[2]), fingerprint)


def _message(spec: DeepSpec, work: tuple) -> str:
    if work[0] == "teachers":
        return f"training {spec.teachers} teachers"
    return "training the non-private reference" if work[0] == "baseline" else f"DP-SGD at ε = {work[2]:g}"


def run_deep(spec: DeepSpec, *, progress: ProgressFn | None = None, cancel: Callable[[], bool] | None = None,
             cache: ResultCache | None = None, use_cache: bool = True, batched_teachers: bool | None = None,
             checkpoint_every: float = 60.0, executor: Any = None) -> DeepResult:
    """Every row of ``spec``, computing what the cache lacks. Raises :class:`TrainingCancelled`
    when ``cancel()`` turns true (finished units are stored, the current one checkpointed).

    ``batched_teachers``: None trains the teachers vmapped on a GPU and one by one on a CPU
    (faster there for small models; see ``bench/bench_deep.py``). ``executor``
    (:mod:`privcore.engine.executor`): None or a ``LocalExecutor`` trains in this thread; a
    ``DaskExecutor`` trains each unit on a worker (GPU workers for a CUDA spec). Only this process
    writes the cache and the teachers' predictions; the rows are the same, bit for bit."""
    if not isinstance(spec, DeepSpec):
        raise TypeError(f"spec must be a DeepSpec, got {type(spec).__name__}")
    check_callbacks(progress, cancel)
    from ..engine.executor import ClusterError, LocalExecutor

    executor = executor if executor is not None else LocalExecutor()
    start = time.perf_counter()
    device = resolve_device(spec.device) if executor.local_device else None
    data = load_images(spec.dataset, spec.n_train, spec.n_test)
    check_steps(spec, len(data.y_train))
    store = cache if cache is not None else ResultCache(enabled=use_cache)
    units = missing_units(spec, store, data)
    weights = _weights(spec, units, len(data.y_train))
    total = sum(weights) or 1.0
    resources = {"GPU": 1} if spec.device.startswith("cuda") else None
    # Each unit's share of the progress bar and its message; the relay (the driver's progress and
    # cancel, handed to the unit trained here and polled by an executor waiting for a cluster) covers
    # the unit under way: the next one's span is set as a unit comes back (a concurrent executor has
    # them all at once: the last one's).
    ends = [sum(weights[:i]) for i in range(len(units) + 1)]
    spans = [(ends[i] / total, w / total, _message(spec, work)) for i, (work, w) in enumerate(zip(units, weights))]
    planned = [DeepUnit(index, spec, work, _unit_key(spec, work, data.fingerprint), data.fingerprint, SCHEMA_VERSION,
                        spans[index][2], resources, batched_teachers, checkpoint_every) for index, work in enumerate(units)]
    relay = Poller(progress, cancel, *(spans[-1 if executor.concurrent else 0] if spans else ()))
    fresh: dict[str, DeepRow] = {}

    def note(message: str) -> None:
        relay.message = message

    for outcome in executor.run(planned, execute_deep_unit, relay, note):
        work = units[outcome.index]
        key, value = outcome.results[0] if len(outcome.results) == 1 else (None, None)
        if key != _unit_key(spec, work, data.fingerprint) or value is None:
            raise ClusterError(f"{_message(spec, work)}: the executor answered for another unit than it was given")
        if work[0] == "teachers":
            save_checkpoint(_predictions_path(spec, data), {"tag": key, "predictions": value["predictions"]})
        else:
            store.put(key, value)
            fresh[key] = DeepRow.from_dict(value, cached=False)
        Poller(progress, cancel, *spans[outcome.index])(1.0, force=True)
        if not executor.concurrent and outcome.index + 1 < len(spans):
            relay.start, relay.width, relay.message = spans[outcome.index + 1]
    device = device if device is not None else resolve_device(spec.device)
    y_test = torch.tensor(data.y_test, device=device)
    rows = _rows(spec, data, store, device, y_test, fresh)
    if spec.baseline:
        key = point_key(spec.baseline_point(), data.fingerprint)
        stored = store.get(key, validate=check_row) if key not in fresh else None
        base = fresh.get(key) or (DeepRow.from_dict(stored, cached=True) if stored is not None else None)
        if base is not None:
            rows.extend(_spread(base, spec))
    if progress is not None:
        progress(1.0, "done")
    new = sum(not r.cached for r in rows)
    return DeepResult(rows, new, len(rows) - new, time.perf_counter() - start, str(device))


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
    if data.fingerprint != unit.fingerprint or _unit_key(spec, work, data.fingerprint) != unit.key:
        raise ClusterError(f"{unit.label}: the images loaded here differ from the driver's (fingerprint "
                           f"{data.fingerprint[:12]} vs {unit.fingerprint[:12]}); give the workers the same data")
    device = resolve_device(spec.device)
    poll = poll if isinstance(poll, Poller) else Poller(None, None)
    ckpt_dir = deep_dir() / "checkpoints"
    if work[0] == "teachers":
        batched = device.type == "cuda" if unit.batched_teachers is None else unit.batched_teachers
        params = train_teachers(_model_fn(spec, data, device), data,
                                SGDConfig(spec.teacher_epochs, spec.teacher_batch, spec.teacher_lr, spec.momentum,
                                          spec.augment, amp=spec.amp),
                                spec.teachers, spec.seed, device, batched=batched,
                                checkpoint=ckpt_dir / f"{unit.key[:32]}.pt", tag=unit.key,
                                checkpoint_every=unit.checkpoint_every, poll=poll)
        model = _model_fn(spec, data, device)(make_generator(0, "unused", device=device))
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
    problem = _dpsgd_problem(spec, data)
    scale = get_method(method).calibrate(PrivacyBudget(eps, spec.delta), problem, spec.accounting)
    tag = point_key(spec.dpsgd_point(method, eps), data.fingerprint)
    model = _model_fn(spec, data, device)(make_generator(spec.seed, "deep-dpsgd", "init", device=device))
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
    params = train_teachers(_model_fn(spec, data, device), data, cfg, 1, spec.seed, device, batched=False,
                            checkpoint=ckpt_dir / f"{tag[:32]}.pt", tag=tag, checkpoint_every=checkpoint_every,
                            poll=poll)
    model = _model_fn(spec, data, device)(make_generator(0, "unused", device=device))
    acc = float((teacher_predictions(model, params, data, device)[0] == y_test).double().mean())
    (ckpt_dir / f"{tag[:32]}.pt").unlink(missing_ok=True)
    return DeepRow(spec.dataset, spec.model, BASELINE.name, 0.0, 0.0, 0, None, spec.accounting, len(data.y_train),
                   len(data.y_test), acc, 0.0, 1, time.perf_counter() - t0, str(device),
                   formula="non-private: the teachers' training on all images, no noise")


def _rows(spec: DeepSpec, data: ImageData, store: ResultCache, device: torch.device, y_test: torch.Tensor,
          fresh: dict[str, DeepRow]) -> list[DeepRow]:
    rows: list[DeepRow] = []
    votes = None
    c, h, w = data.shape
    for m in spec.methods:
        for e in spec.epsilons:
            if m in dpsgd_methods():
                key = point_key(spec.dpsgd_point(m, e), data.fingerprint)
                if key in fresh:  # computed now (also when the cache cannot store it)
                    base = fresh[key]
                else:
                    hit = store.get(key, validate=check_row)
                    if hit is None:  # pragma: no cover - missing_units planned it
                        raise RuntimeError("internal: a DP-SGD result is neither cached nor computed")
                    base = DeepRow.from_dict(hit, cached=True)
                rows.extend(replace(base, budget=b) for b in spec.budgets)
                continue
            for b in spec.budgets:
                key = point_key(spec.vote_point(m, e, b), data.fingerprint)
                hit = store.get(key, validate=check_row)
                if hit is not None:
                    rows.append(DeepRow.from_dict(hit, cached=True))
                    continue
                if votes is None:
                    votes = _load_votes(spec, data, device)
                t0 = time.perf_counter()
                problem = vote_problem(len(data.y_train), c * h * w, data.classes, b, spec.teachers)
                scale, acc, answered = private_vote_accuracy(m, votes, y_test, e, spec.delta, problem, spec.accounting,
                                                             spec.repeats, spec.seed)
                row = DeepRow(spec.dataset, spec.model, m, e, spec.delta, b, spec.teachers, spec.accounting,
                              len(data.y_train), len(data.y_test), float(acc.mean()),
                              float(acc.std(unbiased=False)), spec.repeats, time.perf_counter() - t0, str(device),
                              sigma=scale.sigma, beta=scale.beta, formula=scale.formula,
                              extras=vote_numbers(get_method(m), scale, float(answered.mean())))
                store.put(key, row.to_dict())
                rows.append(row)
    return rows


def _load_votes(spec: DeepSpec, data: ImageData, device: torch.device) -> torch.Tensor:
    tag = point_key(spec.teacher_point(), data.fingerprint)
    state = load_checkpoint(_predictions_path(spec, data), tag, device)
    pred = None if state is None else state.get("predictions")
    if (not isinstance(pred, torch.Tensor) or pred.shape != (spec.teachers, len(data.y_test))
            or pred.dtype.is_floating_point or int(pred.min()) < 0 or int(pred.max()) >= data.classes):
        _predictions_path(spec, data).unlink(missing_ok=True)  # not what we wrote: retrained next time
        raise RuntimeError("the teachers' predictions file was missing or not valid and has been removed: run again "
                           "to retrain the teachers")
    return votes_from_predictions(pred.to(torch.int64), data.classes)
