"""The trade-off engine: batched solver, methods' evaluate, runner and cache."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privcore.data import load_dataset
from privcore.engine.cache import ResultCache
from privcore.context import TrainContext
from privcore.engine.runner import run_sweep
from privcore.engine.specs import DataSpec, SweepSpec
from privcore.methods import REGISTRY
from privcore.methods.dpsgd import per_example_grad_norms
from privcore.solver import softmax_objective, solve_softmax
from privcore.types import PrivacyBudget, Problem

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def synth():
    return load_dataset("synthetic", seed=0)


def _ctx(ds, seed: int = 0, device=CPU, **kw) -> TrainContext:
    problem = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, **{"lam": 1e-2, "budget": 10, "teachers": 8,
                                                                  "batch_size": 64, "epochs": 3, **kw})
    return TrainContext.from_dataset(ds, problem, seed, device)


# ---------------------------------------------------------------- solver

@pytest.mark.slow
@pytest.mark.parametrize("scaling", ["diagonal", "bohning"])
def test_solver_reaches_tolerance_and_matches_float64_reference(synth, scaling):
    x = torch.tensor(np.array(synth.x_train))
    y = torch.tensor(np.array(synth.y_train))
    lam = torch.tensor([1e-2, 1e-4], dtype=torch.float64)
    res = solve_softmax(x, y, lam, classes=10, gtol=1e-6, scaling=scaling)
    assert bool(res.converged.all())
    # Independent check: the gradient at the returned point, recomputed in float64, is ~0.
    _, g = softmax_objective(x.double(), y, res.theta, lam, None)
    assert float(g.flatten(1).norm(dim=1).max()) < 1e-5


@pytest.mark.slow
def test_solver_null_space_of_the_data_is_solved_exactly(synth):
    """Rank-deficient data (columns never non-zero, like MNIST's border pixels) with a linear term:
    the solver iterates only in the data's row space and sets the null-space part in closed form,
    so the full gradient, including the null-space coordinates, must vanish."""
    x = torch.tensor(np.array(synth.x_train), dtype=torch.float64)
    x[:, :5] = 0.0  # five dead features
    y = torch.tensor(np.array(synth.y_train))
    gen = torch.Generator().manual_seed(5)
    lam = torch.tensor([1e-2, 1e-3], dtype=torch.float64)
    linear = torch.randn(2, x.shape[1], 10, generator=gen, dtype=torch.float64) * 0.05
    res = solve_softmax(x, y, lam, linear, classes=10, gtol=1e-7)
    assert bool(res.converged.all())
    _, g = softmax_objective(x, y, res.theta, lam, linear)
    assert float(g.flatten(1).norm(dim=1).max()) < 1e-6
    # The dead features' weights are exactly the closed form -G / lam.
    torch.testing.assert_close(res.theta[:, :5], -linear[:, :5] / lam.view(-1, 1, 1), rtol=1e-9, atol=1e-9)


def test_hessian_diagonal_equals_autograd_and_is_chunk_independent():
    from privcore.solver import hessian_diagonal

    gen = torch.Generator().manual_seed(2)
    x = torch.randn(30, 4, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (30,), generator=gen)
    theta = torch.randn(2, 4, 3, generator=gen, dtype=torch.float64)

    def loss(t: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(x @ t, y)

    want = torch.stack([torch.autograd.functional.hessian(loss, theta[p]).reshape(12, 12).diagonal().view(4, 3)
                        for p in range(2)])
    torch.testing.assert_close(hessian_diagonal(x, theta), want)
    torch.testing.assert_close(hessian_diagonal(x, theta, rows=7), want)           # chunked rows
    per_problem = hessian_diagonal(x.expand(2, -1, -1), theta, rows=4)             # [P, n, r] data
    torch.testing.assert_close(per_problem, want)


@pytest.mark.slow
def test_batched_solve_equals_looped(synth):
    x = torch.tensor(np.array(synth.x_train))
    y = torch.tensor(np.array(synth.y_train))
    gen = torch.Generator().manual_seed(3)
    lam = torch.tensor([1e-3, 1e-2, 3e-2, 0.1], dtype=torch.float64)
    linear = torch.randn(4, x.shape[1], 10, generator=gen, dtype=torch.float64) * torch.tensor([0.0, 0.01, 0.3, 1.0]).view(-1, 1, 1)
    batched = solve_softmax(x, y, lam, linear, classes=10, gtol=1e-7)
    for p in range(4):
        alone = solve_softmax(x, y, lam[p:p + 1], linear[p:p + 1], classes=10, gtol=1e-7)
        # Both are within gtol/lam of the unique minimiser (strong convexity).
        assert float((alone.theta[0] - batched.theta[p]).norm()) <= 2 * (1e-7 + 1e-7 * float(alone.theta[0].norm())) / float(lam[p]) + 1e-6


def test_per_problem_data_equals_separate_solves(synth):
    x = torch.tensor(np.array(synth.x_train))[:800].view(4, 200, -1)
    y = torch.tensor(np.array(synth.y_train))[:800].view(4, 200)
    lam = torch.full((4,), 1e-2, dtype=torch.float64)
    batched = solve_softmax(x, y, lam, classes=10, gtol=1e-7)
    for p in range(4):
        alone = solve_softmax(x[p], y[p], lam[p:p + 1], classes=10, gtol=1e-7)
        bound = 2 * (1e-7 + 1e-7 * float(alone.theta[0].norm())) / 1e-2  # both within gtol/lam of the optimum
        assert float((alone.theta[0] - batched.theta[p]).norm()) <= bound


def test_teacher_votes_equal_teachers_trained_one_by_one(synth):
    """The context trains the T teachers together in the full data's eigenbasis; each teacher
    trained alone on its own rows (its own basis) must predict the same labels."""
    ctx = _ctx(synth)
    teachers, lam = 8, ctx.problem.lam
    votes = ctx.teacher_votes(teachers, lam)
    n, m = ctx.x_train.shape[0], ctx.x_train.shape[0] // teachers
    perm = torch.randperm(n, generator=ctx.generator("sa_partition", teachers))[: teachers * m]
    alone = torch.zeros_like(votes)
    for t in range(teachers):
        rows = perm[t * m:(t + 1) * m]
        res = solve_softmax(ctx.x_train[rows], ctx.y_train[rows], torch.tensor([lam], dtype=torch.float64),
                            classes=ctx.classes, gtol=ctx.gtol)
        pred = ctx.test_logits(res.theta)[0].argmax(dim=1)
        alone[torch.arange(len(pred)), pred] += 1
    assert float(votes.sum()) == teachers * ctx.x_test.shape[0]
    # Both are the unique minimisers to within gtol / lam: at most a rare near-tie may flip.
    assert float((votes - alone).abs().sum()) <= 0.01 * teachers * ctx.x_test.shape[0]


@pytest.mark.slow
def test_per_example_norm_shortcut_equals_torch_func():
    from torch.func import functional_call, grad, vmap

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(16, 7, generator=gen, dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True).clamp_min(1.0)
    y = torch.randint(0, 4, (16,), generator=gen)
    theta = torch.randn(7, 4, generator=gen, dtype=torch.float64)
    model = torch.nn.Linear(7, 4, bias=False).double()
    params = {"weight": theta.T.clone()}

    def loss(p, xi, yi):
        logits = functional_call(model, p, (xi.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(logits, yi.unsqueeze(0))

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)["weight"]  # [16, 4, 7]
    reference = per_sample.flatten(1).norm(dim=1)
    probs = torch.softmax(x @ theta, dim=1).unsqueeze(1)  # [16, E=1, C]
    shortcut = per_example_grad_norms(x, probs, y)[:, 0]
    assert torch.allclose(shortcut, reference, atol=1e-12)


# ---------------------------------------------------------------- methods

@pytest.mark.slow
@pytest.mark.parametrize("name", list(REGISTRY))
def test_result_does_not_depend_on_batch(synth, name):
    ctx = _ctx(synth)
    m = REGISTRY[name]
    delta = 1e-5
    scales = [m.calibrate(PrivacyBudget(e, delta), ctx.problem) for e in (0.5, 2.0, 8.0)]
    together = m.evaluate(ctx, scales, 4)
    m_test = ctx.x_test.shape[0]
    for i, s in enumerate(scales):
        alone = m.evaluate(ctx, [s], 4)[0]
        # Same draws per repetition; solver rounding may flip at most a test point or two.
        assert torch.allclose(alone, together[i], atol=2.5 / m_test), (name, i, alone, together[i])
    # Nor on how many repetitions share the batch: repetitions 0-1 of 2 are repetitions 0-1 of 4.
    fewer = m.evaluate(ctx, scales, 2)
    assert torch.allclose(fewer, together[:, :2], atol=2.5 / m_test), (name, fewer, together[:, :2])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(REGISTRY))
def test_accuracy_rises_with_epsilon_on_easy_data(synth, name):
    ctx = _ctx(synth)
    m = REGISTRY[name]
    scales = [m.calibrate(PrivacyBudget(e, 1e-5), ctx.problem) for e in (0.01, 1000.0)]
    acc = m.evaluate(ctx, scales, 5).mean(dim=1)
    assert float(acc[1]) > float(acc[0]) + 0.2, (name, acc)
    assert float(acc[1]) > 0.8


def _nonprivate_acc(ctx: TrainContext) -> float:
    theta = ctx.nonprivate_theta(ctx.problem.lam)
    return float((ctx.test_logits(theta.unsqueeze(0))[0].argmax(1) == ctx.y_test).double().mean())


@pytest.mark.parametrize("name", ["model_sensitivity", "loss_perturbation", "prediction_sensitivity"])
def test_infinite_epsilon_equals_nonprivate_model(synth, name):
    ctx = _ctx(synth)
    m = REGISTRY[name]
    acc = m.evaluate(ctx, [m.calibrate(PrivacyBudget(math.inf, 0.0), ctx.problem)], 3)
    assert torch.allclose(acc, torch.full_like(acc, _nonprivate_acc(ctx)), atol=1e-12)


def test_infinite_epsilon_subsample_aggregate_is_the_plain_majority_vote(synth):
    ctx = _ctx(synth)
    m = REGISTRY["subsample_aggregate"]
    acc = m.evaluate(ctx, [m.calibrate(PrivacyBudget(math.inf, 0.0), ctx.problem)], 3)
    votes = ctx.teacher_votes(ctx.problem.teachers, ctx.problem.lam)
    top = votes.max(dim=1, keepdim=True).values
    # With ties broken at random, accuracy lies between "all ties wrong" and "all ties right".
    unique = ((votes == top).sum(dim=1) == 1)
    correct_unique = ((votes.argmax(dim=1) == ctx.y_test) & unique).double().mean()
    tie_right = ((votes.gather(1, ctx.y_test.view(-1, 1)).squeeze(1) == top.squeeze(1)) & ~unique).double().mean()
    assert float(correct_unique) - 1e-12 <= float(acc.min()) and float(acc.max()) <= float(correct_unique + tie_right) + 1e-12


def test_infinite_epsilon_dpsgd_is_noiseless_clipped_sgd(synth):
    ctx = _ctx(synth)
    m = REGISTRY["dpsgd"]
    acc = m.evaluate(ctx, [m.calibrate(PrivacyBudget(math.inf, 1e-5), ctx.problem)], 3)
    assert float(acc.min()) > 0.8  # noiseless SGD on easy data


def test_same_seed_same_numbers_and_other_seed_differs(synth):
    m = REGISTRY["model_sensitivity"]
    a = m.evaluate(_ctx(synth, seed=1), [m.calibrate(PrivacyBudget(1.0, 0.0), _ctx(synth).problem)], 5)
    b = m.evaluate(_ctx(synth, seed=1), [m.calibrate(PrivacyBudget(1.0, 0.0), _ctx(synth).problem)], 5)
    c = m.evaluate(_ctx(synth, seed=2), [m.calibrate(PrivacyBudget(1.0, 0.0), _ctx(synth).problem)], 5)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


@pytest.mark.slow
def test_nonprivate_accuracy_on_mnist5k_above_floor():
    # A linear softmax model reaches ~92 % on full MNIST; on 4,000 training digits it reaches
    # ~88-89 %. 0.85 leaves room for seeds while catching a broken solver or normalisation.
    ds = load_dataset("mnist-5k", seed=0)
    ctx = TrainContext.from_dataset(ds, Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=1e-3), 0, CPU)
    assert _nonprivate_acc(ctx) > 0.85


# ---------------------------------------------------------------- runner and cache

def _small_spec(**kw) -> SweepSpec:
    base = dict(data=DataSpec(name="synthetic"), methods=("model_sensitivity", "subsample_aggregate", "dpsgd"),
                epsilons=(1.0, 10.0), delta=1e-5, repeats=3, teachers=8, batch_size=64, epochs=2, lam=1e-2, device="cpu")
    base.update(kw)
    return SweepSpec(**base)


@pytest.mark.slow
def test_cache_hit_returns_identical_numbers_without_computing(tmp_path, monkeypatch):
    cache = ResultCache(tmp_path)
    first = run_sweep(_small_spec(), cache=cache)
    assert first.computed == len(first.rows) and first.cached == 0

    def boom(*args, **kwargs):
        raise AssertionError("evaluate called on a cache hit")

    for m in REGISTRY.values():
        monkeypatch.setattr(type(m), "evaluate", boom)
    second = run_sweep(_small_spec(), cache=cache)
    assert second.computed == 0 and second.cached == len(second.rows)
    key = lambda r: (r["method"], r["epsilon"])  # noqa: E731
    for a, b in zip(sorted(first.rows, key=key), sorted(second.rows, key=key)):
        assert a["accuracy_mean"] == b["accuracy_mean"] and a["accuracy_std"] == b["accuracy_std"]


@pytest.mark.slow
def test_rows_report_the_certified_sensitivity_and_solver_residual(tmp_path):
    res = run_sweep(_small_spec(), cache=ResultCache(tmp_path))
    released_minimiser = {name for name, m in REGISTRY.items()
                          if m.calibrate(PrivacyBudget(1.0, 1e-5), Problem()).solver_tolerance is not None}
    assert released_minimiser  # model/prediction sensitivity, loss perturbation
    for row in res.rows:
        if row["method"] in released_minimiser:
            # the reached norm is certified (float64) under the bound the sensitivity includes
            assert 0.0 < row["solver_grad_norm"] <= row["solver_tolerance"]
            assert row["sensitivity"] > 0
        elif row["method"] in REGISTRY:
            assert row["solver_grad_norm"] is None and row["solver_tolerance"] is None
    assert not any("gradient norm" in w for w in res.warnings)


def test_unrelated_setting_reuses_cache(tmp_path):
    cache = ResultCache(tmp_path)
    run_sweep(_small_spec(methods=("model_sensitivity",)), cache=cache)
    # B does not enter model sensitivity: changing it is a cache hit.
    again = run_sweep(_small_spec(methods=("model_sensitivity",), budget=7), cache=cache)
    assert again.computed == 0


def test_a_cached_row_of_a_method_that_ignores_lam_reports_the_current_lam(tmp_path):
    """A method whose result does not depend on lambda (DP-SGD) is a cache hit when only lambda
    changes; its row must then say the lambda of this sweep, not the one it was first computed
    under (the chart's caption read "lambda = 0.001-0.01" for a sweep at 0.01). Methods that use
    lambda keep the lambda they were computed with."""
    from privcore.methods import get_method

    cache = ResultCache(tmp_path)
    methods = ("model_sensitivity", "dpsgd")
    run_sweep(_small_spec(methods=methods, epsilons=(1.0,), lam=1e-3), cache=cache)
    again = run_sweep(_small_spec(methods=methods, epsilons=(1.0,), lam=1e-2), cache=cache)
    ignores = [r for r in again.rows if "lam" not in get_method(r["method"]).uses]
    assert ignores and all(r["cached"] for r in ignores)
    assert {r["lam"] for r in again.rows} == {1e-2}, [(r["method"], r["lam"]) for r in again.rows]


def test_dpsgd_at_delta_zero_is_a_warning_not_an_error(tmp_path):
    res = run_sweep(_small_spec(delta=0.0), cache=ResultCache(tmp_path))
    assert any(w.startswith("DP-SGD skipped: ") and "delta > 0" in w for w in res.warnings), res.warnings
    assert {r["method"] for r in res.rows} == {"model_sensitivity", "subsample_aggregate", "non_private"}


@pytest.mark.slow
def test_progress_and_cancel(tmp_path):
    from privcore.engine.runner import SweepCancelled

    seen: list[float] = []
    res = run_sweep(_small_spec(), cache=ResultCache(tmp_path), progress=lambda f, m: seen.append(f))
    assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen) and res.rows
    with pytest.raises(SweepCancelled):
        run_sweep(_small_spec(seed=5), cache=ResultCache(tmp_path), cancel=lambda: True)


def test_progress_messages_and_warnings_name_methods_by_their_labels(tmp_path):
    """The dashboard shows the runner's progress text and warnings as they are: a method's label
    ("Model sensitivity"), never its code name ("model_sensitivity")."""
    from privcore.methods import get_method

    messages: list[str] = []
    spec = _small_spec(methods=("model_sensitivity", "dpsgd"), delta=0.0, epochs=1)
    res = run_sweep(spec, cache=ResultCache(tmp_path), progress=lambda f, m: messages.append(m))
    shown = messages + [w.split(":")[0] for w in res.warnings]  # who the message is about
    assert any(m.startswith("Model sensitivity on ") for m in messages), messages
    assert any(w.startswith(get_method("dpsgd").label + " skipped: ") for w in res.warnings), res.warnings
    assert not any(code in m for m in shown for code in ("model_sensitivity", "dpsgd")), shown


@pytest.mark.parametrize("method", ["dpsgd", "loss_perturbation"])
def test_cancel_acts_inside_a_batch(tmp_path, method):
    """The cancel callable is polled at every DP-SGD step and solver iteration, not only between
    batches: with one method and no baseline, the only polls after the batch has started come
    from inside it, and nothing of the interrupted batch is stored."""
    from privcore.engine.runner import SweepCancelled

    calls = []

    def cancel() -> bool:
        calls.append(1)
        return len(calls) > 2  # the 'loading' and the method's own tick pass; the next poll stops it

    spec = _small_spec(methods=(method,), baseline=False, seed=9)
    cache = ResultCache(tmp_path)
    with pytest.raises(SweepCancelled):
        run_sweep(spec, cache=cache, cancel=cancel)
    assert len(calls) == 3
    assert run_sweep(spec, cache=cache).computed == 2  # nothing was cached by the cancelled run


def test_dpsgd_polls_at_every_step(tmp_path):
    spec = _small_spec(methods=("dpsgd",), baseline=False, seed=10, epsilons=(1.0,))
    ds = load_dataset("synthetic", seed=10)
    steps = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, batch_size=spec.batch_size, epochs=spec.epochs).steps
    calls = []
    run_sweep(spec, cache=ResultCache(tmp_path), cancel=lambda: bool(calls.append(1)))
    assert len(calls) == 2 + steps  # 'loading', the method's tick, then one poll per step


def test_solver_calls_back_every_iteration_and_its_exception_stops_it(synth):
    x = torch.tensor(np.array(synth.x_train))
    y = torch.tensor(np.array(synth.y_train))
    lam = torch.tensor([1e-3], dtype=torch.float64)
    seen = []
    res = solve_softmax(x, y, lam, classes=10, callback=lambda: seen.append(1))
    assert len(seen) == int(res.iterations.max()) + 1

    def stop() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        solve_softmax(x, y, lam, classes=10, callback=stop)


def test_identical_sweeps_in_two_threads_compute_once(tmp_path):
    """Two sessions (threads) asking for the same spec on the same cache: one computes, the other
    waits for it and reads the cache, reporting progress while it waits."""
    import threading

    spec = _small_spec(methods=("model_sensitivity", "dpsgd"), seed=21)
    started, release = threading.Event(), threading.Event()
    results, waits = {}, []

    def first_progress(fraction: float, message: str) -> None:
        if not started.is_set():  # hold the sweep (and its lock) until the second call is waiting
            started.set()
            release.wait(timeout=10)

    def second_progress(fraction: float, message: str) -> None:
        if message.startswith("waiting"):
            waits.append(message)
            release.set()

    def go(i: int, progress) -> None:
        results[i] = run_sweep(spec, cache=ResultCache(tmp_path), progress=progress)

    a = threading.Thread(target=go, args=(0, first_progress))
    a.start()
    assert started.wait(timeout=30)
    b = threading.Thread(target=go, args=(1, second_progress))
    b.start()
    a.join()
    b.join()
    assert waits  # the second call waited, and said so
    assert results[0].computed == 5 and results[1].computed == 0  # 2 methods x 2 epsilons + baseline
    assert [r["accuracy_mean"] for r in results[0].rows] == [r["accuracy_mean"] for r in results[1].rows]


def test_running_elsewhere_is_true_exactly_while_another_thread_computes_the_spec(tmp_path, monkeypatch):
    """What the dashboard polls instead of waiting inside a page run (ui/progress.py)."""
    import threading

    from privcore.engine.runner import running_elsewhere

    spec = _small_spec(methods=("model_sensitivity",), seed=22)
    other = _small_spec(methods=("model_sensitivity",), seed=23)
    cache = ResultCache(tmp_path / "results")
    started, release = threading.Event(), threading.Event()

    def hold(fraction: float, message: str) -> None:
        if not started.is_set():
            started.set()
            release.wait(timeout=30)

    assert not running_elsewhere(spec, cache)
    worker = threading.Thread(target=lambda: run_sweep(spec, cache=ResultCache(tmp_path / "results"), progress=hold))
    worker.start()
    try:
        assert started.wait(timeout=30)
        assert running_elsewhere(spec, cache)                        # held by the worker
        monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
        assert running_elsewhere(spec)                               # the default cache directory, not opened
        assert not running_elsewhere(other, cache)                   # another spec
        assert not running_elsewhere(spec, ResultCache(tmp_path / "elsewhere"))  # another cache
    finally:
        release.set()
        worker.join()
    assert not running_elsewhere(spec, cache)
    assert run_sweep(spec, cache=cache).computed == 0                # the worker's results are cached


@pytest.mark.slow
def test_vary_axis_rows_and_auto_lambda(tmp_path):
    res = run_sweep(_small_spec(methods=("prediction_sensitivity",), vary="budget", values=(1, 100)), cache=ResultCache(tmp_path))
    pred = {r["value"]: r["accuracy_mean"] for r in res.rows if r["method"] == "prediction_sensitivity"}
    assert set(pred) == {1, 100}
    assert all(r["vary"] == "budget" for r in res.rows)
    auto = run_sweep(_small_spec(methods=("model_sensitivity",), lam="auto", epsilons=(10.0,)), cache=ResultCache(tmp_path))
    row = next(r for r in auto.rows if r["method"] == "model_sensitivity")
    assert row["lam"] in (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 0.5) and "chosen privately" in row["note"]


def test_spec_json_round_trip_and_validation():
    spec = _small_spec(vary="n", values=(100, 200))
    assert SweepSpec.from_json(spec.to_json()) == spec
    with pytest.raises(ValueError, match="repeats"):
        _small_spec(repeats=0)
    with pytest.raises(ValueError, match="vary"):
        _small_spec(vary="colour", values=(1,))
    with pytest.raises(TypeError, match="repeats"):
        _small_spec(repeats=2.0)


# ---------------------------------------------------------------- GPU (skipped without CUDA)

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")
def test_gpu_matches_cpu(synth):
    cuda = torch.device("cuda")
    for name in REGISTRY:
        m = REGISTRY[name]
        s = [m.calibrate(PrivacyBudget(2.0, 1e-5), _ctx(synth).problem)]
        cpu_acc = m.evaluate(_ctx(synth), s, 3)
        gpu_acc = m.evaluate(_ctx(synth, device=cuda), s, 3).cpu()
        # Different RNG streams on different devices: compare distributions, not draws.
        assert abs(float(cpu_acc.mean()) - float(gpu_acc.mean())) < 0.1, name


@pytest.mark.parametrize("text, error, fragment", [
    ('{"methods": null}', TypeError, "methods must be a list"),
    ('{"methods": ["dpsgd"], "epsilons": null}', TypeError, "epsilons must be a list"),
    ('{"data": 3}', TypeError, "data must be a JSON object"),
    ('{"bogus": 1}', ValueError, "no field 'bogus'"),
])
def test_from_json_names_what_is_wrong(text, error, fragment):
    """A bad-input hunt: '{"methods": null}' raised "'NoneType' object is not iterable"."""
    from privcore.engine.specs import SweepSpec

    with pytest.raises(error, match=fragment):
        SweepSpec.from_json(text)
