"""A tuned comparison: every method at its own best knobs over its declared grid.

Each method declares a small grid of candidate knobs (:attr:`Method.tuning_grid`: lambda for the
ERM methods, T for the vote methods, threshold and noise ratio for Confident-GNMax, k and the
sampling rate for Private-kNN, clip and step size for DP-SGD); the configured values are always
among the candidates. Two variants, labelled on every row they produce (``ResultRow.tuned``):

``held-out``
    The candidate with the best mean test accuracy, per method and epsilon. Picking on the test
    queries' labels, with the private data, without noise: an optimistic upper bound of what
    tuning can give, not a private result.

``private``
    The pick is itself a private release (:func:`privcore.engine.tuning.private_choice`, the
    selection of ``lam = auto`` over the whole grid): on a public 80 / 20 split of the training
    set, each of the k candidates is released once on the fitting part at (eps_s / k, delta_s / k)
    and scored on the validation part; report noisy max picks one. The release at the chosen
    knobs, on the whole training set, gets the rest, (1 - f) (eps, delta) with f =
    ``SELECTION_FRACTION``; by basic composition (replace-one neighbours, the two parts in parallel)
    the row is (eps, delta)-DP in total. The selection's randomness derives from a seed of its own
    (:func:`tuned_seed`), each candidate's from its own label, never from a release's.

Everything runs through :func:`privcore.engine.runner.run_sweep` (cached like any sweep), which
calls :func:`run_tuned` for a spec with ``tuning`` set; the selections are cached as plain numbers.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from typing import Any, Callable

from .. import knobs
from ..data import load_dataset
from ..device import derive_seed, resolve_device, secure_seed
from ..methods import BASELINE, get_method, method_name
from ..types import PrivacyBudget, Problem
from ..validation import check_choice
from .cache import ResultCache, point_key
from ..jobs import JobCancelled, ProgressFn
from .rows import ResultRow, SweepResult
from .specs import TUNING_LABELS, TUNING_MODES, SweepSpec
from .tuning import SELECTION_FRACTION, private_choice, release_budget

__all__ = ["TUNING_MODES", "TUNING_LABELS", "Candidate", "candidates", "run_tuned", "tuned_seed", "estimate_seconds"]

#: How a held-out row's ``tuned`` text starts (then the knobs picked); a private row's starts
#: "private: " and ends with the selection's terms in brackets. TUNING_LABELS say what each means.
HELD_OUT_PREFIX = "best on the test queries (not private): "
#: Knobs of a SweepSpec a grid may set (anything else in a grid is a method parameter).
_SPEC_KNOBS = ("lam", "teachers", "clip", "learning_rate", "batch_size", "epochs")


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One point of a method's grid: its (maybe parameterised) name and the spec knobs it sets."""

    method: str
    knobs: tuple[tuple[str, Any], ...]
    params: tuple[tuple[str, Any], ...]

    def describe(self) -> str:
        """``knob=value, ...`` over every grid knob (spec knobs, then parameters)."""
        return ", ".join(f"{k}={v!r}" for k, v in self.knobs + self.params)  # repr: read back exactly


def candidates(base: str, spec: SweepSpec, n: int | None = None) -> list[Candidate]:
    """The candidates of method ``base`` for ``spec`` (declared grid x the configured values), the
    configured one first; the swept axis (``spec.vary``) is never tuned; candidates the method
    cannot run with ``n`` training examples are left out (N is public)."""
    m = get_method(base)
    grid: dict[str, tuple] = {}
    for knob, values in m.tuning_grid.items():
        if knob == spec.vary or (knob == "lam" and spec.lam == "auto"):
            continue
        now = getattr(spec, knob) if knob in _SPEC_KNOBS else getattr(m, knob)
        grid[knob] = tuple(dict.fromkeys((now, *values)))
    out = []
    for combo in itertools.product(*grid.values()):
        chosen = dict(zip(grid, combo))
        spec_knobs = tuple((k, v) for k, v in chosen.items() if k in _SPEC_KNOBS)
        params = tuple((k, v) for k, v in chosen.items() if k not in _SPEC_KNOBS)
        name = method_name(m.base_name, **dict(params))
        setting = {**{k: getattr(spec, k) for k in _SPEC_KNOBS}, "budget": spec.budget, "delta": spec.delta,
                   **dict(spec_knobs)}
        if get_method(name).unavailable(setting, n) is None:
            out.append(Candidate(name, spec_knobs, params))
    return out


def tuned_seed(seed: int) -> int:
    """The seed of a tuned comparison's private selections: the experiment seed under a label no
    release and no ``lam = auto`` selection uses."""
    return derive_seed(seed, "tuned_selection")


