"""The dashboard's start-up warm-up: pay the first visit's costs before anyone asks.

:func:`start` runs :func:`warm_all` once per server process in a background thread: when the server
starts (``streamlit run app.py`` builds an ``st.App`` whose lifespan calls it, see ``app.py``), and
again, as a no-op, from the first page run (a server started some other way). It loads the default data,
and DP-SGD's accountant where the shipped calibration table does not cover it
(:func:`privcore.engine.warmup.warm_up`), then computes what the Explore page shows first with every
control at its default, into the disk cache. A visitor who arrives while that is under way waits for the
same computation instead of repeating it (:func:`privcore.engine.runner.run_sweep` runs identical specs
once per process): the specs and their order are the page's own (:func:`ui.setting.explore_plan`), so
none is computed twice.

Between its steps the warm-up also hands the objects then alive (mostly the imported modules of
torch, scipy, plotly and Streamlit) to :func:`gc.freeze`, so that the full garbage
collection Streamlit runs after every script run, a fragment's included, no longer walks them: a first
visit polls the warm-up every second, and each of those collections would otherwise hold the interpreter
lock while it walks them (``bench/bench_first_visit.py --spy`` measures it).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import atexit
import threading
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

__all__ = ["warm_default_view", "freeze_heap", "warm_all", "start", "stop", "lifespan"]

_LOG = logging.getLogger(__name__)
_START_LOCK = threading.Lock()
_THREAD: list[threading.Thread] = []
_EXIT_HOOK: list[bool] = []
_STOP = threading.Event()


def warm_default_view(values: dict[str, Any] | None = None, cancel: Callable[[], bool] | None = None) -> int:
    """Compute the Explore page's first specs for ``values`` (default: every control's default).

    Returns the number of points computed (0 when all were cached). Never raises: a failure is
    logged, and the page then computes on demand as usual. ``cancel`` (polled between and inside
    sweeps) stops it early; finished points stay cached.
    """
    try:
        from privcore.engine.runner import SweepCancelled, run_sweep
        from privcore.engine.warmup import warm_up
        from privcore.threads import use_threads

        from . import state
        from .setting import build_data_info, explore_plan

        chosen = {**state.DEFAULTS, **(values or {})}
        dataset = chosen["dataset"]
        warm_up(dataset, chosen["accounting"], wait=False)  # the accountant imports beside the first methods
        info = build_data_info(dataset)
        freeze_heap()
        done = 0
        for spec in explore_plan(info, values):
            if cancel is not None and cancel():
                break
            try:
                t0 = time.perf_counter()
                use_threads()  # this thread's own OpenMP count: the cores other jobs leave free now
                n = run_sweep(spec, cancel=cancel).computed
                done += n
                _LOG.info("warm-up: %d points of %d methods in %.2f s", n, len(spec.methods), time.perf_counter() - t0)
                freeze_heap()  # what the page and the methods imported meanwhile (plotly, the accountant)
            except SweepCancelled:
                break
        return done
    except Exception:  # noqa: BLE001 - a warm-up must never take the app down
        _LOG.exception("start-up warm-up failed; results will be computed on demand")
        return 0


def freeze_heap() -> None:
    """Collect garbage once, then move every object still alive into the collector's permanent
    generation (:func:`gc.freeze`): later full collections (Streamlit runs one after each script
    run) then walk only objects made since. Frozen objects are still freed by reference counting;
    a reference cycle among them is never collected: they are mostly long-lived module objects, and
    the rest is a one-off (only the warm-up freezes, a few times per server process)."""
    gc.collect()
    gc.freeze()


def warm_all() -> None:
    """The default Explore view first, then kaleido's Chromium for the first export: one after the
    other, so a first visit does not share its two cores with a browser start-up. Environment:
    ``PRIVCORE_CORE_WARMUP=0`` / ``PRIVCORE_EXPORT_WARMUP=0`` leave out either part."""
    if os.environ.get("PRIVCORE_CORE_WARMUP", "1") != "0":
        warm_default_view(cancel=_STOP.is_set)
    if os.environ.get("PRIVCORE_EXPORT_WARMUP", "1") != "0" and not _STOP.is_set():
        from . import export

        export.warm_up()


def start() -> bool:
    """Start :func:`warm_all` in a daemon thread, once per process; True when this call started it."""
    with _START_LOCK:
        if _THREAD:
            return False
        _STOP.clear()
        thread = threading.Thread(target=warm_all, name="privcore-warmup", daemon=True)
        _THREAD.append(thread)
        thread.start()
        if not _EXIT_HOOK:  # stopped before the interpreter finalises (a daemon thread in native code aborts it)
            atexit.register(stop)
            _EXIT_HOOK.append(True)
        return True


def stop(timeout: float = 5.0) -> None:
    """Ask a running warm-up to stop (the server is shutting down) and wait up to ``timeout`` s."""
    _STOP.set()
    for thread in list(_THREAD):
        thread.join(timeout)


@asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:  # st.App passes itself
    """``st.App``'s lifespan: start the warm-up as the server starts, stop it as the server stops."""
    from . import freshness  # noqa: F401 - records the code the server starts with (its import does)

    start()
    try:
        yield
    finally:
        await asyncio.to_thread(stop)
