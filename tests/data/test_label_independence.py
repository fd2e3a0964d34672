"""Replacing one row of a data set replaces at most one training example: the split, the subsample
and the teachers' parts are drawn from the seed alone, never from the labels.

The privacy guarantees are stated for replace-one neighbours of the training set. A pipeline step
that reads every label to decide where each row goes (a split stratified by class) turns one changed
label into dozens of changed training rows and teacher parts; ``stratified`` below is that known-bad
variant, and the same check catches it.
"""

from __future__ import annotations

import numpy as np
import pytest

from privcore.data import load_dataset
from privcore.data.transforms import seeded_split, seeded_subsample
from privcore.device import derive_seed

ROWS, FEATURES = 400, 5


def _write(path, y) -> str:
    x = np.random.default_rng(1).uniform(-1.0, 1.0, (ROWS, FEATURES)).round(4)
    lines = [",".join([f"f{k}" for k in range(FEATURES)] + ["label"])]
    lines += [",".join([*(f"{v:g}" for v in row), str(label)]) for row, label in zip(x, y)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _labels() -> np.ndarray:
    return np.array(["a", "b", "c", "d"])[np.random.default_rng(2).integers(0, 4, ROWS)]


def _row_in_training(seed: int = 0) -> int:
    train, _ = seeded_split(ROWS, 0.2, seed)
    return int(train[7])


@pytest.mark.parametrize("n", [None, 200])
def test_one_changed_label_changes_one_training_row_and_no_test_row(tmp_path, n) -> None:
    y = _labels()
    row = _row_in_training()
    y2 = y.copy()
    y2[row] = "d" if y[row] != "d" else "a"  # another label of the same label set
    a = load_dataset("file", data_file=_write(tmp_path / "a.csv", y), n=n)
    b = load_dataset("file", data_file=_write(tmp_path / "b.csv", y2), n=n)
    assert a.n == b.n and a.classes == b.classes == 4
    np.testing.assert_array_equal(a.x_train, b.x_train)  # every row at the same position
    assert int(np.count_nonzero(a.y_train != b.y_train)) <= 1  # the one replaced example, if subsampled
    np.testing.assert_array_equal(a.x_test, b.x_test)
    np.testing.assert_array_equal(a.y_test, b.y_test)


def test_one_changed_label_changes_one_teacher_part(tmp_path) -> None:
    import torch

    from privcore.context import TrainContext
    from privcore.types import Problem

    y = _labels()
    row = _row_in_training()
    y2 = y.copy()
    y2[row] = "a" if y[row] != "a" else "b"
    by_part = []
    for name, labels in (("a.csv", y), ("b.csv", y2)):
        ds = load_dataset("file", data_file=_write(tmp_path / name, labels))
        problem = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=1e-2, budget=1, teachers=16)
        ctx = TrainContext.from_dataset(ds, problem, 0, torch.device("cpu"))
        parts = ctx.teacher_partition(16)
        by_part.append((ctx.x_train[parts], ctx.y_train[parts]))  # [T, m, D], [T, m]
    (xa, ya), (xb, yb) = by_part
    differs = (xa != xb).any(dim=2).any(dim=1) | (ya != yb).any(dim=1)
    assert int(differs.sum()) <= 1  # the part holding the replaced example, if it is in a part


def stratified(y: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The known-bad variant (the loader's split before 2026-11-28): class by class, one generator."""
    rng = np.random.default_rng(derive_seed(seed, "split"))
    train, test = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        k = min(max(int(np.floor(idx.size * test_fraction + 0.5)), 1), idx.size - 1)
        test.append(idx[:k])
        train.append(idx[k:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


def _training_rows_moved(split, y: np.ndarray, y2: np.ndarray) -> int:
    """Training positions whose row (by index) differs between the two label vectors' splits."""
    (tr, _), (tr2, _) = split(y), split(y2)
    n = min(tr.size, tr2.size)
    return int(np.count_nonzero(tr[:n] != tr2[:n])) + abs(tr.size - tr2.size)


def test_the_check_catches_a_split_stratified_by_label() -> None:
    y = np.random.default_rng(2).integers(0, 4, ROWS)
    row = _row_in_training()
    y2 = y.copy()
    y2[row] = (y[row] + 1) % 4
    sound = lambda labels: seeded_split(labels.size, 0.2, 0)  # noqa: E731
    bad = lambda labels: stratified(labels, 0.2, 0)  # noqa: E731
    assert _training_rows_moved(sound, y, y2) == 0
    assert _training_rows_moved(bad, y, y2) > 10
    # The teachers' parts: a permutation of training positions from the seed (as TrainContext's), cut in 16.
    cut = np.random.default_rng(0).permutation(len(seeded_split(ROWS, 0.2, 0)[0]))[: 16 * 20].reshape(16, 20)
    parts_moved = lambda split: int(np.any(split(y)[0][cut] != split(y2)[0][cut], axis=1).sum())  # noqa: E731
    assert parts_moved(sound) == 0 and parts_moved(bad) > 8


def test_split_and_subsample_are_seeded_permutations() -> None:
    tr, te = seeded_split(1797, 0.2, 0)
    assert te.size == 359 and tr.size == 1438
    assert np.array_equal(np.sort(np.concatenate([tr, te])), np.arange(1797))
    assert not np.array_equal(seeded_split(1797, 0.2, 1)[1], te)
    small, large = seeded_subsample(1438, 100, 0), seeded_subsample(1438, 500, 0)
    assert np.array_equal(large[:100], small)  # a smaller N takes a prefix of a larger one's rows
    assert np.unique(large).size == 500
    with pytest.raises(ValueError, match="n=9"):
        seeded_subsample(8, 9, 0)
    with pytest.raises(ValueError, match="at least 2 rows"):
        seeded_split(1, 0.2, 0)


def test_a_label_set_read_off_the_file_is_labelled_not_covered(tmp_path) -> None:
    """A row whose label no other row has adds a class and renumbers the others: the label set read off
    the file is a data-dependent step, and the data notes (which the privacy statement lists) say so."""
    from privcore.statement import privacy_statement

    y = _labels()
    y2 = y.copy()
    y2[_row_in_training()] = "e"  # a label no other row has
    a = load_dataset("file", data_file=_write(tmp_path / "a.csv", y))
    b = load_dataset("file", data_file=_write(tmp_path / "b.csv", y2))
    assert (a.classes, b.classes) == (4, 5)  # what the note warns of
    note = next(n for n in a.notes if "labels mapped" in n)
    assert "read off the file" in note and "not covered" in note
    statement = privacy_statement("subsample_aggregate", 1.0, 1e-5, preprocessing=list(a.notes))
    assert not next(p for p in statement["preprocessing"] if "labels mapped" in p["step"])["covered"]
