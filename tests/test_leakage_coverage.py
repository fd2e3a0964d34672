"""The Measured-leakage audit compares one release with one claim, and its 95 %
bound holds: a correct method is called unsound in at most about 5 % of independent audits.

* One trial is one release the claim covers. Sparse vector: a row's B answers come from *one*
  stream of B queries (at most c paid answers, then abstentions), not from B one-query streams.
  PATE student: one student per trial, not B separately trained students. Each check is shown to
  fail on the old grouping (B releases per trial), as the known-bad canaries of
  tests/test_privacy_audits.py are.
* Coverage: for every method, AUDITS independent audits of the page's own procedure
  (privcore.leakage.run.audit_scores: observe, the confidence score, then the Clopper-Pearson bound
  at 95 %) on the worst-case canaries of tests/audit_canaries.py. A sound method reports
  eps_lower > eps with probability at most 5 % per audit, so its violation count is at most
  binomial(AUDITS, 0.05), which exceeds ``violation_limit(AUDITS)`` with probability < 1e-3 (the
  test is not flaky). A known-bad variant (S&A as published: beta = eps / B, really 2 eps) exceeds
  the limit: the test can fail.

The independent audits are consecutive blocks of repetitions of one batched run (every repetition
draws from its own generator), so the teachers and students are set up once per method.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import binom

from audit_canaries import audit_problem, canary_data, vote_data
from privcore.context import TrainContext
from privcore.leakage.run import audit_scores
from privcore.leakage.stats import clopper_pearson, epsilon_from_rates, epsilon_lower_bound
from privcore.methods import get_method
from privcore.methods.base import Method
from privcore.methods.pate_student import PUBLIC_LABELS
from privcore.methods.teachers import TeacherVoteMethod
from privcore.types import NoiseScale, PrivacyBudget, Problem

ALPHA = 0.05  # the page's 95 % level
AUDITS = 40
SEED = 29


def violation_limit(audits: int, level: float = ALPHA, tail: float = 1e-3) -> int:
    """The largest violation count a sound procedure (violation probability <= ``level`` per audit)
    reaches with probability >= 1 - ``tail``: P(binomial(audits, level) > limit) < tail."""
    return next(k for k in range(audits + 1) if binom.sf(k, audits, level) < tail)


def _contexts(method: str, problem: Problem, ones: int | None, seed: int = SEED):
    """(ctx_in, ctx_out, query x [1, D], query label [1]) as the page builds them: ``in`` holds the
    canary (x, y), ``out`` the same x with the next label; one seed for both (the page's common
    random numbers). Teacher-vote methods: the canary is teacher ``ones``'s example (label 1 in, 0 out)."""
    if isinstance(get_method(method), TeacherVoteMethod):
        x, y_out, y_in = vote_data(problem.n, ones)
        qy = torch.tensor([1])
    else:
        x, y_in, y_out = canary_data(problem.n - 1)
        qy = torch.tensor([0])
    # The student buys its labels for public rows of the test set: there all are the canary.
    xt = x[-1:].repeat(2 * PUBLIC_LABELS, 1) if method == "pate_student" else x[-1:].clone()
    yt = torch.zeros(xt.shape[0], dtype=torch.int64)

    def make(y: torch.Tensor) -> TrainContext:
        return TrainContext(x, y, xt, yt, problem.classes, problem, seed, torch.device("cpu"))

    return make(y_in), make(y_out), x[-1:].clone(), qy


def audit_lowers(method: str, scale: NoiseScale, problem: Problem, trials: int, audits: int,
                 ones: int | None = None) -> np.ndarray:
    """eps_lower of ``audits`` independent audits of ``trials`` releases per data set each."""
    ctx_in, ctx_out, qx, qy = _contexts(method, problem, ones)
    s_in, s_out = audit_scores(method, ctx_in, ctx_out, scale, audits * trials, qx, qy)
    return np.array([epsilon_lower_bound(s_in[k * trials:(k + 1) * trials], s_out[k * trials:(k + 1) * trials],
                                         scale.delta, ALPHA).lower for k in range(audits)])


