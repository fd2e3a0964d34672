"""privcore.tails: Exp(1), Gumbel and Laplace draws whose tails reach float64's range.

The one-uniform recipes capped a Gumbel draw at 36.7 (a difference of two at 43.3), so the exponential
mechanism never released a class trailing by more than 43.3 / beta: at epsilon = 40, delta = 1e-12, B = 1
(beta = 20) the votes (3, 0) gave label 1 probability 0 and their neighbour (2, 1) more than 5e-10.
"""

from __future__ import annotations

import math

import mpmath
import pytest
import scipy.stats as st
import torch

from privcore import tails

mpmath.mp.dps = 50


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("name, law", [("gumbel", "gumbel_r"), ("exponential", "expon"), ("laplace", "laplace")])
def test_draws_follow_their_law(name, law):
    x = getattr(tails, name)((100_000,), _gen(1))
    assert x.dtype == torch.float64 and bool(torch.isfinite(x).all())
    assert st.kstest(x.numpy(), law).pvalue > 1e-3


def test_draws_come_from_the_generator_alone():
    assert torch.equal(tails.gumbel((5, 3), _gen(7)), tails.gumbel((5, 3), _gen(7)))
    assert not torch.equal(tails.gumbel((5, 3), _gen(7)), tails.gumbel((5, 3), _gen(8)))
    assert tails.laplace((0,), _gen(1)).shape == (0,)


@pytest.mark.parametrize("e", [1, 2, 30, 53, 59, 60, 61, 200, 1000, 1074, 1100, 5000])
@pytest.mark.parametrize("f", [1.0, 1.5, 2.0 - 2.0 ** -52])
def test_each_tail_against_fifty_digit_arithmetic(e, f):
    """From the parts W = f 2^-e and the half: E and -log E to float64's relative precision, however far
    out in the tail (no underflow to 0, no saturation, no infinity)."""
    w = mpmath.mpf(f) * mpmath.mpf(2) ** -e
    small_e = -mpmath.log1p(-w / 2)  # E on [0, ln 2)
    large_e = mpmath.log(2) - mpmath.log(w)  # E on [ln 2, inf)
    parts = (torch.tensor([e]), torch.tensor([f], dtype=torch.float64))
    for half, exact in ((True, small_e), (False, large_e)):
        g = float(tails.gumbel_from(*parts, torch.tensor([half]))[0])
        assert g == pytest.approx(float(-mpmath.log(exact)), rel=1e-14, abs=1e-15)
        got = float(tails.exponential_from(*parts, torch.tensor([half]))[0])
        want = float(exact)  # rounds to 0 only below float64's range (e > 1,074)
        assert got == pytest.approx(want, rel=1e-13) or (want < 1e-300 and got < 1e-300)


def test_a_class_trailing_by_more_than_43_over_beta_can_win():
    """beta = 20, votes (3, 0): label 1 wins when G1 - G0 > 60. 61 leading zero bits give G1 near 42.6 ...
    100 give 69.9; the one-uniform recipe's differences stop at 43.3."""
    g1 = float(tails.gumbel_from(torch.tensor([100]), torch.tensor([1.0], dtype=torch.float64), torch.tensor([True])))
    g0 = float(tails.gumbel_from(torch.tensor([1]), torch.tensor([1.0], dtype=torch.float64), torch.tensor([False])))
    assert g1 - g0 > 60
    u = torch.tensor([2.0 ** -53, 1.0 - 2.0 ** -53], dtype=torch.float64)  # the old recipe's extreme uniforms
    old = -torch.log(-torch.log(u))
    assert float(old[1] - old[0]) < 43.3  # the known-bad sampler cannot


def test_an_all_zero_word_extends_the_exponent(monkeypatch):
    """The exponent counts leading zero bits across 52-bit words: an all-zero first word adds 52."""
    real = torch.randint
    calls = []

    def fake(low, high, size, **kw):
        calls.append(size)
        out = real(low, high, size, **kw)
        if len(calls) == 1:  # the first exponent word: all zero in position 0
            out[0] = 0
        if len(calls) == 2:  # the word drawn for it: only its top bit set
            out[:] = 1 << 51
        return out

    monkeypatch.setattr(tails.torch, "randint", fake)
    e, f, half = tails.uniform_parts((3,), _gen(2))
    assert int(e[0]) == 53 and calls[1] == (1,)
    assert bool((e[1:] >= 1).all()) and bool(((f >= 1) & (f < 2)).all())


