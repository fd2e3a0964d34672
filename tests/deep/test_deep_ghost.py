"""Ghost (book-keeping) clipping: the clipped sum equals a one-example-at-a-time loop and torch.func."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from privcore import tails
from privcore.deep.dpsgd import SGDConfig, _std_up, clip_and_sum, clipped_sum, dpsgd_step, per_sample_grads, train_dpsgd
from privcore.deep import ghost as ghost_module
from privcore.deep.ghost import ghost_clip_and_sum, supports_ghost
from privcore.deep.images import ImageData
from privcore.deep.models import build_model


def _gen(seed: int = 0) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _model(name: str) -> tuple[nn.Module, int]:
    """The small CNN, or the full ResNet-20 on 8 x 8 images (it uses both the per-layer-gradient and the
    Gram route for its convolutions), in float64: the batched paths agree to ~1e-10, and with the
    one-example loop to ~1e-7 (CPU kernels round differently at batch 1)."""
    channels = 1 if name == "small-cnn" else 3
    return build_model(name, channels, 3, _gen(), size=8).double(), channels


def _naive(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float):
    """Autograd on one example at a time: its gradient, its norm, scaled by min(1, clip / norm), summed."""
    total = {k: torch.zeros_like(p) for k, p in model.named_parameters()}
    norms = []
    for i in range(x.shape[0]):
        model.zero_grad()
        F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
        g = {k: p.grad.clone() for k, p in model.named_parameters()}
        norm = math.sqrt(sum(float(v.pow(2).sum()) for v in g.values()))
        norms.append(norm)
        for k in total:
            total[k] += g[k] * min(1.0, clip / norm)
    return total, torch.tensor(norms, dtype=torch.float64)


@pytest.mark.parametrize("route", ["grouped", "unfold"])  # how per-example weight gradients are formed
@pytest.mark.parametrize("factor", [None, 0.0, 1.0])  # the CPU's rule (no Gram); every conv by Gram; mixed
@pytest.mark.parametrize("name", ["small-cnn", "resnet20"])
def test_ghost_clipped_sum_equals_naive_loop_and_torch_func(name, factor, route, monkeypatch):
    if factor is not None:
        monkeypatch.setattr(ghost_module, "GHOST_FACTOR", {"cpu": factor})
    monkeypatch.setattr(ghost_module, "PER_EXAMPLE_ROUTE", {"cpu": route})
    model, channels = _model(name)
    assert supports_ghost(model)
    x = torch.randn(7, channels, 8, 8, generator=_gen(1), dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 1, 0, 2, 2])
    params = {k: v.detach() for k, v in model.named_parameters()}
    _, norms = _naive(model, x, y, 1.0)
    clip = float(norms.median())  # some examples below the clip norm, some above
    assert (norms < clip).any() and (norms > clip).any()
    expect, _ = _naive(model, x, y, clip)
    ghost, g_norms = ghost_clip_and_sum(model, params, {}, x, y, clip)
    func, f_norms = clip_and_sum(per_sample_grads(model, params, {}, x, y), clip)
    assert torch.allclose(g_norms, norms, rtol=1e-6)
    assert torch.allclose(g_norms, f_norms, rtol=1e-10)
    assert set(ghost) == set(expect)
    for k in expect:
        assert torch.allclose(ghost[k], expect[k], rtol=1e-6, atol=1e-6), k
        # The Gram route's norms are upper bounds (privcore.roundoff: + 4 gamma M^2, ~1e-11 relative here).
        assert torch.allclose(ghost[k], func[k], rtol=1e-9, atol=1e-10 * float(func[k].abs().max())), k


def test_ghost_float32_agrees_with_torch_func_to_float_tolerance():
    model = build_model("resnet20", 3, 10, _gen(), size=8)
    x, y = torch.randn(6, 3, 8, 8, generator=_gen(2)), torch.tensor([0, 3, 5, 9, 1, 1])
    params = {k: v.detach() for k, v in model.named_parameters()}
    ghost, gn = ghost_clip_and_sum(model, params, {}, x, y, 1.0)
    func, fn = clip_and_sum(per_sample_grads(model, params, {}, x, y), 1.0)
    assert torch.allclose(gn, fn, rtol=1e-4)
    for k in func:
        assert ghost[k].dtype == torch.float32
        assert torch.allclose(ghost[k], func[k], rtol=1e-3, atol=1e-5), k


def test_a_wrong_norm_is_caught():
    """The comparison can fail: leaving the GroupNorm parameters out of the norms changes the sum."""
    model, _ = _model("small-cnn")
    x, y = torch.randn(4, 1, 8, 8, generator=_gen(3), dtype=torch.float64), torch.tensor([0, 1, 2, 0])
    params = {k: v.detach() for k, v in model.named_parameters()}
    expect, norms = _naive(model, x, y, 1e-3)
    grads = per_sample_grads(model, params, {}, x, y)
    wrong, wrong_norms = clip_and_sum({k: v for k, v in grads.items() if not k.startswith("gn")}, 1e-3)
    assert not torch.allclose(wrong_norms, norms, rtol=1e-6)
    assert not torch.allclose(wrong["fc.weight"], expect["fc.weight"], rtol=1e-6)


@pytest.mark.parametrize("method", ["auto", "ghost", "torch-func"])
def test_empty_batch_gives_a_zero_sum(method):
    model = build_model("small-cnn", 1, 3, _gen(), size=8)
    params = {k: v.detach() for k, v in model.named_parameters()}
    summed, norms = clipped_sum(model, params, {}, torch.zeros(0, 1, 8, 8), torch.zeros(0, dtype=torch.int64),
                                1.0, method)
    assert norms.shape == (0,)
    assert set(summed) == set(params) and all(not v.any() for v in summed.values())


def _data(n: int) -> ImageData:
    rng = np.random.default_rng(0)
    y = np.arange(n + 4) % 3
    x = (rng.integers(0, 120, (n + 4, 1, 8, 8)) + 60 * y.reshape(-1, 1, 1, 1)).astype(np.uint8)
    return ImageData("tiny", x[:n], y[:n], x[n:], y[n:], classes=3)


def _step(method: str, data: ImageData, batch: int, seed: int):
    model = build_model("small-cnn", 1, 3, _gen(), size=8)
    params = {k: v.detach() for k, v in model.named_parameters()}
    gens = {k: _gen(seed + i) for i, k in enumerate(("sample", "noise", "augment"))}
    cfg = SGDConfig(epochs=1, batch_size=batch, physical_batch=3, augment=True, clipping=method)
    out = dpsgd_step(model, params, {}, torch.as_tensor(data.x_train), torch.as_tensor(data.y_train), data, cfg,
                     1.0, 1.3, gens)
    return out, {k: g.get_state() for k, g in gens.items()}


def test_steps_use_the_same_draws_and_agree_across_paths():
    data = _data(20)
    ghost, g_states = _step("ghost", data, 8, 0)
    func, f_states = _step("torch-func", data, 8, 0)
    auto, _ = _step("auto", data, 8, 0)
    assert all(torch.equal(g_states[k], f_states[k]) for k in g_states)  # same samples, noise, augmentation
    for k in ghost:
        assert torch.equal(ghost[k], auto[k])  # auto is ghost for this model
        assert torch.allclose(ghost[k], func[k], rtol=1e-4, atol=1e-6), k


def test_an_empty_poisson_batch_releases_only_the_same_noise():
    data = _data(3)
    seed = next(s for s in range(100) if not tails.bernoulli((3,), 1 / 3, _gen(s)).any())
    ghost, _ = _step("ghost", data, 1, seed)
    func, _ = _step("torch-func", data, 1, seed)
    # One draw for all parameters, split in their order, times the std rounded up
    sizes = [v.numel() for v in ghost.values()]
    unit = tails.gaussian_noise(sum(sizes), _gen(seed + 1)).split(sizes)
    for (k, v), u in zip(ghost.items(), unit):
        assert torch.equal(v, func[k])  # bit-identical: only noise
        assert torch.equal(v, (_std_up(1.3, v.dtype) * u).view(v.shape) / 1.0)  # std rounded up


def _auto_is_torch_func_and_ghost_refused(model: nn.Module, seed: int, refusal: str) -> None:
    """clipping='auto' gives torch.func's clipped sum bit for bit; clipping='ghost' raises ``refusal``."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(4, 1, 8, 8, generator=_gen(seed)), torch.tensor([0, 1, 2, 0])
    auto, _ = clipped_sum(model, params, {}, x, y, 1.0, "auto")
    func, _ = clip_and_sum(per_sample_grads(model, params, {}, x, y), 1.0)
    assert all(torch.equal(auto[k], func[k]) for k in func)
    with pytest.raises(ValueError, match=refusal):
        clipped_sum(model, params, {}, x, y, 1.0, "ghost")


