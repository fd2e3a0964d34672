"""The deep models on a GPU (skipped without CUDA): the same clipped sums as on the CPU, generators
on the device, vmapped teachers, AMP as an option, and the small preset end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privcore.deep.dpsgd import SGDConfig, add_noise, clip_and_sum, per_sample_grads
from privcore.deep.images import ImageData
from privcore.deep.models import build_model
from privcore.precision import exact_fp32
from privcore.deep.teachers import teacher_predictions, train_teachers

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")]


def _gen(seed: int, device: str) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


@pytest.mark.parametrize("name, channels, size", [("small-cnn", 1, 28), ("resnet20", 3, 32)])
def test_clipped_sums_match_the_cpu(name, channels, size):
    with exact_fp32("cuda"):  # the forward too: under TF32 the two devices compute different functions
        _clipped_sums_match_the_cpu(name, channels, size)


def _clipped_sums_match_the_cpu(name, channels, size):
    x = torch.randn(16, channels, size, size, generator=_gen(1, "cpu"))
    y = torch.arange(16) % 10
    out = {}
    for dev in ("cpu", "cuda"):
        model = build_model(name, channels, 10, _gen(0, dev), dev, size=size)
        if dev == "cuda":  # the same initial weights as the CPU model
            model.load_state_dict({k: v.to(dev) for k, v in out["cpu"][1].items()})
        params = {k: v.detach() for k, v in model.named_parameters()}
        s, _ = clip_and_sum(per_sample_grads(model, params, {}, x.to(dev), y.to(dev)), 1.0)
        out[dev] = (s, model.state_dict())
    for k in out["cpu"][0]:
        assert torch.allclose(out["cpu"][0][k], out["cuda"][0][k].cpu(), atol=1e-4, rtol=1e-3), k
    noisy = add_noise({"w": torch.zeros(1000, device="cuda")}, 1.0, _gen(5, "cuda"))["w"]
    assert noisy.device.type == "cuda" and 0.9 < float(noisy.std()) < 1.1


def test_vmapped_teachers_on_the_gpu_match_the_loop():
    with exact_fp32("cuda"):  # two epochs of training amplify TF32's rounding differences between the two
        _vmapped_teachers_match_the_loop()


def _vmapped_teachers_match_the_loop():
    rng = np.random.default_rng(0)
    y = np.arange(140) % 10
    x = rng.integers(0, 255, (140, 1, 28, 28)).astype(np.uint8)
    data = ImageData("t", x[:120], y[:120], x[120:], y[120:], 10)
    dev = torch.device("cuda")
    fn = lambda g: build_model("small-cnn", 1, 10, g, dev)  # noqa: E731
    cfg = SGDConfig(epochs=2, batch_size=10, lr=0.05)
    a = train_teachers(fn, data, cfg, 4, 0, dev, batched=True)
    b = train_teachers(fn, data, cfg, 4, 0, dev, batched=False)
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-4, rtol=1e-3), k
    model = fn(_gen(0, "cuda"))
    assert teacher_predictions(model, a, data, dev).shape == (4, 20)
    amp = train_teachers(fn, data, SGDConfig(epochs=1, batch_size=10, lr=0.05, amp=True), 4, 0, dev)
    assert all(torch.isfinite(v).all() for v in amp.values())


def test_small_preset_runs_on_the_gpu(tmp_path, monkeypatch):
    from privcore.deep.fashion import FASHION_DEFAULT_DIR, FASHION_ENV
    from privcore.deep.run import run_deep
    from privcore.deep.spec import DeepSpec

    if not (FASHION_DEFAULT_DIR / "train-images-idx3-ubyte.gz").is_file() and FASHION_ENV not in __import__("os").environ:
        pytest.skip("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    res = run_deep(DeepSpec(n_train=2000, n_test=500, epochs=2, teacher_epochs=2, epsilons=(2.0,), device="cuda"))
    assert res.device.startswith("cuda") and all(0.0 <= r.accuracy_mean <= 1.0 for r in res.rows)


@pytest.mark.parametrize("factor, route", [(None, None), (0.0, None), (float("inf"), "grouped"),
                                           (float("inf"), "unfold"), (4.0, "unfold")])
@pytest.mark.parametrize("name, channels, size", [("small-cnn", 1, 28), ("resnet20", 3, 32)])
def test_ghost_clipping_matches_torch_func_on_the_gpu(name, channels, size, factor, route, monkeypatch):
    from privcore.deep import ghost as ghost_module

    if factor is not None:
        monkeypatch.setitem(ghost_module.GHOST_FACTOR, "cuda", factor)
    if route is not None:
        monkeypatch.setitem(ghost_module.PER_EXAMPLE_ROUTE, "cuda", route)
    # float64 on the GPU: both routes compute the same sum to rounding. (In float32 the first convolution's
    # sum loses about 1e-3 of its own size to cancellation with these weights, on the CPU too:
    # bench/gpu_ghost_check.py --like-test; there the error is measured against the contributions' scale.)
    with exact_fp32("cuda"):
        _ghost_matches_torch_func(name, channels, size)


def _ghost_matches_torch_func(name, channels, size):
    from privcore.deep.ghost import ghost_clip_and_sum

    model = build_model(name, channels, 10, _gen(0, "cuda"), "cuda", size=size)
    x = torch.randn(24, channels, size, size, generator=_gen(1, "cuda"), device="cuda")
    y = torch.arange(24, device="cuda") % 10
    sums = {}
    for dtype in (torch.float64, torch.float32):
        m = model.to(dtype)
        params = {k: v.detach() for k, v in m.named_parameters()}
        sums["func", dtype] = clip_and_sum(per_sample_grads(m, params, {}, x.to(dtype), y), 1.0)
        sums["ghost", dtype] = ghost_clip_and_sum(m, params, {}, x.to(dtype), y, 1.0)
    (func, f_norms), (ghost, g_norms) = sums["func", torch.float64], sums["ghost", torch.float64]
    assert torch.allclose(f_norms, g_norms, rtol=1e-10)
    for k in func:
        assert torch.allclose(func[k], ghost[k], rtol=1e-7, atol=1e-12), k
    for route in ("func", "ghost"):  # float32 against float64, against the scale of 24 contributions of norm <= 1
        low, low_norms = sums[route, torch.float32]
        assert torch.allclose(low_norms.double(), f_norms, rtol=1e-5), route
        diff = torch.cat([(low[k].double() - func[k]).flatten() for k in func]).norm()
        # measured on an H100: ghost and torch.func in float32 differed by 2.8e-3 in all (torch.func's
        # per-example convolution gradients are the less accurate: bench/gpu_ghost_check.py --like-test)
        assert float(diff) <= 1e-3 * 24, (route, float(diff))
    f_norms = sums["func", torch.float32][1]
    model = model.float()
    params = {k: v.detach() for k, v in model.named_parameters()}
    amp, a_norms = ghost_clip_and_sum(model, params, {}, x, y, 1.0, amp=True)  # bfloat16 forward
    assert all(torch.isfinite(v).all() and v.dtype == torch.float32 for v in amp.values())
    assert torch.allclose(a_norms, f_norms, rtol=0.1)


def _worst_contribution(monkeypatch, shrink: float = 1.0, route: str = "device", amp: bool = False,
                        cl: bool = False) -> float:
    """Largest float64 norm, over 32 examples each clipped alone (batch of one: the released sum is that
    example's whole contribution), of the clipped sum divided by the clip, with PyTorch's default
    precision flags (cuDNN may use TF32) and the project's ResNet-20 on 32 x 32 images. ``shrink`` < 1
    is the known-bad variant: every convolution's squared norm under-counted by that factor. ``route``:
    ghost clipping's ``conv_route``; ``amp``/``cl``: a bfloat16 forward / channels-last."""
    from privcore.deep import ghost as ghost_module

    if shrink != 1.0:
        real = ghost_module._conv_terms
        monkeypatch.setattr(ghost_module, "_conv_terms", lambda *a: (lambda sq, w: (sq * shrink, w))(*real(*a)))
    model = build_model("resnet20", 3, 10, _gen(0, "cuda"), "cuda", size=32)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = 3.0 * torch.randn(32, 3, 32, 32, generator=_gen(7, "cuda"), device="cuda")
    if cl:
        from privcore.deep.dpsgd import channels_last

        params, x = channels_last(params), x.contiguous(memory_format=torch.channels_last)
    y = torch.arange(32, device="cuda") % 10
    clip, worst = 1e-3, 0.0  # every example's gradient is far above the clip: each is scaled down
    for i in range(32):
        summed, norms = ghost_module.ghost_clip_and_sum(model, params, {}, x[i:i + 1], y[i:i + 1], clip, amp, route)
        assert float(norms[0]) > 10 * clip
        total = torch.cat([v.double().flatten() for v in summed.values()]).norm()
        worst = max(worst, float(total) / clip)
    return worst


def test_each_clipped_contribution_stays_within_the_clip(monkeypatch):
    """DP-SGD's sensitivity: one example adds at most C to the released sum, to float32 rounding (1e-5
    relative), with the flags PyTorch starts with. Every route (Gram and per-example) is used by
    ResNet-20 at 32 x 32 on CUDA."""
    assert _worst_contribution(monkeypatch) <= 1 + 1e-5


def test_the_contribution_check_catches_under_counted_norms(monkeypatch):
    """The check above can fail: norms 2 % too small let an example add more than C."""
    assert _worst_contribution(monkeypatch, shrink=0.98) > 1 + 1e-5


@pytest.mark.parametrize("route, amp, cl", [("cost", False, False), ("gram", False, False),
                                            ("per-example", False, False), ("cost", True, True)])
def test_each_contribution_stays_within_the_clip_on_every_route(monkeypatch, route, amp, cl):
    """The new routes form per-example convolution gradients with the forward's precision (TF32 allowed)
    and compute their norms and sum from those tensors in full float32: still at most C per example, also
    with a bfloat16 forward in channels-last."""
    assert _worst_contribution(monkeypatch, route=route, amp=amp, cl=cl) <= 1 + 1e-5


def test_the_route_check_catches_under_counted_norms(monkeypatch):
    assert _worst_contribution(monkeypatch, shrink=0.98, route="cost") > 1 + 1e-5


@pytest.mark.parametrize("route", ["cost", "gram", "per-example"])
@pytest.mark.parametrize("name, channels, size", [("small-cnn", 1, 28), ("resnet20", 3, 32)])
def test_every_route_matches_torch_func_on_the_gpu_in_float64(name, channels, size, route):
    from privcore.deep.ghost import ghost_clip_and_sum

    model = build_model(name, channels, 10, _gen(0, "cuda"), "cuda", size=size).double()
    x = torch.randn(12, channels, size, size, generator=_gen(1, "cuda"), device="cuda", dtype=torch.float64)
    y = torch.arange(12, device="cuda") % 10
    params = {k: v.detach() for k, v in model.named_parameters()}
    func, f_norms = clip_and_sum(per_sample_grads(model, params, {}, x, y), 0.5)
    got, g_norms = ghost_clip_and_sum(model, params, {}, x, y, 0.5, conv_route=route)
    assert torch.allclose(f_norms, g_norms, rtol=1e-10)
    for k in func:
        assert torch.allclose(func[k], got[k], rtol=1e-7, atol=1e-12), k


@pytest.mark.parametrize("name, channels, size", [("small-cnn", 1, 28), ("resnet20", 3, 32)])
def test_the_mixed_clipped_sum_never_waits_for_the_gpu(name, channels, size):
    """The clipping reads nothing back to the host mid-step (a sync stalls the launches behind it)."""
    from privcore.deep.ghost import ghost_clip_and_sum

    model = build_model(name, channels, 10, _gen(0, "cuda"), "cuda", size=size)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.randn(64, channels, size, size, generator=_gen(1, "cuda"), device="cuda")
    y = torch.arange(64, device="cuda") % 10
    ghost_clip_and_sum(model, params, {}, x, y, 1.0, conv_route="cost")  # warm-up (cuDNN's choices)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        ghost_clip_and_sum(model, params, {}, x, y, 1.0, conv_route="cost")
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("bulk_bits", [20, 2])
def test_dpsgd_noise_on_the_gpu_is_standard_normal_in_both_branches(monkeypatch, bulk_bits):
    """privcore.tails.gaussian_noise on CUDA: the CUDA generator, both branches of the radius (with the split at
    2^-2 a quarter of the radii take the exact Exp(1) branch), and add_noise's draw on the device."""
    import scipy.stats as st

    from privcore import tails

    monkeypatch.setattr(tails, "_BULK_BITS", bulk_bits)
    z = tails.gaussian_noise(200_001, _gen(3, "cuda"), torch.float64)
    assert z.device.type == "cuda" and bool(torch.isfinite(z).all())
    assert st.kstest(z.cpu().numpy(), "norm").pvalue > 1e-3
    noisy = add_noise({"w": torch.zeros(1000, device="cuda")}, 2.0, _gen(4, "cuda"))["w"]
    assert noisy.device.type == "cuda" and float(noisy.std()) == pytest.approx(2.0, rel=0.15)


def test_the_chunked_sums_meet_their_rounding_bound_on_cuda():
    """privcore.roundoff on the card (cuBLAS sums in its own order): ||computed - exact|| <= eta(b) sum ||x_i||
    against float64 on the CPU, with TF32 off as DP-SGD runs it, and the norms within their block bound."""
    from privcore.roundoff import NORM_BLOCK, gamma, outer_sum, squared_norms, sum_error, weighted_sum

    gen = torch.Generator().manual_seed(3)
    for b in (1, 33, 600):
        x = torch.randn(b, 4096, generator=gen) * torch.logspace(-3, 3, b).unsqueeze(1)
        f = torch.rand(b, generator=gen)
        exact = (f.double().unsqueeze(1) * x.double()).sum(0)
        mass = float((f.double().unsqueeze(1) * x.double()).norm(dim=1).sum())
        with exact_fp32("cuda"):
            got = weighted_sum(f.cuda(), x.cuda()).cpu()
            u, v = torch.randn(b, 64, generator=gen), torch.randn(b, 128, generator=gen)
            outer = outer_sum(u.cuda(), v.cuda()).cpu()
        assert float((got - exact).norm()) <= sum_error(b) * mass
        outer_mass = float((u.double().norm(dim=1) * v.double().norm(dim=1)).sum())
        assert float((outer - u.double().t() @ v.double()).norm()) <= sum_error(b) * outer_mass
        sq = squared_norms(x.cuda()).cpu()
        assert torch.all((sq - x.double().pow(2).sum(1)).abs() <= 2 * gamma(NORM_BLOCK + 1, torch.float32)
                         * x.double().pow(2).sum(1))