def run_tuned(spec: SweepSpec, tuning: str | None = None, *, progress: ProgressFn | None = None,
              cancel: Callable[[], bool] | None = None, cache: ResultCache | None = None,
              executor: Any = None, run: Callable[..., SweepResult]) -> SweepResult:
    """The rows of ``spec`` with every method at its tuned knobs (see the module docstring).

    Called by :func:`privcore.engine.runner.run_sweep` for a tuned spec, which passes itself as ``run``
    (the sweep of each candidate set; this module imports no runner). ``tuning`` (default:
    ``spec.tuning``) ``= "configured"`` is ``run`` itself; ``executor`` runs every sweep's batches
    (the private selections run in this process). The result's rows keep the spec's method
    names and budgets; ``ResultRow.tuned`` says the variant and the knobs picked."""
    if not isinstance(spec, SweepSpec):
        raise TypeError(f"spec must be a SweepSpec, got {type(spec).__name__}")
    tuning = spec.tuning if tuning is None else tuning
    check_choice("tuning", tuning, TUNING_MODES)
    spec = dataclasses.replace(spec, tuning="configured")  # every sweep below runs as configured
    if tuning == "configured":
        return run(spec, progress=progress, cancel=cancel, cache=cache, executor=executor)
    start = time.perf_counter()
    store = cache if cache is not None else ResultCache()
    result = SweepResult(spec=dataclasses.replace(spec, tuning=tuning))
    if tuning == "held-out":
        runs = _held_out_runs(spec)
    else:
        runs = _private_runs(spec, store, progress, cancel, result)
    for i, (sub, relabel) in enumerate(runs):
        part = run(sub, progress=_scaled(progress, i, len(runs)), cancel=cancel, cache=store, executor=executor)
        result.warnings.extend(w for w in part.warnings if w not in result.warnings)
        result.computed += part.computed
        result.cached += part.cached
        result.device = part.device
        result.rows.extend(relabel(r) for r in part.rows)
    result.rows = _best(result.rows, spec, baseline_only=tuning != "held-out")
    result.seconds = time.perf_counter() - start
    return result


def estimate_seconds(spec: SweepSpec) -> float:
    """Predicted seconds of a tuned ``spec`` by the cost model (cached points cost nothing): the
    candidate sweeps of the held-out variant; for the private one, the candidates at one repetition
    (one release each, on 80 % of the data) and one release per method at the spec's repetitions."""
    from .cost import estimate_spec

    conf = dataclasses.replace(spec, tuning="configured")
    subs = [sub for sub, _ in _held_out_runs(conf)]
    if spec.tuning == "held-out":
        return float(sum(estimate_spec(sub).seconds for sub in subs))
    return float(sum(estimate_spec(dataclasses.replace(sub, repeats=1)).seconds for sub in subs)
                 + estimate_spec(conf).seconds)


# ---------------------------------------------------------------- best on held-out data

def _held_out_runs(spec: SweepSpec) -> list[tuple[SweepSpec, Callable[[ResultRow], ResultRow]]]:
    """One sweep per distinct set of spec knobs that differ from the spec's, with every method
    variant that uses it; the baseline rides with the configured set."""
    groups: dict[tuple, list[tuple[str, Candidate]]] = {}
    n = _train_size(spec)
    for base in spec.methods:
        for c in candidates(base, spec, n):
            changed = tuple((k, v) for k, v in c.knobs if getattr(spec, k) != v)
            groups.setdefault(changed, []).append((base, c))
    runs = []
    if spec.baseline and () not in groups:
        text = HELD_OUT_PREFIX + f"lam={spec.lam!r}" if _tunes_baseline(spec) else None
        runs.append((dataclasses.replace(spec, methods=(spec.methods[0],), baseline=True),
                     _baseline_only(None, None, tuned=text)))
    for changed, members in sorted(groups.items(), key=lambda kv: len(kv[0])):  # the configured set first
        by_name = {c.method: (base, c) for base, c in members}
        sub = dataclasses.replace(spec, methods=tuple(by_name), baseline=spec.baseline and not changed,
                                  **dict(changed))

        def relabel(row: ResultRow, by_name: dict = by_name) -> ResultRow:
            if row.method not in by_name:  # the baseline, at the configured lambda
                return _baseline_text(row, spec)
            base, c = by_name[row.method]
            return dataclasses.replace(row, method=base, tuned=HELD_OUT_PREFIX + c.describe())
        runs.append((sub, relabel))
    return runs + _baseline_lams(spec, None, None)


