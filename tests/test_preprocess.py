"""Declared, data-independent preprocessing of a user's data (privcore/data/preprocess.py, loader, reference)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privcore.data import DataFileError, load_dataset
from privcore.data.preprocess import Preprocess, parse_preprocess
from privcore.data.reference import baseline_gap_warning, plain_logistic_accuracy
from privcore.engine.specs import DataSpec, SweepSpec


def offset_csv(path: Path, per_class: int = 60, seed: int = 0, label: str = "label") -> Path:
    """A separable 3-class CSV whose classes differ only in the size of f1, far from the origin (the
    issue's failing case: the unit-ball clip keeps only the direction, which carries no class)."""
    rng = np.random.default_rng(seed)
    centres = np.array([[100.0, 0.0], [110.0, 0.0], [120.0, 0.0]])
    lines = [f"f1,f2,{label}"]
    for c, centre in enumerate(centres):
        for row in centre + rng.normal(scale=1.0, size=(per_class, 2)):
            lines.append(f"{row[0]:.4f},{row[1]:.4f},{'abc'[c]}")
    path.write_text("\n".join(lines) + "\n")
    return path


# ---------------------------------------------------------------- the text form

@pytest.mark.parametrize("text", ["none", "none+intercept", "bounds:-5:5", "bounds:0:1,-3:3+intercept", "norm:2.5",
                                  "norm:10+intercept"])
def test_text_round_trip(text):
    assert parse_preprocess(text).text == text
    assert parse_preprocess(parse_preprocess(text).text) == parse_preprocess(text)


@pytest.mark.parametrize("text, words", [("bounds:5:-5", "low < high"), ("norm:0", "> 0"), ("norm:x", "not readable"),
                                         ("zscore", "mode must be"), ("bounds:1", "not readable"),
                                         ("bounds:0:inf", "finite")])
def test_bad_text_names_the_problem(text, words):
    with pytest.raises(ValueError, match=words):
        parse_preprocess(text)


# ---------------------------------------------------------------- the map

def test_bounds_map_by_hand():
    prep = Preprocess("bounds", (0.0,), (10.0,), intercept=True)
    out, clipped = prep.apply(np.array([[0.0, 10.0], [5.0, 20.0]]))
    s = np.sqrt(3.0)
    np.testing.assert_allclose(out, [[-1 / s, 1 / s, 1 / s], [0.0, 1 / s, 1 / s]], rtol=1e-6)
    assert clipped == 1  # 20 is outside [0, 10]


def test_norm_map_by_hand():
    out, clipped = Preprocess("norm", norm=5.0).apply(np.array([[3.0, 4.0], [30.0, 40.0], [0.3, 0.4]]))
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.6, 0.8], [0.06, 0.08]], rtol=1e-6)
    assert clipped == 1
    out, _ = Preprocess("norm", norm=5.0, intercept=True).apply(np.array([[3.0, 4.0]]))
    np.testing.assert_allclose(out, [[0.6 / np.sqrt(2), 0.8 / np.sqrt(2), 1 / np.sqrt(2)]], rtol=1e-6)


@pytest.mark.parametrize("text", ["bounds:-3:3+intercept", "bounds:-1:1,0:50,-9:9", "norm:4+intercept", "none+intercept"])
def test_rows_land_in_the_unit_ball(text):
    x = np.random.default_rng(1).normal(scale=20.0, size=(500, 3))
    out, _ = parse_preprocess(text).apply(x)
    assert np.linalg.norm(out.astype(np.float64), axis=1).max() <= 1.0 + 1e-6


def _zscore(x):  # the data-dependent scaling the module refuses (a known-bad variant)
    return (x - x.mean(axis=0)) / x.std(axis=0)


