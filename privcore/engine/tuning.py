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

So the choice is (eps_s, delta_s)-DP and the whole row (eps, delta)-DP: the selection and the
release compose sequentially (basic composition), eps_s + eps_r = eps and delta_s + delta_r = delta.
The choice is drawn once per (seed, epsilon, method); the repetitions of the release share it.

Composition needs independent randomness. Every draw of the selection (the k candidate releases,
their teachers' partitions, and the noisy max) comes from generators derived from
:func:`selection_seed`, a seed of its own derived from the experiment seed with a label no release
uses, never from the release's (seed, labels): with the experiment seed itself the candidates' unit
noise would be repetition 0's of the final release. Each candidate derives its own seed from it
(candidate j: label ("candidate", j)), so the k candidates' draws are independent of each other too.
With secure noise (``noise_seed`` given) the selection's seed is a fresh secret one from the
operating system's entropy instead.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from typing import Callable

import numpy as np
import torch

from .. import tails
from ..data import Dataset
from ..device import derive_seed, make_generator
from ..methods import Method, get_method
from ..types import CalibrationError, PrivacyBudget, Problem
from ..context import TrainContext
from .specs import LAM_AUTO_GRID, SweepSpec

__all__ = ["SELECTION_FRACTION", "LAM_AUTO_NOTE", "release_budget", "selection_budget", "selection_seed",
           "choose_lams", "private_choice", "noisy_max_scale",
           "LAM_AUTO_COUPLED_NOTE"]

#: Share of (epsilon, delta) spent on choosing lambda when ``lam = "auto"``.
SELECTION_FRACTION = 0.1
#: Said on the rows of a method that ``lam = auto`` cannot choose for (Method.couples_queries).
LAM_AUTO_COUPLED_NOTE = ("lambda = auto: no private choice for this method (one validation row can change its answers "
                         "to other rows, so the selection's scores would move by more than 1/|V|): it ran at the "
                         "stand-in lambda with the whole budget")
LAM_AUTO_NOTE = (f"lambda chosen privately: {SELECTION_FRACTION:g} of (epsilon, delta) pays for a report-noisy-max "
                 f"choice among {len(LAM_AUTO_GRID)} candidates (each a private release on 80 % of the training data, "
                 "scored on the other 20 %); the release uses the rest; epsilon is the total")


#: The fitting part's training context of the last data set tuned in this process: every method's
#: candidates share it, so the non-private solves and the teachers at each candidate lambda are
#: computed once for all methods (they depend on the data, lambda and T only).
_SUB_CONTEXT: dict[tuple[str, int, str], TrainContext] = {}
_SUB_LOCK = threading.Lock()


def selection_seed(seed: int) -> int:
    """The seed every draw of the private lambda selection derives from: a function of the public
    experiment seed under a label of its own, so no generator of the selection has the (seed,
    labels) of any release's (whose contexts use ``seed`` itself)."""
    return derive_seed(seed, "lam_auto_selection")


def _sub_context(sub: Dataset, problem: Problem, seed: int, device, keep: bool = True) -> TrainContext:  # noqa: ANN001
    device = torch.device(device)
    if not keep:  # a secret seed (secure noise): kept nowhere, not even in this process's memo
        return TrainContext.from_dataset(sub, problem, seed, device)
    key = (sub.fingerprint, int(seed), str(device))
    with _SUB_LOCK:
        known = _SUB_CONTEXT.get(key)
        if known is None:
            known = TrainContext.from_dataset(sub, problem, seed, device)
            _SUB_CONTEXT.clear()
            _SUB_CONTEXT[key] = known
    return known.with_problem(problem)


def live_selection_context(fingerprint: str, seed: int, device: str) -> TrainContext | None:
    """The fitting part's context this process holds for the data set ``fingerprint`` tuned with the
    spec's ``seed`` on ``device`` (what lambda = auto's candidates already trained), or None."""
    with _SUB_LOCK:
        return _SUB_CONTEXT.get((fingerprint + ":auto-lam", selection_seed(seed), str(device)))


def clear_selection_context() -> None:
    """Drop the fitting part's context this process keeps (a released data file's, or a cold benchmark)."""
    with _SUB_LOCK:
        _SUB_CONTEXT.clear()


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


def choose_lams(method: str, ds: Dataset, spec: SweepSpec, budgets: list[PrivacyBudget], device: torch.device,
                make_problem: Callable[[Dataset, float], Problem],
                poll: Callable[[float | None], None] | None = None, noise_seed: int | None = None) -> list[float]:
    """Per budget, the lambda picked by the private selection described in the module docstring.

    Its randomness derives from ``noise_seed`` (secure noise: a secret seed) or, by default, from
    :func:`selection_seed` of the spec's seed; the split into fitting and validation parts is public
    (the spec's seed alone)."""
    m = get_method(method)
    keep = noise_seed is None
    noise_seed = selection_seed(spec.seed) if noise_seed is None else noise_seed
    cands = [(m, (lambda d, lam=lam: make_problem(d, lam))) for lam in LAM_AUTO_GRID]
    picks = private_choice(cands, ds, spec.seed, spec.accounting, budgets, device, noise_seed,
                           lambda j: derive_seed(noise_seed, "candidate", j), ("lam_auto_noisy_max", method), poll, keep)
    return [float(LAM_AUTO_GRID[j]) for j in picks]


def noisy_max_scale(n_val: int, eps_s: float) -> float:
    """Laplace scale of report noisy max over accuracies on ``n_val`` validation rows at ``eps_s``:
    2 Delta / eps_s with Delta = 1 / n_val. The factor 2, not 1: a replaced validation row moves
    the candidates' scores in different directions (not monotone; Dwork and Roth 2014, Section 3.3).
    0 at eps_s = inf (no noise)."""
    return 2.0 / (n_val * eps_s) if math.isfinite(eps_s) else 0.0


def private_choice(candidates: list[tuple[Method, Callable[[Dataset], Problem]]], ds: Dataset, split_seed: int,
                   accounting: str, budgets: list[PrivacyBudget], device: torch.device, noise_seed: int,
                   candidate_seed: Callable[[int], int], max_label: tuple[str, str],
                   poll: Callable[[float | None], None] | None = None, keep: bool = True) -> list[int]:
    """Per budget, the index of the candidate (method, problem on the fitting part) that the private
    selection of the module docstring picks: each candidate one release at (eps_s / k, delta_s / k)
    on the fitting part (a prediction method answering every validation query), scored on the
    validation part; report noisy max with Laplace(2 / (|V| eps_s)). ``noise_seed`` is the
    selection's own seed (its contexts and teachers' partitions), ``candidate_seed(j)`` candidate
    j's, ``max_label`` (label, method) names the noisy max's generator; the split depends on
    ``split_seed`` alone (public)."""
    coupled = sorted({m.base_name for m, _ in candidates if m.couples_queries})
    if coupled:  # report noisy max's 1 / |V| sensitivity needs answers that depend on their own query alone
        raise ValueError(f"{', '.join(coupled)} cannot be selected privately: one validation row can change its "
                         "answers to other validation rows, so its score moves by more than 1/|V|")
    if accounting == "paper":  # a selection's candidates spend what they claim (the paper made no selection)
        accounting = "corrected"
    sub, n_val = _split(ds, split_seed)
    k = len(candidates)
    if k == 0:
        raise ValueError("a private selection needs at least one candidate")
    scores = np.zeros((len(budgets), k))
    base = None
    for j, (m, make_problem) in enumerate(candidates):
        problem = make_problem(sub)
        if m.family == "prediction":  # it answers every validation query
            problem = dataclasses.replace(problem, budget=n_val)
        base = _sub_context(sub, problem, noise_seed, device, keep) if base is None else base.with_problem(problem)
        # Each candidate its own seed too: k releases of one draw Z (theta_j + s_j Z) would not compose
        # (two of them give theta_1 / s_1 - theta_2 / s_2 without noise). The candidates share the
        # fitting part's data-only work (its eigenbasis) and its solves, which are keyed by lambda:
        # each candidate's lambda is its own, so none reads another's.
        ctx = dataclasses.replace(base, seed=candidate_seed(j))
        ctx.poll = poll
        # A candidate its budget share cannot calibrate (a public fact: no data involved) releases
        # nothing and scores 0; the split of the budget stays the same, so the total still holds.
        scales, rows = [], []
        for i, b in enumerate(budgets):
            try:
                scales.append(m.calibrate(selection_budget(b, k), problem, accounting))
                rows.append(i)
            except CalibrationError:
                continue
        if scales:
            scores[rows, j] = m.evaluate(ctx, scales, 1)[:, 0].cpu().numpy()
    chosen = []
    for i, b in enumerate(budgets):
        eps_s = b.epsilon * SELECTION_FRACTION
        gen = make_generator(noise_seed, max_label[0], max_label[1], repr(float(b.epsilon)))
        # Laplace(scale) as the difference of two exponentials, drawn from the explicit generator; tails.exponential
        # reaches any tail (torch's exponential_ stops at 36.7: a candidate trailing further could never win).
        e = tails.exponential((2, k), gen).numpy()
        noisy = scores[i] + noisy_max_scale(n_val, eps_s) * (e[0] - e[1])
        chosen.append(int(np.argmax(noisy)))
    return chosen
