"""The pay-once PATE student: public split, flat in B, noisy labels only."""

from __future__ import annotations

import pytest
import torch

from privcore.context import TrainContext
from privcore.data import load_dataset
from privcore.methods import get_method
from privcore.methods.pate_student import PUBLIC_LABELS, public_split
from privcore.accounting.pate import gnmax_sigmas
from privcore.types import PrivacyBudget, Problem

CPU = torch.device("cpu")
M = get_method("pate_student")


@pytest.fixture(scope="module")
def ds():
    return load_dataset("synthetic", seed=0)


def _ctx(ds, budget=10):
    return TrainContext.from_dataset(ds, Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=1e-2, budget=budget,
                                                 teachers=20), 0, CPU)


def test_calibration_pays_for_the_public_labels_only():
    a = M.calibrate(PrivacyBudget(1.0, 1e-5), Problem(budget=1))
    b = M.calibrate(PrivacyBudget(1.0, 1e-5), Problem(budget=100_000))
    assert a == b and "budget" not in M.uses and not M.uses_budget
    assert a.sigma == pytest.approx(gnmax_sigmas(1.0, 1e-5, PUBLIC_LABELS, "corrected", ratio=None).sigma_vote)


def test_public_split_is_fixed_and_disjoint(ds):
    ctx = _ctx(ds)
    h0, h1 = public_split(ctx)
    again = public_split(_ctx(ds, budget=99))
    assert torch.equal(h0, again[0]) and torch.equal(h1, again[1])
    assert len(set(h0.tolist()) & set(h1.tolist())) == 0 and len(h0) + len(h1) == ctx.x_test.shape[0]


@pytest.mark.slow
def test_flat_in_b_and_learns(ds):
    scales = [M.calibrate(PrivacyBudget(e, 1e-5), Problem()) for e in (1e4,)]
    a = M.release(_ctx(ds, budget=1), scales, 2)
    b = M.release(_ctx(ds, budget=1000), scales, 2)
    assert torch.equal(a, b)  # the same release whatever B
    ctx = _ctx(ds)
    acc = M.evaluate(ctx, scales, 2)
    assert float(acc.min()) > 0.5  # nearly clean labels: the student learns (synthetic is easy)
    low = M.evaluate(ctx, [M.calibrate(PrivacyBudget(0.05, 1e-5), Problem())], 2)
    assert float(low.mean()) < float(acc.mean())


def test_student_depends_on_the_private_data_only_through_the_labels(ds, monkeypatch):
    ctx = _ctx(ds)
    s = M.calibrate(PrivacyBudget(10.0, 1e-5), Problem())
    out = M.release(ctx, [s], 1)
    # Same votes, different training rows and labels: the same release.
    votes = ctx.teacher_votes(20, 1e-2)
    other = TrainContext.from_dataset(ds, ctx.problem, 0, CPU)
    other.x_train = torch.zeros_like(other.x_train)
    monkeypatch.setattr(other, "teacher_votes", lambda *a, **k: votes)
    assert torch.equal(M.release(other, [s], 1), out)


def test_recommendation_can_pick_the_new_methods():
    from privcore.recommend import recommend

    base = dict(epsilon=1.0, delta=1e-5, budget=1000, n=4000, lam=1e-3, teachers=16, classes=10, repeats=20)
    for winner in ("pate_student", "confident_gnmax", "sparse_vector"):
        rows = [dict(base, method=m, accuracy_mean=0.9 if m == winner else 0.5, accuracy_std=0.01)
                for m in ("dpsgd", "subsample_aggregate", "pate_student", "confident_gnmax", "sparse_vector")]
        rec = recommend(rows)
        assert rec.winner == winner and rec.significant
        assert rec.reason == rec.reason.strip() and len(rec.reason) > 40


@pytest.mark.slow
def test_the_students_eigenbasis_is_built_once_per_rows_and_changes_nothing(ds, monkeypatch):
    """A second epsilon on the same data (a slider move) reuses the two folds' eigenbases; the
    students are exactly those of a fresh context, which builds its own."""
    import privcore.context as context_mod

    built = []
    real = context_mod.Preconditioner

    class Counting(real):
        def __init__(self, x, *a, **k):
            built.append(x.shape[0])
            super().__init__(x, *a, **k)

    monkeypatch.setattr(context_mod, "Preconditioner", Counting)
    ctx = _ctx(ds)
    k = len(public_split(ctx)[0][:PUBLIC_LABELS])  # the rows of each fold's student
    assert k != ds.n
    first = M.release(ctx, [M.calibrate(PrivacyBudget(1.0, 1e-5), ctx.problem)], 2)
    assert built.count(k) == 2  # one per fold
    second = M.release(ctx.with_problem(ctx.problem), [M.calibrate(PrivacyBudget(3.0, 1e-5), ctx.problem)], 2)
    assert built.count(k) == 2  # reused by the context that shares its solves
    fresh = M.release(_ctx(ds), [M.calibrate(PrivacyBudget(3.0, 1e-5), ctx.problem)], 2)
    assert built.count(k) == 4 and torch.equal(second, fresh)
    assert first.shape == second.shape


def test_a_student_is_a_function_of_its_own_labels_whatever_its_batch(ds):
    """The E x R students share one batched solve. Their labels entered it against the first student's
    labels, so a private student moved (1.4e-6 here) with another repetition's labels, or with the noiseless
    majority of an epsilon = inf point placed first. In a batch of the same (public) shape it is now the
    same bit for bit whatever its companions; at another place (public too) the same to float rounding, since a
    BLAS may round batch entries by their position (3e-16 on an AMD EPYC), far below the 1.4e-6 of the bug."""
    ctx = _ctx(ds)
    m = get_method("pate_student")
    private = m.calibrate(PrivacyBudget(1.0, 1e-5), ctx.problem, "corrected")
    exact = m.calibrate(PrivacyBudget(float("inf"), 1e-5), ctx.problem, "corrected")
    other = m.calibrate(PrivacyBudget(0.3, 1e-5), ctx.problem, "corrected")
    rows = torch.arange(100)
    after_exact = m._students(ctx, [exact, private], 1, rows, 0)[1]
    after_other = m._students(ctx, [other, private], 1, rows, 0)[1]
    first = m._students(ctx, [private, other], 1, rows, 0)[0]
    assert torch.equal(after_exact, after_other)
    assert torch.allclose(after_exact, first, rtol=0, atol=1e-12 * float(first.abs().max()))
