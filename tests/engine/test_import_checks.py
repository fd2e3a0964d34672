"""``results import`` refuses a record that contradicts its own point, all or nothing, naming record and field.

The key of a record is a hash of its point only, so an edited value keeps a valid key: these are the
edits the key check cannot see (privcore/engine/import_checks.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from privcore.engine.cache import ResultCache
from privcore.engine.cli_results import ImportRejected, export_results, import_results
from privcore.engine.import_checks import check_against_point
from privcore.engine.runner import run_sweep
from privcore.engine.specs import DataSpec, SweepSpec
from privcore.methods import METHOD_NAMES

REPEATS = 4


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """Every method at ε = 1 and ∞ (and the baseline), 4 repetitions, exported: (header line, records)."""
    base = tmp_path_factory.mktemp("import_checks")
    cache = ResultCache(base / "a")
    spec = SweepSpec(data=DataSpec(name="synthetic"), methods=METHOD_NAMES, epsilons=(1.0, math.inf), delta=1e-5,
                     repeats=REPEATS, lam=1e-2, device="cpu")
    result = run_sweep(spec, cache=cache)
    out = base / "points.jsonl"
    assert export_results(out, cache) == (len(result.rows), 0)
    lines = out.read_text().splitlines()
    return lines[0], [json.loads(line) for line in lines[1:]]


def _find(recs: list[dict], method: str, eps: float | str = 1.0) -> int:
    return next(i for i, r in enumerate(recs) if r["point"]["method"] == method and r["point"]["epsilon"] == eps)


def _summary(acc: list[float]) -> dict:
    mean = math.fsum(acc) / len(acc)
    std = math.sqrt(math.fsum((a - mean) ** 2 for a in acc) / (len(acc) - 1)) if len(acc) > 1 else 0.0
    return {"accuracies": acc, "accuracy_mean": mean, "accuracy_std": std}


def _import(tmp_path: Path, header: str, recs: list[dict]) -> ResultCache:
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join([header] + [json.dumps(r) for r in recs]) + "\n")
    store = ResultCache(tmp_path / "target")
    import_results(path, store)
    return store


def test_every_record_a_sweep_writes_agrees_with_its_point(records, tmp_path):
    header, recs = records
    assert {r["point"]["method"] for r in recs} == set(METHOD_NAMES) | {"non_private"}
    for r in recs:
        assert check_against_point(r["point"], r["value"]) is None, r["point"]
    assert len(_import(tmp_path, header, recs)) == len(recs)


def _one_accuracy(value: dict, point: dict) -> None:
    value.update(_summary(value["accuracies"][:1]))


def _forty_accuracies(value: dict, point: dict) -> None:
    value.update(_summary(value["accuracies"] * 10))


def _scale_of_eps_1000(value: dict, point: dict) -> None:
    # What the method adds at epsilon = 1000: its scale, as stored for such a point.
    value["scale"] = dict(value["scale"], epsilon=1000.0, sigma=value["scale"]["sigma"] / 400)


def _noise_of_eps_1000_relabelled(value: dict, point: dict) -> None:
    value["scale"] = dict(value["scale"], sigma=value["scale"]["sigma"] / 400)  # the label left at epsilon = 1


def _no_noise(value: dict, point: dict) -> None:
    value["scale"] = {"noise": "none"}


def _another_method(value: dict, point: dict) -> None:
    value["scale"] = dict(value["scale"], method="loss_perturbation")


def _another_delta(value: dict, point: dict) -> None:
    value["scale"] = dict(value["scale"], delta=0.1)


def _another_accounting(value: dict, point: dict) -> None:
    value["scale"] = dict(value["scale"], accounting="tight" if point["accounting"] != "tight" else "paper")


def _another_lam(value: dict, point: dict) -> None:
    value["lam"] = value["lam"] * 10


EDITS = [
    ("model_sensitivity", 1.0, _one_accuracy, "value.accuracies: 1 accuracies for a point of 4 repetitions"),
    ("subsample_aggregate", 1.0, _forty_accuracies, "value.accuracies: 40 accuracies for a point of 4 repetitions"),
    ("model_sensitivity", 1.0, _scale_of_eps_1000, "value.scale.epsilon: 1000"),
    ("model_sensitivity", 1.0, _noise_of_eps_1000_relabelled, "value.scale.sigma"),
    ("prediction_sensitivity", 1.0, _noise_of_eps_1000_relabelled, "value.scale.sigma"),
    ("confident_gnmax", 1.0, _noise_of_eps_1000_relabelled, "value.scale.sigma"),
    ("pate_student", 1.0, _noise_of_eps_1000_relabelled, "value.scale.sigma"),
    ("loss_perturbation", 1.0, _noise_of_eps_1000_relabelled, "value.scale.sigma"),
    ("dpsgd", 1.0, _noise_of_eps_1000_relabelled, "value.scale.sigma"),
    ("model_sensitivity", 1.0, _no_noise, "value.scale.noise: 'none' (no noise) for a private point"),
    ("sparse_vector", 1.0, _no_noise, "value.scale.noise: 'none'"),
    ("model_sensitivity", 1.0, _another_method, "value.scale.method: 'loss_perturbation'"),
    ("dpsgd", 1.0, _another_delta, "value.scale.delta"),
    ("subsample_aggregate", 1.0, _another_accounting, "value.scale.accounting"),
    ("model_sensitivity", 1.0, _another_lam, "value.lam"),
    ("non_private", "inf", lambda v, p: v.update(scale={"noise": "gaussian", "sigma": 1.0}),
     "value.scale.noise: 'gaussian' for the non-private baseline"),
]


@pytest.mark.parametrize("method, eps, edit, expected", EDITS,
                         ids=[f"{m}-{e.__name__.strip('_') if e.__name__ != '<lambda>' else 'baseline_noise'}"
                              for m, _, e, _ in EDITS])
def test_a_record_that_contradicts_its_point_is_refused_naming_record_and_field(records, tmp_path, method, eps,
                                                                                  edit, expected):
    header, recs = records
    recs = json.loads(json.dumps(recs))
    i = _find(recs, method, eps)
    edit(recs[i]["value"], recs[i]["point"])
    assert check_against_point(recs[i]["point"], recs[i]["value"]) is not None
    with pytest.raises(ImportRejected) as err:
        _import(tmp_path, header, recs)
    message = str(err.value)
    assert f"record {i} (line {i + 2}): {expected}" in message, message
    assert len(ResultCache(tmp_path / "target")) == 0                    # all or nothing


def test_a_scale_copied_from_another_method_is_refused(records, tmp_path):
    """The scale of subsample-and-aggregate under a model-sensitivity point, relabelled as its own."""
    header, recs = records
    recs = json.loads(json.dumps(recs))
    i, j = _find(recs, "model_sensitivity"), _find(recs, "subsample_aggregate")
    recs[i]["value"]["scale"] = dict(recs[j]["value"]["scale"], method="model_sensitivity")
    with pytest.raises(ImportRejected, match=rf"record {i} \(line {i + 2}\): value\.scale\.noise: 'exponential_mechanism'"):
        _import(tmp_path, header, recs)


def test_a_small_difference_in_the_last_digits_is_not_a_contradiction(records):
    """Calibrations agree to far better than 1e-6 across machines; a rounding of the stored sigma passes."""
    _, recs = records
    rec = json.loads(json.dumps(recs[_find(recs, "model_sensitivity")]))
    rec["value"]["scale"]["sigma"] *= 1 + 1e-9
    assert check_against_point(rec["point"], rec["value"]) is None