def test_unsupported_models_fall_back_or_are_refused():
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 3), nn.LayerNorm(3))
    assert not supports_ghost(model)
    _auto_is_torch_func_and_ghost_refused(model, 4, "clipping='ghost'")
    with pytest.raises(ValueError, match="clipping must be one of"):
        SGDConfig(1, 4, clipping="fast")


def test_training_with_either_path_reaches_the_same_parameters():
    data = _data(24)
    out = {}
    for method in ("ghost", "torch-func"):
        model = build_model("small-cnn", 1, 3, _gen(), size=8)
        cfg = SGDConfig(epochs=2, batch_size=8, lr=0.5, physical_batch=5, clipping=method)
        out[method] = train_dpsgd(model, data, cfg, 1.0, 1.1, 0, torch.device("cpu"))
    for k in out["ghost"]:
        assert torch.allclose(out["ghost"][k], out["torch-func"][k], rtol=1e-3, atol=1e-5), k


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
@pytest.mark.parametrize("name", ["small-cnn", "resnet20"])
def test_a_non_finite_example_contributes_zero_as_in_clip_and_sum(name, bad):
    model, channels = _model(name)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.randn(5, channels, 8, 8, generator=_gen(5), dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 1, 0])
    x[2, 0, 3, 3] = bad
    ghost, norms = ghost_clip_and_sum(model, params, {}, x, y, 0.5)
    assert not torch.isfinite(norms[2]) and torch.isfinite(norms[[0, 1, 3, 4]]).all()
    rest = torch.tensor([0, 1, 3, 4])
    expect, _ = clip_and_sum(per_sample_grads(model, params, {}, x[rest], y[rest]), 0.5)
    func, _ = clip_and_sum(per_sample_grads(model, params, {}, x, y), 0.5)
    for k in expect:
        assert torch.isfinite(ghost[k]).all(), k
        assert torch.allclose(ghost[k], expect[k], rtol=1e-9, atol=1e-12), k
        assert torch.allclose(ghost[k], func[k], rtol=1e-9, atol=1e-12), k


