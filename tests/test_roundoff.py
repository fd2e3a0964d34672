"""The clipped sum as computed (privcore/roundoff.py): float rounding cannot push DP-SGD past 2C.

The known-bad variants are the summation orders a library is free to use: a float32 running sum over the
batch, or over a layer's squares. The constructions below make every rounding of such a sum go the
adversary's way; they are checked against exact rational arithmetic (fractions), or against float64 where
the float32 bound under test is 2^29 times wider than float64's rounding. The last tests are an independent
review's reproducers (an underflowed norm, a subnormal factor, transposed storage).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from torch import nn

from privcore import roundoff
from privcore.precision import clip_factors, clip_margin
from privcore.roundoff import NORM_BLOCK, SUM_CHUNK, gamma, outer_sum, squared_norms, step_clip, sum_error, weighted_sum

F32 = np.float32


def _running_sum(values: list[float]) -> float:
    """Left-to-right float32 running sum: the order a library may use (the known-bad variant's arithmetic)."""
    total = F32(0.0)
    for v in values:
        total = F32(total + F32(v))
    return float(total)


def _chunked_running_sum(values: list[float], chunk: int) -> float:
    """The scheme of privcore.roundoff with the worst order inside each chunk: float32 running sums of
    ``chunk`` terms, added in float64."""
    return float(sum(np.float64(_running_sum(values[i:i + chunk])) for i in range(0, len(values), chunk)))


def _neighbours(w: float, b: int) -> tuple[list[float], list[float]]:
    """One coordinate of two neighbouring batches of b clipped examples (|value| <= w each): example 0 is
    w in D and -w in D'; an offset example puts D's running sum in [1, 2) and D''s in (-0.5, -0.25), whose
    float32 spacings differ 4x; then b - 2 equal steps t = 2^-24 + 2^-40 round D's sum up by almost
    2^-24 and D''s down by 2^-40 each, so the computed sums drift apart by about 2^-24 per step."""
    offset = 0.35
    t = 2.0 ** -24 + 2.0 ** -40
    rest = [offset] + [t] * (b - 2)
    return [w] + rest, [-w] + rest


def _exact(values: list[float]) -> Fraction:
    return sum((Fraction(float(F32(v))) for v in values), Fraction(0))


def test_a_float32_running_sum_breaks_2c_with_the_old_margin_alone():
    """Known-bad: examples clipped to C (1 - 64 eps) only (the margin of earlier versions), summed by a
    float32 running sum of 600 examples: the two neighbours' computed sums differ by more than 2C."""
    clip, b = 0.8, 600
    w = clip * clip_margin(torch.float32)
    d, d2 = _neighbours(w, b)
    assert abs(_exact(d) - _exact(d2)) <= 2 * Fraction(clip)  # exact arithmetic: within 2C
    gap = abs(_running_sum(d) - _running_sum(d2))
    assert gap > 2 * clip, gap / (2 * clip)


@pytest.mark.parametrize("b", [64, 600, 1024])
def test_the_step_clip_keeps_the_worst_order_within_2c(b):
    """The same construction with each example clipped to step_clip(C, b) and summed in chunks of
    SUM_CHUNK (worst order inside each chunk, float64 across): within 2C; and the real weighted_sum too."""
    clip = 0.8
    w = step_clip(clip, b) * clip_margin(torch.float32)
    d, d2 = _neighbours(w, b)
    assert abs(_chunked_running_sum(d, SUM_CHUNK) - _chunked_running_sum(d2, SUM_CHUNK)) <= 2 * clip
    # The bound itself (eta b C') holds for the adversarial order, against exact arithmetic.
    for values in (d, d2):
        err = abs(Fraction(_chunked_running_sum(values, SUM_CHUNK)) - _exact(values))
        assert err <= Fraction(sum_error(b)) * sum(abs(Fraction(float(F32(v)))) for v in values)
    ones = torch.ones(b)
    got = [float(weighted_sum(ones, torch.tensor(v, dtype=torch.float32).view(b, 1))[0]) for v in (d, d2)]
    assert abs(got[0] - got[1]) <= 2 * clip


def test_the_chunked_sums_meet_their_bound_on_random_data():
    """||computed - exact|| <= eta(b) sum_i ||x_i|| for weighted_sum and outer_sum (exact: float64 of
    float32 inputs, whose errors are 2^29 times smaller than the bound's float32 terms)."""
    gen = torch.Generator().manual_seed(3)
    for b in (1, 31, 33, 200):
        x = torch.randn(b, 50, generator=gen) * torch.logspace(-3, 3, b).unsqueeze(1)
        f = torch.rand(b, generator=gen)
        exact = (f.double().unsqueeze(1) * x.double()).sum(0)
        got = weighted_sum(f, x)
        assert got.dtype == torch.float64
        mass = float((f.double().unsqueeze(1) * x.double()).norm(dim=1).sum())
        assert float((got - exact).norm()) <= sum_error(b) * mass
        u, v = torch.randn(b, 7, generator=gen), torch.randn(b, 9, generator=gen)
        exact_outer = u.double().t() @ v.double()
        mass = float((u.double().norm(dim=1) * v.double().norm(dim=1)).sum())
        assert float((outer_sum(u, v) - exact_outer).norm()) <= sum_error(b) * mass


def test_zero_rows_and_empty_batches():
    """Zero rows (DP-SGD's padding) change a sum only by its rounding (another chunking), and an empty
    batch sums to zero."""
    gen = torch.Generator().manual_seed(4)
    x, f = torch.randn(40, 6, generator=gen), torch.rand(40, generator=gen)
    padded = torch.cat([x, torch.zeros(24, 6)])
    got = weighted_sum(torch.cat([f, torch.rand(24, generator=gen)]), padded)
    assert torch.allclose(got, weighted_sum(f, x), rtol=0, atol=2 * sum_error(64) * float(x.norm(dim=1).sum()))
    assert torch.equal(weighted_sum(f[:0], x[:0]), torch.zeros(6, dtype=torch.float64))
    assert torch.equal(outer_sum(x[:0], x[:0]), torch.zeros(6, 6, dtype=torch.float64))


def test_a_float32_sum_of_squares_can_fall_far_short_of_the_norm():
    """Known-bad: one weight of 1 then 36,864 squares of 2^-25 each: a float32 running sum keeps 1 (each
    square is under half a unit), 5.5e-4 short of the norm in the norm, 70 times the clip margin; the
    factor from that norm scales the example past the clip; squared_norms' float32 blocks of 64 are short
    by at most gamma_65 and its factor keeps the example inside."""
    k = 36_864
    g = torch.cat([torch.ones(1), torch.full((k,), 2.0 ** -12.5)]).view(1, -1)
    exact = 1 + Fraction(k) * Fraction(float(F32(2.0 ** -12.5))) ** 2
    short = _running_sum([float(v) ** 2 for v in g[0].double()])
    assert short == 1.0
    clip = 0.5
    bad = float(clip_factors(torch.tensor([short ** 0.5]), clip, torch.float32)[0])
    assert Fraction(bad) ** 2 * exact > Fraction(clip) ** 2  # outside the ball
    good_sq = squared_norms(g)
    # float32 blocks of NORM_BLOCK squares (the first block keeps 1, as above), float64 across blocks
    assert abs(Fraction(float(good_sq[0])) - exact) <= Fraction(gamma(NORM_BLOCK + 1, torch.float32)) * exact
    good = float(clip_factors(good_sq.sqrt(), clip, torch.float32, k + 1)[0])
    assert Fraction(good) ** 2 * exact <= Fraction(clip) ** 2


def _exact_conv_norm_sq(a: torch.Tensor, b: torch.Tensor) -> Fraction:
    """||sum_s b_s a_s^T||_F^2 for a 1x1 convolution, a [C_in, L], b [C_out, L], in rationals."""
    cin, L = a.shape
    cout = b.shape[0]
    total = Fraction(0)
    for o in range(cout):
        for i in range(cin):
            entry = sum(Fraction(float(b[o, s])) * Fraction(float(a[i, s])) for s in range(L))
            total += entry * entry
    return total


def test_the_gram_norm_is_an_upper_bound_even_when_positions_cancel():
    """Two output positions whose gradients cancel to 1e-6 of their size: the Gram entries are ~1, the
    norm ~1e-12 squared. A float32 Gram computation can miss it entirely (the known-bad variant, computed
    here: not an upper bound); the float64 one plus 4 gamma M^2 is one, and M is returned."""
    from privcore.deep.ghost import _gram_norms

    conv = nn.Conv2d(2, 2, 1, bias=False)
    a = torch.tensor([[[[1.0, 1.0]], [[0.5, 0.5]]]])  # [1, C_in, 1, L=2]: the same input at both positions
    b = torch.tensor([[[[1.0, -1.0 + 2.0 ** -20]], [[0.25, -0.25]]]])  # output gradients that nearly cancel
    exact = _exact_conv_norm_sq(a[0].reshape(2, 2), b[0].reshape(2, 2))
    sq, mass = _gram_norms(conv, a, b)
    assert Fraction(float(sq[0])) >= exact
    assert float(mass[0]) == pytest.approx(2 * (1.25 ** 0.5) * (1.0625 ** 0.5), rel=1e-6)
    unfolded = a.reshape(1, 2, 2)
    bl = b.reshape(1, 2, 2)
    float32_gram = float((torch.bmm(unfolded.transpose(1, 2), unfolded) * torch.bmm(bl.transpose(1, 2), bl)).sum())
    lowered = Fraction(float32_gram) - 4 * Fraction(float(mass[0])) ** 2 * Fraction(2.0 ** -24)
    assert lowered < exact  # a float32 Gram value minus its possible error is no upper bound


def test_the_gram_cap_limits_c_m(monkeypatch):
    """Ghost clipping on the Gram route caps each factor so that c_i M_i <= GRAM_CAP clip; with the cap
    lowered to bind, the sum shrinks accordingly (the cap is applied, not only declared)."""
    from privcore.deep import ghost as ghost_module
    from privcore.deep.models import build_model

    monkeypatch.setattr(ghost_module, "GHOST_FACTOR", {"cpu": 0.0})  # every convolution by the Gram route
    gen = torch.Generator().manual_seed(0)
    model = build_model("small-cnn", 1, 3, gen, size=8).double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(5, 1, 8, 8, generator=gen, dtype=torch.float64), torch.tensor([0, 1, 2, 0, 1])
    free, _ = ghost_module.ghost_clip_and_sum(model, params, {}, x, y, 1e6)
    monkeypatch.setattr(ghost_module, "GRAM_CAP", 1e-9)
    capped, _ = ghost_module.ghost_clip_and_sum(model, params, {}, x, y, 1e6)
    assert float(capped["fc.weight"].norm()) < 1e-3 * float(free["fc.weight"].norm())


@pytest.mark.parametrize("k", [1, 63, 64, 65, 36_864])
def test_squared_norms_on_any_width_meet_their_bound(k):
    gen = torch.Generator().manual_seed(k)
    t = torch.randn(3, k, generator=gen) * torch.logspace(-25, 15, k)  # squares down to float32's subnormals
    exact = t.double().pow(2).sum(1)  # float64 of float32 squares: exact products, 2^-53 sums
    got = squared_norms(t.view(3, 1, k))
    allowed = 2 * gamma(NORM_BLOCK + 1, torch.float32) * exact + k * 2.0 ** -149  # + subnormal rounding
    assert torch.all((got - exact).abs() <= allowed)


def test_sum_error_and_step_clip():
    assert sum_error(600) == pytest.approx((SUM_CHUNK + 2) * 2.0 ** -24, rel=0.05)
    assert step_clip(1.0, 0) < 1.0 and step_clip(1.0, 600) > 0.998  # 0.12 % at the paper's batch
    assert step_clip(1.0, 4096) < step_clip(1.0, 600) < step_clip(1.0, 64)
    with pytest.raises(ValueError, match="clip"):
        step_clip(0.0, 10)
    with pytest.raises(ValueError, match="batch"):
        sum_error(-1)
    assert roundoff.GRAM_CAP * gamma(roundoff.GRAM_SUM_POSITIONS + 602, torch.float64) < 1e-7


def _exact_sq(summed: dict) -> Fraction:
    return sum((Fraction(float(v)) ** 2 for t in summed.values() for v in t.flatten().tolist()), Fraction(0))


def test_a_linear_layers_norm_cannot_underflow_to_zero():
    """Review: ghost clipping's Linear norm is ||a||^2 ||b||^2; with b's float32 squares underflowing (output
    gradients of 1.6e-23) and ||a||^2 about 1.6e40, the norm came out 0, the factor 1, and the example entered
    the sum at 6 C. The squares are float64 now: the example is clipped."""
    from torch import nn

    from privcore.deep.ghost import ghost_clip_and_sum

    h, clip = 4096, 1e-3
    model = nn.Sequential(nn.Linear(1, h, bias=False), nn.Linear(h, 10, bias=False))
    with torch.no_grad():
        model[0].weight.fill_(2e18)
        model[1].weight.zero_()
        model[1].weight[0].fill_(52.5 / (h * 2e18))  # logit 0 = 52.5: the softmax saturates
    params = {k: v.detach() for k, v in model.named_parameters()}
    summed, norms = ghost_clip_and_sum(model, params, {}, torch.ones(1, 1), torch.zeros(1, dtype=torch.long), clip)
    assert float(norms[0]) > 0
    assert _exact_sq(summed) <= Fraction(clip) ** 2


def test_a_subnormal_factor_is_zero():
    """Review: a factor below float32's smallest normal rounds with an absolute error of 2^-150, which scaled an
    example to 1.67 C; clip_factors now gives 0 there (and normal factors as before)."""
    tiny = torch.finfo(torch.float32).tiny
    norms = torch.tensor([1.0, 1e30, 0.5 / (0.6 * 2.0 ** -149)], dtype=torch.float64)
    f = clip_factors(norms, 0.5, torch.float32)
    assert f[0] == 0.5 * clip_margin(torch.float32) or abs(float(f[0]) - 0.5) < 1e-5
    assert float(f[1]) >= tiny or float(f[1]) == 0.0
    assert float(f[2]) == 0.0
    assert all(Fraction(float(v)) * Fraction(float(n)) <= Fraction(0.5) for v, n in zip(f, norms))


def test_squared_norms_of_a_transposed_view():
    """Review: the block view assumed row-major storage; a transposed [n, K] view gave wrong norms."""
    gen = torch.Generator().manual_seed(9)
    t = torch.randn(200, 3, generator=gen).t()  # [3, 200], column-major
    exact = t.double().pow(2).sum(1)
    assert torch.allclose(squared_norms(t), exact, rtol=1e-5)


def test_the_clip_is_bounded_where_float32_stays_in_range():
    from privcore import knobs

    for bad in (1e-9, 1e7):
        with pytest.raises(ValueError, match=r"clip must be in \[1e-08, 1e\+06\]"):
            knobs.check("clip", bad)
    assert knobs.check("clip", 1e-8) == 1e-8 and knobs.check("clip", 1e6) == 1e6
