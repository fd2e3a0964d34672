"""Every kind of job (sweep, leakage, deep) by one protocol, from the library and the command line."""

from __future__ import annotations

import pytest

from privcore.cli import main
from privcore.engine.jobkinds import KINDS, cached_job, estimate_job, kind_of, run_job
from privcore.engine.specs import DataSpec, SweepSpec
from privcore.leakage.spec import LeakageSpec

SWEEP = SweepSpec(data=DataSpec(name="digits", n=300), methods=("model_sensitivity",), epsilons=(1.0,), delta=0.0,
                  repeats=2, device="cpu")
LEAKAGE = LeakageSpec(method="model_sensitivity", epsilon=1.0, data=DataSpec(name="digits", n=300), delta=1e-5,
                      references=4, canaries=4, worlds=2, repeats=2, audit_trials=16, device="cpu")


def test_each_spec_has_its_kind_and_nothing_else_has_one():
    assert kind_of(SWEEP).name == "sweep" and kind_of(LEAKAGE).name == "leakage" and set(KINDS) == {"sweep", "leakage", "deep"}
    with pytest.raises(TypeError, match="SweepSpec, LeakageSpec or DeepSpec"):
        kind_of("sweep")


@pytest.mark.parametrize("spec", [SWEEP, LEAKAGE], ids=["sweep", "leakage"])
def test_estimate_run_and_cached_result_of_a_kind(spec, tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    assert cached_job(spec) is None and estimate_job(spec) > 0
    seen = []
    result = run_job(spec, progress=lambda f, m: seen.append(f))
    assert seen and seen[-1] == 1.0
    back = cached_job(spec)
    assert back is not None and estimate_job(spec) == 0.0
    if spec is SWEEP:
        assert [r.accuracy_mean for r in back.rows] == [r.accuracy_mean for r in result.rows]
    else:
        assert back.cached and back.audit == result.audit and back.attacks == result.attacks


@pytest.mark.parametrize("command", [["sweep", "--dataset", "digits", "--epsilons", "1"],
                                     ["leakage", "--epsilon", "1", "--dataset", "digits"],
                                     ["deep", "--epsilons", "1"]], ids=["sweep", "leakage", "deep"])
def test_every_job_command_takes_the_same_executor_options(command, capsys):
    assert main([*command, "--scheduler", "tcp://127.0.0.1:1"]) == 2  # one scaffold: checked alike, before any work
    assert "--scheduler and --workers need --executor dask" in capsys.readouterr().err
