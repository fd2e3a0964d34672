"""The deep models on a GPU (skipped without CUDA): the same clipped sums as on the CPU, generators
on the device, vmapped teachers, AMP as an option, and the small preset end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privcore.deep.dpsgd import SGDConfig, add_noise, clip_and_sum, per_sample_grads
from privcore.deep.images import ImageData
from privcore.deep.models import build_model
from privcore.deep.teachers import teacher_predictions, train_teachers

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")]


def _gen(seed: int, device: str) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


@pytest.mark.parametrize("name, channels, size", [("small-cnn", 1, 28), ("resnet20", 3, 32)])
def test_clipped_sums_match_the_cpu(name, channels, size):
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


@pytest.mark.parametrize("name, channels, size", [("small-cnn", 1, 28), ("resnet20", 3, 32)])
def test_ghost_clipping_matches_torch_func_on_the_gpu(name, channels, size):
    from privcore.deep.ghost import ghost_clip_and_sum

    model = build_model(name, channels, 10, _gen(0, "cuda"), "cuda", size=size)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.randn(24, channels, size, size, generator=_gen(1, "cuda"), device="cuda")
    y = torch.arange(24, device="cuda") % 10
    func, f_norms = clip_and_sum(per_sample_grads(model, params, {}, x, y), 1.0)
    ghost, g_norms = ghost_clip_and_sum(model, params, {}, x, y, 1.0)
    assert torch.allclose(f_norms, g_norms, rtol=1e-3)
    for k in func:
        assert torch.allclose(func[k], ghost[k], atol=1e-4, rtol=1e-3), k
    amp, a_norms = ghost_clip_and_sum(model, params, {}, x, y, 1.0, amp=True)  # bfloat16 forward
    assert all(torch.isfinite(v).all() and v.dtype == torch.float32 for v in amp.values())
    assert torch.allclose(a_norms, f_norms, rtol=0.1)
