"""privcore/data/fetch.py: the checksummed atomic download and the idx readers shared by the data sets."""

from __future__ import annotations

import gzip
import hashlib
import io
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from privcore.data.errors import DataFileError
from privcore.data.fetch import FolderNotWritable, download_verified, file_md5, read_idx_gz, read_idx_split


def _write_idx(path: Path, arr: np.ndarray) -> None:
    head = (2048 + arr.ndim).to_bytes(4, "big") + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(head + arr.astype(np.uint8).tobytes())


def _split(folder: Path, n_images: int, labels: list[int]) -> None:
    _write_idx(folder / "train-images-idx3-ubyte.gz", np.arange(n_images * 4).reshape(n_images, 2, 2))
    _write_idx(folder / "train-labels-idx1-ubyte.gz", np.array(labels))


def test_read_idx_split_round_trip_and_checks(tmp_path):
    _split(tmp_path, 3, [0, 9, 4])
    x, y = read_idx_split(tmp_path, "train", "Demo")
    assert x.shape == (3, 2, 2) and x.dtype == np.uint8 and y.tolist() == [0, 9, 4]
    _split(tmp_path, 3, [0, 1])
    with pytest.raises(DataFileError, match="Demo train files disagree: 3 images but 2 labels"):
        read_idx_split(tmp_path, "train", "Demo")
    _split(tmp_path, 2, [0, 10])
    with pytest.raises(DataFileError, match="Demo train labels must be 0..9, found 10"):
        read_idx_split(tmp_path, "train", "Demo")


def test_read_idx_gz_rejects_bad_files(tmp_path):
    path = tmp_path / "f.gz"
    _write_idx(path, np.zeros((2, 3)))  # a 2-d file read as 3-d
    with pytest.raises(DataFileError, match="not an idx file of bytes with 3 dimensions"):
        read_idx_gz(path, 3, "Demo")
    path.write_bytes(b"not gzip")
    with pytest.raises(DataFileError, match="Demo file .* is not a valid gzip file"):
        read_idx_gz(path, 1, "Demo")


def test_download_is_atomic_and_checked(tmp_path, monkeypatch):
    blob = b"payload" * 1000
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: io.BytesIO(blob))
    target = tmp_path / "file.bin"
    with pytest.raises(ValueError, match="the download has md5"):
        download_verified("http://x/file.bin", target, "0" * 32, size=len(blob))
    assert list(tmp_path.iterdir()) == []  # no file, no .part
    download_verified("http://x/file.bin", target, hashlib.md5(blob).hexdigest(), size=len(blob))
    assert target.read_bytes() == blob and file_md5(target) == hashlib.md5(blob).hexdigest()
    assert [p.name for p in tmp_path.iterdir()] == ["file.bin"]


def test_a_folder_that_cannot_hold_the_temporary_file_is_named_as_such(tmp_path):
    with pytest.raises(FolderNotWritable) as info:
        download_verified("http://x/file.bin", tmp_path / "missing" / "file.bin", "0" * 32, size=10)
    assert isinstance(info.value, OSError) and "missing" in str(info.value)