def _best(rows: list[ResultRow | None], spec: SweepSpec, *, baseline_only: bool = False) -> list[ResultRow]:
    """Per (method, value, epsilon), the row with the best mean accuracy (the first on a tie); with
    ``baseline_only`` for the non-private reference's rows alone (the others pass)."""
    best: dict[tuple, ResultRow] = {}
    rest = []
    for r in rows:
        if r is None:
            continue
        if baseline_only and r.method != BASELINE.name:
            rest.append(r)
            continue
        key = (r.method, repr(r.value), r.epsilon)
        if key not in best or r.accuracy_mean > best[key].accuracy_mean:
            best[key] = r
    return _ordered(rest + list(best.values()), spec)


def _tunes_baseline(spec: SweepSpec) -> bool:
    return spec.baseline and spec.lam != "auto" and spec.vary != "lam" and bool(BASELINE.tuning_grid.get("lam"))


def _baseline_text(row: ResultRow, spec: SweepSpec) -> ResultRow:
    """The reference's row at the configured lambda, labelled as a candidate of its own tuning."""
    if row.method != BASELINE.name or not _tunes_baseline(spec):
        return row
    return dataclasses.replace(row, tuned=HELD_OUT_PREFIX + f"lam={spec.lam!r}")


def _baseline_lams(spec: SweepSpec, vary: str | None, value: Any) -> list[tuple[SweepSpec, Callable]]:
    """The non-private reference at each other lambda of its grid (the configured one rides with a sweep
    already): a tuned chart draws the best non-private model, picked on the test queries. Each sweep carries
    one private method it needs (SweepSpec has at least one): one that ignores lambda (its points are cached
    already), else model sensitivity, which reuses the reference's own solve."""
    if not _tunes_baseline(spec):
        return []
    free = [m for m in spec.methods if "lam" not in get_method(m).uses]
    carrier = free[0] if free else "model_sensitivity"
    return [(dataclasses.replace(spec, methods=(carrier,), baseline=True, lam=lam),
             _baseline_only(vary, value, tuned=HELD_OUT_PREFIX + f"lam={lam!r}"))
            for lam in BASELINE.tuning_grid["lam"] if lam != spec.lam]


# ---------------------------------------------------------------- selected privately

def _private_runs(spec: SweepSpec, store: ResultCache, progress: ProgressFn | None,
                  cancel: Callable[[], bool] | None, result: SweepResult
                  ) -> list[tuple[SweepSpec, Callable[[ResultRow], ResultRow]]]:
    """Choose each method's knobs privately per variant and epsilon, then one release sweep per
    (variant, chosen candidate) at the release budget."""
    runs = []
    variants = spec.variants()
    for value, vspec in variants:
        ds = load_dataset(vspec.data.name, seed=vspec.seed, **vspec.data.load_kwargs())
        n_fit = int(round(0.8 * ds.n))
        budgets = [PrivacyBudget(e, vspec.delta) for e in vspec.epsilons]
        for mi, base in enumerate(spec.methods):
            if cancel is not None and cancel():
                raise JobCancelled("sweep cancelled; finished points are cached")
            if progress is not None:
                progress(0.0, f"choosing {get_method(base).label}'s knobs privately")
            cands = candidates(base, vspec, n_fit)
            if not cands or not get_method(base).supports(vspec.delta):
                continue
            if get_method(base).couples_queries:  # no private selection for it (Method.couples_queries)
                text = ("private: as configured (no private selection for this method: one validation row can "
                        "change its answers to other rows)")
                runs.append((dataclasses.replace(vspec, methods=(base,), baseline=False),
                             _private_relabel(base, {}, vspec.delta, spec.vary, value, text)))
                continue
            if spec.secure_noise:  # each epsilon's selection its own secret seed (no common random numbers)
                picks = [_choose(base, cands, ds, vspec, [b], store, secure_seed())[0] for b in budgets]
            else:
                picks = _choose(base, cands, ds, vspec, budgets, store, None)
            chosen: dict[int, list[float]] = {}
            for e, j in zip(vspec.epsilons, picks):
                chosen.setdefault(j, []).append(e)
            for j, eps in sorted(chosen.items()):
                c = cands[j]
                release = {release_budget(PrivacyBudget(e, vspec.delta)).epsilon: e for e in eps}
                r_delta = release_budget(PrivacyBudget(1.0, vspec.delta)).delta
                sub = dataclasses.replace(vspec, methods=(c.method,), epsilons=tuple(release), delta=r_delta,
                                          baseline=False, **dict(c.knobs))
                text = (f"private: {c.describe()} (chosen among {len(cands)} candidates with {SELECTION_FRACTION:g} "
                        "of (ε, δ); the release used the rest; ε and δ are the totals)")
                runs.append((sub, _private_relabel(base, release, vspec.delta, spec.vary, value, text)))
        if spec.baseline:  # the non-private reference, once per variant: the best over its lambda grid
            text = HELD_OUT_PREFIX + f"lam={vspec.lam!r}" if _tunes_baseline(vspec) else None
            runs.append((dataclasses.replace(vspec, methods=(spec.methods[0],), baseline=True),
                         _baseline_only(spec.vary, value, tuned=text)))
            runs.extend(_baseline_lams(vspec, spec.vary, value))
    return runs