def _largest_bound(trials: int, delta: float) -> float:
    """The largest eps_lower ``trials`` trials per side can certify (no error on the evaluation half)."""
    hi = clopper_pearson(0, trials // 2, ALPHA)[1]
    return epsilon_from_rates(hi, hi, delta)


# ------------------------------------------------------------------ one trial is one release


def _tie_setting(method: str, budget: int) -> tuple[TrainContext, NoiseScale, torch.Tensor]:
    """T = 10 one-example teachers split 5:5 at the query (always unstable, each label a coin toss)."""
    problem = audit_problem(method, budget=budget)
    ctx, _, qx, _ = _contexts(method, problem, ones=5)
    scale = get_method(method).calibrate(PrivacyBudget(2.0, 1e-3), problem, "corrected")
    return ctx, scale, qx


def _one_stream(answers: torch.Tensor, cap: int) -> bool:
    """Whether every trial's B answers [R, B, M] about an always-unstable query are one stream: it
    pays for ``cap`` of them and abstains on the rest."""
    return bool(((answers >= 0).sum(dim=1) == cap).all())


def _one_student(answers: torch.Tensor) -> bool:
    """Whether every trial's answers [R, A, M] come from one student: they all agree."""
    return bool((answers == answers[:, :1]).all())


def test_sparse_vector_trial_is_one_stream_of_b_queries(monkeypatch):
    from privcore.methods.sparse_vector import svt_cap

    b = 8
    ctx, scale, qx = _tie_setting("sparse_vector", b)
    m = get_method("sparse_vector")
    answers = m.query_answers(ctx, [scale], 64, qx)[0]
    assert answers.shape == (64, b, 1)
    assert _one_stream(answers, svt_cap(b))
    # Known bad, the old grouping: B one-query streams, each (eps, delta)-DP, all answered.
    monkeypatch.setattr(type(m), "query_answers", Method.query_answers)
    assert not _one_stream(m.query_answers(ctx, [scale], 64, qx)[0], svt_cap(b))


def test_pate_student_trial_is_one_student(monkeypatch):
    ctx, scale, qx = _tie_setting("pate_student", 8)
    m = get_method("pate_student")
    answers = m.query_answers(ctx, [scale], 32, qx)[0]
    assert answers.shape == (32, 1, 1)  # one student answers any number of queries alike
    assert torch.equal(answers[:, 0], m.release(ctx, [scale], 32, qx)[0])
    # Known bad, the old grouping: B separately trained students per trial (B releases).
    monkeypatch.setattr(type(m), "query_answers", Method.query_answers)
    old = m.query_answers(ctx, [scale], 32, qx)[0]
    assert old.shape == (32, 8, 1) and not _one_student(old)


def test_other_methods_answer_b_queries_of_one_guarantee():
    """S&A, Confident-GNMax and prediction sensitivity answer each query with its own noise: B
    one-query runs are the B queries their calibration covers (the default grouping)."""
    for name in ("subsample_aggregate", "confident_gnmax", "prediction_sensitivity"):
        m = get_method(name)
        assert type(m).query_answers is Method.query_answers and m.uses_budget, name
    for name in ("model_sensitivity", "loss_perturbation", "dpsgd"):
        with pytest.raises(TypeError, match="releases a model"):
            get_method(name).query_answers(None, [], 1, torch.zeros(1, 1))


def test_answers_per_release_matches_the_grouping():
    """The runner's caps count answers_per_release answers per row and release: what query_answers gives."""
    from privcore.leakage.run import answers_per_release
    from privcore.methods import REGISTRY

    for name, m in REGISTRY.items():
        if m.releases == "model":
            continue
        problem = audit_problem(name, budget=3)
        ctx, _, qx, _ = _contexts(name, problem, ones=2 if isinstance(m, TeacherVoteMethod) else None)
        scale = m.calibrate(PrivacyBudget(1.0, 1e-3), problem, "corrected")
        assert m.query_answers(ctx, [scale], 2, qx).shape[2] == answers_per_release(name, 3), name


def test_violation_limit():
    assert violation_limit(40) == 7 and violation_limit(12) == 4
    assert binom.sf(violation_limit(40), 40, 0.05) < 1e-3 <= binom.sf(violation_limit(40) - 1, 40, 0.05)


# ------------------------------------------------------------------ coverage of the 95 % bound

# method, accounting, (eps, delta), problem overrides, teachers' votes for class 1 (in: one more), trials
COVERAGE = [
    ("model_sensitivity", "corrected", (1.0, 0.0), {}, None, 128),
    ("prediction_sensitivity", "tight", (1.0, 1e-3), {"budget": 4}, None, 128),
    ("loss_perturbation", "corrected", (1.0, 0.0), {}, None, 64),
    ("dpsgd", "corrected", (1.0, 1e-3), {}, None, 128),
    ("subsample_aggregate", "corrected", (1.0, 0.0), {"budget": 2}, 3, 256),
    ("confident_gnmax", "corrected", (1.0, 1e-3), {"budget": 2}, 1, 256),
    # T = 120 teachers, votes 110:10 (d = 49) against 109:11 (d = 48) around the threshold w = 48.96.
    ("sparse_vector", "corrected", (2.0, 1e-3), {"budget": 4, "n": 120, "teachers": 120}, 10, 128),
    ("pate_student", "tight", (1.0, 1e-3), {}, 2, 64),
]


@pytest.mark.slow
@pytest.mark.parametrize("method,accounting,budget,overrides,ones,trials", COVERAGE, ids=[c[0] for c in COVERAGE])
def test_sound_method_violates_in_at_most_5_percent_of_audits(method, accounting, budget, overrides, ones, trials):
    eps, delta = budget
    assert _largest_bound(trials, delta) > eps  # these trials could certify a violation: the test can fail
    problem = audit_problem(method, **overrides)
    scale = get_method(method).calibrate(PrivacyBudget(eps, delta), problem, accounting)
    lowers = audit_lowers(method, scale, problem, trials, AUDITS, ones)
    print(f"\n[coverage] {method} {accounting} ({eps:g}, {delta:g}): {int((lowers > eps).sum())} of {AUDITS} audits "
          f"above eps, eps_lower median {np.median(lowers):.3f}, max {lowers.max():.3f}")
    assert int((lowers > eps).sum()) <= violation_limit(AUDITS)


@pytest.mark.slow
def test_coverage_catches_subsample_aggregate_as_published():
    # beta = eps / B as published: one query is 2 beta = 2 eps-DP. T = 10 votes 7:3 against 6:4.
    eps, audits, trials = 1.0, 12, 4096
    problem = audit_problem("subsample_aggregate", budget=1)
    bad = get_method("subsample_aggregate").calibrate(PrivacyBudget(eps), problem, "paper")
    good = get_method("subsample_aggregate").calibrate(PrivacyBudget(eps), problem, "corrected")
    assert bad.beta == pytest.approx(2 * good.beta)
    lowers = audit_lowers("subsample_aggregate", bad, problem, trials, audits, ones=3)
    print(f"\n[coverage] S&A paper (known bad): {int((lowers > eps).sum())} of {audits} audits above eps, "
          f"eps_lower median {np.median(lowers):.3f}")
    assert int((lowers > eps).sum()) > violation_limit(audits)


def test_blocks_are_independent_audits():
    # Block k of one batched run is the same release as repetition k * trials + r on its own: the
    # audits share no draw (each repetition has its own generator).
    problem = audit_problem("subsample_aggregate", budget=2)
    scale = get_method("subsample_aggregate").calibrate(PrivacyBudget(1.0), problem, "corrected")
    ctx_in, ctx_out, qx, qy = _contexts("subsample_aggregate", problem, 3)
    both, _ = audit_scores("subsample_aggregate", ctx_in, ctx_out, scale, 8, qx, qy)
    first, _ = audit_scores("subsample_aggregate", ctx_in, ctx_out, scale, 4, qx, qy)
    assert np.array_equal(both[:4], first)
