"""Private choice of lambda (``lam = "auto"``): the tuning is paid for out of the row's epsilon.

Choosing lambda on the private data is itself a release. Here it is a differentially private
selection with an explicit budget split (sequential composition, replace-one neighbours):

* ``SELECTION_FRACTION`` of (eps, delta) pays for the choice, the rest for the release at the
  chosen lambda on the full training set; the row's epsilon is the total.
* The training set is split once, by position, with a permutation derived from the seed alone
  (not from the data), into a fitting part (80 %) and a validation part V (20 %). A replaced
  example stays in its part, so the two parts compose in parallel.
* For each of the k candidates in :data:`LAM_AUTO_GRID`: one private release of the method on the
  fitting part at (eps_s / k, delta_s / k), calibrated by the method itself (prediction methods for
  |V| answers, since they answer every validation query). For a fitting example the k releases
  compose to (eps_s, delta_s) (basic composition); the scores below are post-processing of them.
* Score j = accuracy of release j on V, sensitivity 1/|V| to a validation example. Report noisy
  max with Laplace(2 / (|V| eps_s)) noise on each score is eps_s-DP for non-monotone scores of
  that sensitivity (Dwork and Roth 2014, Section 3.3).

So the choice is (eps_s, delta_s)-DP and the whole row (eps, delta)-DP. The choice is drawn once
per (seed, epsilon, method); the repetitions of the release share it.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from typing import Callable

import numpy as np
import torch

from ..data import Dataset
from ..device import make_generator
from ..methods import REGISTRY
from ..types import PrivacyBudget, Problem
from ..context import TrainContext
from .specs import LAM_AUTO_GRID, SweepSpec

__all__ = ["SELECTION_FRACTION", "LAM_AUTO_NOTE", "release_budget", "selection_budget", "choose_lams"]

#: Share of (epsilon, delta) spent on choosing lambda when ``lam = "auto"``.
SELECTION_FRACTION = 0.1
LAM_AUTO_NOTE = (f"lambda chosen privately: {SELECTION_FRACTION:g} of (epsilon, delta) pays for a report-noisy-max "
                 f"choice among {len(LAM_AUTO_GRID)} candidates (each a private release on 80 % of the training data, "
                 "scored on the other 20 %); the release uses the rest; epsilon is the total")


#: The fitting part's training context of the last data set tuned in this process: every method's
#: candidates share it, so the non-private solves and the teachers at each candidate lambda are
#: computed once for all methods (they depend on the data, lambda and T only).
_SUB_CONTEXT: dict[tuple[str, int, str], TrainContext] = {}
_SUB_LOCK = threading.Lock()


def _sub_context(sub: Dataset, problem: Problem, seed: int, device) -> TrainContext:  # noqa: ANN001
    device = torch.device(device)
    key = (sub.fingerprint, int(seed), str(device))
    with _SUB_LOCK:
        known = _SUB_CONTEXT.get(key)
        if known is None:
            known = TrainContext.from_dataset(sub, problem, seed, device)
            _SUB_CONTEXT.clear()
            _SUB_CONTEXT[key] = known
    return known.with_problem(problem)


def release_budget(budget: PrivacyBudget) -> PrivacyBudget:
    """What is left for the release after the selection."""
    return PrivacyBudget(budget.epsilon * (1.0 - SELECTION_FRACTION), budget.delta * (1.0 - SELECTION_FRACTION))


def selection_budget(budget: PrivacyBudget, candidates: int) -> PrivacyBudget:
    """The budget of each candidate's release on the fitting part."""
    return PrivacyBudget(budget.epsilon * SELECTION_FRACTION / candidates,
                         budget.delta * SELECTION_FRACTION / candidates)


def _split(ds: Dataset, seed: int) -> tuple[Dataset, int]:
    """(fitting part with the validation part as its test set, |V|), by a seed-only permutation."""
    rng = np.random.default_rng(seed + 7919)
    perm = rng.permutation(ds.n)
    cut = int(round(0.8 * ds.n))
    tr, va = perm[:cut], perm[cut:]
    sub = Dataset(ds.name + ":auto-lam", ds.x_train[tr], ds.y_train[tr], ds.x_train[va], ds.y_train[va], ds.classes,
                  ds.fingerprint + ":auto-lam", ds.notes)
    return sub, len(va)


def choose_lams(method: str, ds: Dataset, spec: SweepSpec, budgets: list[PrivacyBudget], device,
                make_problem: Callable[[Dataset, float], Problem],
                poll: Callable[[float | None], None] | None = None) -> list[float]:
    """Per budget, the lambda picked by the private selection described in the module docstring."""
    m = REGISTRY[method]
    sub, n_val = _split(ds, spec.seed)
    k = len(LAM_AUTO_GRID)
    scores = np.zeros((len(budgets), k))
    for j, lam in enumerate(LAM_AUTO_GRID):
        problem = make_problem(sub, lam)
        if m.family == "prediction":  # it answers every validation query
            problem = dataclasses.replace(problem, budget=n_val)
        ctx = _sub_context(sub, problem, spec.seed, device)
        ctx.poll = poll
        scales = [m.calibrate(selection_budget(b, k), problem, spec.accounting) for b in budgets]
        scores[:, j] = m.evaluate(ctx, scales, 1)[:, 0].cpu().numpy()
    chosen = []
    for i, b in enumerate(budgets):
        eps_s = b.epsilon * SELECTION_FRACTION
        gen = make_generator(spec.seed, "lam_auto_noisy_max", method, repr(float(b.epsilon)))
        # Laplace(scale) as the difference of two exponentials, drawn from the explicit generator.
        e = torch.empty(2, k, dtype=torch.float64).exponential_(generator=gen).numpy()
        scale = 2.0 / (n_val * eps_s) if math.isfinite(eps_s) else 0.0
        noisy = scores[i] + scale * (e[0] - e[1])
        chosen.append(float(LAM_AUTO_GRID[int(np.argmax(noisy))]))
    return chosen
