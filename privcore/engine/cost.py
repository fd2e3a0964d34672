"""How long a sweep will take, before it runs: the engine's own time model.

Each method declares the pieces of compute a batch of its releases needs
(:meth:`privcore.methods.base.Method.cost_parts`: the non-private solve, the T teachers, a batch of
perturbed solves, DP-SGD's epochs, ...), sized relative to a reference piece on mnist-5k and
scaled by N, D, C, lambda (smaller lambda = more solver iterations), T, epochs and the number of
releases (epsilons x repetitions). Every variant adds its context (data to the device, the
eigenbasis of X^T X / N); ``lam = "auto"`` adds the private selection's six candidates on 80 % of
the data. Pieces another method (or an earlier sweep of this process) already paid for are
counted once. Seconds = sum of work x a constant per kind of piece.

The constants are fitted by ``bench/bench_cost.py`` (least squares on relative error over a
design of settings) on the machine that runs the engine: it writes them to
``$PRIVCORE_CACHE/cost_model.json``, which :func:`coefficients` reads; :data:`DEFAULT_COEFFS` are
the ones fitted on the development machine (2 CPU cores). Predictions for a run
(:func:`estimate_spec`) scale with the machine's load now against the load during the fit
(:func:`slowdown`: the speed of the threads the run will get, :mod:`privcore.threads`), since other
jobs stretch every piece alike. The dashboard shows the estimate before
a run, asks for an explicit click above :data:`THRESHOLD_SECONDS`, and the runner weights its
progress fraction by it so the ETA follows the same model.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from .. import knobs, threads
from ..methods import BASELINE, get_method
from ..methods.base import CostPart, data_work
from ..types import Problem
from .specs import LAM_AUTO_GRID, SweepSpec

if TYPE_CHECKING:
    from .plan import SweepPlan

__all__ = ["DEFAULT_COEFFS", "MEASURED_KINDS", "THRESHOLD_SECONDS", "threshold_seconds", "DataSizes", "Estimate", "estimate", "coefficients",
           "coefficients_path", "save_coefficients", "slowdown", "fit_slowdown", "DEFAULT_FIT_SLOWDOWN", "data_sizes", "variant_sizes", "plan_state", "estimate_plan", "estimate_spec", "eta"]

#: Seconds per unit of work of each kind of piece, fitted by ``bench/bench_cost.py --write`` on the 2-core
#: development machine when idle (OMP_NUM_THREADS=1), rescaled to a median predicted/measured ratio of 1.
#: "augment" is a guess, not fitted; "answers" (the B answers of a teacher vote), which that fit's runs
#: cannot identify, keeps an earlier fit's value.
DEFAULT_COEFFS: dict[str, float] = {
    "fixed": 0.0, "data": 0.0, "eig": 0.2531, "solve": 0.16, "perturbed": 1.037, "teachers": 0.2069,
    "sgd": 0.5402, "sgd_batch": 0.2713, "sgd_steps": 0.2689, "student": 0.185, "answers": 0.018, "augment": 1.0,
    # "solve": measured alone by bench/bench_solve_cost.py (warm non-private solves; a joint fit would carry
    # the process's first solve, priced apart as FIRST_SOLVE_S).
    # "sgd", "sgd_batch", "sgd_steps": measured alone by bench/bench_dpsgd_cost.py (DP-SGD over epochs x batch
    # x epsilons): the joint fit, rescaled over every method's runs, puts DP-SGD's constants too low.
    # Also measured directly, not fitted (bench_cost's runs are warm and single-point): seconds per DP-SGD
    # PLD calibration per epsilon, per Confident-GNMax data-dependent epsilon, and per second of a one-time
    # import
    "calibrate": 0.05, "pate_dd": 0.085, "import": 1.0,
    # "knn": Private-kNN's neighbour votes of the test queries, per repetition and unit of data work,
    # measured per method by bench/bench_estimates.py --only methods (docs/benchmarks.md); it was priced
    # as a twentieth of a solve, 30x too cheap.
    "knn": 0.42,
}
#: CPU seconds the first solve of a process takes beyond the same solve once warm (mnist-5k, lambda = 1e-3;
#: bench/bench_solve_cost.py measures it), priced as a one-time "import".
FIRST_SOLVE_S = 0.15
#: Pieces only a release pays, not lambda = auto's candidates (scored by ``evaluate``, without
#: :meth:`~privcore.methods.base.Method.extra_results`): Confident-GNMax's data-dependent epsilon.
RELEASE_ONLY_KINDS: tuple[str, ...] = ("pate_dd",)
#: The kinds above that are measured directly: bench/bench_cost.py subtracts them and fits the rest.
MEASURED_KINDS: tuple[str, ...] = ("calibrate", "pate_dd", "import", "solve", "sgd", "sgd_batch", "sgd_steps", "knn")
#: How much slower than one thread on an idle machine the fit's runs went while :data:`DEFAULT_COEFFS`
#: were fitted (:func:`slowdown`: 1.0 at OMP_NUM_THREADS=1 on the quiet machine).
DEFAULT_FIT_SLOWDOWN = 1.0
#: Above this estimate the dashboard waits for an explicit "Compute" click (the first view of
#: mnist-5k, about 15 s cold on 2 loaded cores, starts by itself; the curves at lambda = 1e-6,
#: lambda = auto or 50 DP-SGD epochs wait). ``PRIVCORE_COMPUTE_THRESHOLD_S`` changes it (see :func:`threshold_seconds`).
THRESHOLD_SECONDS = 20.0


def threshold_seconds() -> float:
    """:data:`THRESHOLD_SECONDS`, or the environment variable ``PRIVCORE_COMPUTE_THRESHOLD_S``."""
    text = os.environ.get("PRIVCORE_COMPUTE_THRESHOLD_S", "").strip()
    if not text:
        return THRESHOLD_SECONDS
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"environment variable PRIVCORE_COMPUTE_THRESHOLD_S must be a number of seconds >= 0, "
                         f"got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"environment variable PRIVCORE_COMPUTE_THRESHOLD_S must be a number of seconds >= 0, "
                         f"got {text!r}")
    return value


@dataclass(frozen=True)
class DataSizes:
    """The full training split of a data set: N, D, C (what ``n``/``dim``/``classes`` = None mean), and
    the test split's rows."""

    n: int
    dim: int
    classes: int
    #: Rows of the test split (the queries a prediction method's accuracy answers).
    test_rows: int = 1000


