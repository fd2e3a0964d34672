"""DP-SGD for the deep models: per-example clipping against a naive loop, noise, accounting, resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from privcore.accounting import dpsgd_noise_multiplier
from privcore import tails
from privcore.deep.dpsgd import SGDConfig, add_noise, clip_and_sum, per_sample_grads, scale, train_dpsgd
from privcore.deep.images import ImageData
from privcore.deep.loop import load_checkpoint, lr_at
from privcore.deep.models import build_model
from privcore.methods import get_method
from privcore.roundoff import step_clip
from privcore.types import PrivacyBudget, Problem


def _gen(seed: int = 0) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _tiny_data(n: int = 48, m: int = 16) -> ImageData:
    rng = np.random.default_rng(0)
    y = np.arange(n + m) % 3
    x = (rng.integers(0, 120, (n + m, 1, 8, 8)) + 60 * y.reshape(-1, 1, 1, 1)).astype(np.uint8)
    return ImageData("tiny", x[:n], y[:n], x[n:], y[n:], classes=3)


@pytest.mark.parametrize("clip", [0.05, 1e6])  # every gradient clipped; none clipped
def test_per_sample_clipped_sum_matches_a_naive_per_example_loop(clip):
    model = build_model("small-cnn", 1, 3, _gen(), size=8)
    x, y = torch.randn(5, 1, 8, 8, generator=_gen(1)), torch.tensor([0, 1, 2, 1, 0])
    params = {k: v.detach() for k, v in model.named_parameters()}
    summed, norms = clip_and_sum(per_sample_grads(model, params, {}, x, y), clip)
    expect = {k: torch.zeros_like(v) for k, v in params.items()}
    for i in range(5):  # autograd, one example at a time
        model.zero_grad()
        F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
        g = {k: p.grad.clone() for k, p in model.named_parameters()}
        norm = math.sqrt(sum(float(v.pow(2).sum()) for v in g.values()))
        assert norms[i].item() == pytest.approx(norm, rel=1e-4)
        for k in expect:
            expect[k] += g[k] * min(1.0, clip / norm)
    for k in expect:
        assert torch.allclose(summed[k], expect[k], atol=1e-6, rtol=1e-4), k
    if clip < 1:  # the clipped sum's norm is at most B clip
        total = math.sqrt(sum(float(v.pow(2).sum()) for v in summed.values()))
        assert total <= 5 * clip * (1 + 1e-5)


def test_noise_is_from_the_generator_with_the_right_scale():
    zero = {"w": torch.zeros(200, 500)}
    a, b = add_noise(zero, 3.0, _gen(7)), add_noise(zero, 3.0, _gen(7))
    assert torch.equal(a["w"], b["w"])
    assert float(a["w"].std()) == pytest.approx(3.0, rel=0.01)
    assert torch.equal(scale(a, 2.0)["w"], a["w"] / 2.0)


def test_noise_multiplier_is_the_registry_calibration_and_meets_replace_one_target():
    """The run uses DPSGD.calibrate (replace-one PLD); an independent PLDAccountant re-checks it."""
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.pld import PLDAccountant

    n, batch, epochs, eps, delta = 5000, 250, 4, 1.0, 1e-5
    cfg = SGDConfig(epochs, batch)
    problem = Problem(n=n, dim=784, classes=10, batch_size=batch, epochs=epochs, clip=1.0, learning_rate=0.5)
    assert cfg.steps(n) == problem.steps == 80
    z = get_method("dpsgd").calibrate(PrivacyBudget(eps, delta), problem, "corrected").noise_multiplier
    assert z == dpsgd_noise_multiplier(eps, delta, batch / n, 80, "pld", relation="replace_one")

    def reference(mult: float) -> float:
        acc = PLDAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE,
                            value_discretization_interval=eps * 2e-3 / math.sqrt(80))
        acc.compose(dp_event.SelfComposedDpEvent(
            dp_event.PoissonSampledDpEvent(batch / n, dp_event.GaussianDpEvent(mult)), 80))
        return acc.get_epsilon(delta)

    assert reference(z) <= eps
    assert reference(0.98 * z) > eps  # the check can fail: 2 % less noise misses the target
    # Opacus' add/remove calibration would under-protect under replace-one.
    z_add = dpsgd_noise_multiplier(eps, delta, batch / n, 80, "rdp", relation="add_remove")
    assert reference(z_add) > eps


def test_lr_schedule_divides_by_ten_three_times():
    assert [lr_at(s, 8, 1.0) for s in range(8)] == pytest.approx([1, 1, 0.1, 0.1, 0.01, 0.01, 0.001, 0.001])


def _train(data, tmp_path, stop_after=None, name="a.pt"):
    model = build_model("small-cnn", 1, 3, _gen(), size=8)
    cfg = SGDConfig(epochs=3, batch_size=12, lr=0.5, augment=True, physical_batch=5)
    return train_dpsgd(model, data, cfg, 1.0, 1.3, 0, torch.device("cpu"), checkpoint=tmp_path / name, tag="t",
                       stop_after=stop_after)


def test_resume_from_checkpoint_equals_an_uninterrupted_run(tmp_path):
    data = _tiny_data()
    full = _train(data, tmp_path, name="full.pt")
    _train(data, tmp_path, stop_after=5)  # interrupted after 5 of 12 steps
    state = load_checkpoint(tmp_path / "a.pt", "t", torch.device("cpu"))
    assert state is not None and state["step"] == 5
    assert load_checkpoint(tmp_path / "a.pt", "another run", torch.device("cpu")) is None
    resumed = _train(data, tmp_path)
    assert all(torch.equal(full[k], resumed[k]) for k in full)
    assert not any(p.suffix == ".part" for p in tmp_path.iterdir())


def test_a_run_of_other_steps_than_the_accounted_ones_is_refused(tmp_path):
    data = _tiny_data()
    model = build_model("small-cnn", 1, 3, _gen(), size=8)
    cfg = SGDConfig(epochs=3, batch_size=12, lr=0.5, augment=True, physical_batch=5)
    steps = cfg.steps(len(data.y_train))
    with pytest.raises(RuntimeError, match=f"calibrated for {steps + 1}"):
        train_dpsgd(model, data, cfg, 1.0, 1.3, 0, torch.device("cpu"), accounted_steps=steps + 1)
    assert not any(tmp_path.iterdir())  # refused before the first step: nothing trained, nothing saved
    train_dpsgd(model, data, cfg, 1.0, 1.3, 0, torch.device("cpu"), accounted_steps=steps, stop_after=1)


def test_cancel_checkpoints_then_resumes(tmp_path):
    from privcore.deep.loop import Poller, TrainingCancelled

    data = _tiny_data()
    full = _train(data, tmp_path, name="full.pt")
    calls = {"n": 0}

    def cancel():
        calls["n"] += 1
        return calls["n"] >= 4

    model = build_model("small-cnn", 1, 3, _gen(), size=8)
    cfg = SGDConfig(epochs=3, batch_size=12, lr=0.5, augment=True, physical_batch=5)
    with pytest.raises(TrainingCancelled):
        train_dpsgd(model, data, cfg, 1.0, 1.3, 0, torch.device("cpu"), checkpoint=tmp_path / "a.pt", tag="t",
                    poll=Poller(None, cancel))
    assert load_checkpoint(tmp_path / "a.pt", "t", torch.device("cpu"))["step"] == 4
    resumed = _train(data, tmp_path)
    assert all(torch.equal(full[k], resumed[k]) for k in full)


def test_an_interrupt_inside_an_update_is_not_saved(tmp_path, monkeypatch):
    """An interrupt (Ctrl-C) inside momentum_step, after it has updated some parameters in place: saving that
    state would resume with the step's noise drawn anew on parameters that hold part of its update (one noisy
    step more than accounted). Nothing is saved then; the periodic checkpoint before it is resumed, and the
    result equals an uninterrupted run."""
    from privcore.deep import dpsgd as dpsgd_module

    data = _tiny_data()
    full = _train(data, tmp_path, name="full.pt")
    real = dpsgd_module.momentum_step
    calls = {"n": 0}

    def interrupted(params, grads, buf, lr, momentum):
        calls["n"] += 1
        if calls["n"] == 6:  # half of the parameters updated, then the interrupt
            keys = list(params)[: len(params) // 2]
            real({k: params[k] for k in keys}, {k: grads[k] for k in keys}, {k: buf[k] for k in keys}, lr, momentum)
            raise KeyboardInterrupt
        real(params, grads, buf, lr, momentum)

    monkeypatch.setattr(dpsgd_module, "momentum_step", interrupted)
    model = build_model("small-cnn", 1, 3, _gen(), size=8)
    cfg = SGDConfig(epochs=3, batch_size=12, lr=0.5, augment=True, physical_batch=5)
    with pytest.raises(KeyboardInterrupt):
        train_dpsgd(model, data, cfg, 1.0, 1.3, 0, torch.device("cpu"), checkpoint=tmp_path / "a.pt", tag="t",
                    checkpoint_every=0.0)  # a checkpoint after every step
    assert load_checkpoint(tmp_path / "a.pt", "t", torch.device("cpu"))["step"] == 5  # the last settled step
    monkeypatch.setattr(dpsgd_module, "momentum_step", real)
    resumed = _train(data, tmp_path)
    assert all(torch.equal(full[k], resumed[k]) for k in full)


# ---------------------------------------------------------------- review: one step, end to end


def test_a_non_finite_per_example_gradient_cannot_leak_through_the_sum():
    """A NaN/inf gradient (an overflow, e.g. under bfloat16 autocast) must not make the released sum
    NaN: that would reveal that this example was sampled, with no bound on its influence. The sum of
    b examples clipped to ``clip`` has norm at most b clip whatever one example's gradient is."""
    grads = {"w": torch.tensor([[3.0, 4.0], [float("nan"), 1.0], [float("inf"), 0.0]]),
             "b": torch.tensor([[0.0], [2.0], [1.0]])}
    summed, _ = clip_and_sum(grads, 1.0)
    total = torch.cat([v.flatten() for v in summed.values()])
    assert torch.isfinite(total).all()
    assert float(total.norm()) <= 3 * 1.0 * (1 + 1e-6)
    # the finite example is clipped as before: (3, 4, 0) / 5
    only = clip_and_sum({k: v[:1] for k, v in grads.items()}, 1.0)[0]
    assert torch.allclose(only["w"], torch.tensor([0.6, 0.8])) and float(only["b"]) == 0.0


