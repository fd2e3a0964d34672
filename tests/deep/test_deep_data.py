"""Readers of the deep-model data: Fashion-MNIST idx files and the CIFAR-10 python archive."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from privcore.data.errors import DataFileError, DataUnavailableError
from privcore.deep import cifar, fashion
from privcore.deep.images import ImageData, augment_batch, to_float

# ------------------------------------------------------------------ Fashion-MNIST


def _write_idx(path: Path, arr: np.ndarray) -> None:
    head = (2048 + arr.ndim).to_bytes(4, "big") + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(head + arr.astype(np.uint8).tobytes())


def _fake_fashion(folder: Path, n: int = 12, m: int = 5) -> None:
    rng = np.random.default_rng(0)
    for split, k in (("train", n), ("t10k", m)):
        _write_idx(folder / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 256, (k, 28, 28)))
        _write_idx(folder / f"{split}-labels-idx1-ubyte.gz", np.arange(k) % 10)


@pytest.mark.skipif(not (fashion.FASHION_DEFAULT_DIR / fashion.FASHION_FILES[0]).is_file(),
                    reason="Debian package dataset-fashion-mnist not installed")
def test_installed_fashion_mnist_is_read_whole(monkeypatch):
    monkeypatch.delenv(fashion.FASHION_ENV, raising=False)
    d = fashion.load_fashion_mnist()
    assert d.x_train.shape == (60000, 1, 28, 28) and d.x_test.shape == (10000, 1, 28, 28)
    assert d.x_train.dtype == np.uint8 and set(np.unique(d.y_train)) == set(range(10))
    assert np.bincount(d.y_test).tolist() == [1000] * 10


def test_fashion_from_env_folder_and_missing_names_the_package(tmp_path, monkeypatch):
    _fake_fashion(tmp_path)
    monkeypatch.setenv(fashion.FASHION_ENV, str(tmp_path))
    d = fashion.load_fashion_mnist()
    assert d.x_train.shape == (12, 1, 28, 28) and d.y_test.tolist() == [0, 1, 2, 3, 4]
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(fashion.FASHION_ENV, str(empty))
    with pytest.raises(DataUnavailableError, match="dataset-fashion-mnist") as err:
        fashion.load_fashion_mnist()
    assert fashion.FASHION_ENV in str(err.value) and str(empty) in str(err.value)


def test_fashion_corrupt_file_is_a_clear_error(tmp_path):
    _fake_fashion(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(b"\x00\x00\x08\x03junk"))
    with pytest.raises(DataFileError, match="train-labels"):
        fashion.load_fashion_mnist(tmp_path)


# ------------------------------------------------------------------ CIFAR-10


def _batch_bytes(n: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    d = {b"batch_label": b"testing batch", b"labels": [int(v) for v in rng.integers(0, 10, n)],
         b"data": rng.integers(0, 256, (n, 3072)).astype(np.uint8), b"filenames": [b"x.png"] * n}
    return pickle.dumps(d, protocol=2)


def _archive(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, blob in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


def _small_cifar(path: Path) -> Path:
    return _archive(path, {name: _batch_bytes(4, i) for i, name in enumerate(cifar.CIFAR_MEMBERS)})


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_cifar_reader_on_a_small_archive_of_the_same_format(tmp_path):
    path = _small_cifar(tmp_path / cifar.CIFAR_ARCHIVE)
    d = cifar.read_cifar_archive(path)
    assert d.x_train.shape == (20, 3, 32, 32) and d.x_test.shape == (4, 3, 32, 32)
    first = pickle.loads(_batch_bytes(4, 0), encoding="bytes")
    assert np.array_equal(d.x_train[:4].reshape(4, -1), first[b"data"])
    assert d.y_train[:4].tolist() == first[b"labels"]
    # A user-placed archive is accepted when its checksum matches, refused (not overwritten) otherwise.
    assert cifar.ensure_cifar_archive(tmp_path, download=False, md5=_md5(path)) == path
    with pytest.raises(DataUnavailableError, match="checksum"):
        cifar.ensure_cifar_archive(tmp_path, download=False)
    assert path.is_file()


def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    members = {name: _batch_bytes(4, i) for i, name in enumerate(cifar.CIFAR_MEMBERS)}
    members[cifar.CIFAR_MEMBERS[0]] = pickle.dumps({b"data": Evil()}, protocol=2)
    path = _archive(tmp_path / "evil.tar.gz", members)
    with pytest.raises(DataFileError, match="refused to load global"):
        cifar.read_cifar_archive(path)
    assert not marker.exists()
    for payload in (pickle.dumps(eval, protocol=2), pickle.dumps(getattr, protocol=2)):
        with pytest.raises(pickle.UnpicklingError, match="refused"):
            cifar.restricted_loads(payload)
    # Allowed globals only rebuild plain arrays: the checks after loading still apply.
    bad = {name: _batch_bytes(4, i) for i, name in enumerate(cifar.CIFAR_MEMBERS)}
    bad[cifar.CIFAR_MEMBERS[5]] = pickle.dumps({b"data": np.zeros((2, 5), np.float64), b"labels": [0, 1]}, protocol=2)
    with pytest.raises(DataFileError, match="uint8"):
        cifar.read_cifar_archive(_archive(tmp_path / "bad.tar.gz", bad))


def test_offline_download_fails_clearly_and_leaves_nothing(tmp_path, monkeypatch):
    def offline(*a, **k):
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    folder = tmp_path / "cifar"
    with pytest.raises(DataUnavailableError) as err:
        cifar.load_cifar10(folder)
    msg = str(err.value)
    assert cifar.CIFAR_ARCHIVE in msg and str(folder) in msg and cifar.CIFAR_MD5 in msg and cifar.CIFAR_ENV in msg
    assert not folder.exists()  # created for the download, removed again


@pytest.mark.parametrize("failure", ["midway", "checksum"])
def test_interrupted_or_corrupt_download_leaves_no_file(tmp_path, monkeypatch, failure):
    class Response(io.BytesIO):
        def read(self, size=-1):
            out = super().read(size if failure == "checksum" else 3)
            if failure == "midway" and self.tell() > 3:
                raise OSError("connection reset")
            return out

        def __exit__(self, *a):
            return False

    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: Response(b"not the archive at all"))
    tmp_path.joinpath("keep").write_text("x")  # an existing folder is kept, with nothing added
    with pytest.raises(DataUnavailableError, match="could not download"):
        cifar.ensure_cifar_archive(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]


def test_download_is_moved_into_place_after_its_checksum(tmp_path, monkeypatch):
    blob = _small_cifar(tmp_path / "src.tar.gz").read_bytes()
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: io.BytesIO(blob))
    folder = tmp_path / "dst"
    path = cifar.ensure_cifar_archive(folder, md5=hashlib.md5(blob).hexdigest())
    assert path.read_bytes() == blob and [p.name for p in folder.iterdir()] == [cifar.CIFAR_ARCHIVE]


# ------------------------------------------------------------------ container and augmentation


def test_image_data_checks_and_subset():
    x = np.zeros((6, 1, 8, 8), np.uint8)
    d = ImageData("t", x, np.arange(6) % 2, x[:3], np.zeros(3, np.int64), classes=2)
    assert d.subset(4, 2).x_train.shape[0] == 4 and d.subset(None, None) is d
    with pytest.raises(ValueError, match="n_train must be an integer in \\[1, 6\\]"):
        d.subset(7, None)
    with pytest.raises(ValueError, match="labels"):
        ImageData("t", x, np.arange(6), x[:3], np.zeros(3, np.int64), classes=2)
    assert d.fingerprint != d.subset(5, 3).fingerprint


def test_augment_is_a_crop_or_flip_from_the_generator():
    import torch

    x = to_float(torch.arange(2 * 16, dtype=torch.uint8).view(2, 1, 4, 4), (0.0,), (1.0,))
    g1, g2 = torch.Generator(), torch.Generator()
    g1.manual_seed(3)
    g2.manual_seed(3)
    a, b = augment_batch(x, g1, 1), augment_batch(x, g2, 1)
    assert torch.equal(a, b) and a.shape == x.shape
    assert torch.equal(augment_batch(x, g1, 0)[0], x[0]) or torch.equal(augment_batch(x, g1, 0)[0], x[0].flip(-1))
