"""DP-SGD's batched release (privcore/methods/dpsgd.py) against a plain one-model-at-a-time reference.

The release keeps every (epsilon, repetition) model in one transposed tensor and clips through
||x_n|| ||p_n - y_n||; the reference below trains each model alone, materialises every
per-example gradient x_n (p_n - y_n)^T, clips it by its own Frobenius norm, and uses the same
batches and unit noise (drawn by the module's own _chunks/_draw_chunk from the same generators).
A wrong layout, clipping, noise scale or step size moves the models far beyond the tolerance.
"""

from __future__ import annotations

import pytest
import torch

from privcore.context import TrainContext
from privcore.data import load_dataset
from privcore.methods import REGISTRY
from privcore.methods.dpsgd import _chunks, _draw_chunk, sum_chunk
from privcore.roundoff import step_clip
from privcore.types import PrivacyBudget, Problem


@pytest.fixture(scope="module")
def ctx():
    ds = load_dataset("synthetic", seed=0)
    problem = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, batch_size=64, epochs=3, clip=0.5, learning_rate=2.0)
    return TrainContext.from_dataset(ds, problem, 3, torch.device("cpu"))


def _reference(ctx: TrainContext, multipliers: list[float], repeats: int) -> torch.Tensor:
    """[E, R, D, C] by the textbook loop, in float64."""
    pb = ctx.problem
    n, d = ctx.x_train.shape
    c = ctx.classes
    x, y = ctx.x_train.double(), ctx.y_train
    gens = [ctx.generator("dpsgd", "run", r) for r in range(repeats)]
    draws = [_draw_chunk(gens, chunk, n, pb.sample_rate, d, c, ctx.device) for chunk in _chunks(pb.steps, n, d * c)]
    out = torch.zeros(len(multipliers), repeats, d, c, dtype=torch.float64)
    for e, mult in enumerate(multipliers):
        for r in range(repeats):
            theta = torch.zeros(d, c, dtype=torch.float64)
            for idx_chunk, _, _, unit_chunk in draws:
                for s in range(idx_chunk.shape[1]):
                    rows = idx_chunk[r, s]
                    rows = rows[rows < n]  # drop the padding
                    xb, yb = x[rows], y[rows]
                    resid = torch.softmax(xb @ theta, dim=1) - torch.nn.functional.one_hot(yb, c).double()
                    per_example = xb.unsqueeze(2) * resid.unsqueeze(1)  # [b, D, C]
                    norms = per_example.flatten(1).norm(dim=1)
                    # the clip of a step of b examples (privcore.roundoff: rounding included, the sum moves by <= 2 clip)
                    factor = torch.clamp(step_clip(pb.clip, len(rows), chunk=sum_chunk(pb.batch_size)) / norms.clamp_min(1e-12), max=1.0)
                    total = (per_example * factor.view(-1, 1, 1)).sum(dim=0)
                    noise = mult * pb.clip * unit_chunk[r, s].double()
                    theta = theta - pb.learning_rate * (total + noise) / (pb.sample_rate * n)
            out[e, r] = theta
    return out


@pytest.mark.slow
def test_batched_release_equals_the_per_model_reference(ctx):
    m = REGISTRY["dpsgd"]
    scales = [m.calibrate(PrivacyBudget(eps, 1e-5), ctx.problem) for eps in (1.0, 8.0)]
    got = m.release(ctx, scales, 3).double()
    want = _reference(ctx, [s.noise_multiplier for s in scales], 3)
    assert got.shape == want.shape
    scale = want.abs().max()
    assert float(scale) > 0.1  # the models moved
    assert torch.allclose(got, want, atol=1e-4 * float(scale), rtol=0), float((got - want).abs().max())


@pytest.mark.slow
def test_reference_catches_a_wrong_noise_scale(ctx):
    """The comparison above can fail: the same reference with the noise doubled is far off."""
    m = REGISTRY["dpsgd"]
    scale = m.calibrate(PrivacyBudget(1.0, 1e-5), ctx.problem)
    got = m.release(ctx, [scale], 2).double()
    wrong = _reference(ctx, [2.0 * scale.noise_multiplier], 2)
    assert not torch.allclose(got, wrong, atol=1e-4 * float(wrong.abs().max()), rtol=0)