def _step_setup(n: int = 400, batch: int = 40):
    from privcore.deep.dpsgd import dpsgd_step

    data = _tiny_data(n, 4)
    model = build_model("small-cnn", 1, 3, _gen(), size=8)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    cfg = SGDConfig(epochs=1, batch_size=batch, physical_batch=7)
    x_u8, y = torch.tensor(data.x_train), torch.as_tensor(data.y_train)
    return dpsgd_step, model, params, cfg, data, x_u8, y


def test_one_step_is_poisson_sampled_clipped_noised_and_scaled_by_the_expected_batch():
    """dpsgd_step against an independent re-computation: the examples with u_i < q (u from the
    sampling generator), each gradient clipped, the sum plus N(0, sigma^2) noise from the noise
    generator, divided by q N (not by the drawn batch size)."""
    dpsgd_step, model, params, cfg, data, x_u8, y = _step_setup()
    n, clip, sigma = y.shape[0], 0.1, 0.7
    gens = {"sample": _gen(11), "noise": _gen(12), "augment": _gen(13)}
    got = dpsgd_step(model, params, {}, x_u8, y, data, cfg, clip, sigma, gens)
    q = cfg.batch_size / n
    chosen = torch.nonzero(tails.bernoulli((n,), q, _gen(11))).flatten()
    assert chosen.numel() != cfg.batch_size  # the drawn batch differs from the expected one here
    from privcore.deep.images import to_float
    xb = to_float(x_u8[chosen], data.mean, data.std)
    # each example clipped to the step clip of the drawn batch (privcore.roundoff)
    summed, _ = clip_and_sum(per_sample_grads(model, params, {}, xb, y[chosen]), step_clip(clip, chosen.numel()))
    sizes = [v.numel() for v in params.values()]  # one draw, split in the parameters' order
    unit = tails.gaussian_noise(sum(sizes), _gen(12)).split(sizes)
    for k, u in zip(params, unit):
        want = (summed[k] + sigma * u.view(summed[k].shape)) / (q * n)
        assert torch.allclose(got[k], want, atol=1e-6, rtol=1e-4), k


