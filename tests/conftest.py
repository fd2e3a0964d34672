"""Shared pytest configuration for the privcore test suite."""

import gzip
import os
from fnmatch import fnmatch
from pathlib import Path

import numpy as np
import pytest

_HERE = Path(__file__).resolve().parent

# Torch's threads as the test process starts them, whatever the load: results compared bit for bit
# must not change their float sums between two runs (privcore/threads.py; its tests set their own).
os.environ.setdefault("PRIVCORE_THREADS", "keep")
# The dashboard's check that its code has not changed under a running server (ui/freshness.py) would stop
# every AppTest once a developer edits a module during a run; tests/test_ui_freshness.py turns it on.
os.environ.setdefault("PRIVCORE_CODE_CHECK", "off")

#: Whole modules marked ``slow`` (``python -m pytest -m "not slow"`` leaves them out; .ci/run runs
#: them): Chromium driving the served dashboard, the dashboard's pages under AppTest, the deep models,
#: the empirical privacy audits, a Dask cluster, fresh interpreters timing the CLI's imports, and the
#: checks of every shipped calibration against the accountant. A slow test elsewhere carries
#: ``@pytest.mark.slow`` itself.
SLOW_MODULES = (
    "test_browser*.py", "test_app*.py", "test_learn.py", "deep/*", "test_privacy_audits.py", "test_cluster.py",
    "test_cli_startup.py", "test_golden_sweep.py", "test_leakage_run.py", "test_leakage_coverage.py",
    "accounting/test_bundle.py", "accounting/test_dpsgd_replace_one.py",
)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped when torch.cuda.is_available() is False)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        try:
            where = Path(str(item.path)).resolve().relative_to(_HERE).as_posix()
        except ValueError:
            continue
        if any(fnmatch(where, pattern) for pattern in SLOW_MODULES):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="module")
def app_env(tmp_path_factory):
    """Environment of a Streamlit AppTest module: one fresh result cache for the module (its tests
    reuse what the first one computed) and no background warm-ups (kaleido's Chromium, the default
    mnist-5k view) competing with the tests. Yields the MonkeyPatch, undone after the module."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PRIVCORE_CACHE", str(tmp_path_factory.mktemp("privcore_cache")))
    mp.setenv("PRIVCORE_EXPORT_WARMUP", "0")
    mp.setenv("PRIVCORE_CORE_WARMUP", "0")
    yield mp
    mp.undo()


@pytest.fixture()
def uploads(tmp_path, monkeypatch):
    """An empty uploads folder inside a fresh result cache (ui/uploads.py stores files there)."""
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    folder = tmp_path / "uploads"
    folder.mkdir()
    return folder


def _write_idx(path: Path, arr: np.ndarray) -> None:
    head = (2048 + arr.ndim).to_bytes(4, "big") + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(head + arr.astype(np.uint8).tobytes())


@pytest.fixture()
def fake_fashion(tmp_path, monkeypatch):
    """A small Fashion-MNIST-format folder (240 training and 60 test images, the class drawn into the
    pixels so a few steps learn it) that the deep models read, inside a fresh result cache."""
    from privcore.deep import fashion

    rng = np.random.default_rng(0)
    for split, k in (("train", 240), ("t10k", 60)):
        y = np.arange(k) % 10
        _write_idx(tmp_path / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 100, (k, 28, 28)) + 15 * y.reshape(-1, 1, 1))
        _write_idx(tmp_path / f"{split}-labels-idx1-ubyte.gz", y)
    monkeypatch.setenv(fashion.FASHION_ENV, str(tmp_path))
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture()
def loaded_module(tmp_path, monkeypatch):
    """A factory: ``loaded_module(name)`` puts a module called ``name`` in ``sys.modules``, backed by a file of
    its own (returned), as a privcore or ui module loaded from disk is; removed after the test."""
    import sys
    import types

    def make(name: str) -> Path:
        path = tmp_path / f"{name.rpartition('.')[2]}.py"
        path.write_text("A = 1\n")
        module = types.ModuleType(name)
        module.__file__ = str(path)
        monkeypatch.setitem(sys.modules, name, module)
        return path

    return make