@pytest.mark.parametrize("bad", [None, float("nan")])
@pytest.mark.parametrize("route", ["device", "cost", "gram"])
def test_the_sync_free_mask_gives_the_same_sums(route, bad, monkeypatch):
    """On CUDA the finite-rows mask is always applied (no read-back mid-step); on this CPU, forced onto
    that path, every clipped sum is the same bit for bit, with and without a non-finite example."""
    model, channels = _model("resnet20")
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.randn(5, channels, 8, 8, generator=_gen(6), dtype=torch.float64)
    if bad is not None:
        x[3, 0, 2, 2] = bad
    y = torch.tensor([0, 1, 2, 1, 0])
    plain, plain_norms = ghost_clip_and_sum(model, params, {}, x, y, 0.5, conv_route=route)
    monkeypatch.setattr(ghost_module, "SYNC_FREE_DEVICES", ("cpu",))
    masked, masked_norms = ghost_clip_and_sum(model, params, {}, x, y, 0.5, conv_route=route)
    assert torch.equal(plain_norms.nan_to_num(-1), masked_norms.nan_to_num(-1))
    for k in plain:
        assert torch.isfinite(masked[k]).all() and torch.equal(plain[k], masked[k]), k


def test_auto_uses_ghost_only_for_the_projects_models():
    class Other(nn.Module):  # ghost-shaped, but a forward the project has not tested: auto uses torch.func
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.fc, self.unused = nn.Conv2d(1, 4, 3), nn.Linear(144, 3), nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.conv(x).flatten(1)) + 0.0 * self.unused.weight.sum()

    model = Other()
    assert supports_ghost(model)
    _auto_is_torch_func_and_ghost_refused(model, 6, "no forward call of the layers holding unused.bias, unused.weight")