def test_each_step_clips_to_the_step_clip_of_its_drawn_batch(monkeypatch):
    """The step clip C / (1 + eta(b) b) is asked for with the drawn batch size b and is the clip every
    physical batch uses: with it replaced by C / 3 the step equals the re-computation at C / 3."""
    from privcore.deep import dpsgd as dpsgd_module
    from privcore.deep.images import to_float

    dpsgd_step, model, params, cfg, data, x_u8, y = _step_setup()
    n, clip, sigma = y.shape[0], 0.1, 0.0
    calls = []
    monkeypatch.setattr(dpsgd_module, "step_clip", lambda c, b: calls.append((c, b)) or c / 3)
    got = dpsgd_step(model, params, {}, x_u8, y, data, cfg, clip, sigma,
                     {"sample": _gen(11), "noise": _gen(12), "augment": _gen(13)})
    chosen = torch.nonzero(tails.bernoulli((n,), cfg.batch_size / n, _gen(11))).flatten()
    assert calls == [(clip, chosen.numel())]
    xb = to_float(x_u8[chosen], data.mean, data.std)
    summed, _ = clip_and_sum(per_sample_grads(model, params, {}, xb, y[chosen]), clip / 3)
    for k in params:
        assert torch.allclose(got[k], summed[k] / cfg.batch_size, atol=1e-7, rtol=1e-4), k


