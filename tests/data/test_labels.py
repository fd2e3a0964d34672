"""privcore/data/labels.py: a user file's label set declared in advance, so the classes and their
numbering are the same for every data set (a label set read off the file is labelled not covered)."""

from __future__ import annotations

import numpy as np
import pytest

from privcore.data import DataFileError, load_dataset
from privcore.data.labels import labels_text, normalise_label, parse_labels


def _write(path, labels) -> str:
    x = np.random.default_rng(0).uniform(-1, 1, (len(labels), 3))
    rows = ["f1,f2,f3,label"] + [f"{a:.4f},{b:.4f},{c:.4f},{y}" for (a, b, c), y in zip(x, labels)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_parse_normalises_integer_labels_and_keeps_text():
    assert parse_labels("cat, dog ,bird") == ("cat", "dog", "bird")
    assert parse_labels(["1.0", 2, " 3 "]) == ("1", "2", "3")
    assert normalise_label(4.0) == "4" and normalise_label("0.5") == "0.5"
    assert parse_labels(None) is None and parse_labels("  ") is None
    assert labels_text(("a", "b")) == "a,b" and labels_text(None) is None


@pytest.mark.parametrize("text, match", [("a", "2 to 1,000 classes, got 1"), ("a,,b", "empty label"),
                                         ("1,1.0", "'1' twice"), (",".join(map(str, range(1001))), "got 1,001")])
def test_parse_refuses_by_name(text, match):
    with pytest.raises(ValueError, match=rf"^labels must .*{match}"):
        parse_labels(text)


def test_declared_labels_fix_the_classes_whatever_the_rows(tmp_path):
    """With labels declared, a row changed to a label no other row has keeps C and the numbering, and
    changes one training example; read off the file, it adds a class (what the note warns of)."""
    y = ["a", "b", "c"] * 40
    y2 = list(y)
    from privcore.data.transforms import seeded_split

    row = int(seeded_split(len(y), 0.2, 0)[0][3])
    y2[row] = "e"
    first = load_dataset("file", data_file=_write(tmp_path / "a.csv", y), labels="a,b,c,d,e")
    second = load_dataset("file", data_file=_write(tmp_path / "b.csv", y2), labels="a,b,c,d,e")
    assert first.classes == second.classes == 5
    assert int(np.count_nonzero(first.y_train != second.y_train)) == 1
    note = next(n for n in first.notes if "labels declared" in n)
    assert "not covered" not in note and "'e'->4" in note
    assert load_dataset("file", data_file=str(tmp_path / "b.csv")).classes == 4  # read off: a class more
    assert first.fingerprint != load_dataset("file", data_file=str(tmp_path / "a.csv")).fingerprint


def test_a_file_holding_an_undeclared_label_is_refused_by_name(tmp_path):
    path = _write(tmp_path / "c.csv", ["a", "b", "zebra"] * 10)
    with pytest.raises(DataFileError, match=r"data_file 'c.csv' has labels not among the declared labels: 'zebra' "
                                            r"\(10 rows\)"):
        load_dataset("file", data_file=path, labels="a,b")
    with pytest.raises(ValueError, match="labels apply to name='file'"):
        load_dataset("digits", labels="a,b")


def test_the_spec_the_cli_and_the_code_carry_the_declared_labels(tmp_path):
    from privcore.engine.code import cli_command, python_code
    from privcore.engine.specs import DataSpec, SweepSpec

    path = _write(tmp_path / "d.csv", ["x", "y"] * 20)
    spec = SweepSpec(data=DataSpec(name="file", data_file=path, labels="y, x"), methods=("model_sensitivity",),
                     epsilons=(1.0,))
    assert spec.data.labels == "y,x" and spec.data.load_kwargs()["labels"] == "y,x"
    assert "labels" not in SweepSpec(data=DataSpec(name="file", data_file=path)).key  # older keys stay valid
    assert "--labels y,x" in cli_command(spec) and "labels='y,x'" in python_code(spec)
    with pytest.raises(ValueError, match="labels apply to dataset 'file' only"):
        DataSpec(name="digits", labels="a,b")