def test_auto_follows_the_per_device_choice(monkeypatch):
    """"auto" takes ghost clipping only where AUTO_GHOST says it is the faster (on CUDA: the per-layer
    route by cost, measured faster than torch.func on an H200)."""
    from privcore.deep import dpsgd as dpsgd_module

    model = build_model("small-cnn", 1, 3, _gen(), size=8)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(3, 1, 8, 8, generator=_gen(4)), torch.tensor([0, 1, 2])
    calls = []
    real = dpsgd_module.ghost_clip_and_sum
    monkeypatch.setattr(dpsgd_module, "ghost_clip_and_sum", lambda *a, **k: calls.append(1) or real(*a, **k))
    dpsgd_module.clipped_sum(model, params, {}, x, y, 1.0, "auto")
    assert calls == [1]
    monkeypatch.setitem(dpsgd_module.AUTO_GHOST, "cpu", False)
    dpsgd_module.clipped_sum(model, params, {}, x, y, 1.0, "auto")
    dpsgd_module.clipped_sum(model, params, {}, x, y, 1.0, "torch-func")
    assert calls == [1]
    dpsgd_module.clipped_sum(model, params, {}, x, y, 1.0, "ghost")  # asked for by name: still ghost
    assert calls == [1, 1]
    assert dpsgd_module.AUTO_GHOST == {"cpu": False, "cuda": True}


def test_the_clipping_arithmetic_runs_inside_exact_fp32(monkeypatch):
    """Ghost clipping's norms and sums, and clip_and_sum's weighted sum, run inside
    privcore.precision.exact_fp32 (on CUDA: no TF32 where the clip bound rests on float32 rounding);
    the results are unchanged."""
    import contextlib

    from privcore.deep import dpsgd as dpsgd_module

    model = build_model("small-cnn", 1, 3, _gen(), size=8)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(3, 1, 8, 8, generator=_gen(4)), torch.tensor([0, 1, 2])
    plain_ghost = ghost_clip_and_sum(model, params, {}, x, y, 1.0)
    plain_func = clip_and_sum(per_sample_grads(model, params, {}, x, y), 1.0)
    state = {"inside": False, "entered": []}

    @contextlib.contextmanager
    def recording(device):
        state["entered"].append(torch.device(device).type)
        state["inside"] = True
        try:
            yield
        finally:
            state["inside"] = False

    real_records = ghost_module._clip_records

    def checked(*a, **k):
        assert state["inside"], "ghost clipping's norms and sums ran outside exact_fp32"
        return real_records(*a, **k)

    monkeypatch.setattr(ghost_module, "exact_fp32", recording)
    monkeypatch.setattr(ghost_module, "_clip_records", checked)
    monkeypatch.setattr(dpsgd_module, "exact_fp32", recording)
    again_ghost = ghost_clip_and_sum(model, params, {}, x, y, 1.0)
    assert state["entered"] == ["cpu"]
    again_func = clip_and_sum(per_sample_grads(model, params, {}, x, y), 1.0)
    assert state["entered"] == ["cpu", "cpu"]
    for plain, again in ((plain_ghost, again_ghost), (plain_func, again_func)):
        assert torch.equal(plain[1], again[1]) and all(torch.equal(plain[0][k], again[0][k]) for k in plain[0])
