"""A method's cached results are keyed by its code (privcore/methods/source.py): editing a method's file
computes its points afresh (the old code's rows were served before), and only that method's."""

from __future__ import annotations

import pytest

from privcore.engine.cache import ResultCache
from privcore.engine.runner import run_sweep
from privcore.engine.specs import DataSpec, SweepSpec
from privcore.methods import REGISTRY, get_method, source

SPEC = SweepSpec(data=DataSpec(name="digits", n=400), methods=("model_sensitivity", "subsample_aggregate"),
                 epsilons=(1.0,), delta=0.0, repeats=2, teachers=4, device="cpu")


@pytest.fixture()
def probe(loaded_module):
    """A class in a privcore module of its own file (as a method's module is)."""
    path = loaded_module("privcore.methods._source_probe")
    yield path, type("Probe", (type(REGISTRY["model_sensitivity"]),), {"__module__": "privcore.methods._source_probe"})
    source._of_class.cache_clear()


def test_the_version_follows_the_source_of_the_class_and_of_its_privcore_bases(probe):
    path, cls = probe
    before = source._of_class(cls)
    assert before != REGISTRY["model_sensitivity"].code_version  # its own module counts
    path.write_text("A = 2\n")
    source._of_class.cache_clear()
    after = source._of_class(cls)
    assert after != before
    assert REGISTRY["model_sensitivity"].code_version == source._of_class(type(REGISTRY["model_sensitivity"]))
    assert len({m.code_version for m in REGISTRY.values()}) == len(REGISTRY)
    assert get_method("private_knn[neighbours=3]").code_version == REGISTRY["private_knn"].code_version


def test_editing_a_method_recomputes_its_own_points_and_no_other(tmp_path, monkeypatch):
    store = ResultCache(tmp_path / "c")
    first = run_sweep(SPEC, cache=store)
    assert not any(r.cached for r in first.rows)
    assert all(r.cached for r in run_sweep(SPEC, cache=store).rows)
    real = source._of_class
    edited = type(REGISTRY["model_sensitivity"])
    monkeypatch.setattr(source, "_of_class", lambda cls: "0" * 16 if cls is edited else real(cls))
    again = run_sweep(SPEC, cache=store).rows
    assert {r.method for r in again if not r.cached} == {"model_sensitivity"}
    assert {r.method for r in again if r.cached} >= {"subsample_aggregate"}


def test_editing_an_accountant_or_a_sampler_rekeys_the_methods_that_import_it(monkeypatch):
    """The key followed the methods' own modules only: halving GNMax's noise in accounting/pate.py kept its
    key, so the old accounting's rows were served as current (an independent attack found it). Every privcore
    module a method's modules import, at the top or inside a function, now counts; packages (whose
    __init__ imports every method) do not, so the methods keep keys of their own."""
    before = {name: m.code_version for name, m in REGISTRY.items()}
    real = source._source

    def changed_by(module: str) -> set[str]:
        monkeypatch.setattr(source, "_source", lambda name: real(name) + (b"\n# edited\n" if name == module else b""))
        source._of_class.cache_clear()
        try:
            return {name for name, m in REGISTRY.items() if source._of_class(type(m)) != before[name]}
        finally:
            source._of_class.cache_clear()

    pate = changed_by("privcore.accounting.pate")
    assert {"confident_gnmax", "pate_student"} <= pate and not pate & {"model_sensitivity", "dpsgd"}
    assert {"subsample_aggregate", "sparse_vector", "confident_gnmax"} <= changed_by("privcore.tails")