@dataclass
class Estimate:
    """Predicted seconds in all, and per job (variant index, method) in the runner's order."""

    seconds: float
    jobs: dict[tuple[int, str], float] = field(default_factory=dict)


def coefficients_path() -> Path:
    from .cache import default_results_dir

    return default_results_dir().parent / "cost_model.json"


_WARNED: set[str] = set()


def model_file() -> dict[str, Any]:
    """The calibration file's JSON object; {} when absent, and {} with one warning when damaged."""
    path = coefficients_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as exc:  # unreadable, not JSON, or nested beyond json's reach
        data = exc
    if not isinstance(data, dict):
        _warn_once(f"ignoring the time model's constants in {path.name}: not a JSON object written by "
                   "bench/bench_cost.py (the built-in constants are used)")
        return {}
    return data


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        import warnings

        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _finite(value: Any) -> float | None:
    """``value`` as a finite float, or None (a bool, a string, an integer beyond float range, inf)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


def coefficients(model: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The constants: :data:`DEFAULT_COEFFS`, updated by this machine's calibration file if any
    (entries that are not finite numbers >= 0 are ignored, with one warning). ``model``: the file's
    object already read (:func:`model_file`), so one estimate reads the file once."""
    out = dict(DEFAULT_COEFFS)
    given = (model_file() if model is None else model).get("coefficients", {})
    if not isinstance(given, dict):
        given = {"coefficients": given}
    bad = []
    for k, v in given.items():
        value = _finite(v)
        if k in out and value is not None and value >= 0:
            out[k] = value
        else:
            bad.append(str(k)[:40])
    if bad:
        _warn_once(f"ignoring {len(bad)} entries of the time model's constants in {coefficients_path().name} "
                   f"({', '.join(bad[:5])}): unknown names or not numbers >= 0")
    return out


