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
from pathlib import Path
from typing import Any, Callable

import torch

from ..device import resolve_device, secure_seed
from ..engine.cache import ResultCache, point_key
from ..jobs import ProgressFn, check_callbacks
from ..methods import get_method
from .data import load_images
from .images import ImageData
from .loop import Poller, TrainingCancelled, load_checkpoint, save_checkpoint
from .spec import DeepRow, DeepSpec, check_row, vote_numbers
from .teachers import votes_from_predictions
from .units import DeepUnit, deep_dir, execute_deep_unit, plan_units, predictions_path
from .votes import private_vote_accuracy, split_methods, vote_problem

__all__ = ["run_deep", "DeepResult", "DeepUnit", "execute_deep_unit", "missing_units", "deep_dir", "TrainingCancelled",
           "cached_rows", "check_steps"]


@dataclass
class DeepResult:
    rows: list[DeepRow]
    computed: int
    cached: int
    seconds: float
    device: str


def missing_units(spec: DeepSpec, cache: ResultCache | None = None, data: ImageData | None = None, *,
                  kinds: tuple[tuple[str, ...], tuple[str, ...]] | None = None,
                  predictions: Path | None = None) -> list[tuple]:
    """The units still to compute: ("teachers",) and ("dpsgd", method, epsilon) entries. ``kinds``
    (:func:`privcore.deep.votes.split_methods` of the spec's methods) and ``predictions`` (the teachers'
    predictions file) are asked for where not given."""
    data = data or load_images(spec.dataset, spec.n_train, spec.n_test)
    store = cache if cache is not None else ResultCache()
    votes, dpsgd = kinds if kinds is not None else split_methods(spec.methods)
    secure = spec.secure_noise  # a secure row is never read from the cache: always computed
    out: list[tuple] = []
    if votes:
        need = [(m, e, b) for m in votes for e in spec.epsilons for b in spec.budgets]
        if secure or any(store.get(point_key(spec.vote_point(*p), data.fingerprint), validate=check_row) is None
                         for p in need):
            path = predictions if predictions is not None else predictions_path(spec, data.fingerprint)
            if not (store.enabled and path.is_file()):  # no cache: retrain
                out.append(("teachers",))
    for m in dpsgd:
        for e in spec.epsilons:
            if secure or store.get(point_key(spec.dpsgd_point(m, e), data.fingerprint), validate=check_row) is None:
                out.append(("dpsgd", m, e))
    if spec.baseline and store.get(point_key(spec.baseline_point(), data.fingerprint), validate=check_row) is None:
        out.append(("baseline",))
    return out


def cached_rows(spec: DeepSpec, cache: ResultCache | None = None) -> tuple[list[DeepRow], int]:
    """(the rows of ``spec`` the cache holds, how many are missing): reads only, trains nothing. The cache
    holds no private row of a secure spec."""
    data = load_images(spec.dataset, spec.n_train, spec.n_test)
    store = cache if cache is not None else ResultCache()
    dpsgd = split_methods(spec.methods)[1]
    rows: list[DeepRow] = []
    missing = len(spec.methods) * len(spec.epsilons) * len(spec.budgets) if spec.secure_noise else 0
    for m in spec.methods if not spec.secure_noise else ():
        for e in spec.epsilons:
            if m in dpsgd:
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
    """The non-private reference at every B of ``spec`` (a flat line), with epsilon = inf as the sweeps' baseline
    rows: at each of the spec's finite epsilons, with delta = 0, its rows read like a (1, 0)-DP result."""
    return [replace(base, epsilon=math.inf, delta=spec.delta, budget=b) for b in spec.budgets]


def _predictions_path(spec: DeepSpec, data: ImageData) -> Path:
    return predictions_path(spec, data.fingerprint)


def _weights(spec: DeepSpec, units: list[tuple], n: int) -> list[float]:
    """Relative cost of each unit: a DP-SGD example (ghost clipping) costs about 1.3 plain ones
    (bench/bench_deep.py: 75-78 % of the non-private step's throughput on a CPU)."""
    return [1.3 * spec.epochs * n if u[0] == "dpsgd" else spec.teacher_epochs * n for u in units]


