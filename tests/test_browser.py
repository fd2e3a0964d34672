"""One end-to-end test in a real browser: the Streamlit server, Chromium driven by Playwright.

Starts ``streamlit run app.py`` on a free loopback port with a fresh result cache, opens the Explore
page with small settings (digits data, 3 repetitions, 1 DP-SGD epoch, ε from 1 to 10, all through URL
query parameters), moves the ε control with the keyboard, checks that the chart and the
recommendation change, downloads the chart's CSV through its export button and checks its contents,
and saves screenshots of Explore, Learn and Reproduce (to docs/screenshots/, used by the README and
docs/dashboard.md, when PRIVCORE_UPDATE_SCREENSHOTS=1).

Skipped, with the reason, when Chromium or the playwright package is missing. About a minute on CPU.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from browser_helpers import IDLE, chromium, idle, needs_browser, no_exception, screenshot_dir, streamlit_server

SHOTS = screenshot_dir()  # docs/screenshots with PRIVCORE_UPDATE_SCREENSHOTS=1
FAST = "dataset=%22digits%22&repeats=3&epochs=1&eps_min=1.0&eps_max=10.0"
LEAKAGE = ("dataset=%22digits%22&eps=10.0&budget=5&teachers=4&lk_refs=8&lk_audit=32"
           "&methods=%5B%22model_sensitivity%22%2C%22subsample_aggregate%22%5D")
CHART_DATA = """() => { const el = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
  return el && el.data ? JSON.stringify(el.data.map(d => [d.name, d.x, d.y])) : null; }"""


RECOMMENDED_BOXES = """() => [...document.querySelectorAll('[data-testid="stAlert"]')]
  .filter(e => e.innerText.includes('Recommended')).length"""


def _recommendation(page) -> str:
    box = page.locator('[data-testid="stAlert"]').filter(has_text="Recommended:").first
    box.wait_for(timeout=120_000)
    return box.inner_text()


@needs_browser
def test_dashboard_end_to_end_in_chromium(tmp_path):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with streamlit_server(tmp_path) as base, chromium() as browser:
        context = browser.new_context(viewport={"width": 1400, "height": 1900}, accept_downloads=True)
        page = context.new_page()

        # ---- Explore: the current setting, its recommendation and the accuracy-vs-ε curve.
        page.goto(f"{base}/?{FAST}")
        idle(page)
        no_exception(page, "Explore")
        page.wait_for_function(CHART_DATA, timeout=120_000)
        rec_before = _recommendation(page)
        chart_before = page.evaluate(CHART_DATA)
        assert "Model sensitivity" in chart_before and "Non-private" in chart_before

        # Move ε from 3 down two steps (3 -> 2 -> 1) with the keyboard, as a user would.
        slider = page.get_by_test_id("stSlider").filter(has_text="Privacy loss ε").get_by_role("slider")
        assert slider.get_attribute("aria-valuetext") == "3"
        for step in ("2", "1"):  # one key at a time: each press reruns the app, which may re-draw the slider
            slider.focus()
            page.keyboard.press("ArrowLeft")
            for _ in range(60):  # the value shows at once, or the press was lost in a re-draw: press again
                if slider.get_attribute("aria-valuetext") == step:
                    break
                page.wait_for_timeout(250)
                if _ in (20, 40) and slider.get_attribute("aria-valuetext") not in (step, "1"):
                    slider.focus()
                    page.keyboard.press("ArrowLeft")
            idle(page)
        page.wait_for_function(CHART_DATA, timeout=120_000)
        no_exception(page, "Explore after moving ε")
        assert slider.get_attribute("aria-valuetext") == "1"
        assert "eps=1.0" in page.url  # the URL records the new setting
        rec_after = _recommendation(page)
        chart_after = page.evaluate(CHART_DATA)
        assert rec_after != rec_before, rec_after
        assert chart_after != chart_before  # the current-setting marker (and the ε grid) moved
        page.screenshot(path=str(SHOTS / "explore.png"))

        # Download the chart's numbers with its CSV export button and check them.
        with page.expect_download(timeout=60_000) as dl:
            page.get_by_role("button", name="CSV", exact=True).first.click()
        text = Path(dl.value.path()).read_text(encoding="utf-8")
        assert dl.value.suggested_filename.endswith(".csv")
        rows = list(csv.DictReader(io.StringIO(text)))
        header = text.splitlines()[0].split(",")
        assert {"method", "epsilon", "accuracy_mean"} <= set(header)
        methods = {r["method"] for r in rows}
        assert {"model_sensitivity", "loss_perturbation", "dpsgd", "prediction_sensitivity",
                "subsample_aggregate", "non_private"} <= methods
        assert {float(r["epsilon"]) for r in rows if r["method"] == "dpsgd"} >= {1.0, 10.0}
        assert all(0.0 <= float(r["accuracy_mean"]) <= 1.0 for r in rows)

        # Another tab computes its curve: one recommendation box all along (the previous run's box
        # used to stay, faded, below the new one until the run ended).
        page.get_by_role("tab", name="vs N (training size)").click()
        boxes = []
        for _ in range(150):
            boxes.append(page.evaluate(RECOMMENDED_BOXES))
            if len(boxes) > 10 and page.locator(IDLE).count():
                break
            page.wait_for_timeout(200)
        idle(page)
        assert max(boxes) == 1 and page.evaluate(RECOMMENDED_BOXES) == 1, boxes
        no_exception(page, "Explore's N tab")

        # ---- Learn, through the sidebar navigation: ε, δ, B follow from Explore (shared state).
        page.get_by_test_id("stSidebarNav").get_by_text("Learn", exact=True).click()
        idle(page)
        no_exception(page, "Learn")
        page.wait_for_function(CHART_DATA, timeout=60_000)
        learn_eps = page.get_by_test_id("stSlider").filter(has_text="Privacy loss ε").get_by_role("slider")
        assert learn_eps.get_attribute("aria-valuetext") == "1"
        assert page.get_by_text("Gaussian σ (analytic)").count() == 1
        page.screenshot(path=str(SHOTS / "learn.png"))

        # ---- Reproduce: compute Figure 1a (as published | corrected) on demand.
        page.get_by_test_id("stSidebarNav").get_by_text("Reproduce the paper", exact=True).click()
        idle(page)
        assert "1,438 training" in page.get_by_test_id("stSidebar").inner_text()  # digits carried over
        no_exception(page, "Reproduce")
        page.get_by_role("button", name="Compute Figure 1a").click()
        idle(page)
        page.wait_for_function(
            "() => document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .js-plotly-plot').length >= 2",
            timeout=180_000)
        no_exception(page, "Reproduce after computing")
        assert page.get_by_text("What the paper found.").count() == 1
        page.screenshot(path=str(SHOTS / "reproduce.png"))

        # ---- Measured leakage: attacks and the audit beside each method's bound (a quick setting).
        page.goto(f"{base}/Measured_leakage?{LEAKAGE}")
        idle(page)
        no_exception(page, "Measured leakage")
        page.wait_for_function(CHART_DATA, timeout=240_000)
        idle(page)
        no_exception(page, "Measured leakage after computing")
        roc = page.evaluate(CHART_DATA)
        assert "Model sensitivity" in roc, roc[:200]
        page.screenshot(path=str(SHOTS / "leakage.png"))
    for name in ("explore", "learn", "reproduce", "leakage"):
        assert (SHOTS / f"{name}.png").stat().st_size > 20_000, name
