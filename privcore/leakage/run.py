"""Run one leakage measurement: release, attack, audit; cache the plain numbers.

:func:`run_leakage` takes a :class:`~privcore.leakage.spec.LeakageSpec` and returns a
:class:`~privcore.leakage.spec.LeakageResult`. What does not depend on the method (the population,
the worlds' non-private solves and teachers, the reference models) is kept in memory for the last
game, so measuring the five methods at one setting trains the shared parts once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from ..data import load_dataset
from ..device import derive_seed, resolve_device
from ..engine.cache import SCHEMA_VERSION, ResultCache, point_key
from ..engine.context import TrainContext
from ..solver import Preconditioner
from ..jobs import JobCancelled, ProgressFn, check_callbacks
from ..methods import get_method
from ..types import NoiseScale, PrivacyBudget
from .attacks import confidence, lira_offline_scores, loss_scores, out_stats
from .game import Population, audit_rows, build_population, reference_logits, reference_masks, vote_logits, world_masks
from .sizes import MAX_AUDIT_ANSWERS, MAX_OBSERVED, answers_per_release, observed
from .spec import AttackResult, LeakageResult, LeakageSpec
from .stats import EpsilonBound, epsilon_lower_bound, roc

__all__ = ["run_leakage", "LeakageCancelled", "LeakageUnit", "execute_leakage_unit", "observe", "audit_scores",
           "audit_bound", "answers_per_release", "forget", "kept_games", "warm_pieces", "MAX_OBSERVED", "MAX_AUDIT_ANSWERS"]


_GAMES: dict[tuple, "_Game"] = {}
_GAMES_LOCK = threading.Lock()


#: Raised when the cancel callable returned True: the one cancellation of every job kind, under its old name.
LeakageCancelled = JobCancelled


@dataclass(frozen=True)
class LeakageUnit:
    """One leakage measurement as a unit of work for an executor (:mod:`privcore.engine.executor`):
    the spec, its cache key and the data fingerprint and cache schema the driver planned with."""

    index: int
    spec: LeakageSpec
    key: str
    fingerprint: str
    schema: int
    label: str = ""
    resources: dict | None = None  # Dask worker resources the unit needs (None: any worker)

    @property
    def method(self) -> str:
        return self.spec.method


class _Relay:
    """The driver's callbacks, handed to a unit computed in this process (a cluster's workers get none;
    the executor then polls ``relay(None)`` while it waits, which only checks for a cancel)."""

    def __init__(self, progress: ProgressFn | None, cancel: Callable[[], bool] | None) -> None:
        self.progress, self.cancel = progress, cancel

    def __call__(self, fraction: float | None = None) -> None:
        if self.cancel is not None and self.cancel():
            raise LeakageCancelled("leakage measurement cancelled")


class _Game:
    """The population, world membership, audit rows and lazily built contexts and references."""

    def __init__(self, pop: Population, spec: LeakageSpec, device: torch.device) -> None:
        self.pop, self.device, self.seed = pop, device, spec.seed
        self.masks = world_masks(pop, spec.worlds, spec.seed)
        self.ref_masks = reference_masks(pop, spec.references, spec.seed)
        self.base, self.canary, _ = audit_rows(pop, spec.seed)
        # One eigendecomposition for the whole game: every world, audit data set and reference is a
        # subset of the population's rows, so the population's null space lies in each one's null
        # space and its basis is exact for all of them (as for subsample-and-aggregate's teachers).
        self.precond = Preconditioner(pop.x)
        self._ctx: dict[Any, TrainContext] = {}
        self._refs: dict[Any, torch.Tensor] = {}
        self.lock = threading.Lock()

    def _add_context(self, key: Any, rows: torch.Tensor, x: torch.Tensor, y: torch.Tensor, seed: int,
                     spec: LeakageSpec) -> None:
        problem = spec.problem(int(rows.numel()), self.pop.x.shape[1], self.pop.classes)
        ctx = TrainContext(x, y, self.pop.x_test, self.pop.y_test, self.pop.classes, problem, seed, self.device)
        sub = self.precond.rows(rows, 1)
        sub.x = sub.x[0]  # shared-data layout [n, r]
        ctx.use_basis(sub)  # the context would otherwise decompose its own rows again
        self._ctx[key] = ctx

    def world(self, g: int, spec: LeakageSpec) -> TrainContext:
        key = ("world", g)
        if key not in self._ctx:
            rows = torch.nonzero(self.masks[g]).flatten()
            self._add_context(key, rows, self.pop.x[rows].contiguous(), self.pop.y[rows].contiguous(),
                              derive_seed(spec.seed, "leakage", "world", g), spec)
        return self._ctx[key].with_problem(spec.problem(self.pop.n_train, self.pop.x.shape[1], self.pop.classes))

    def audit(self, member: bool, spec: LeakageSpec) -> TrainContext:
        key = ("audit", member)
        if key not in self._ctx:
            # In: base + the OOD canary (x, y). Out: base + the same input with the next label, the
            # fresh example that moves the model furthest from the canary (replace-one neighbours).
            rows = torch.cat([self.base, torch.tensor([self.canary], device=self.device)])
            x, y = self.pop.x[rows].contiguous(), self.pop.y[rows].clone()
            if not member:
                y[-1] = (y[-1] + 1) % self.pop.classes
            # One seed for both data sets: the same batches, noise and teacher partition.
            self._add_context(key, rows, x, y, derive_seed(spec.seed, "leakage", "audit"), spec)
        return self._ctx[key].with_problem(spec.problem(self.pop.n_train, self.pop.x.shape[1], self.pop.classes))

    def warm(self) -> set[tuple]:
        """What this game has built: ("world", g), ("audit", member) and ("references", lam, T or 1)."""
        return set(self._ctx) | {("references", lam, teachers or 1) for lam, teachers in self._refs}

    def references(self, lam: float, teachers: int | None, callback: Callable[[], None] | None) -> torch.Tensor:
        key = (float(lam), teachers)
        if key not in self._refs:
            self._refs[key] = reference_logits(self.pop, self.ref_masks, lam, teachers, self.seed, callback,
                                               precond=self.precond)
        return self._refs[key]


def _game(ds, spec: LeakageSpec, device: torch.device) -> _Game:  # noqa: ANN001
    key = (ds.fingerprint, spec.seed, spec.canaries, spec.worlds, spec.references, str(device))
    with _GAMES_LOCK:
        game = _GAMES.get(key)
        if game is None:
            t = lambda a, dt: torch.as_tensor(a.copy(), dtype=dt, device=device)  # noqa: E731
            pop = build_population(t(ds.x_train, torch.float32), t(ds.y_train, torch.int64),
                                   t(ds.x_test, torch.float32), t(ds.y_test, torch.int64), ds.classes,
                                   spec.canaries, spec.seed)
            game = _Game(pop, spec, device)
            _GAMES.clear()  # one game in memory at a time
            _GAMES[key] = game
    return game


def forget(fingerprints) -> None:  # noqa: ANN001 - an iterable of data fingerprints
    """Drop the game this process keeps when it was played on one of these data sets."""
    prints = set(fingerprints)
    with _GAMES_LOCK:
        for key in [k for k in _GAMES if k[0] in prints]:
            del _GAMES[key]


def warm_pieces(spec: LeakageSpec) -> set[tuple]:
    """The pieces of ``spec``'s measurement that a game this process keeps has built, as
    :func:`privcore.leakage.cost.estimate_seconds` keys them (a later estimate does not price them again)."""
    d = spec.data
    ds = load_dataset(d.name, seed=spec.seed, **d.load_kwargs())
    with _GAMES_LOCK:
        built = [g.warm() for k, g in _GAMES.items() if k[:5] == (ds.fingerprint, spec.seed, spec.canaries,
                                                                     spec.worlds, spec.references)]
    return set().union(*built) if built else set()


def kept_games() -> list[tuple]:
    """The keys (data fingerprint, seed, canaries, worlds, references, device) of the games this process keeps."""
    with _GAMES_LOCK:
        return list(_GAMES)


def observe(method: str, ctx: TrainContext, scale: NoiseScale | None, repeats: int,
            queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """What the attacker sees about each query row in each of ``repeats`` releases, as logit-like
    outputs [R, M, C], and the released models [R, D, C] (None for prediction methods).

    One repetition is one release of the claimed (eps, delta) guarantee, never more: the audit
    compares it with the claim itself.
    Methods releasing a model (and the non-private baseline): the model's logits. Otherwise the
    answers of :meth:`~privcore.methods.base.Method.query_answers`: releasing logits, the mean of the
    B noisy logit vectors per row; releasing labels, the smoothed frequencies of the labels per row
    (B from one stream for sparse vector, one student's label for the PATE student).
    """
    m = get_method(method)
    if m.releases == "model":
        theta = m.release(ctx, [scale], repeats)[0]  # [R, D, C]
        return ctx.logits(theta, queries), theta
    out = m.query_answers(ctx, [scale], repeats, queries)[0]  # [R, A, M(, C)]
    if m.releases == "logits":
        return out.double().mean(dim=1), None
    # An abstention (label -1, e.g. Confident-GNMax, sparse vector) adds no count.
    answered = (out >= 0).unsqueeze(-1)
    counts = (torch.nn.functional.one_hot(out.clamp_min(0), ctx.classes) * answered).sum(dim=1)  # [R, M, C]
    return vote_logits(counts, out.shape[1]), None


def audit_scores(method: str, ctx_in: TrainContext, ctx_out: TrainContext, scale: NoiseScale, trials: int,
                 query_x: torch.Tensor, query_y: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The audit's scores [trials] on each of two neighbouring data sets (``ctx_in`` holds the canary
    (query_x, query_y), ``ctx_out`` its replacement): the confidence phi of query_y at query_x in
    each release (higher: "in"). Trial r is repetition r of :func:`observe`: one release that the
    claim covers, so the bound is compared with the claimed epsilon itself."""
    deterministic = scale.noise == "none"  # the baseline: one release says everything
    out = []
    for ctx in (ctx_in, ctx_out):
        logits, _ = observe(method, ctx, scale, 1 if deterministic else trials, query_x)
        phi = confidence(logits, query_y).flatten()
        out.append((phi.expand(trials) if phi.numel() == 1 else phi).cpu().numpy())
    return out[0], out[1]


def audit_bound(method: str, ctx_in: TrainContext, ctx_out: TrainContext, scale: NoiseScale, trials: int,
                query_x: torch.Tensor, query_y: torch.Tensor, delta: float, alpha: float) -> EpsilonBound:
    """:func:`audit_scores` turned into a Clopper-Pearson lower bound on epsilon at level 1 - alpha:
    a sound method's bound exceeds its claimed epsilon with probability at most alpha."""
    s_in, s_out = audit_scores(method, ctx_in, ctx_out, scale, trials, query_x, query_y)
    return epsilon_lower_bound(s_in, s_out, delta, alpha)


def _split(scores: torch.Tensor, member: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """In- and out-scores of [R, M] scores given membership [M]."""
    return scores[:, member].flatten(), scores[:, ~member].flatten()


def _check_record(value: Any) -> str | None:
    """None when ``value`` reads back as a :class:`LeakageResult`, else why not (a cache miss)."""
    try:
        LeakageResult.from_dict(value, cached=True)
    except (KeyError, TypeError, ValueError) as err:
        return f"not a leakage result ({type(err).__name__})"
    return None


def cached_result(spec: LeakageSpec, *, cache: ResultCache | None = None) -> LeakageResult | None:
    """The cached result of ``spec`` (no training), or None."""
    store = cache if cache is not None else ResultCache()
    d = spec.data
    ds = load_dataset(d.name, seed=spec.seed, **d.load_kwargs())
    hit = store.get(point_key(spec.point(), ds.fingerprint), validate=_check_record)
    return None if hit is None else LeakageResult.from_dict(hit, cached=True)


def is_cached(spec: LeakageSpec, *, cache: ResultCache | None = None) -> bool:
    """Whether :func:`run_leakage` would answer ``spec`` from the cache (no training)."""
    return cached_result(spec, cache=cache) is not None


def run_leakage(spec: LeakageSpec, *, progress: ProgressFn | None = None, cancel: Callable[[], bool] | None = None,
                cache: ResultCache | None = None, use_cache: bool = True, executor: Any = None) -> LeakageResult:
    """Measure the leakage of one method at one setting (or fetch it from the cache).

    ``executor`` (:mod:`privcore.engine.executor`): None or a ``LocalExecutor`` measures in this thread
    with ``progress`` and ``cancel`` inside; a ``DaskExecutor`` on a cluster's worker (the reference
    models of the attack are the expensive part). Only this process writes the cache; the result is
    the same, bit for bit."""
    if not isinstance(spec, LeakageSpec):
        raise TypeError(f"spec must be a LeakageSpec, got {type(spec).__name__}")
    check_callbacks(progress, cancel)
    store = cache if cache is not None else ResultCache(enabled=use_cache)
    d = spec.data
    ds = load_dataset(d.name, seed=spec.seed, **d.load_kwargs())
    key = point_key(spec.point(), ds.fingerprint)
    hit = store.get(key, validate=_check_record)
    if hit is not None:
        if progress is not None:
            progress(1.0, "from the cache")
        return LeakageResult.from_dict(hit, cached=True)
    from .. import limits

    limits.check_features(ds.dim)  # the game diagonalises a D x D matrix, which cannot be cancelled
    from ..engine.executor import ClusterError, LocalExecutor

    executor = executor if executor is not None else LocalExecutor()
    unit = LeakageUnit(0, spec, key, ds.fingerprint, SCHEMA_VERSION, f"leakage of {spec.method}")
    relay = _Relay(progress, cancel)
    note = (lambda message: progress(0.0, message)) if progress is not None else (lambda message: None)
    outcomes = list(executor.run([unit], execute_leakage_unit, relay, note))
    if len(outcomes) != 1 or [k for k, _ in outcomes[0].results] != [key]:
        raise ClusterError(f"{unit.label}: the executor answered for other points than it was given")
    value = outcomes[0].results[0][1]
    store.put(key, value)
    if progress is not None and executor.concurrent:
        progress(1.0, "done")
    return LeakageResult.from_dict(value, cached=False)


def execute_leakage_unit(unit: LeakageUnit, poll: Any = None) -> Any:
    """Measure one unit where it runs (this process or a Dask worker); returns a
    :class:`~privcore.engine.executor.UnitOutcome` holding (key, the result as plain numbers). Stores nothing.
    The data set loaded here must have the driver's fingerprint, the code its cache schema."""
    from ..engine.executor import ClusterError, UnitOutcome

    t0 = time.perf_counter()
    if unit.schema != SCHEMA_VERSION:
        raise ClusterError(f"this worker's privcore writes cache schema {SCHEMA_VERSION}, the driver's "
                           f"{unit.schema}: install the same privcore version on the driver and the workers")
    d = unit.spec.data
    ds = load_dataset(d.name, seed=unit.spec.seed, **d.load_kwargs())
    if ds.fingerprint != unit.fingerprint or point_key(unit.spec.point(), ds.fingerprint) != unit.key:
        raise ClusterError(f"{unit.label}: the data set loaded here differs from the driver's (fingerprint "
                           f"{ds.fingerprint[:12]} vs {unit.fingerprint[:12]}); give the workers the same data")
    result = _compute(unit.spec, ds, getattr(poll, "progress", None), getattr(poll, "cancel", None))
    return UnitOutcome(index=unit.index, results=[(unit.key, result.to_dict())], seconds=time.perf_counter() - t0,
                       where=result.device)


def _compute(spec: LeakageSpec, ds, progress: ProgressFn | None, cancel: Callable[[], bool] | None) -> LeakageResult:  # noqa: ANN001
    start = time.perf_counter()
    device = resolve_device(spec.device)
    stages = spec.worlds + 3
    state = {"done": 0, "msg": "", "last": 0.0}

    def poll(fraction: float | None = None) -> None:
        now = time.perf_counter()
        if progress is not None and now - state["last"] >= 0.25:
            within = 0.0 if fraction is None else min(max(fraction, 0.0), 1.0)
            progress(min((state["done"] + within) / stages, 1.0), state["msg"])
            state["last"] = now
        if cancel is not None and cancel():
            raise LeakageCancelled("leakage measurement cancelled")

    def tick(msg: str) -> None:
        state["msg"], state["last"] = msg, 0.0
        poll(0.0)

    tick("building the population and canaries")
    game = _game(ds, spec, device)
    pop = game.pop
    notes: list[str] = []
    m = get_method(spec.method)
    label, family, releases = m.label, m.family, m.releases
    if "batch_size" in m.uses and spec.batch_size > pop.n_train:
        raise ValueError(f"batch_size must be at most {pop.n_train} (each release trains on half of the "
                         f"{pop.size:,} population rows), got {spec.batch_size}")
    if "teachers" in m.uses and spec.teachers > pop.n_train:
        raise ValueError(f"teachers must be at most {pop.n_train} (each release trains on half of the "
                         f"{pop.size:,} population rows), got {spec.teachers}")
    problem = spec.problem(pop.n_train, pop.x.shape[1], pop.classes)
    scale = m.calibrate(PrivacyBudget(spec.epsilon, spec.delta), problem, spec.accounting)
    deterministic = scale.noise == "none"  # the baseline: one release says everything
    prediction = releases in ("logits", "labels")

    # Targets: every row, or (prediction methods with a large B) all canaries plus a subsample.
    targets = torch.arange(pop.size, device=device)
    answers = answers_per_release(spec.method, spec.budget)
    seen = observed(prediction, deterministic, answers, pop.classes, pop.size, spec.canaries, spec.repeats,
                    spec.audit_trials)
    repeats = seen.repeats
    if prediction and repeats < spec.repeats:
        notes.append(f"{repeats} release(s) per world instead of {spec.repeats} (each answers B = {spec.budget:,} "
                     "queries per row)")
    if seen.targets is not None:
        g = torch.Generator(device=device)
        g.manual_seed(derive_seed(spec.seed, "leakage", "targets"))
        ordinary = torch.nonzero(~pop.canary).flatten()
        keep = ordinary[torch.randperm(ordinary.numel(), generator=g, device=device)[: seen.targets - spec.canaries]]
        targets = torch.cat([keep.sort().values, torch.nonzero(pop.canary).flatten()])
        notes.append(f"{targets.numel():,} of {pop.size:,} rows attacked (B = {spec.budget:,} answers each)")
    tx, ty, tcan = pop.x[targets], pop.y[targets], pop.canary[targets]

    # 1. The target releases on each world.
    loss_obs, phi_obs, members, accuracy = [], [], [], float("nan")
    with game.lock:
        for g in range(spec.worlds):
            state["done"] = 1 + g
            tick(f"releasing on world {g + 1} of {spec.worlds}")
            ctx = game.world(g, spec)
            ctx.poll = poll
            logits, theta = observe(spec.method, ctx, scale, repeats, tx)
            loss_obs.append(loss_scores(logits, ty))
            phi_obs.append(confidence(logits, ty))
            members.append(game.masks[g][targets])
            if g == 0:
                if theta is not None:
                    pred = ctx.test_logits(theta).argmax(dim=2)
                    accuracy = float((pred == ctx.y_test).double().mean())
                else:
                    accuracy = float(m.evaluate(ctx, [scale], repeats).mean())

        # 2. The attacker's reference models.
        state["done"] = 1 + spec.worlds
        tick(f"training {spec.references} reference models")
        teachers = spec.teachers if releases == "labels" else None
        ref = game.references(spec.lam, teachers, poll)
        ref_phi = confidence(ref[:, targets], ty)
        stats = out_stats(ref_phi, game.ref_masks[:, targets])

        # 3. The audit: two neighbouring data sets, i.i.d. releases on each.
        state["done"] = 2 + spec.worlds
        tick("auditing: releases with and without the canary")
        trials = seen.trials
        if trials < spec.audit_trials:
            notes.append(f"audit trials capped at {trials} (each needs B = {spec.budget:,} answers)")
        qx, qy = pop.x[game.canary:game.canary + 1], pop.y[game.canary:game.canary + 1]
        ctx_in, ctx_out = game.audit(True, spec), game.audit(False, spec)
        ctx_in.poll = ctx_out.poll = poll
        bound = audit_bound(spec.method, ctx_in, ctx_out, scale, trials, qx, qy, spec.delta, spec.alpha)

    # 4. Attack scores and ROCs.
    attacks = []
    ordinary = ~tcan
    for name, per_world in (("loss", loss_obs), ("lira", [lira_offline_scores(p, stats) for p in phi_obs])):
        ins, outs = zip(*(_split(s[:, ordinary], mb[ordinary]) for s, mb in zip(per_world, members)))
        attacks.append(AttackResult(name, spec.method, roc(torch.cat(ins).cpu().numpy(), torch.cat(outs).cpu().numpy())))
    lira = [lira_offline_scores(p, stats) for p in phi_obs]
    pairs = [_split(s[:, tcan], mb[tcan]) for s, mb in zip(lira, members)]
    ins = torch.cat([p[0] for p in pairs])
    outs = torch.cat([p[1] for p in pairs])
    if ins.numel() and outs.numel():
        attacks.append(AttackResult("canary", spec.method, roc(ins.cpu().numpy(), outs.cpu().numpy())))
    if progress is not None:
        progress(1.0, "done")
    return LeakageResult(
        method=spec.method, label=label, family=family, releases=releases, epsilon=spec.epsilon, delta=spec.delta,
        accounting=spec.accounting, accuracy=accuracy, n_train=pop.n_train, attacks=tuple(attacks), audit=bound,
        noise=scale.to_dict(), seconds=time.perf_counter() - start, device=str(device),
        cached=False, notes=tuple(notes))
