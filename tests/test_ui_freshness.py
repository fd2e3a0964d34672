"""A server whose code changed on disk under it says to restart instead of running a page (ui/freshness.py)."""

from __future__ import annotations

import os
import sys
import types

import pytest

from ui import freshness


@pytest.fixture()
def probe(loaded_module):
    """A loaded module of the ``ui`` package, backed by a file of its own."""
    return loaded_module("ui._freshness_probe")


def test_a_loaded_module_whose_file_changes_or_goes_is_named(probe):
    assert "ui._freshness_probe" not in freshness.changed_modules()  # first seen: recorded
    assert "ui._freshness_probe" not in freshness.changed_modules()
    stat = probe.stat()
    os.utime(probe, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert freshness.changed_modules() == ["ui._freshness_probe"]
    probe.unlink()
    assert freshness.changed_modules() == ["ui._freshness_probe"]


def test_a_module_imported_afresh_is_not_stale(probe):
    """With the file watcher on (developing), Streamlit evicts the modules on an edit and the next run imports
    them again: that module runs the new code."""
    assert "ui._freshness_probe" not in freshness.changed_modules()
    stat = probe.stat()
    os.utime(probe, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    again = types.ModuleType("ui._freshness_probe")
    again.__file__ = str(probe)
    sys.modules[again.__name__] = again
    assert "ui._freshness_probe" not in freshness.changed_modules()


def test_the_message_names_a_module_and_says_how_to_restart():
    text = freshness.restart_message(["privcore.methods.dpsgd", "ui.sidebar"])
    assert "privcore.methods.dpsgd and 1 more" in text and "privcore app" in text and "URL" in text


def test_the_dashboard_runs_no_page_on_changed_code(app_env, monkeypatch):
    """A page run on changed code showed a traceback (a name the old module lacked); the run now stops
    before the navigation with the restart message."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    app = str(Path(__file__).resolve().parents[1] / "app.py")
    monkeypatch.setenv("PRIVCORE_CODE_CHECK", "on")  # the suite turns it off (conftest.py)
    monkeypatch.setattr(freshness, "changed_modules", lambda: ["privcore.methods.dpsgd"])
    at = AppTest.from_file(app, default_timeout=60).run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [freshness.restart_message(["privcore.methods.dpsgd"])]
    assert not at.title and not at.sidebar.get("slider")


def test_the_check_is_on_unless_switched_off(monkeypatch):
    monkeypatch.delenv("PRIVCORE_CODE_CHECK", raising=False)
    assert freshness.enabled()
    monkeypatch.setenv("PRIVCORE_CODE_CHECK", "off")
    assert not freshness.enabled()
