"""Hostile and oversized user files are refused from their headers, quickly and in little memory."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privcore.data import DataFileError, load_dataset
from privcore.data import userfile
from privcore.data.userfile import load_user_file

ROOT = Path(__file__).resolve().parents[1]


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _npz_with_header(path: Path, shape: tuple[int, ...], descr: str = "<f8", rows_of_y: int = 20) -> Path:
    """An NPZ whose x.npy header claims ``shape`` but holds no data (a few hundred bytes)."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": descr, "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x.npy", head.getvalue())
        zf.writestr("y.npy", _npy(np.arange(rows_of_y) % 2))
    return path


def make_zip_bomb(path: Path, rows: int = 250_000, cols: int = 1000, level: int = 1) -> Path:
    """A valid NPZ whose x (zeros, float64) inflates to rows x cols x 8 bytes = 2 GB by default.

    Written in chunks, so building it never holds the inflated data in memory.
    """
    header = {"descr": "<f8", "fortran_order": False, "shape": (rows, cols)}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=level) as zf:
        with zf.open("x.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_1_0(fh, header)
            chunk = bytes(1 << 24)
            left = rows * cols * 8
            while left:
                n = min(left, len(chunk))
                fh.write(chunk[:n])
                left -= n
        zf.writestr("y.npy", _npy(np.zeros(rows, dtype=np.int8)))
    return path


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    return make_zip_bomb(tmp_path_factory.mktemp("bomb") / "bomb.npz")


_MEASURE = """
import json, resource, sys, time
from privcore.cli import main
t0 = time.perf_counter()
rc = main(sys.argv[1:])
# VmHWM: this process image's peak RSS. ru_maxrss is not reset by exec, so it would report the
# parent's (pytest's) peak at fork time.
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
peak = int(hwm[0].split()[1]) / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"rc": rc, "seconds": time.perf_counter() - t0, "rss_mb": peak}))
"""


def _measure_cli(args: list[str], tmp_path: Path) -> tuple[dict, str]:
    env = {**os.environ, "PRIVCORE_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", _MEASURE, *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.slow
def test_zip_bomb_npz_is_refused_in_under_a_second_and_500_mb(bomb, tmp_path):
    assert bomb.stat().st_size < 20 * 2**20
    info, err = _measure_cli(["sweep", "--dataset", "file", "--data-file", str(bomb), "--quiet"], tmp_path)
    assert info["rc"] == 2
    assert info["seconds"] < 1.0, info
    assert info["rss_mb"] < 500, info
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err
    assert "bomb.npz" in lines[0] and str(bomb.parent) not in lines[0]       # the name, not the server path


@pytest.mark.slow
def test_zip_bomb_library_call_is_refused(bomb):
    with pytest.raises(DataFileError, match="memory budget|zip bomb"):
        load_user_file(bomb)


def test_a_tiny_npz_claiming_a_huge_shape_is_refused(tmp_path):
    path = _npz_with_header(tmp_path / "claims.npz", (10**7, 10**6))
    assert path.stat().st_size < 2000
    with pytest.raises(DataFileError, match="claims shape|memory budget"):
        load_user_file(path)


def test_rows_times_columns_is_checked_against_the_memory_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCORE_MAX_DATA_MB", "1")
    path = tmp_path / "big.npz"
    np.savez(path, x=np.ones((400, 400), dtype=np.float32), y=np.arange(400) % 2)   # 0.6 MB, 1.2 MB as float64
    with pytest.raises(DataFileError, match=r"400 x 400.*PRIVCORE_MAX_DATA_MB"):
        load_user_file(path)
    csv_path = tmp_path / "big.csv"
    csv_path.write_text("a,b,label\n" + "".join(f"{i},{i},{i % 2}\n" for i in range(70_000)))
    with pytest.raises(DataFileError, match="memory budget"):
        load_user_file(csv_path)


def test_file_size_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCORE_MAX_FILE_MB", "1")
    path = tmp_path / "large.csv"
    path.write_text("a,label\n" + "1.0,0\n" * 200_000)
    with pytest.raises(DataFileError, match=r"above the limit of 1 MB.*PRIVCORE_MAX_FILE_MB"):
        load_user_file(path)


def test_csv_column_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCORE_MAX_COLUMNS", "50")
    path = tmp_path / "wide.csv"
    path.write_text(",".join(f"c{j}" for j in range(100)) + ",label\n" + ("0," * 100 + "1\n") * 20)
    with pytest.raises(DataFileError, match="101 columns, above the limit of 50"):
        load_user_file(path)


@pytest.mark.parametrize("header", ["a,a,b,label,label", "a,A,label", "a,b,label,Label"])
def test_duplicate_csv_headers_are_rejected(tmp_path, header):
    path = tmp_path / "dup.csv"
    ncol = len(header.split(","))
    path.write_text(header + "\n" + "".join(",".join([str(i % 2)] * ncol) + "\n" for i in range(20)))
    with pytest.raises(DataFileError, match="more than once"):
        load_user_file(path)


def test_an_unreadable_file_is_a_data_file_error(tmp_path, monkeypatch):
    path = tmp_path / "locked.csv"
    path.write_text("a,label\n" + "".join(f"{i},{i % 2}\n" for i in range(20)))

    def denied(p):
        raise PermissionError(13, "Permission denied", p)

    monkeypatch.setattr(userfile, "_open_text", denied)
    with pytest.raises(DataFileError, match="cannot be read: Permission denied") as info:
        load_user_file(path)
    assert str(tmp_path) not in str(info.value)


def test_object_arrays_are_never_loaded(tmp_path):
    path = tmp_path / "obj.npz"
    np.savez(path, x=np.array([[object()]] * 20, dtype=object), y=np.arange(20) % 2)
    with pytest.raises(DataFileError, match="Python objects"):
        load_user_file(path)


def test_messages_show_no_server_path_and_no_numpy_reprs(tmp_path):
    one_class = tmp_path / "one.npz"
    np.savez(one_class, x=np.ones((20, 3)), y=np.ones(20, dtype=np.int64))
    with pytest.raises(DataFileError) as info:
        load_user_file(one_class)
    text = str(info.value)
    assert "np.int64" not in text and str(tmp_path) not in text and "'one.npz'" in text
    missing = tmp_path / "nowhere" / "gone.csv"
    with pytest.raises(DataFileError) as info:
        load_user_file(missing)
    assert str(tmp_path) not in str(info.value) and "gone.csv" in str(info.value)
    good = tmp_path / "good.npz"
    np.savez(good, x=np.random.default_rng(0).normal(size=(20, 3)), y=np.arange(20) % 2)
    src = load_user_file(good)
    assert not any(str(tmp_path) in note for note in src.notes)


def test_valid_files_still_load(tmp_path):
    path = tmp_path / "ok.npz"
    np.savez_compressed(path, x=np.random.default_rng(0).normal(size=(60, 4)), y=np.arange(60) % 3)
    ds = load_dataset("file", data_file=str(path))
    assert ds.dim == 4 and ds.classes == 3


_UPLOAD_BYTES = st.one_of(
    st.binary(max_size=2000),
    st.builds(lambda b: b"PK\x03\x04" + b, st.binary(max_size=2000)),
    st.builds(lambda head, body: head.encode() + b"\n" + body, st.sampled_from(["a,label", "x,y", "a,a", ""]),
              st.binary(max_size=500)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_UPLOAD_BYTES, suffix=st.sampled_from([".csv", ".npz"]))
def test_random_bytes_never_raise_anything_but_data_file_error(tmp_path, data, suffix):
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(data)
    userfile.clear_cache()
    try:
        load_user_file(path)
    except DataFileError:
        pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_mutated_real_npz_never_raises_anything_but_data_file_error(tmp_path, data):
    good = _npy(np.random.default_rng(0).normal(size=(20, 3)))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x.npy", good)
        zf.writestr("y.npy", _npy(np.arange(20) % 2))
    raw = bytearray(buf.getvalue())
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    path = tmp_path / "mut.npz"
    path.write_bytes(bytes(raw))
    userfile.clear_cache()
    try:
        load_user_file(path)
    except DataFileError:
        pass


@pytest.mark.parametrize("shape, fragment", [((0, 3), "has too few rows: 0 (need at least 10)"),
                                             ((30, 0), "'x' has no features (shape (30, 0))")])
def test_an_npz_with_no_rows_or_no_features_is_refused_in_words(tmp_path, shape, fragment):
    # Once: "cannot reshape array of size 0 ..." and "memoryview: cannot cast view with zeros ...".
    path = tmp_path / "hollow.npz"
    np.savez(path, x=np.zeros(shape), y=np.arange(shape[0]) % 2)
    with pytest.raises(DataFileError) as info:
        load_dataset("file", data_file=path)
    assert fragment in str(info.value)


def test_a_non_utf8_csv_is_explained_in_words(tmp_path):
    # Once: the codec's own text, cut mid-word ("'utf-8' codec can't decode byte 0xe4 in position 5: inval...").
    path = tmp_path / "latin1.csv"
    path.write_bytes(("a,b,l\xe4bel\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(20))).encode("latin-1"))
    with pytest.raises(DataFileError) as info:
        load_user_file(path)
    text = str(info.value)
    assert "byte 0xe4 is not UTF-8 text (save the file as UTF-8 CSV)" in text and "codec" not in text


def _label_csv(path: Path, labels: list[str], per: int = 12) -> Path:
    rng = np.random.default_rng(1)
    rows = ["a,b,label"] + [f"{rng.normal():.4f},{rng.normal():.4f},{lab}" for lab in labels for _ in range(per)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_csv_labels_are_read_exactly_never_through_float(tmp_path):
    """A bad-input hunt: labels 10000000000000000 and 10000000000000001 (float-equal) became one class,
    and 1e19 wrapped to -2**63. Integer labels are read exactly; beyond int64 they stay text."""
    near = load_dataset("file", data_file=str(_label_csv(tmp_path / "ids.csv", ["10000000000000000", "10000000000000001", "5"])))
    assert near.classes == 3
    huge = load_dataset("file", data_file=str(_label_csv(tmp_path / "huge.csv", ["1e19", "2e19", "5"])))
    assert huge.classes == 3
    assert userfile._parse_labels(np.asarray(["9", "10", "3.0"])).tolist() == [9, 10, 3]  # numeric, as before
    assert userfile._parse_labels(np.asarray(["cat", "dog"])).tolist() == ["cat", "dog"]


def test_a_nan_label_in_a_csv_is_a_missing_label(tmp_path):
    """'nan' became a class of its own in a CSV while NaN labels are refused in an .npz."""
    path = _label_csv(tmp_path / "nan.csv", ["1", "nan", "2"])
    with pytest.raises(DataFileError, match="missing value"):
        load_dataset("file", data_file=str(path))


@pytest.mark.parametrize("lines, where", [
    (["a,b,label", "1,2,0", "3,x,1"], "line 3 (data row 2)"),               # the header is line 1, not a data row
    (["a,b,label", "1,2,0", "", "", "3,x,1"], "line 5 (data row 2)"),       # blank lines count as lines only
    (["a,b,label", '1,2,"0', '"', "3,x,1"], "line 4 (data row 2)"),         # a quoted cell over two lines
])
def test_csv_errors_name_the_file_line_and_the_data_row(tmp_path, lines, where):
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines + [f"{i},{i},{i % 2}" for i in range(20)]) + "\n")
    with pytest.raises(DataFileError) as err:
        load_user_file(str(path))
    assert f"at {where}" in str(err.value) and "row 3" not in str(err.value)


@pytest.mark.parametrize("sep, words", [(";", "';'"), ("\t", "a tab"), ("|", "'|'")])
def test_a_file_separated_by_another_character_is_named_so(tmp_path, sep, words):
    """A semicolon CSV (Excel in many locales) read as one column, and the message said it had no label column
    and to pick one: the label list then offered one column 'f1;f2;label'. It now names the separator."""
    path = tmp_path / "semi.csv"
    path.write_text(sep.join(["f1", "f2", "label"]) + "\n" + "\n".join(sep.join(["0.1", "0.2", str(i % 2)])
                                                                      for i in range(20)) + "\n")
    with pytest.raises(DataFileError, match=f"separates its columns with {words}, not commas"):
        load_user_file(str(path))
    path.write_text("label\n" + "\n".join(str(i % 2) for i in range(20)) + "\n")  # one column: no separator to name
    with pytest.raises(DataFileError, match="no feature columns"):
        load_user_file(str(path))