def _choose(base: str, cands: list[Candidate], ds: Any, vspec: SweepSpec, budgets: list[PrivacyBudget],
            store: ResultCache, secret: int | None) -> list[int]:
    """Indices into ``cands`` per budget (cached unless the noise is secret)."""
    point = {"kind": "tuned-selection", "method": base, "candidates": [[c.method, c.describe()] for c in cands],
             "epsilons": ["inf" if math.isinf(b.epsilon) else b.epsilon for b in budgets], "delta": vspec.delta,
             "accounting": vspec.accounting, "seed": vspec.seed, "budget": vspec.budget,
             "fixed": {k: getattr(vspec, k) for k in _SPEC_KNOBS}, "fraction": SELECTION_FRACTION,
             "code": sorted({get_method(c.method).code_version for c in cands})}
    key = point_key(point, ds.fingerprint)
    if secret is None:
        known = store.get(key, _valid_picks(len(cands), len(budgets)))
        if known is not None:
            return [int(j) for j in known["picks"]]
    noise_seed = tuned_seed(vspec.seed) if secret is None else secret
    device = resolve_device(vspec.device)

    def make(c: Candidate) -> Callable[[Any], Problem]:
        return lambda d: _problem(d, dataclasses.replace(vspec, **dict(c.knobs)))
    # paper mode reproduces the paper's calibrations; the paper made no private selection, and a
    # selection calibrated by paper mode would spend more than its share: the candidates use corrected.
    accounting = "corrected" if vspec.accounting == "paper" else vspec.accounting
    picks = private_choice([(get_method(c.method), make(c)) for c in cands], ds, vspec.seed, accounting,
                           budgets, device, noise_seed, lambda j: derive_seed(noise_seed, "candidate", base, j),
                           ("tuned_noisy_max", base), keep=secret is None)
    if secret is None:
        store.put(key, {"picks": [int(j) for j in picks]})
    return picks


def _valid_picks(k: int, e: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        picks = value.get("picks") if isinstance(value, dict) else None
        if (not isinstance(picks, list) or len(picks) != e
                or not all(isinstance(j, int) and 0 <= j < k for j in picks)):
            return "a tuned selection must list one candidate index per epsilon"
        return None
    return check


def _problem(ds: Any, spec: SweepSpec) -> Problem:
    return Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=knobs.fixed_lam(spec.lam), budget=spec.budget,
                   teachers=spec.teachers, batch_size=spec.batch_size, epochs=spec.epochs, clip=spec.clip,
                   learning_rate=spec.learning_rate)


def _private_relabel(base: str, release: dict[float, float], delta: float, vary: str | None, value: Any,
                     text: str) -> Callable[[ResultRow], ResultRow]:
    def relabel(row: ResultRow) -> ResultRow:
        total = release.get(row.epsilon, row.epsilon)
        return dataclasses.replace(row, method=base, epsilon=total, delta=delta, vary=vary, value=value, tuned=text)
    return relabel


def _baseline_only(vary: str | None, value: Any, tuned: str | None = None) -> Callable[[ResultRow], ResultRow | None]:
    """Keeps only the baseline's rows (``vary`` None: as the sweep labelled them), with ``tuned`` as their text."""
    def relabel(row: ResultRow) -> ResultRow | None:
        if row.method != BASELINE.name:
            return None
        row = row if tuned is None else dataclasses.replace(row, tuned=tuned)
        return row if vary is None else dataclasses.replace(row, vary=vary, value=value)
    return relabel


# ---------------------------------------------------------------- helpers

def _train_size(spec: SweepSpec) -> int | None:
    try:
        d = spec.data
        return load_dataset(d.name, seed=spec.seed, **d.load_kwargs()).n
    except (OSError, ValueError):
        return None


def _ordered(rows: list[ResultRow | None], spec: SweepSpec) -> list[ResultRow]:
    """The rows in the spec's method order (baseline last), then by value and epsilon."""
    order = {m: i for i, m in enumerate(spec.methods)}
    values = {repr(v): i for i, v in enumerate(spec.values)} if spec.vary else {}
    kept = [r for r in rows if r is not None]
    return sorted(kept, key=lambda r: (values.get(repr(r.value), 0), order.get(r.method, len(order)), r.epsilon))


def _scaled(progress: ProgressFn | None, i: int, k: int) -> ProgressFn | None:
    if progress is None:
        return None
    return lambda f, text: progress((i + min(max(f, 0.0), 1.0)) / k, text)
