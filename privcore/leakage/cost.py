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

from dataclasses import replace
from typing import Iterable

from ..engine import cost
from ..methods import get_method
from ..methods.base import CostPart, data_work, teacher_part
from .spec import LeakageSpec

__all__ = ["estimate_seconds"]


def _context_parts(problem) -> list[tuple[str, CostPart]]:  # noqa: ANN001 - Problem
    return [("data", CostPart("data", data_work(problem))), ("eig", CostPart("eig", (problem.dim / 784) ** 3))]


def estimate_seconds(specs: Iterable[LeakageSpec], sizes: cost.DataSizes, *, coeffs: dict | None = None) -> float:
    """Predicted seconds of measuring every spec in ``specs`` one after the other (pieces they share
    counted once), on a data set of ``sizes`` (N training rows, D, C): the population is the N rows
    plus the canaries, and each release trains on half of it. Scaled by the machine's load
    (:func:`privcore.engine.cost.slowdown`) like the sweeps' estimates."""
    k = dict(coeffs or cost.coefficients())
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
        n_train = max((sizes.n + spec.canaries) // 2, 1)
        problem = spec.problem(n_train, sizes.dim, sizes.classes)
        game = (spec.data, spec.seed, spec.canaries, spec.worlds, spec.references)
        deterministic = m.family == "baseline"
        contexts = [(("world", g), 1 if deterministic else spec.repeats) for g in range(spec.worlds)]
        contexts += [(("audit", member), 1 if deterministic else spec.audit_trials) for member in (True, False)]
        for where, releases in contexts:
            for name, part in _context_parts(problem):
                add(game + where + (name,), part)
            for part in m.cost_parts(problem, 1, releases):
                add(None if part.shared is None else game + where + part.shared, part)
        # the attacker's reference models: non-private models (or teacher ensembles) on random halves
        teachers = problem.teachers if m.releases == "labels" else 1
        refs = replace(problem, n=n_train * spec.references, teachers=spec.references * teachers)
        add(game + ("references", float(spec.lam), teachers), teacher_part(refs))
    return total * cost.slowdown() / cost.fit_slowdown()