def _neighbours_change_other_rows(transform) -> bool:
    """Replace row 0; does any OTHER row's image change? (must not, for a per-example guarantee)."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(50, 3)) * 5
    y = x.copy()
    y[0] = [40.0, -40.0, 7.0]
    return not np.allclose(transform(x)[1:], transform(y)[1:])


@pytest.mark.parametrize("text", ["bounds:-3:3+intercept", "norm:4", "none+intercept"])
def test_map_is_per_row_so_neighbours_only_move_their_own_row(text):
    prep = parse_preprocess(text)
    assert not _neighbours_change_other_rows(lambda x: prep.apply(x)[0])


def test_the_check_catches_data_dependent_scaling():
    assert _neighbours_change_other_rows(_zscore)


def test_per_feature_bounds_must_match_the_columns(tmp_path):
    csv = offset_csv(tmp_path / "d.csv")
    with pytest.raises(ValueError, match="3 per-feature bounds but data_file 'd.csv' has 2"):
        load_dataset("file", data_file=str(csv), preprocess="bounds:0:1,0:1,0:1")


# ---------------------------------------------------------------- loader, spec, label column

def test_loader_applies_the_map_and_adds_the_intercept(tmp_path):
    csv = str(offset_csv(tmp_path / "d.csv"))
    plain = load_dataset("file", data_file=csv)
    prep = load_dataset("file", data_file=csv, preprocess="bounds:80:140,-5:5+intercept")
    assert plain.dim == 2 and prep.dim == 3
    np.testing.assert_allclose(prep.x_train[:, 2], 1 / np.sqrt(3), rtol=1e-6)
    assert plain.fingerprint != prep.fingerprint
    assert any("bounds:80:140,-5:5+intercept" in n for n in prep.notes)
    assert any("as given" in n for n in plain.notes)


def test_preprocess_only_for_files():
    with pytest.raises(ValueError, match="dataset 'file' only"):
        DataSpec(name="digits", preprocess="norm:1")
    with pytest.raises(ValueError, match="name='file'"):
        load_dataset("digits", preprocess="norm:1")


def test_default_spec_key_is_unchanged_by_the_new_fields():
    spec = SweepSpec(data=DataSpec(name="digits"))
    raw = json.loads(spec.to_json())
    assert "preprocess" not in raw["data"] and "label_column" not in raw["data"]
    f = SweepSpec(data=DataSpec(name="file", data_file="/x.csv", preprocess="norm:2", label_column="kind"))
    assert SweepSpec.from_json(f.to_json()) == f
    assert json.loads(f.to_json())["data"]["preprocess"] == "norm:2"


def test_label_column_picker(tmp_path):
    path = tmp_path / "k.csv"
    path.write_text("a,kind,b\n" + "".join(f"{i},{i % 2},{i * 2}\n" for i in range(20)))
    with pytest.raises(DataFileError, match="no label column"):
        load_dataset("file", data_file=str(path))
    ds = load_dataset("file", data_file=str(path), label_column="KIND")
    assert ds.dim == 2 and ds.classes == 2
    with pytest.raises(DataFileError, match="no column 'nope'"):
        load_dataset("file", data_file=str(path), label_column="nope")


# ---------------------------------------------------------------- the case, end to end

def test_standardisation_closes_the_gap_to_plain_logistic_regression(tmp_path):
    from privcore.engine.runner import run_sweep

    csv = str(offset_csv(tmp_path / "sep.csv"))
    plain = plain_logistic_accuracy(csv)
    assert plain > 0.95

    def ours(prep: str) -> float:
        spec = SweepSpec(data=DataSpec(name="file", data_file=csv, preprocess=prep), methods=("model_sensitivity",),
                         epsilons=(1.0,), repeats=2)
        rows = run_sweep(spec, use_cache=False).rows
        return next(r["accuracy_mean"] for r in rows if r["method"] == "non_private")

    raw, fixed = ours("none"), ours("bounds:80:140,-5:5+intercept")
    assert raw < plain - 0.2  # the symptom: rows squashed onto one direction
    assert baseline_gap_warning(raw, plain) is not None
    assert fixed > plain - 0.05
    assert baseline_gap_warning(fixed, plain) is None


@pytest.mark.parametrize("text, fragment", [
    ("bounds:-1e308:1e308", "must lie within"), ("bounds:0:1e-40", "span at least"), ("norm:1e-320", "norm R must be in"),
    ("norm:1e300", "norm R must be in"),
])
def test_bounds_and_norms_that_overflow_the_map_are_refused(text, fragment):
    """A bad-input hunt: bounds:-1e308:1e308 gave NaN rows and a message not naming preprocess;
    norm:1e-320 zeroed every feature with only a numpy warning."""
    from privcore.data.preprocess import parse_preprocess

    with pytest.raises(ValueError, match=fragment) as err:
        parse_preprocess(text)
    assert "preprocess" in str(err.value)
