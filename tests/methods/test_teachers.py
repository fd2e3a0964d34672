"""privcore/methods/teachers.py: the teachers of every teacher-vote method depend on their own part only.

Subsample-and-aggregate, Confident-GNMax, sparse vector and the PATE student all rest on "one replaced
training example changes one teacher". Here one row of teacher 0's part is replaced in each of the ways
of issue 29 (another image, a unit vector on a never-lit pixel, -x, another label) and every other
teacher's parameters must be bit-for-bit the same (``TrainContext.teacher_thetas``, on real images:
digits with parts larger than D, mnist-5k with parts smaller than D). Then no query, however chosen, can
move another teacher: the margin LP of tests/methods/adversarial_query.py finds nothing. The same checks
catch the known-bad variant whose teachers share the whole training set's eigenbasis
(tests/methods/teacher_variants.py).
"""

from __future__ import annotations

import pytest
import torch

from adversarial_query import REPLACEMENTS, adversarial_query, replace_row, votes_of
from teacher_variants import SharedPreconditionerContext

from privcore.context import TrainContext
from privcore.data import load_dataset
from privcore.types import Problem

CPU = torch.device("cpu")
LAM = 1e-3
#: (data set, N, T): digits' parts (89 rows) hold more rows than D = 64, mnist-5k's (125) fewer than D = 784.
DATA = {"digits T=16": ("digits", None, 16), "mnist-5k N=1000 T=8": ("mnist-5k", 1000, 8)}
#: The replacements that change X^T X of the whole training set (and so the shared basis): -x and a label
#: change leave it bitwise the same, and the known-bad variant's teachers with it.
MOVES_POOLED_BASIS = ("another image", "never-lit pixel")


def _context(cls: type, x: torch.Tensor, y: torch.Tensor, base: TrainContext) -> TrainContext:
    return cls(x, y, base.x_test, base.y_test, base.classes, base.problem, base.seed, CPU)


@pytest.fixture(scope="module", params=list(DATA))
def data(request):
    """(context of D, teachers, the replaced row) for one data set."""
    name, n, teachers = DATA[request.param]
    ds = load_dataset(name, n=n)
    problem = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=LAM, budget=1, teachers=teachers)
    ctx = TrainContext.from_dataset(ds, problem, 0, CPU)
    return ctx, teachers, int(ctx.teacher_partition(teachers)[0, 0])


def _neighbour(cls: type, ctx: TrainContext, row: int, kind: str) -> TrainContext:
    x2, y2 = replace_row(ctx.x_train, ctx.y_train, row, kind, (ctx.x_test[0], int(ctx.y_test[0])), ctx.classes)
    return _context(cls, x2, y2, ctx)


def _moved_others(theta: torch.Tensor, theta2: torch.Tensor) -> list[int]:
    return [k for k in range(1, theta.shape[0]) if not torch.equal(theta[k], theta2[k])]


def test_the_replaced_row_is_in_teacher_0s_part(data):
    ctx, teachers, row = data
    parts = ctx.teacher_partition(teachers)
    assert parts.shape == (teachers, ctx.x_train.shape[0] // teachers)
    assert row in parts[0].tolist() and all(row not in parts[k].tolist() for k in range(1, teachers))


@pytest.mark.slow
@pytest.mark.parametrize("kind", REPLACEMENTS)
def test_replacing_one_row_leaves_every_other_teacher_bitwise_identical(data, kind):
    ctx, teachers, row = data
    theta = ctx.teacher_thetas(teachers, LAM)
    theta2 = _neighbour(TrainContext, ctx, row, kind).teacher_thetas(teachers, LAM)
    assert not torch.equal(theta[0], theta2[0]), "the replacement must change teacher 0 (else this test proves nothing)"
    moved = _moved_others(theta, theta2)
    assert not moved, (f"{kind}: teachers {moved} changed (largest move "
                       f"{float((theta[1:] - theta2[1:]).abs().max()):.3g}) though only teacher 0's part did")


@pytest.mark.slow
@pytest.mark.parametrize("kind", MOVES_POOLED_BASIS)
def test_the_bitwise_check_catches_teachers_sharing_the_whole_datas_basis(data, kind):
    ctx, teachers, row = data
    bad = _context(SharedPreconditionerContext, ctx.x_train, ctx.y_train, ctx)
    theta = bad.teacher_thetas(teachers, LAM)
    theta2 = _neighbour(SharedPreconditionerContext, bad, row, kind).teacher_thetas(teachers, LAM)
    assert _moved_others(theta, theta2), "the shared basis must move the other teachers (the check must be able to fail)"


@pytest.mark.slow
def test_no_query_moves_another_teacher(data):
    """The margin LP over the teachers other than 0 finds no query on which any of them changes its vote."""
    ctx, teachers, row = data
    other = _neighbour(TrainContext, ctx, row, "another image")
    q = adversarial_query(ctx.teacher_thetas(teachers, LAM), other.teacher_thetas(teachers, LAM))
    assert q.margin <= 0.0
    assert float(q.query.norm()) <= 1.0
    assert torch.equal(votes_of(ctx, teachers, LAM, q.query)[1:], votes_of(other, teachers, LAM, q.query)[1:])


@pytest.mark.slow
def test_the_adversarial_query_flips_the_teachers_of_the_shared_basis(data):
    """Against the known-bad variant the same LP finds a query in the unit ball on which the other teachers
    vote a under D and b under D' (the float32 votes of ``TrainContext.logits``, as ``release`` counts them)."""
    ctx, teachers, row = data
    bad = _context(SharedPreconditionerContext, ctx.x_train, ctx.y_train, ctx)
    other = _neighbour(SharedPreconditionerContext, bad, row, "another image")
    q = adversarial_query(bad.teacher_thetas(teachers, LAM), other.teacher_thetas(teachers, LAM))
    assert q.margin > 0.0 and float(q.query.norm()) <= 1.0
    v, v2 = votes_of(bad, teachers, LAM, q.query)[1:], votes_of(other, teachers, LAM, q.query)[1:]
    flipped = int(((v == q.a) & (v2 == q.b)).sum())
    assert flipped >= (teachers - 1) // 2, f"only {flipped} of {teachers - 1} teachers flipped (margin {q.margin:.3g})"
