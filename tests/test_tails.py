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
