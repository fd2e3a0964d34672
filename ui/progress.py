"""Running a sweep from a page: a progress bar with device and ETA, Cancel and Resume, and a memo.

:func:`run_with_progress` runs (or fetches) one :class:`~privcore.engine.specs.SweepSpec` through
:func:`privcore.engine.runner.run_sweep`. Results are memoised per session (the last 64 specs) and
cached on disk by privcore; :func:`quick_part` splits off the methods that train nothing per
release so a page can draw them first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Callable

import streamlit as st

from .display import show_error

__all__ = ["BAR_INTERVAL_S", "BarThrottle", "POLL_S", "run_with_progress", "wait_in_background", "waiting", "quick_part", "was_cancelled", "device_text", "fmt_seconds", "estimate_seconds",
           "plan_and_estimate", "run_jobs",
           "compute_approved", "show_previous", "has_previous"]


def device_text(device: str) -> str:
    try:
        import torch

        from privcore.device import resolve_device

        dev = resolve_device(device)
        if dev.type == "cuda":
            return f"GPU ({torch.cuda.get_device_name(dev)})"
        import os

        from privcore.threads import planned_threads

        threads, cores = planned_threads(), os.cpu_count() or 1
        busy = f" of {cores} cores: other jobs hold the rest" if threads < cores else ""
        return f"CPU ({threads} thread{'s' if threads != 1 else ''}{busy})"
    except Exception as err:  # noqa: BLE001
        return f"device unavailable: {err}"


def fmt_seconds(s: float) -> str:
    if s < 1:
        return "1 s"  # "about 1 s", "1 s elapsed": an estimate or a clock this coarse does not need "<"
    if s < 90:
        return f"{s:.0f} s"
    return f"{s / 60:.1f} min"


_MEMO_SIZE = 64
#: Seconds between two redraws of a progress bar. Each redraw is a message to the browser, which then
#: renders the page again (``bench/bench_first_visit.py --browser-trace`` measures how long): redrawing at
#: every 0.25 s callback would keep the browser busy on a core the computation needs. Cancel takes effect
#: at the next redraw, so this is also the most a Cancel click waits for the computation to notice it.
BAR_INTERVAL_S = 1.0


class BarThrottle:
    """Which progress callbacks redraw a bar: the first, every one at fraction 1, and otherwise at most
    one per ``interval`` seconds. A due redraw happens even when its text is unchanged: it is also
    when a Cancel click is noticed."""

    def __init__(self, interval: float = BAR_INTERVAL_S) -> None:
        self.interval = float(interval)
        self._last: float | None = None

    def due(self, now: float, fraction: float) -> bool:
        """Whether a callback at time ``now`` (seconds) with ``fraction`` done redraws; if so, it is recorded."""
        if fraction >= 1.0 or self._last is None or now - self._last >= self.interval:
            self._last = now
            return True
        return False


def _memo() -> OrderedDict:
    memo = st.session_state.get("_sweep_memo")
    if memo is None:
        memo = st.session_state["_sweep_memo"] = OrderedDict()
    return memo


def quick_part(spec):  # noqa: ANN001, ANN201 - SweepSpec -> SweepSpec | None
    """The methods of ``spec`` that train nothing per release, as a spec of their own, to draw
    while the slow ones (loss perturbation, DP-SGD) compute; None when that would not help (all
    methods are of one kind, or the whole result is already in this session or on disk)."""
    from privcore.engine.runner import read_cached

    from .setting import quick_subset

    quick = quick_subset(spec)
    if quick is None or spec.key in _memo():
        return None
    try:
        if read_cached(spec) is not None:
            return None
    except (ValueError, TypeError, RuntimeError):  # the full run will report the problem itself
        return None
    return quick


def was_cancelled(spec, key: str) -> bool:  # noqa: ANN001
    """Whether the user cancelled :func:`run_with_progress` for this spec under ``key``."""
    return st.session_state.get("_cancelled", {}).get(key) == spec.key


def cancel_clicked(key: str) -> bool:
    """Whether this rerun comes from the Cancel button of the bar under ``key`` (a page that runs
    only on a button click draws no bar in that rerun, so :func:`cancellable_bar` cannot see it)."""
    return bool(st.session_state.get(f"{key}_cancel", False))


def cancellable_bar(key: str, sig: str, label: str, device: str, *, what: str = "points",
                    predicted: float | None = None) -> tuple[Any, Callable[[float, str], None]] | None:
    """A progress bar with a Cancel button for the run ``sig`` under ``key``, or None when the user
    cancelled that run (a "Resume" box is shown instead). Returns (holder, progress) where
    ``progress(fraction, message)`` updates the bar with elapsed time and ETA and ``holder.empty()``
    removes it. With ``predicted`` (seconds, from :mod:`privcore.engine.cost`) the bar shows it
    from the start and the ETA follows the cost model (:func:`privcore.engine.cost.eta`). Shared by
    every long computation of the dashboard."""
    cancelled = st.session_state.setdefault("_cancelled", {})
    if cancelled.get(key) == sig:
        box = st.container(border=True)
        box.info(f"{label}: cancelled. Finished {what} are cached; resume to compute the rest.")
        if box.button("Resume", key=f"{key}_resume"):
            cancelled.pop(key, None)
            st.rerun()
        return None
    holder = st.empty()
    with holder.container(border=True):
        expected = "" if predicted is None else f" (expected about {fmt_seconds(predicted)})"
        bar = st.progress(0.0, text=f"{label} on {device}: starting{expected}...")
        if st.button("Cancel", key=f"{key}_cancel", help=f"Stop now; finished {what} stay cached"):
            cancelled[key] = sig
            holder.empty()
            st.rerun()
    t0 = time.perf_counter()
    throttle = BarThrottle()

    def progress(fraction: float, message: str) -> None:
        fraction = min(max(fraction, 0.0), 1.0)
        now = time.perf_counter()
        elapsed = now - t0
        if not throttle.due(now, fraction):
            return  # see BAR_INTERVAL_S
        if predicted is not None:
            from privcore.engine.cost import eta as model_eta

            eta = f"ETA {fmt_seconds(model_eta(predicted, fraction, elapsed))}"
        else:
            eta = "estimating..." if fraction <= 0 else f"ETA {fmt_seconds(elapsed * (1 - fraction) / fraction)}"
        text = f"{label} on {device}: {message} · {fraction:.0%} · {fmt_seconds(elapsed)} elapsed · {eta}"
        bar.progress(fraction, text=text)

    return holder, progress


def plan_and_estimate(spec):  # noqa: ANN001, ANN201 - SweepSpec -> (SweepPlan | None, float | None)
    """The spec's plan (:func:`privcore.engine.plan.make_plan`: data, points, keys, cache hits) and the
    predicted seconds of computing what it found missing (privcore's cost model); (None, None) when
    either cannot be made (the run then reports the problem itself). The run uses the same plan."""
    from privcore.engine.cost import estimate_plan
    from privcore.engine.plan import make_plan

    if getattr(spec, "tuning", "configured") != "configured":  # its candidate sweeps (privcore.engine.tuned)
        from privcore.engine.tuned import estimate_seconds

        try:
            return None, estimate_seconds(spec)
        except (ValueError, TypeError, RuntimeError, OSError):
            return None, None
    try:
        plan = make_plan(spec)
    except (ValueError, TypeError, RuntimeError, OSError):
        return None, None
    try:
        return plan, float(estimate_plan(plan).seconds)
    except (ValueError, TypeError, RuntimeError, OSError):
        return plan, None


def run_jobs(specs, run: Callable[[Any, Callable[[float, str], None]], Any], *, key: str, sig: str, label: str,  # noqa: ANN001, ANN201
             device: str, what: str, predicted: float | None = None, cancelled: str | None = None,
             errors: tuple[type[BaseException], ...] = (ValueError, TypeError, RuntimeError),
             on_error: Callable[[BaseException], None] | None = None):
    """The dashboard's one runner for every kind of job (sweep, leakage, deep: :mod:`privcore.engine.jobkinds`):
    one progress bar with device and ETA and a Cancel button (:func:`cancellable_bar`) over ``specs``,
    each run by ``run(spec, progress)``; the bar's share of each spec is equal. Returns the list of
    results, or None when cancelled (``cancelled`` is said; finished work stays cached) or failed with
    one of ``errors`` (shown inline, or by ``on_error``)."""
    from privcore.jobs import JobCancelled
    from privcore.threads import use_threads

    box = cancellable_bar(key, sig, label, device, what=what, predicted=predicted)
    if box is None:
        return None
    holder, bar = box
    results = []
    try:
        use_threads()  # the cores others leave free: more would spin at OpenMP's barriers (privcore.threads)
        for i, spec in enumerate(specs):
            def part(fraction: float, message: str, i: int = i) -> None:
                bar((i + min(max(fraction, 0.0), 1.0)) / len(specs), message)

            results.append(run(spec, part if len(specs) > 1 else bar))
    except JobCancelled:
        holder.empty()
        st.info(cancelled or f"{label}: cancelled; finished {what} are cached.")
        return None
    except errors as err:
        holder.empty()
        if on_error is not None:
            on_error(err)
        else:
            show_error(err, prefix=f"{label} failed")
        return None
    holder.empty()
    return results


def estimate_seconds(spec) -> float | None:  # noqa: ANN001 - SweepSpec
    """Predicted seconds of computing what is not cached of ``spec`` (privcore's cost model), or
    None when it cannot say (the run then reports the problem itself)."""
    return plan_and_estimate(spec)[1]


def _limit(on_error: Callable[[BaseException], None] | None = None) -> float:
    """The seconds above which a run waits for its Compute click (``PRIVCORE_COMPUTE_THRESHOLD_S``, else the
    default; a bad setting is passed to ``on_error`` and the default used)."""
    from privcore.engine.cost import THRESHOLD_SECONDS, threshold_seconds

    try:
        return threshold_seconds()
    except ValueError as err:
        if on_error is not None:
            on_error(err)
        return THRESHOLD_SECONDS


def compute_approved(key: str, sig: str, label: str, predicted: float | None, device: str,
                     also: tuple[str, float] | None = None) -> bool:
    """True when run ``sig`` may start: its estimate is at most the threshold, or the user clicked
    "Compute (about N s)" for it. Otherwise shows that button (with the estimate) and returns False:
    an expensive setting waits for an explicit click instead of starting on slider release. ``also``:
    (what, seconds) the same click starts after this run (a page's curve), priced into the button."""
    approved = st.session_state.setdefault("_approved", {})
    limit = _limit(show_error)
    if predicted is None or predicted <= limit or approved.get(key) == sig:
        return True
    if st.session_state.get(f"{key}_compute"):  # this run is the click on the box below: no box at all
        approved[key] = sig                      # (drawn and then emptied, it stayed for the whole run)
        return True
    total = predicted + (also[1] if also else 0.0)
    more = (f", then {also[0]} about {fmt_seconds(also[1])} more: about {fmt_seconds(total)} in all"
            if also and also[1] > 0 else "")
    box = st.container(border=True)
    box.info(f"{label}: this setting takes about {fmt_seconds(predicted)} to compute on {device}{more}. Anything "
             f"over {limit:g} s waits for you to click Compute; finished points are cached, so coming back to them "
             "later is instant.")
    if box.button(f"Compute (about {fmt_seconds(total)})", key=f"{key}_compute", type="primary"):
        approved[key] = sig
        box.empty()
        return True
    return False


def needs_click(spec, key: str) -> bool:  # noqa: ANN001 - SweepSpec
    """Whether :func:`run_with_progress` would show ``spec``'s "Compute" box under ``key`` now (not
    computed in this session, not approved, not computed by another thread, estimated over the
    threshold), without drawing anything: a page can then ask once for a run and its parts."""
    from privcore.engine.runner import running_elsewhere

    sig = spec.key
    if sig in _memo() or st.session_state.get("_approved", {}).get(key) == sig or st.session_state.get(f"{key}_compute"):
        return False
    if running_elsewhere(spec):
        return False
    plan, predicted = plan_and_estimate(spec)
    if predicted is not None and predicted > _limit():
        return True
    # It runs in this page run: run_with_progress takes this plan instead of planning a second time
    st.session_state.setdefault("_planned", {})[sig] = (plan, predicted)
    return False


def _previous_key(key: str) -> str | None:
    shown = st.session_state.get("_last_figures", {})
    latest = [k for k in shown if k in (key, f"{key}_quick")]  # the full chart, or the quick one drawn first
    return latest[-1] if latest else None


def has_previous(key: str) -> bool:
    """Whether this session has drawn a chart under ``key`` (or ``key + "_quick"``)."""
    return _previous_key(key) is not None


def show_previous(key: str) -> bool:
    """Draw the last chart remembered under ``key`` (or ``key + "_quick"``, whichever was drawn
    last) when the new one was cancelled or waits for a click, so Cancel keeps the previous chart
    (its title still names its own setting). Returns whether there was one."""
    from .display import show_figure

    latest = _previous_key(key)
    fig = None if latest is None else st.session_state["_last_figures"][latest]
    if fig is None:
        return False
    st.caption("Previous chart, kept while the new setting is not computed (its title names its setting).")
    show_figure(fig, key=f"{key}_previous")
    return True


#: Seconds between two checks of a sweep computed by another thread (:func:`wait_in_background`).
POLL_S = 1.0


def waiting(key: str) -> bool:
    """Whether the run under ``key`` was left to another thread in this page run (see
    :func:`wait_in_background`): the page should not start related work of its own."""
    return key in st.session_state.get("_waiting", {})


def wait_in_background(spec, key: str, label: str, device: str) -> None:  # noqa: ANN001 - SweepSpec
    """Show that ``spec`` is being computed by another thread (the server's start-up warm-up or
    another session), poll for it every :data:`POLL_S` s in a fragment and rerun the page when it is done.

    Why not wait inside the page run, as :func:`privcore.engine.runner.run_sweep` can: while a page
    run lasts over 0.5 s, Streamlit's running indicator re-renders every 200 ms, and on a slow or busy
    machine the first render of the page's lazily loaded widgets (sliders, text boxes, radios) takes
    longer than that, never completes, and leaves grey placeholders until the run ends
    (``bench/bench_first_visit.py`` prints when the controls are drawn). Polling keeps every run short,
    so the page is drawn and usable while the warm-up computes.
    """
    started = st.session_state.setdefault("_waiting_since", {}).setdefault(spec.key, time.perf_counter())
    st.session_state.setdefault("_waiting", {})[key] = spec.key

    @st.fragment(run_every=POLL_S)
    def poll() -> None:
        from privcore.engine.runner import running_elsewhere

        if not running_elsewhere(spec):
            st.session_state.get("_waiting_since", {}).pop(spec.key, None)
            st.rerun(scope="app")
        with st.container(border=True):
            st.progress(0.0, text=f"{label} on {device}: being computed in the background (by the "
                                  f"server's start-up, another visitor or a run this one replaced) · {fmt_seconds(time.perf_counter() - started)} "
                                  "elapsed · the page updates when it is done; every control works meanwhile")

    poll()


def run_with_progress(spec, *, key: str, label: str = "Computing", show_done: bool = False,  # noqa: ANN001, ANN201
                      ask: bool = True, also: tuple[str, float] | None = None):
    """Run (or fetch) a sweep with a progress bar showing device, progress and ETA, and a Cancel button.

    Returns the :class:`SweepResult`, or None when the run failed (shown inline), was cancelled
    (finished points stay cached; a "Resume" button continues), is being computed by another thread
    (:func:`wait_in_background`: the page polls and reruns when it is done) or waits for its "Compute (about
    N s)" click: with ``ask`` (default) a run the cost model predicts above
    :data:`privcore.engine.cost.THRESHOLD_SECONDS` starts only on that click (:func:`compute_approved`). Results are memoised per session
    and on disk, so repeating a spec is instant. Cancelling takes effect at the next redraw of
    the bar (:data:`BAR_INTERVAL_S` apart; privcore calls back every 0.25 s, also inside a batch):
    a message to the browser is where Streamlit can stop the script. ``also``: see :func:`compute_approved`.
    """
    from privcore.engine.runner import run_sweep

    sig = spec.key
    # A plan needs_click made in this page run (taken before any early return, so none is left for a later run)
    planned = st.session_state.setdefault("_planned", {}).pop(sig, None)
    memo = _memo()
    if sig in memo:
        memo.move_to_end(sig)
        return memo[sig]
    device = device_text(spec.device)
    st.session_state.get("_waiting", {}).pop(key, None)
    from privcore.engine.runner import running_elsewhere

    # Another thread computes it (the warm-up, another session, or this session's previous run, which
    # Streamlit's fast reruns replace before it has stopped): poll, do not block this run. Not when
    # this run comes from the bar's Cancel button: that click must reach cancellable_bar below.
    if not cancel_clicked(key) and running_elsewhere(spec):
        wait_in_background(spec, key, label, device)
        return None
    if was_cancelled(spec, key):
        cancellable_bar(key, sig, label, device, what="points")  # the Resume box
        return None
    plan, predicted = planned if planned is not None else plan_and_estimate(spec)
    if ask and not compute_approved(key, sig, label, predicted, device, also):
        return None
    done = run_jobs([spec], lambda sp, progress: run_sweep(sp, progress=progress, plan=plan), key=key, sig=sig,
                    label=label, device=device, what="points", predicted=predicted)
    if done is None:
        return None
    result = done[0]
    if show_done and result.computed:
        st.caption(f"{label}: {result.computed} points computed in {fmt_seconds(result.seconds)} on {device}, "
                   f"{result.cached} from the cache.")
    memo[sig] = result
    while len(memo) > _MEMO_SIZE:
        memo.popitem(last=False)
    return result
