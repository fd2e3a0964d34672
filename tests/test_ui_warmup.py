"""ui/warmup.py: the server's start-up warm-up starts once per process, stops when asked, and
runs as the lifespan of the ``st.App`` that ``streamlit run app.py`` serves."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ui import warmup


@pytest.fixture
def fake_work(monkeypatch):
    """warm_all replaced by a job that runs until stop() is asked for; yields its start counter."""
    started = []
    monkeypatch.setattr(warmup, "_THREAD", [])
    monkeypatch.setattr(warmup, "_STOP", threading.Event())

    def work() -> None:
        started.append(1)
        warmup._STOP.wait(30)

    monkeypatch.setattr(warmup, "warm_all", work)
    yield started
    warmup.stop()


def test_start_runs_the_warm_up_once_per_process(fake_work):
    assert warmup.start() is True
    assert warmup.start() is False  # the first page run after the lifespan's start: a no-op
    warmup._THREAD[0].join(0.2)
    assert fake_work == [1] and warmup._THREAD[0].is_alive()
    warmup.stop(5)
    assert not warmup._THREAD[0].is_alive()


def test_the_lifespan_starts_it_with_the_server_and_stops_it_with_the_server(fake_work):
    async def serve() -> bool:
        async with warmup.lifespan(None):
            await asyncio.sleep(0.05)
            return warmup._THREAD[0].is_alive()

    assert asyncio.run(serve()) is True
    assert fake_work == [1] and not warmup._THREAD[0].is_alive()


def test_a_cancelled_warm_up_computes_nothing(tmp_path, monkeypatch):
    from privcore.engine.cache import ResultCache

    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    assert warmup.warm_default_view({"dataset": "synthetic", "repeats": 2}, cancel=lambda: True) == 0
    assert len(ResultCache()) == 0


def test_a_failing_warm_up_is_logged_not_raised(monkeypatch, caplog):
    import ui.setting

    def broken(_name):
        raise RuntimeError("no data here")

    monkeypatch.setattr(ui.setting, "build_data_info", broken)
    assert warmup.warm_default_view() == 0
    assert "start-up warm-up failed" in caplog.text


def test_the_warm_up_freezes_the_imported_heap_for_streamlits_post_run_collections(tmp_path, monkeypatch):
    """After its imports and data load the warm-up moves the live objects out of the cyclic collector's
    walk (gc.freeze): Streamlit's gc.collect(2) after each script run then costs microseconds, not 0.1 s."""
    import gc

    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    gc.unfreeze()
    try:
        assert gc.get_freeze_count() == 0
        warmup.warm_default_view({"dataset": "synthetic", "repeats": 2}, cancel=lambda: True)
        assert gc.get_freeze_count() > 10_000  # at least the modules privcore and numpy brought
    finally:
        gc.unfreeze()
