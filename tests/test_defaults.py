"""One set of defaults (privcore/knobs.py): ``privcore sweep`` with no flags, the Python API and the
dashboard's default view build the same spec, so the same cache key and the same numbers."""

from __future__ import annotations

import dataclasses

import pytest

from privcore import knobs
from privcore.cli import build_parser
from privcore.engine.specs import DataSpec, SweepSpec
from privcore.types import Problem


class _Captured(Exception):
    pass


def cli_spec(argv: list[str], monkeypatch) -> SweepSpec:
    """The spec ``privcore sweep ARGV`` would run (captured before anything is computed)."""
    from privcore.engine import runner
    from privcore.engine.cli_sweep import run_sweep_command

    seen = []

    def capture(spec, **_):
        seen.append(spec)
        raise _Captured

    monkeypatch.setattr(runner, "run_sweep", capture)
    with pytest.raises(_Captured):
        run_sweep_command(build_parser().parse_args(["sweep", *argv, "--quiet"]))
    return seen[0]


def test_a_bare_sweep_is_the_dashboards_default_curve(monkeypatch):
    from ui.setting import build_data_info, explore_specs

    point, curve = explore_specs(build_data_info(knobs.default("dataset")))  # every control at its default
    spec = cli_spec([], monkeypatch)
    assert spec == curve and spec.key == curve.key
    assert spec.epsilons == knobs.EPSILONS == (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
    assert point.epsilons == (knobs.default("epsilon"),) and set(point.epsilons) <= set(spec.epsilons)
    assert (spec.delta, spec.budget) == (1e-5, 10)  # the dashboard's first view won


def test_the_python_api_has_the_same_defaults(monkeypatch):
    spec = cli_spec([], monkeypatch)
    assert SweepSpec(data=DataSpec(augment=False)) == spec  # DataSpec alone augments by default (N beyond the data)
    problem = Problem()
    for name in ("lam", "budget", "teachers", "batch_size", "epochs", "clip", "learning_rate"):
        assert getattr(problem, name) == getattr(spec, name) == knobs.default(name), name


def test_a_given_n_still_augments_as_before(monkeypatch):
    assert cli_spec(["--n", "8000"], monkeypatch).data.augment
    assert cli_spec(["--vary", "n", "--values", "1000,8000"], monkeypatch).data.augment


def test_the_leakage_spec_and_command_share_the_defaults():
    from privcore.leakage.spec import LeakageSpec

    spec = LeakageSpec()
    shared = {f.name for f in dataclasses.fields(LeakageSpec)} & set(knobs.KNOBS) - {"repeats"}  # releases per world
    assert shared >= {"epsilon", "delta", "budget", "lam", "teachers", "accounting", "seed", "device"}
    for name in shared:
        assert getattr(spec, name) == knobs.default(name), name
    args = build_parser().parse_args(["leakage", "--epsilon", "1"])
    for name in ("delta", "budget", "lam", "teachers", "dataset"):
        assert getattr(args, name) == knobs.default(name), name


def test_every_knob_has_one_default():
    for k in knobs.KNOBS.values():
        assert k.first_view == (None if k.per_dataset else k.default), k.name
    sizes = {k.name for k in knobs.KNOBS.values() if k.per_dataset}
    assert sizes == {"n", "dim", "classes"}