def save_coefficients(coeffs: Mapping[str, float], note: str = "", fit_slowdown: float = 1.0) -> Path:
    """Write this machine's constants (bench/bench_cost.py) where :func:`coefficients` reads them,
    with the :func:`slowdown` the machine had while they were measured."""
    path = coefficients_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"coefficients": dict(coeffs), "slowdown": float(fit_slowdown), "note": note}, indent=1))
    return path


def fit_slowdown(model: Mapping[str, Any] | None = None) -> float:
    """The :func:`slowdown` under which the constants in use were measured (``model`` as for
    :func:`coefficients`)."""
    value = _finite((model_file() if model is None else model).get("slowdown", DEFAULT_FIT_SLOWDOWN))
    return value if value is not None and value > 0.0 else DEFAULT_FIT_SLOWDOWN


def slowdown() -> float:
    """How much longer than one thread on an idle machine a run takes now: 1 / :func:`privcore.threads.speed`
    of the threads it will use (:func:`privcore.threads.planned_threads`, the cores other jobs leave
    free) beside the other jobs runnable now (:func:`privcore.threads.others_load`). Below 1 on an idle
    machine with several cores. ``PRIVCORE_SLOWDOWN`` (a number > 0) fixes it instead, e.g. in a
    container whose load average counts the host's jobs."""
    fixed = os.environ.get("PRIVCORE_SLOWDOWN")
    if fixed:
        try:
            value = float(fixed)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0.0):
            raise ValueError(f"PRIVCORE_SLOWDOWN must be a number > 0, got {fixed!r}")
        return value
    cores = os.cpu_count() or 1
    others = threads.others_load()
    return 1.0 / threads.speed(threads.planned_threads(cores, others), others, cores)


def variant_sizes(spec: SweepSpec, sizes: DataSizes) -> tuple[int, int, int, int]:
    """(N, D, C, real N) of one variant's data: classes keep ~C/C_full of the rows; N above the
    real rows is augmentation."""
    d = spec.data
    c = int(d.classes or sizes.classes)
    available = int(round(sizes.n * c / sizes.classes))
    n = int(d.n) if d.n is not None else available
    if not d.augment:
        n = min(n, available)
    dim = int(min(d.dim or sizes.dim, sizes.dim))
    return n, dim, c, available


def _problem(spec: SweepSpec, n: int, dim: int, c: int, lam: float) -> Problem:
    return Problem(n=max(n, 1), dim=dim, classes=c, lam=lam, budget=spec.budget, teachers=min(spec.teachers, max(n, 1)),
                   batch_size=min(spec.batch_size, max(n, 1)), epochs=spec.epochs, clip=spec.clip,
                   learning_rate=spec.learning_rate)