def test_each_repetition_clips_to_the_step_clip_of_its_own_batch(ctx, monkeypatch):
    """The release asks for the step clip with each repetition's drawn batch size (not the padded size,
    which depends on the other repetitions), and uses it: with C / 3 instead the models change."""
    from privcore import roundoff

    m = REGISTRY["dpsgd"]
    pb = ctx.problem
    n, d = ctx.x_train.shape
    scale = m.calibrate(PrivacyBudget(1.0, 1e-5), pb)
    plain = m.release(ctx, [scale], 2)
    gens = [ctx.generator("dpsgd", "run", r) for r in range(2)]
    counts = torch.cat([_draw_chunk(gens, chunk, n, pb.sample_rate, d, ctx.classes, ctx.device)[2]
                        for chunk in _chunks(pb.steps, n, d * ctx.classes)], dim=1)  # [R, steps]
    asked = []
    real = roundoff.step_clip
    monkeypatch.setattr(roundoff, "step_clip", lambda c, b, chunk: asked.append(b) or real(c, b, chunk=chunk))
    assert torch.equal(m.release(ctx, [scale], 2), plain)
    assert asked == counts.t().flatten().tolist()  # step by step, repetition by repetition
    monkeypatch.setattr(roundoff, "step_clip", lambda c, b, chunk: c / 3)
    assert not torch.allclose(m.release(ctx, [scale], 2), plain, atol=1e-3)


def test_the_partial_sum_size_follows_the_public_batch_size():
    from privcore import roundoff
    from privcore.methods import dpsgd

    assert sum_chunk(256) == dpsgd.SUM_CHUNK == 128 and sum_chunk(4096) == roundoff.SUM_CHUNK == 32
    assert 1 - roundoff.step_clip(1.0, 4096, chunk=sum_chunk(4096)) < 0.01  # under 1 % of the clip


def test_the_float32_noise_std_is_never_below_the_calibrated_one():
    """Review, s4: the steps run in float32; z * clip rounded to nearest could fall below the
    multiplier the accountant accepted. It is rounded up instead."""
    from privcore.methods.dpsgd import noise_std_float32
    from privcore.types import NoiseScale

    zs = [4.246160918, 1.0 + 2.0 ** -30, 3.0000001, 0.7248511, 35.00323, 2.0 - 2.0 ** -40]
    clip = 1.0
    scales = [NoiseScale("dpsgd", 1.0, 1e-5, "corrected", "gaussian", sigma=z * clip, noise_multiplier=z) for z in zs]
    std = noise_std_float32(scales, clip, torch.device("cpu"))
    assert std.dtype == torch.float32
    exact = torch.tensor(zs, dtype=torch.float64) * clip
    assert bool((std.double() >= exact).all())
    assert bool((std.double() <= exact * (1 + 2.0 ** -23)).all())  # by at most one float32 step
    # The check can fail: round-to-nearest lands below for some of these.
    assert bool((exact.float().double() < exact).any())
    none = NoiseScale("dpsgd", float("inf"), 1e-5, "corrected", "none")
    assert float(noise_std_float32([none], clip, torch.device("cpu"))[0]) == 0.0


def test_the_clipped_sum_is_taken_in_full_float32(ctx, monkeypatch):
    """The training (every step's clipped sum) runs inside privcore.precision.exact_fp32, entered once (no TF32
    on CUDA even when the user turned it on globally); the result is unchanged."""
    import contextlib

    from privcore import precision

    seen = []

    @contextlib.contextmanager
    def recording(device):
        seen.append(torch.device(device).type)
        yield

    m = REGISTRY["dpsgd"]
    scale = m.calibrate(PrivacyBudget(1.0, 1e-5), ctx.problem)
    plain = m.release(ctx, [scale], 1)
    monkeypatch.setattr(precision, "exact_fp32", recording)
    again = m.release(ctx, [scale], 1)
    assert seen == ["cpu"]
    assert torch.equal(plain, again)


def test_the_unit_noise_tails_are_not_cut_off(monkeypatch):
    """The linear DP-SGD's unit noise comes from privcore.tails.gaussian_noise: forced into the exact tail
    branch with that branch's Exp(1) at 5000, it reaches about 100 deviations (torch.randn stops at 5.77)."""
    from privcore import tails

    monkeypatch.setattr(tails, "_BULK_BITS", 0)
    monkeypatch.setattr(tails, "exponential", lambda shape, generator: torch.full(shape, 5000.0,
                                                                                          dtype=torch.float64))
    gens = [torch.Generator().manual_seed(s) for s in (1, 2)]
    _, _, _, unit = _draw_chunk(gens, 3, 20, 0.2, 5, 4, torch.device("cpu"))
    assert unit.shape == (2, 3, 5, 4) and unit.dtype == torch.float32
    assert float(unit.abs().max()) > 50