def test_laplace_is_finite_where_the_inverse_cdf_drew_minus_infinity():
    from privcore.methods.sparse_vector import _unit_laplace

    x = _unit_laplace(50_000, _gen(3), "cpu")
    assert bool(torch.isfinite(x).all()) and abs(float(x.mean())) < 0.03
    assert math.isinf(float(-torch.sign(torch.tensor(-0.5)) * torch.log1p(torch.tensor(-1.0))))  # u = 0, the old way


@pytest.mark.parametrize("bulk_bits", [20, 2, 0])
def test_gaussian_noise_is_standard_normal_in_both_branches(monkeypatch, bulk_bits):
    """The radius from U where U > 2^-b and 20 ln 2 + exact Exp(1) beyond: with b = 2 a quarter of the radii,
    with b = 0 all of them, come from the exact branch, and the law is still N(0, 1) (memorylessness)."""
    monkeypatch.setattr(tails, "_BULK_BITS", bulk_bits)
    z = tails.gaussian_noise(100_001, _gen(3), torch.float64)
    assert z.shape == (100_001,) and z.dtype == torch.float64 and bool(torch.isfinite(z).all())
    assert st.kstest(z.numpy(), "norm").pvalue > 1e-3
    tail = z.abs() > math.sqrt(2 * bulk_bits * math.log(2))  # beyond the split: the exact branch's law
    if bulk_bits == 2:  # the exact branch's share, 1/4 of the radii
        assert float(tail.double().mean()) == pytest.approx(2 * st.norm.sf(math.sqrt(2 * bulk_bits * math.log(2))),
                                                            rel=0.05)


def test_gaussian_noise_comes_from_the_generator_alone():
    a = tails.gaussian_noise(7, _gen(5))
    assert a.dtype == torch.float32 and a.shape == (7,)
    assert torch.equal(a, tails.gaussian_noise(7, _gen(5)))
    assert not torch.equal(a, tails.gaussian_noise(7, _gen(6)))
    assert tails.gaussian_noise(0, _gen(5)).shape == (0,)
    with pytest.raises(ValueError, match="size must be an integer >= 0, got -1"):
        tails.gaussian_noise(-1, _gen(5))


def test_the_exact_branch_reaches_far_beyond_torch_randn(monkeypatch):
    """torch.randn's float32 normals stop at sqrt(2 * 24 ln 2) = 5.768 (a 24-bit uniform); the exact
    branch's radius is sqrt(2 (20 ln 2 + E)) for any E the bits give."""
    monkeypatch.setattr(tails, "_BULK_BITS", 0)
    monkeypatch.setattr(tails, "exponential", lambda shape, generator: torch.full(shape, 5000.0,
                                                                                          dtype=torch.float64))
    z = tails.gaussian_noise(1000, _gen(1), torch.float64)
    assert float(z.abs().max()) == pytest.approx(math.sqrt(2 * 5000), rel=1e-3)
    assert math.sqrt(2 * 24 * math.log(2)) < 5.77


def test_bernoulli_never_exceeds_its_rate(monkeypatch):
    """Poisson sampling is accounted at rate p: the 2^53 equally likely uniforms k 2^-53 give True for
    floor(p 2^53) of them. Checked at the edge: with u forced to the largest k below p 2^53 - 1 it is True, at
    the next it is False; torch.rand(n) < p on float32 (the known-bad variant) admits ceil(p 2^24) of 2^24."""
    p = 0.0128
    k = math.floor(p * 2.0 ** 53)  # k = 0 .. k - 1 must be True
    for value, want in ((k - 1, True), (k, False)):
        monkeypatch.setattr(torch, "rand", lambda *a, value=value, **kw: torch.full(a[0], value * 2.0 ** -53,
                                                                                      dtype=torch.float64))
        assert bool(tails.bernoulli((3,), p, _gen(0)).all()) is want
    monkeypatch.undo()
    assert math.ceil(float(torch.tensor(p, dtype=torch.float32)) * 2 ** 24) / 2 ** 24 > p  # the overshoot
    rate = float(tails.bernoulli((400_000,), 0.3, _gen(1)).double().mean())
    assert rate == pytest.approx(0.3, abs=4 * math.sqrt(0.3 * 0.7 / 400_000))
    assert not bool(tails.bernoulli((100,), 0.0, _gen(1)).any()) and bool(tails.bernoulli((100,), 1.0, _gen(1)).all())
    with pytest.raises(ValueError, match=r"p must be a probability in \[0, 1\], got 1.5"):
        tails.bernoulli((3,), 1.5, _gen(1))
