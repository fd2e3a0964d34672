"""Predicted seconds of leakage measurements, from the engine's time model (:mod:`privcore.engine.cost`).

A measurement (:func:`privcore.leakage.run_leakage`) releases on ``worlds`` random halves of the
population (``repeats`` releases each), trains ``references`` non-private models (or teacher
ensembles, for label-releasing methods) for offline LiRA, and releases ``audit_trials`` times on each
of two neighbouring data sets. Each of those data sets is its own training context, so its shared
pieces (data, eigenbasis, non-private solve, teachers) are paid once per context; the worlds, the
references and the audit contexts are shared by every method measured in the same session. This
module sums the methods' own :meth:`~privcore.methods.base.Method.cost_parts` over those contexts,
priced with the same constants as the sweeps. No torch, no Streamlit.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Iterable

from ..engine import cost
from ..engine.specs import SweepSpec
from ..methods import get_method
from ..methods.base import CostPart, data_work, teacher_part
from .sizes import answers_per_release, observed
from .spec import LeakageSpec

__all__ = ["estimate_seconds"]


def _context_parts(problem) -> list[tuple[str, CostPart]]:  # noqa: ANN001 - Problem
    return [("data", CostPart("data", data_work(problem))), ("eig", CostPart("eig", (problem.dim / 784) ** 3))]


def _built(spec: LeakageSpec) -> set[tuple]:
    """:func:`privcore.leakage.run.warm_pieces` where the measurement module is loaded (else nothing is
    built: no game was played in this process)."""
    run = sys.modules.get("privcore.leakage.run")
    if run is None:
        return set()
    try:
        return run.warm_pieces(spec)
    except (ValueError, RuntimeError, OSError):  # data that cannot be loaded: price everything
        return set()


def estimate_seconds(specs: Iterable[LeakageSpec], sizes: cost.DataSizes, *, coeffs: dict | None = None) -> float:
    """Predicted seconds of measuring every spec in ``specs`` one after the other (pieces they share
    counted once), on a data set of ``sizes`` (N training rows, D, C): the population is the N rows
    plus the canaries, and each release trains on half of it. Scaled by the machine's load
    (:func:`privcore.engine.cost.slowdown`) like the sweeps' estimates."""
    model = cost.model_file()
    k = dict(coeffs or cost.coefficients(model))
    seen: set = set()
    total = 0.0

    def add(key: tuple | None, part: CostPart) -> None:
        nonlocal total
        if key is not None:
            if key in seen:
                return
            seen.add(key)
        total += k.get(part.kind, 0.0) * part.work

    for spec in specs:
        m = get_method(spec.method)
        game = (spec.data, spec.seed, spec.canaries, spec.worlds, spec.references)
        for piece in _built(spec):  # what an earlier measurement of this process left (the page's quick part)
            if piece[0] == "references":
                seen.add(game + piece)
            else:
                seen.update(game + piece + (name,) for name in ("data", "eig"))
        # The data the spec loads (its N: a subsample, or grown by augmentation; its C and D), not the raw set's.
        n, dim, classes, _ = cost.variant_sizes(SweepSpec(data=spec.data, seed=spec.seed), sizes)
        population = n + spec.canaries
        n_train = max(population // 2, 1)
        problem = spec.problem(n_train, dim, classes)
        prediction = m.releases in ("logits", "labels")
        answers = answers_per_release(spec.method, spec.budget)
        obs = observed(prediction, m.family == "baseline", answers, classes, population, spec.canaries,
                        spec.repeats, spec.audit_trials)
        rows = population if obs.targets is None else obs.targets
        test = max(sizes.test_rows, 1)

        def per_release(query_rows: int, evaluate: bool, share: float) -> float:
            """Test-set answers one release is worth to a query piece: B answers about ``query_rows``
            rows each (and the accuracy's answer of the test set on the first world)."""
            return answers * ((1.0 - share) + share * query_rows / test) + evaluate

        contexts = [(("world", g), obs.repeats, rows, g == 0) for g in range(spec.worlds)]
        contexts += [(("audit", member), obs.trials, 1, False) for member in (True, False)]
        for where, releases, query_rows, evaluate in contexts:
            for name, part in _context_parts(problem):
                add(game + where + (name,), part)
            for part in m.cost_parts(problem, 1, releases):
                if part.query_share is not None and prediction:
                    part = replace(part, work=part.work * per_release(query_rows, evaluate, part.query_share))
                add(None if part.shared is None else game + where + part.shared, part)
        # the attacker's reference models: non-private models (or teacher ensembles) on random halves
        if m.releases == "labels":  # K ensembles of T teachers on a half each: K times one ensemble's solves
            # (one solve of K x T small problems was priced as one ensemble of K x T teachers, a T-power
            # fitted up to T = 100: 8x the measured time at K = T = 16)
            teachers, part = problem.teachers, teacher_part(problem)
            part = replace(part, work=part.work * spec.references)
        else:  # K non-private models, one on each half, solved together
            teachers = 1
            part = teacher_part(replace(problem, n=n_train * spec.references, teachers=spec.references))
        add(game + ("references", float(spec.lam), teachers), part)
    return total * cost.slowdown() / cost.fit_slowdown(model)
