"""Empirical audits of the teacher-vote methods against a query chosen by the attacker (issue 29).

The canaries of tests/audit_canaries.py give every teacher one example, so they cannot see teachers that
depend on each other's parts. Here the teachers are real (digits, T = 16, lam = 1e-3), D' replaces one
row of teacher 0's part by another image, and the attacker, knowing every teacher's model under D and D',
asks the query of tests/methods/adversarial_query.py: the point of the unit ball on which all the other
teachers switch from class a (under D) to class b (under D') by the largest margin. Each method then answers that query many
times through its own ``release`` on D and on D', and :func:`privcore.audit.audit` bounds epsilon from
below (score: 0 for label a, 2 for label b, 1 for anything else, abstentions included).

Both worlds use the same seed, so the same public partition; their noise is still independent: D's
answers are ``release``'s repetition 0 and D''s its repetition 1, each drawn from its own generator, and
within a repetition the identical query rows get independent draws. B = 1, so one answer is one whole
release of the claimed (epsilon, delta).

With teachers that depend on their own part only, at most teacher 0's vote moves and every audit stays
below the claim. With the known-bad shared-basis teachers (tests/methods/teacher_variants.py) the query
flips the other teachers together and the same audits measure more than the claim: the audit can fail.
"""

from __future__ import annotations

import pytest
import torch

from adversarial_query import adversarial_query, replace_row, votes_of
from teacher_variants import SharedPreconditionerContext

from privcore.audit import AuditResult, audit
from privcore.context import TrainContext
from privcore.data import load_dataset
from privcore.methods import get_method
from privcore.types import PrivacyBudget, Problem

pytestmark = pytest.mark.slow

CPU = torch.device("cpu")
LAM, TEACHERS, SEED = 1e-3, 16, 0
#: Answers per world (half choose the test's threshold, half evaluate it).
ANSWERS = 20_000
#: The methods and budgets of issue 29 (B = 1), each at its corrected calibration.
BUDGETS = {"subsample_aggregate": PrivacyBudget(1.0, 0.0), "confident_gnmax": PrivacyBudget(1.0, 1e-5),
           "sparse_vector": PrivacyBudget(1.0, 1e-5)}
VARIANTS = {"per-part teachers": TrainContext, "shared basis (known bad)": SharedPreconditionerContext}


@pytest.fixture(scope="module")
def worlds(request):
    """(name, context of D, context of D', the attacker's query) for one way of training the teachers."""
    cls = VARIANTS[request.param]
    ds = load_dataset("digits")
    problem = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=LAM, budget=1, teachers=TEACHERS)
    base = TrainContext.from_dataset(ds, problem, SEED, CPU)
    ctx = cls(base.x_train, base.y_train, base.x_test, base.y_test, base.classes, problem, SEED, CPU)
    row = int(ctx.teacher_partition(TEACHERS)[0, 0])
    x2, y2 = replace_row(ctx.x_train, ctx.y_train, row, "another image", (ctx.x_test[0], int(ctx.y_test[0])),
                         ctx.classes)
    ctx2 = cls(x2, y2, ctx.x_test, ctx.y_test, ctx.classes, problem, SEED, CPU)
    query = adversarial_query(ctx.teacher_thetas(TEACHERS, LAM), ctx2.teacher_thetas(TEACHERS, LAM))
    return request.param, ctx, ctx2, query


def _audit(method: str, ctx: TrainContext, ctx2: TrainContext, q) -> tuple[AuditResult, str]:
    m, budget = get_method(method), BUDGETS[method]
    scale = m.calibrate(budget, ctx.problem, "corrected")
    queries = q.query.repeat(ANSWERS, 1)
    out_d = m.release(ctx, [scale], 2, queries)[0, 0]  # repetition 0 on D ...
    out_d2 = m.release(ctx2, [scale], 2, queries)[0, 1]  # ... and 1 on D': independent draws

    def score(out: torch.Tensor):
        return torch.where(out == q.a, 0.0, torch.where(out == q.b, 2.0, 1.0)).double().numpy()

    result = audit(score(out_d), score(out_d2), delta=budget.delta)
    v, v2 = votes_of(ctx, TEACHERS, LAM, q.query), votes_of(ctx2, TEACHERS, LAM, q.query)
    flipped = int(((v[1:] == q.a) & (v2[1:] == q.b)).sum())
    return result, (f"{method}: eps_lo = {result.eps_lower:.3f} vs claimed {budget.epsilon:g}; query margin "
                    f"{q.margin:.3g}, {flipped} of {TEACHERS - 1} other teachers flipped {q.a} -> {q.b}")


@pytest.mark.parametrize("worlds", ["per-part teachers"], indirect=True)
@pytest.mark.parametrize("method", list(BUDGETS))
def test_the_audit_with_the_adversarial_query_stays_below_the_claim(worlds, method):
    _, ctx, ctx2, q = worlds
    result, text = _audit(method, ctx, ctx2, q)
    assert result.eps_lower <= BUDGETS[method].epsilon, text
    assert q.margin <= 0.0, text  # no query moves another teacher


@pytest.mark.parametrize("worlds", ["shared basis (known bad)"], indirect=True)
@pytest.mark.parametrize("method", list(BUDGETS))
def test_the_same_audit_catches_teachers_sharing_a_basis(worlds, method):
    _, ctx, ctx2, q = worlds
    result, text = _audit(method, ctx, ctx2, q)
    assert result.eps_lower > BUDGETS[method].epsilon, "the audit must catch the shared basis: " + text