def _parts(method: str, spec: SweepSpec, problem: Problem, points: int) -> list[tuple[tuple | None, CostPart]]:
    """(dedupe key or None, piece) of one method's batch, lambda = auto's selection included."""
    m = get_method(method)
    if not (spec.lam == "auto" and "lam" in m.uses and m.family != "baseline"):
        parts = m.cost_parts(problem, points, spec.repeats)
        if m.calibration_stored(spec.epsilons, spec.delta, problem, spec.accounting):  # read, not computed
            parts = [p for p in parts if p.kind not in ("calibrate", "import")]
        return [(p.shared, p) for p in parts]
    sub_n = max(int(round(0.8 * problem.n)), 1)
    n_val = max(problem.n - sub_n, 1)
    out: list[tuple[tuple | None, CostPart]] = [
        (("auto", "data"), CostPart("data", data_work(replace(problem, n=sub_n)))),
        (("auto", "eig"), CostPart("eig", (problem.dim / 784) ** 3))]
    for lam in LAM_AUTO_GRID:  # one private release per candidate, R = 1, on the fitting part
        cand = replace(problem, n=sub_n, lam=lam, teachers=min(problem.teachers, sub_n),
                       batch_size=min(problem.batch_size, sub_n),
                       budget=n_val if m.family == "prediction" else problem.budget)
        out += [(None if p.shared is None else ("auto",) + p.shared, p) for p in m.cost_parts(cand, points, 1)
                if p.kind not in RELEASE_ONLY_KINDS]
    # The release at the chosen lambda: not known before the run, and each epsilon chooses its own
    # (noisy selection: Explore's 7-epsilon curve chose 3-5 different lambdas per method,
    # bench/bench_cost_pieces.py --only lam_auto). Expected cost: ``groups`` distinct choices among the
    # points, each one of the candidates with equal chance, each group paying its own full-data pieces
    # (non-private solve, teachers) for its share of the points.
    k = len(LAM_AUTO_GRID)
    groups = k * (1.0 - (1.0 - 1.0 / k) ** points)
    for lam in LAM_AUTO_GRID:
        final = replace(problem, lam=lam)
        out += [(None if p.shared is None else ("auto-final", method) + p.shared, CostPart(p.kind, p.work * groups / k))
                for p in m.cost_parts(final, points / groups, spec.repeats)]
    return out


def _solver_warm() -> bool:
    """Whether this process has run a solve (the first one pays :data:`FIRST_SOLVE_S` more)."""
    solver = sys.modules.get("privcore.solver")
    return bool(getattr(solver, "SOLVES_RUN", 0))


def estimate(spec: SweepSpec, sizes: DataSizes, *, missing: Mapping[tuple[int, str], int] | None = None,
             warm: Mapping[int, set] | None = None, coeffs: Mapping[str, float] | None = None) -> Estimate:
    """Predicted seconds of ``run_sweep(spec)``.

    ``missing``: (variant index, method) -> epsilons not cached (default: none cached); ``warm``:
    variant index -> shared pieces this process already holds (a :class:`~privcore.engine.plan.SweepPlan`'s
    ``missing()`` and ``warm``: see :func:`estimate_plan`).
    """
    jobs = []
    for vi, (_, vspec) in enumerate(spec.variants()):
        methods = list(vspec.methods) + ([BASELINE.name] if vspec.baseline else [])
        for method in methods:
            if missing is None:  # a method that ignores the varied knob computes its points once
                same = vi > 0 and spec.vary in ("budget", "teachers", "lam") and spec.vary not in get_method(method).uses
                todo = 0 if same else (1 if method == BASELINE.name else len(vspec.epsilons))
            else:
                todo = int(missing.get((vi, method), 0))
            jobs.append((vi, vspec, method, todo))
    return _estimate_jobs(jobs, sizes, warm or {}, dict(coeffs or coefficients()), knobs.fixed_lam(spec.lam))


def _estimate_jobs(jobs: list[tuple[int, SweepSpec, str, int]], sizes: DataSizes, warm: Mapping[int, set],
                   k: Mapping[str, float], fixed_lam: float) -> Estimate:
    """Seconds of (variant index, variant spec, method, points to compute) jobs in the runner's order:
    each variant's context is paid by its first job with work, a shared piece once per data set.
    ``fixed_lam``: the sweep's lambda, which sizes every variant's problem."""
    out = Estimate(0.0)
    held: dict[Any, set] = {}  # shared pieces per data set: variants of B, delta, lambda or T share them
    variant, context, problem = -1, [], None
    for vi, vspec, method, todo in jobs:
        if vi != variant:
            variant = vi
            n, dim, c, real = variant_sizes(vspec, sizes)
            problem = _problem(vspec, n, dim, c, fixed_lam)
            seen = held.setdefault(vspec.data, set())
            seen.update(warm.get(vi, set()))
            context = [(("ctx", "data"), CostPart("data", data_work(problem))),
                       (("ctx", "eig"), CostPart("eig", (dim / 784) ** 3))]
            if not _solver_warm():  # the process's first solve (kernels, buffers): once, whatever the data
                context.append((("process", "first_solve"), CostPart("import", FIRST_SOLVE_S)))
            if n > real:  # deformed copies built once per N
                context.append((("ctx", "augment"), CostPart("augment", (n - real) * dim / (1000 * 784))))
        if todo <= 0 or not get_method(method).supports(vspec.delta):
            out.jobs[(vi, method)] = 0.0
            continue
        seconds = 0.0
        for key, part in context + _parts(method, vspec, problem, todo):
            if key is not None:
                if key in seen:
                    continue
                seen.add(key)
            seconds += k.get(part.kind, 0.0) * part.work
        context = []
        out.jobs[(vi, method)] = seconds
        out.seconds += seconds
    return out


