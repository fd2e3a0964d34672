"""privcore/knobs.py: one declaration drives Problem, SweepSpec, the CLI flags and the URL fields."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from privcore import knobs
from privcore.engine.specs import SweepSpec
from privcore.types import Problem


def test_problem_and_spec_defaults_come_from_the_knobs():
    for f in dataclasses.fields(Problem):
        assert f.default == knobs.default(f.name), f.name
    for f in dataclasses.fields(SweepSpec):
        if f.name in knobs.KNOBS and f.name != "methods" and f.default is not dataclasses.MISSING:  # methods: all
            assert f.default == knobs.default(f.name), f.name


def test_check_names_the_knob_the_range_and_the_value():
    with pytest.raises(ValueError, match=r"budget must be an integer in \[1, inf\], got 0"):
        knobs.check("budget", 0)
    with pytest.raises(TypeError, match="teachers must be an integer"):
        knobs.check("teachers", 3.0)
    with pytest.raises(ValueError, match=r"lam must be in \[1e-12, inf\)"):
        knobs.check("lam", 0.0)
    with pytest.raises(ValueError, match="lam must be"):  # below 1e-12 the sensitivity overflows to inf
        knobs.check("lam", 1e-320)
    assert knobs.check("lam", "auto") == "auto"
    with pytest.raises(TypeError, match="lam"):
        knobs.check("lam", "auto", allow_auto=False)
    with pytest.raises(ValueError, match="accounting must be one of paper, corrected, tight"):
        knobs.check("accounting", "loose")


def test_lam_auto_stand_in_is_stated_once():
    assert knobs.fixed_lam("auto") == knobs.LAM_AUTO_STANDIN == 1e-3
    assert knobs.fixed_lam(0.5) == 0.5


def test_cli_flags_are_derived():
    p = argparse.ArgumentParser()
    knobs.add_argument(p, "batch_size")
    knobs.add_argument(p, "lam")
    knobs.add_argument(p, "accounting")
    args = p.parse_args(["--batch-size", "64", "--lam", "auto"])
    assert (args.batch_size, args.lam, args.accounting) == (64, "auto", "corrected")
    assert knobs.knob("learning_rate").cli_flag == "--lr"
    with pytest.raises(SystemExit):
        p.parse_args(["--accounting", "loose"])


def test_url_fields_and_controls_are_derived():
    from ui import state

    for k in knobs.KNOBS.values():
        if not k.url:
            continue
        field = state.FIELDS[k.url]
        assert field.help == k.tooltip
        if k.kind != "choices":
            assert field.default == k.first_view, k.name
        if k.url_low is not None:
            assert (field.low, field.high) == (k.url_low, k.url_high)
    assert state.FIELDS["methods"].default == list(knobs.knob("methods").choices)
    for k in knobs.KNOBS.values():  # every grid value is one the library accepts
        for v in k.grid:
            if v != "auto":
                k.check(v)


def test_minus_zero_is_zero():
    """`--delta -0` printed delta -0.0 in every row and keyed a cache entry of its own."""
    import math

    from privcore import knobs
    from privcore.types import PrivacyBudget

    for v in (-0.0, "-0"):
        try:
            got = knobs.check("delta", float(v))
        except ValueError:
            continue
        assert got == 0.0 and math.copysign(1.0, got) == 1.0
    assert math.copysign(1.0, PrivacyBudget(1.0, -0.0).delta) == 1.0
