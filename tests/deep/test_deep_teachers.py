"""The T teachers: disjoint parts, vmapped training equal to the loop, resume, votes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privcore.deep.dpsgd import SGDConfig
from privcore.deep.images import ImageData
from privcore.deep.loop import load_checkpoint
from privcore.deep.models import build_model
from privcore.deep.teachers import teacher_parts, teacher_predictions, train_teachers, votes_from_predictions

CPU = torch.device("cpu")


def _data(n: int = 66, m: int = 20) -> ImageData:
    rng = np.random.default_rng(1)
    y = np.arange(n + m) % 3
    x = (rng.integers(0, 120, (n + m, 1, 8, 8)) + 60 * y.reshape(-1, 1, 1, 1)).astype(np.uint8)
    return ImageData("tiny", x[:n], y[:n], x[n:], y[n:], classes=3)


def _fn(g: torch.Generator) -> torch.nn.Module:
    return build_model("small-cnn", 1, 3, g, CPU, size=8)


CFG = SGDConfig(epochs=2, batch_size=6, lr=0.1, augment=True)


def test_parts_are_disjoint_and_equal():
    parts = teacher_parts(66, 4, 0, CPU)
    assert parts.shape == (4, 16) and parts.unique().numel() == 64
    with pytest.raises(ValueError, match="teachers must be an integer in \\[1, 66\\]"):
        teacher_parts(66, 67, 0, CPU)


def test_batched_and_loop_teachers_agree_and_give_the_same_votes():
    data = _data()
    a = train_teachers(_fn, data, CFG, 4, 0, CPU, batched=True)
    b = train_teachers(_fn, data, CFG, 4, 0, CPU, batched=False)
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-5, rtol=1e-4), k
    model = _fn(torch.Generator())
    pa, pb = teacher_predictions(model, a, data, CPU), teacher_predictions(model, b, data, CPU)
    assert pa.shape == (4, 20) and torch.equal(pa, pb)
    votes = votes_from_predictions(pa, 3)
    assert votes.dtype == torch.float64 and torch.equal(votes.sum(1), torch.full((20,), 4.0))
    # Each teacher is its own model: the stacked predictions are those of teacher t alone.
    one = {k: v[2] for k, v in a.items()}
    solo = torch.func.functional_call(model, one, (torch.zeros(1, 1, 8, 8),))
    stacked = torch.func.functional_call(model, {k: v[2] for k, v in b.items()}, (torch.zeros(1, 1, 8, 8),))
    assert torch.allclose(solo, stacked, atol=1e-5)


@pytest.mark.parametrize("batched", [True, False])
def test_teachers_resume_from_checkpoint(tmp_path, batched):
    data = _data()
    full = train_teachers(_fn, data, CFG, 4, 0, CPU, batched=batched)
    path = tmp_path / "t.pt"
    train_teachers(_fn, data, CFG, 4, 0, CPU, batched=batched, checkpoint=path, tag="x", stop_after=5)
    assert load_checkpoint(path, "x", CPU)["step"] > 0
    resumed = train_teachers(_fn, data, CFG, 4, 0, CPU, batched=batched, checkpoint=path, tag="x")
    assert all(torch.equal(full[k], resumed[k]) for k in full)