def data_sizes(spec: SweepSpec) -> DataSizes:
    """N, D, C of the spec's data set before any transform (loads it, memoised by the loader)."""
    from ..data import load_dataset

    ds = load_dataset(spec.data.name, data_file=spec.data.data_file, seed=spec.seed)
    return DataSizes(int(ds.n), int(ds.dim), int(ds.classes), int(ds.x_test.shape[0]))


def plan_state(spec: SweepSpec, cache: Any = None) -> tuple[dict[tuple[int, str], int], dict[int, set]]:
    """(missing, warm) for :func:`estimate`, from the spec's plan (:func:`privcore.engine.plan.make_plan`)."""
    from .plan import make_plan

    plan = make_plan(spec, cache)
    return plan.missing(), plan.warm


def estimate_plan(plan: SweepPlan, *, sizes: DataSizes | None = None) -> Estimate:
    """Predicted seconds of running ``plan`` now (what it found missing, the pieces the process
    holds), scaled by the machine's load now against the load of the calibration (:func:`slowdown`).
    Made once per plan (kept in ``plan.estimate``)."""
    if plan.estimate is not None and sizes is None:  # the page's estimate is the run's
        return plan.estimate
    jobs = [(j.variant, j.vspec, j.method, len(j.missing)) for j in plan.jobs]
    model = model_file()
    est = _estimate_jobs(jobs, sizes or data_sizes(plan.spec), plan.warm, coefficients(model),
                         knobs.fixed_lam(plan.spec.lam))
    scale = slowdown() / fit_slowdown(model)
    out = Estimate(est.seconds * scale, {k: v * scale for k, v in est.jobs.items()})
    if sizes is None:
        plan.estimate = out
    return out


def estimate_spec(spec: SweepSpec, cache: Any = None, *, sizes: DataSizes | None = None) -> Estimate:
    """:func:`estimate_plan` of the spec's plan against ``cache`` (default: the results cache)."""
    from .plan import make_plan

    return estimate_plan(make_plan(spec, cache), sizes=sizes)


def eta(predicted: float, fraction: float, elapsed: float) -> float:
    """Seconds left of a run predicted to take ``predicted`` seconds, ``fraction`` of its predicted
    work done after ``elapsed`` seconds: the model's remaining time, scaled by the speed observed so
    far (trusted more as the run advances: as much as the share done).

    The trust grows with the share itself, no faster: the speed observed on the first jobs says
    less about the last ones than it seems (single jobs can be mispredicted, and a pace taken from an
    under-predicted solve would make the ETA run long late in the run). ``bench/bench_cold_updates.py
    --trace`` compares this trust with faster ones on the same traces."""
    fraction = min(max(float(fraction), 0.0), 1.0)
    if fraction >= 1.0:
        return 0.0
    if fraction <= 0.0 or predicted <= 0.0:
        return max(predicted - elapsed, 0.0)
    speed = elapsed / (predicted * fraction)  # > 1: slower than predicted
    trust = fraction
    return predicted * (1.0 - fraction) * ((1.0 - trust) + trust * speed)
