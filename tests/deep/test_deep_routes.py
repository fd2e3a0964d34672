"""Per-layer routes of ghost clipping (privcore/deep/routes.py): the cost rule, and every route's clipped sum
against a float64 loop over examples, for ResNet-20 and the small CNN."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from privcore.deep import ghost as ghost_module
from privcore.deep import routes as routes_module
from privcore.deep.dpsgd import SGDConfig, channels_last, clipped_sum, train_dpsgd
from privcore.deep.ghost import CONV_ROUTES, ghost_clip_and_sum
from privcore.deep.models import build_model
from privcore.deep.routes import ConvShape, conv_route, layer_plan


def _gen(seed: int = 0) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _reference(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float):
    """float64, one example at a time: each gradient by autograd, scaled by min(1, clip / norm), summed."""
    model = model.double()
    total = {k: torch.zeros_like(p) for k, p in model.named_parameters()}
    norms = []
    for i in range(x.shape[0]):
        model.zero_grad()
        F.cross_entropy(model(x[i:i + 1].double()), y[i:i + 1]).backward()
        g = {k: p.grad.clone() for k, p in model.named_parameters()}
        norm = math.sqrt(sum(float(v.pow(2).sum()) for v in g.values()))
        norms.append(norm)
        for k in total:
            total[k] += g[k] * min(1.0, clip / norm)
    return total, torch.tensor(norms, dtype=torch.float64)


def test_the_cost_rule_is_bu_et_al_s_formula():
    s = ConvShape(T=64, d=576, p=64)  # ResNet-20's third stage on 32 x 32 images
    assert s.ghost_cost(600) == 2 * 600 * 64 ** 2 * (576 + 64)
    assert s.per_example_cost(600) == 2 * 600 * 64 * 576 * 64
    assert s.route == "per-example"  # 64 * 640 = 40,960 > 36,864
    assert conv_route(4, 576, 64) == "ghost"  # the same layer on 8 x 8 images: T = 4
    assert conv_route(2, 6, 3) == "per-example"  # a tie, 2 (6 + 3) = 6 * 3, goes to per-example gradients
    for T in (1, 3, 10, 100):
        for d, p in ((9, 16), (144, 32), (576, 64), (4608, 512)):
            cheaper = "ghost" if ConvShape(T, d, p).ghost_cost(7) < ConvShape(T, d, p).per_example_cost(7) else "per-example"
            assert conv_route(T, d, p) == cheaper
    with pytest.raises(ValueError, match="T must be a positive integer, got 0"):
        conv_route(0, 3, 3)


def test_the_plan_of_the_papers_models():
    """At the paper's sizes every layer is cheaper by per-example gradients; on small images the late
    ResNet-20 stages take the ghost norm (T small against the channels)."""
    resnet = build_model("resnet20", 3, 10, _gen(), size=32)
    plan = layer_plan(resnet, (3, 32, 32))
    assert len(plan) == 19 and plan[0].name == "conv" and plan[0].shape == ConvShape(1024, 27, 16)
    assert {p.route for p in plan} == {"per-example"}
    small = layer_plan(resnet, (3, 8, 8))
    assert {p.route for p in small if p.shape.p == 64} == {"ghost"}
    assert {p.route for p in small if p.shape.p == 16} == {"per-example"}
    cnn = layer_plan(build_model("small-cnn", 1, 10, _gen()), (1, 28, 28))
    assert [(p.shape.T, p.shape.d, p.shape.p, p.route) for p in cnn] == [(196, 9, 16, "per-example"),
                                                                         (49, 144, 32, "per-example")]


def _case(name: str, size: int, seed: int):
    channels = 1 if name == "small-cnn" else 3
    model = build_model(name, channels, 3, _gen(), size=size)
    x = torch.randn(6, channels, size, size, generator=_gen(seed), dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 1, 0, 2])
    return model, x, y


@pytest.mark.parametrize("route", CONV_ROUTES)
@pytest.mark.parametrize("name, size", [("small-cnn", 8), ("resnet20", 8), ("small-cnn", 14)])
def test_every_route_matches_the_float64_reference(name, size, route):
    model, x, y = _case(name, size, 1)
    _, norms = _reference(model, x, y, 1.0)
    clip = float(norms.median())  # some examples below the clip, some above
    assert (norms < clip).any() and (norms > clip).any()
    expect, _ = _reference(model, x, y, clip)
    params = {k: v.detach() for k, v in model.named_parameters()}
    got, got_norms = ghost_clip_and_sum(model, params, {}, x, y, clip, conv_route=route)
    assert torch.allclose(got_norms, norms, rtol=1e-6)
    for k in expect:
        assert torch.allclose(got[k], expect[k], rtol=1e-6, atol=1e-8), (route, k)


@pytest.mark.parametrize("name", ["small-cnn", "resnet20"])
def test_mixed_clipping_in_float32_matches_the_float64_reference(name):
    """clipping="mixed" (ghost norm where cheaper, per-example gradients elsewhere) in float32, the
    models' own dtype, against the float64 loop: float32 rounding only."""
    model, x, y = _case(name, 8, 2)
    expect, norms = _reference(model, x, y, 0.5)
    model = model.float()
    params = {k: v.detach() for k, v in model.named_parameters()}
    got, got_norms = clipped_sum(model, params, {}, x.float(), y, 0.5, "mixed")
    assert torch.allclose(got_norms.double(), norms, rtol=1e-4)
    for k in expect:
        assert got[k].dtype == torch.float32
        assert torch.allclose(got[k].double(), expect[k], rtol=1e-4, atol=1e-6), k


