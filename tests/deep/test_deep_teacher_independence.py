"""privcore/deep/teachers.py: each deep teacher is a function of its own part only, bit for bit.

Replacing one image of teacher 0's part (by another image, by an image lit on one pixel that no training
image lights, by its negative -x, which for the fixed normalisation (x - 0.5) / 0.5 is 255 - x, or with
another label) must leave every other teacher's parameters bitwise the same, batched (vmapped) or looped:
a vote method's "one example changes one vote" rests on it (issue 29). A tiny CNN, two steps, on the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privcore.deep.dpsgd import SGDConfig
from privcore.deep.images import ImageData
from privcore.deep.models import build_model
from privcore.deep.teachers import teacher_parts, train_teachers

CPU = torch.device("cpu")
TEACHERS, N, SEED = 4, 48, 0
#: 12 images per teacher in batches of 6: one epoch is two steps; augmentation on (per-teacher generators).
CFG = SGDConfig(epochs=1, batch_size=6, lr=0.1, augment=True)
REPLACEMENTS = ("another image", "never-lit pixel", "-x", "label")


def _data() -> ImageData:
    """8 x 8 images of 3 classes whose top row is dark in every training image."""
    rng = np.random.default_rng(3)
    y = np.arange(N + 4) % 3
    x = (rng.integers(0, 120, (N + 4, 1, 8, 8)) + 60 * y.reshape(-1, 1, 1, 1)).astype(np.uint8)
    x[:, :, 0, :] = 0
    return ImageData("tiny", x[:N], y[:N], x[N:], y[N:], classes=3)


def _replaced(data: ImageData, row: int, kind: str) -> ImageData:
    x, y = data.x_train.copy(), data.y_train.copy()
    if kind == "another image":
        x[row], y[row] = data.x_test[0], data.y_test[0]
    elif kind == "never-lit pixel":
        assert not data.x_train[:, 0, 0, 0].any()
        x[row] = 0
        x[row, 0, 0, 0] = 255
    elif kind == "-x":
        x[row] = 255 - x[row]
    else:
        y[row] = (y[row] + 1) % data.classes
    return ImageData(data.name, x, y, data.x_test, data.y_test, classes=data.classes)


def _model(g: torch.Generator) -> torch.nn.Module:
    return build_model("small-cnn", 1, 3, g, CPU, size=8)


@pytest.fixture(scope="module")
def data() -> ImageData:
    return _data()


@pytest.fixture(scope="module", params=[True, False], ids=["batched", "looped"])
def trained(request, data):
    return request.param, train_teachers(_model, data, CFG, TEACHERS, SEED, CPU, batched=request.param)


@pytest.mark.parametrize("kind", REPLACEMENTS)
def test_replacing_one_image_leaves_every_other_teacher_bitwise_identical(data, trained, kind):
    batched, params = trained
    row = int(teacher_parts(N, TEACHERS, SEED, CPU)[0, 0])
    params2 = train_teachers(_model, _replaced(data, row, kind), CFG, TEACHERS, SEED, CPU, batched=batched)
    assert any(not torch.equal(params[k][0], params2[k][0]) for k in params), "teacher 0 must change"
    moved = sorted({t for k in params for t in range(1, TEACHERS) if not torch.equal(params[k][t], params2[k][t])})
    assert not moved, f"{kind}: teachers {moved} changed though only teacher 0's part did"


def _normalised_by_its_own_pixels(data: ImageData) -> ImageData:
    """Known bad: the normalisation constants computed from the private training images (shared by all
    teachers), which :class:`ImageData` forbids: then every teacher depends on every part."""
    x = data.x_train.astype(np.float64) / 255.0
    return ImageData(data.name, data.x_train, data.y_train, data.x_test, data.y_test, classes=data.classes,
                     mean=(float(x.mean()),), std=(float(x.std()),))


def test_the_bitwise_check_catches_a_normalisation_shared_by_the_teachers(data):
    row = int(teacher_parts(N, TEACHERS, SEED, CPU)[0, 0])
    params = train_teachers(_model, _normalised_by_its_own_pixels(data), CFG, TEACHERS, SEED, CPU)
    params2 = train_teachers(_model, _normalised_by_its_own_pixels(_replaced(data, row, "another image")), CFG,
                             TEACHERS, SEED, CPU)
    assert all(any(not torch.equal(params[k][t], params2[k][t]) for k in params) for t in range(1, TEACHERS))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "looped"])
def test_on_cuda_too_replacing_one_image_moves_only_its_teacher(data, batched):
    """The same property on a GPU, where vmapped convolutions and cuDNN's algorithm choices could mix the
    teachers' arithmetic (an attack on the guarantees found it untested there)."""
    cuda = torch.device("cuda")

    def model(g: torch.Generator) -> torch.nn.Module:
        return build_model("small-cnn", 1, 3, g, cuda, size=8)

    row = int(teacher_parts(N, TEACHERS, SEED, cuda)[0, 0])
    saved = torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False  # no run-to-run noise
    try:
        params = train_teachers(model, data, CFG, TEACHERS, SEED, cuda, batched=batched)
        again = train_teachers(model, data, CFG, TEACHERS, SEED, cuda, batched=batched)
        params2 = train_teachers(model, _replaced(data, row, "another image"), CFG, TEACHERS, SEED, cuda,
                                 batched=batched)
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved
    assert all(torch.equal(params[k], again[k]) for k in params), "the same data must give the same teachers"
    assert any(not torch.equal(params[k][0], params2[k][0]) for k in params), "teacher 0 must change"
    moved = sorted({t for k in params for t in range(1, TEACHERS) if not torch.equal(params[k][t], params2[k][t])})
    assert not moved, f"teachers {moved} changed though only teacher 0's part did"
