"""privcore/paths.py: one cache folder, never inside site-packages."""

from __future__ import annotations

from pathlib import Path

from privcore import paths


def test_the_environment_variable_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "mine"))
    assert paths.cache_dir() == tmp_path / "mine"


def test_a_checkout_keeps_its_cache_folder(monkeypatch):
    monkeypatch.delenv("PRIVCORE_CACHE", raising=False)
    root = Path(__file__).resolve().parents[1]
    assert paths.checkout_root() == root
    assert paths.cache_dir() == root / "cache"


def test_an_installed_package_uses_the_users_cache_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("PRIVCORE_CACHE", raising=False)
    monkeypatch.setattr(paths, "checkout_root", lambda: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_dir() == tmp_path / "xdg" / "privcore"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert paths.cache_dir() == tmp_path / "home" / ".cache" / "privcore"


def test_every_cache_reads_the_same_folder(tmp_path, monkeypatch):
    from privcore.data.mnist_download import default_cache_dir
    from privcore.engine.cache import default_results_dir

    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path and default_results_dir() == tmp_path / "results"
