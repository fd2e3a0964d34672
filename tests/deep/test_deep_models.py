"""The deep models: GroupNorm ResNet-20 (type-A shortcuts) and the small CNN."""

from __future__ import annotations

import pytest
import torch

from privcore.deep.models import ResNet20, build_model, count_parameters


def _gen(seed: int = 0) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


@pytest.mark.parametrize("channels, size", [(1, 28), (3, 32)])
def test_resnet20_shapes_and_parameter_count(channels, size):
    model = build_model("resnet20", channels, 10, _gen(), size=size)
    assert model(torch.randn(2, channels, size, size, generator=_gen(1))).shape == (2, 10)
    # 0.27M as in He et al. (Table 6); type-A shortcuts add no parameters.
    assert 0.26e6 < count_parameters(model) < 0.28e6
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    assert sum(isinstance(m, torch.nn.GroupNorm) for m in model.modules()) == 19
    assert sum(isinstance(m, torch.nn.Conv2d) for m in model.modules()) == 19  # 1 + 9 blocks x 2, no 1x1 convs


def test_type_a_shortcut_is_zero_padded_subsampled_identity():
    block = ResNet20(3).blocks[3]  # first block of the 32-channel stage
    x = torch.randn(2, 16, 8, 8, generator=_gen(1))
    sc = block.shortcut(x)
    assert sc.shape == (2, 32, 4, 4)
    assert torch.equal(sc[:, 8:24], x[:, :, ::2, ::2])
    assert sc[:, :8].abs().sum() == 0 and sc[:, 24:].abs().sum() == 0


def test_one_examples_output_does_not_depend_on_its_batch():
    model = build_model("resnet20", 3, 10, _gen(), size=32)
    x = torch.randn(4, 3, 32, 32, generator=_gen(1))
    assert torch.allclose(model(x)[:1], model(x[:1]), atol=1e-5)  # GroupNorm: per-example statistics


def test_small_cnn_and_initialisation_from_the_generator_only():
    state = torch.random.get_rng_state()
    a = build_model("small-cnn", 1, 10, _gen(1))
    b = build_model("small-cnn", 1, 10, _gen(1))
    assert torch.equal(torch.random.get_rng_state(), state)  # nothing drawn from the global generator
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert count_parameters(a) < 30_000 and a(torch.randn(3, 1, 28, 28, generator=_gen(2))).shape == (3, 10)
    assert build_model("small-cnn", 3, 10, _gen(), size=32)(torch.randn(1, 3, 32, 32, generator=_gen(3))).shape == (1, 10)


def test_bad_model_inputs():
    with pytest.raises(ValueError, match="model must be one of small-cnn, resnet20, got 'vgg'"):
        build_model("vgg", 1, 10, _gen())
    with pytest.raises(ValueError, match="channels must be 1 or 3, got 2"):
        build_model("resnet20", 2, 10, _gen())