def test_a_wrong_route_rule_would_be_caught():
    """The comparison can fail: a per-example gradient formed without one example's positions (here:
    the last output column dropped) changes the sum."""
    model, x, y = _case("resnet20", 8, 3)
    expect, _ = _reference(model, x, y, 1e-2)
    params = {k: v.detach() for k, v in model.named_parameters()}
    real = ghost_module._per_example_conv

    def wrong(module, a, b, shape):
        b = b.clone()
        b[..., -1] = 0
        return real(module, a, b, shape)

    ghost_module._per_example_conv = wrong
    try:
        got, _ = ghost_clip_and_sum(model, params, {}, x, y, 1e-2, conv_route="per-example")
    finally:
        ghost_module._per_example_conv = real
    assert not all(torch.allclose(got[k], expect[k], rtol=1e-6, atol=1e-8) for k in expect)


def test_gram_chunks_give_the_same_norms(monkeypatch):
    """The Gram route splits the batch into chunks (memory bounded): the result does not depend on it."""
    model, x, y = _case("resnet20", 8, 4)
    params = {k: v.detach() for k, v in model.double().named_parameters()}
    whole, whole_norms = ghost_clip_and_sum(model, params, {}, x, y, 0.3, conv_route="gram")
    monkeypatch.setattr(ghost_module, "GRAM_CHUNK_ELEMENTS", 1)  # one example per chunk
    parts, part_norms = ghost_clip_and_sum(model, params, {}, x, y, 0.3, conv_route="gram")
    assert torch.allclose(whole_norms, part_norms, rtol=1e-12)
    for k in whole:
        assert torch.allclose(whole[k], parts[k], rtol=1e-12, atol=1e-15), k


def test_a_result_does_not_depend_on_its_batch_neighbours():
    """Each example's norm on the mixed route is its own: alone or among others, the same."""
    model, x, y = _case("resnet20", 8, 5)
    params = {k: v.detach() for k, v in model.double().named_parameters()}
    _, together = ghost_clip_and_sum(model, params, {}, x, y, 1.0, conv_route="cost")
    alone = torch.cat([ghost_clip_and_sum(model, params, {}, x[i:i + 1], y[i:i + 1], 1.0, conv_route="cost")[1]
                       for i in range(x.shape[0])])
    assert torch.allclose(together, alone, rtol=1e-9)


def test_channels_last_gives_the_same_clipped_sum():
    model, x, y = _case("resnet20", 8, 6)
    model = model.double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    plain, _ = clipped_sum(model, params, {}, x, y, 0.5, "mixed")
    cl, _ = clipped_sum(model, channels_last(params), {}, x.contiguous(memory_format=torch.channels_last), y, 0.5,
                        "mixed")
    for k in plain:
        assert torch.allclose(plain[k], cl[k], rtol=1e-10, atol=1e-13), k


def test_unknown_route_and_unsupported_model_are_refused():
    model, x, y = _case("small-cnn", 8, 7)
    params = {k: v.detach() for k, v in model.named_parameters()}
    with pytest.raises(ValueError, match="conv_route must be one of device, cost, gram, per-example, got 'fast'"):
        ghost_clip_and_sum(model, params, {}, x.float(), y, 1.0, conv_route="fast")
    other = nn.Sequential(nn.Flatten(), nn.Linear(64, 3), nn.LayerNorm(3))
    with pytest.raises(ValueError, match="clipping='mixed' needs a model"):
        clipped_sum(other, dict(other.named_parameters()), {}, x.float(), y, 1.0, "mixed")


def test_training_by_mixed_clipping_with_channels_last_matches_ghost():
    import numpy as np

    from privcore.deep.images import ImageData

    rng = np.random.default_rng(0)
    yy = np.arange(24) % 3
    xx = (rng.integers(0, 120, (24, 1, 8, 8)) + 60 * yy.reshape(-1, 1, 1, 1)).astype(np.uint8)
    data = ImageData("tiny", xx[:20], yy[:20], xx[20:], yy[20:], classes=3)
    out = {}
    for method, cl in (("ghost", False), ("mixed", True)):
        cfg = SGDConfig(epochs=2, batch_size=8, lr=0.5, physical_batch=5, clipping=method, channels_last=cl)
        out[method] = train_dpsgd(build_model("small-cnn", 1, 3, _gen(), size=8), data, cfg, 1.0, 1.1, 0,
                                  torch.device("cpu"))
    for k in out["ghost"]:
        assert torch.allclose(out["ghost"][k], out["mixed"][k], rtol=1e-4, atol=1e-6), k


def test_routes_module_keeps_the_gram_chunk_bound():
    assert routes_module.GRAM_CHUNK_ELEMENTS == ghost_module.GRAM_CHUNK_ELEMENTS == 1 << 26
