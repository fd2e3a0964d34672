"""Shared pytest configuration for the privcore test suite."""

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped when torch.cuda.is_available() is False)")


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