def check_steps(spec: DeepSpec, n: int, kinds: tuple[tuple[str, ...], tuple[str, ...]] | None = None) -> None:
    """Every training ``spec`` asks for on ``n`` images within :func:`privcore.limits.max_steps`, checked
    before any starts: DP-SGD's ceil(epochs n / batch), the T teachers together (teacher_epochs passes
    over a part of n / T images each) and the non-private reference on all n."""
    from .. import limits

    votes, dpsgd = kinds if kinds is not None else split_methods(spec.methods)
    if dpsgd:
        limits.check_steps("DP-SGD's training (ceil(epochs x N / batch))", math.ceil(spec.epochs * n / spec.batch_size))
    part = max(n // spec.teachers, 1)
    if votes:
        limits.check_steps(f"training the {spec.teachers} teachers (teacher epochs x ceil(N / T / teacher batch) x T)",
                           spec.teachers * spec.teacher_epochs * math.ceil(part / min(spec.teacher_batch, part)),
                           advice="use fewer teacher epochs or a larger teacher batch")
    if spec.baseline:
        limits.check_steps("the non-private reference (teacher epochs x ceil(N / teacher batch))",
                           spec.teacher_epochs * math.ceil(n / min(spec.teacher_batch, n)),
                           advice="use fewer teacher epochs or a larger teacher batch")


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
    kinds = split_methods(spec.methods)
    check_steps(spec, len(data.y_train), kinds)
    store = cache if cache is not None else ResultCache(enabled=use_cache)
    predictions = predictions_path(spec, data.fingerprint)
    units = missing_units(spec, store, data, kinds=kinds, predictions=predictions)
    weights = _weights(spec, units, len(data.y_train))
    total = sum(weights) or 1.0
    # Each unit's share of the progress bar and its message; the relay (the driver's progress and
    # cancel, handed to the unit trained here and polled by an executor waiting for a cluster) covers
    # the unit under way: the next one's span is set as a unit comes back (a concurrent executor has
    # them all at once: the last one's).
    ends = [sum(weights[:i]) for i in range(len(units) + 1)]
    spans = [(ends[i] / total, w / total, _message(spec, work)) for i, (work, w) in enumerate(zip(units, weights))]
    planned = plan_units(spec, units, data.fingerprint, [span[2] for span in spans], batched_teachers=batched_teachers,
                         checkpoint_every=checkpoint_every)
    relay = Poller(progress, cancel, *(spans[-1 if executor.concurrent else 0] if spans else ()))
    fresh: dict[str, DeepRow] = {}

    def note(message: str) -> None:
        relay.message = message

    for outcome in executor.run(planned, execute_deep_unit, relay, note):
        work = units[outcome.index]
        key, value = outcome.results[0] if len(outcome.results) == 1 else (None, None)
        if key != planned[outcome.index].key or value is None:
            raise ClusterError(f"{_message(spec, work)}: the executor answered for another unit than it was given")
        if work[0] == "teachers":
            save_checkpoint(predictions, {"tag": key, "predictions": value["predictions"]})
        else:
            if not (spec.secure_noise and work[0] == "dpsgd"):
                store.put(key, value)
            fresh[key] = DeepRow.from_dict(value, cached=False)
        Poller(progress, cancel, *spans[outcome.index])(1.0, force=True)
        if not executor.concurrent and outcome.index + 1 < len(spans):
            relay.start, relay.width, relay.message = spans[outcome.index + 1]
    device = device if device is not None else resolve_device(spec.device)
    y_test = torch.tensor(data.y_test, device=device)
    rows = _rows(spec, data, store, device, y_test, fresh, kinds[1], predictions)
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


def _rows(spec: DeepSpec, data: ImageData, store: ResultCache, device: torch.device, y_test: torch.Tensor,
          fresh: dict[str, DeepRow], dpsgd: tuple[str, ...], predictions: Path) -> list[DeepRow]:
    rows: list[DeepRow] = []
    votes = None
    c, h, w = data.shape
    for m in spec.methods:
        for e in spec.epsilons:
            if m in dpsgd:
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
                hit = None if spec.secure_noise else store.get(key, validate=check_row)
                if hit is not None:
                    rows.append(DeepRow.from_dict(hit, cached=True))
                    continue
                if votes is None:
                    votes = _load_votes(spec, data, device, predictions)
                t0 = time.perf_counter()
                problem = vote_problem(len(data.y_train), c * h * w, data.classes, b, spec.teachers)
                seed = secure_seed() if spec.secure_noise else spec.seed  # each point its own secret seed
                scale, acc, answered = private_vote_accuracy(m, votes, y_test, e, spec.delta, problem, spec.accounting,
                                                             spec.repeats, seed)
                row = DeepRow(spec.dataset, spec.model, m, e, spec.delta, b, spec.teachers, spec.accounting,
                              len(data.y_train), len(data.y_test), float(acc.mean()),
                              float(acc.std(unbiased=False)), spec.repeats, time.perf_counter() - t0, str(device),
                              sigma=scale.sigma, beta=scale.beta, formula=spec.stated(scale.formula),
                              extras=vote_numbers(get_method(m), scale, float(answered.mean())))
                if not spec.secure_noise:
                    store.put(key, row.to_dict())
                rows.append(row)
    return rows


def _load_votes(spec: DeepSpec, data: ImageData, device: torch.device, path: Path) -> torch.Tensor:
    tag = point_key(spec.teacher_point(), data.fingerprint)
    state = load_checkpoint(path, tag, device)
    pred = None if state is None else state.get("predictions")
    if (not isinstance(pred, torch.Tensor) or pred.shape != (spec.teachers, len(data.y_test))
            or pred.dtype.is_floating_point or int(pred.min()) < 0 or int(pred.max()) >= data.classes):
        path.unlink(missing_ok=True)  # not what we wrote: retrained next time
        raise RuntimeError("the teachers' predictions file was missing or not valid and has been removed: run again "
                           "to retrain the teachers")
    return votes_from_predictions(pred.to(torch.int64), data.classes)