def test_sampling_rate_and_noise_scale_over_many_steps():
    """Inclusion frequency q per example (independently: the batch size varies as Binomial(N, q))
    and, with gradients clipped to ~0, the released gradient's spread sigma / (q N)."""
    dpsgd_step, model, params, cfg, data, x_u8, y = _step_setup(n=200, batch=20)
    n, q, sigma = 200, 0.1, 2.0
    gens = {"sample": _gen(21), "noise": _gen(22), "augment": _gen(23)}
    sizes = [int(tails.bernoulli((n,), q, _gen(100 + s)).sum()) for s in range(300)]
    assert abs(np.mean(sizes) - q * n) < 1.0 and np.std(sizes) == pytest.approx(math.sqrt(n * q * (1 - q)), rel=0.2)
    out = [dpsgd_step(model, params, {}, x_u8, y, data, cfg, 1e-9, sigma, gens) for _ in range(3)]
    flat = torch.cat([torch.cat([v.flatten() for v in o.values()]) for o in out])
    assert float(flat.std()) == pytest.approx(sigma / (q * n), rel=0.05)


def test_noise_tails_are_not_cut_off(monkeypatch):
    """torch.randn's float32 normals stop at 5.77 (a 24-bit uniform): a step whose sensitivity is two
    noise deviations then had an outcome of probability 8e-5 under one neighbour and 0 under the other.
    With every radius forced into the exact tail branch and that branch's Exp(1) forced to 5000, the
    noise reaches about 100 deviations; torch.randn could not."""
    monkeypatch.setattr(tails, "_BULK_BITS", 0)  # U <= 1 always: every radius from the exact Exp(1)
    monkeypatch.setattr(tails, "exponential", lambda shape, generator: torch.full(shape, 5000.0,
                                                                                          dtype=torch.float64))
    noisy = add_noise({"w": torch.zeros(400)}, 1.0, _gen(3))["w"]
    assert float(noisy.abs().max()) > 50


def test_noise_std_is_rounded_up_to_float32():
    # float32(0.7) = 0.69999998...: rounding to nearest would add less noise than calibrated
    std = 0.7
    assert float(torch.tensor(std, dtype=torch.float32)) < std
    noisy = add_noise({"w": torch.zeros(2000)}, std, _gen(3))["w"]
    unit = tails.gaussian_noise(2000, _gen(3))
    up = torch.nextafter(torch.tensor(std, dtype=torch.float32), torch.tensor(float("inf")))
    assert float(up) >= std
    assert torch.equal(noisy, up * unit)  # the std used is the float32 just above 0.7, never below
