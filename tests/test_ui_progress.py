"""ui/progress.py: an expensive setting waits for "Compute (about N s)", and a chart that is not
recomputed keeps the previous one (AppTest of the Explore page, synthetic data)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from apptest import APP, run, texts

FAST = {"dataset": '"synthetic"', "repeats": "2", "epochs": "1", "eps_min": "1.0", "eps_max": "10.0"}

pytestmark = pytest.mark.usefixtures("app_env")


@pytest.mark.slow
def test_expensive_settings_wait_for_compute_and_the_previous_chart_stays(monkeypatch):
    at = run(APP, FAST).run()
    assert not at.exception and len(at.get("plotly_chart")) == 1
    monkeypatch.setenv("PRIVCORE_COMPUTE_THRESHOLD_S", "0")       # everything counts as expensive now
    at.text_input(key="t:eps").input("7").run()
    assert not at.exception, at.exception
    compute = [b for b in at.button if b.label.startswith("Compute (about")]
    assert compute, [b.label for b in at.button]
    assert any("takes about" in t and "waits for you" in t for t in texts(at.info))
    assert not [t for t in texts(at.success) if "Recommended" in t]           # nothing ran
    assert any("Previous chart" in t for t in texts(at.caption)) and len(at.get("plotly_chart")) == 1
    compute[0].click().run()                                                   # the current setting
    assert any("ε = 7" in t for t in texts(at.subheader)), texts(at.subheader)
    # The clicked box is gone in the run it started (drawn again and emptied, it used to stay for the
    # whole run: the walk-through found it under finished results); the curve's other points are cached,
    # so nothing else asks.
    assert not [b for b in at.button if b.label.startswith("Compute (about")]
    assert not [t for t in texts(at.info) if "waits for you" in t]
    assert len(at.get("plotly_chart")) == 1 and not any("Previous chart" in t for t in texts(at.caption))
    at.text_input(key="t:eps").input("5").run()                              # a new point: it asks again
    assert [b for b in at.button if b.label.startswith("Compute (about")]
    monkeypatch.setenv("PRIVCORE_COMPUTE_THRESHOLD_S", "1000")
    at.text_input(key="t:eps").input("4").run()                              # cheap: starts by itself
    assert not [b for b in at.button if b.label.startswith("Compute (about")]


@pytest.mark.slow
def test_a_sweep_computed_by_another_thread_is_polled_not_waited_for(monkeypatch):
    """While the warm-up (another thread) computes the current setting, the page run draws every
    control and a note, starts nothing of its own and ends (a fragment polls and reruns the page when
    it is done); with the computation finished, the page shows the result. Waiting inside the run
    left a slow machine's controls grey until the run ended (ui/progress.py, wait_in_background)."""
    import privcore.engine.runner as runner

    busy = {"on": True}
    monkeypatch.setattr(runner, "running_elsewhere", lambda spec, cache=None: busy["on"])
    calls = []
    real_run_sweep = runner.run_sweep
    monkeypatch.setattr(runner, "run_sweep", lambda *a, **k: calls.append(1) or real_run_sweep(*a, **k))
    at = run(APP, FAST).run()
    assert not at.exception, at.exception
    assert not calls                                                            # nothing computed here
    notes = [p.proto.text for p in at.get("progress")]
    assert any("being computed in the background" in str(n) for n in notes), notes
    assert not [t for t in texts(at.success) + texts(at.info) if "Recommended" in t]
    assert at.select_slider(key="w:eps").value and at.text_input(key="t:eps").value  # the controls are drawn
    busy["on"] = False                                                          # the other thread is done
    at.run()
    assert not at.exception, at.exception
    assert calls and [t for t in texts(at.success) + texts(at.info) if "Recommended" in t]
    assert not any("being computed in the background" in p.proto.text for p in at.get("progress"))


def test_the_bar_redraws_at_most_once_per_interval_and_always_at_the_end():
    from ui.progress import BAR_INTERVAL_S, BarThrottle

    assert BAR_INTERVAL_S <= 1.0  # Cancel waits for the next redraw: keep it short
    throttle = BarThrottle(interval=1.0)
    drawn = [now for now, fraction in [(0.0, 0.0), (0.25, 0.1), (0.5, 0.2), (1.0, 0.3), (1.25, 0.4), (2.1, 0.5),
                                       (2.2, 1.0)] if throttle.due(now, fraction)]
    assert drawn == [0.0, 1.0, 2.1, 2.2]


def test_the_device_line_says_when_other_jobs_hold_cores(monkeypatch):
    from privcore import threads
    from ui import progress

    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(threads, "planned_threads", lambda: 1)
    assert progress.device_text("cpu") == "CPU (1 thread of 2 cores: other jobs hold the rest)"
    monkeypatch.setattr(threads, "planned_threads", lambda: 2)
    assert progress.device_text("cpu") == "CPU (2 threads)"


@pytest.mark.slow
def test_a_curve_asks_once_for_its_quick_and_slow_methods(monkeypatch):
    """A walk-through saw two Compute boxes on the vs B tab, one for the quick methods and one for the
    whole curve, with the same estimate: one box now asks for the whole curve, and its click computes
    the quick methods first and then the rest, with no second box."""
    at = run(APP, FAST).run()                                  # the current setting and the ε curve
    assert not at.exception, at.exception
    monkeypatch.setenv("PRIVCORE_COMPUTE_THRESHOLD_S", "0")    # everything counts as expensive now
    at.session_state["w:tab"] = "vs B (predictions)"
    at.run()
    assert not at.exception, at.exception
    boxes = [b for b in at.button if b.label.startswith("Compute (about")]
    assert len(boxes) == 1, [t for t in texts(at.info)]
    assert not any(t.startswith("Quick methods") for t in texts(at.info))
    boxes[0].click().run()
    assert not at.exception, at.exception
    assert not [b for b in at.button if b.label.startswith("Compute (about")], texts(at.info)
    assert any("predictions B" in str(c.proto.spec) for c in at.get("plotly_chart"))
