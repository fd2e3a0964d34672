"""Browser walk of issue 14's output points: own data with declared standardisation, export metadata,
copy as code, an 800 px layout and a rejected URL value (Streamlit server + Chromium via Playwright).

Saves own_data.png (docs/screenshots/, used by docs/dashboard.md, when PRIVCORE_UPDATE_SCREENSHOTS=1). Skipped, with the reason, when Chromium or the
playwright package is missing. About a minute on CPU.
"""

from __future__ import annotations

from pathlib import Path

from browser_helpers import chromium, idle, needs_browser, no_exception, screenshot_dir, streamlit_server
from test_preprocess import offset_csv

FAST = ("dataset=%22file%22&repeats=2&eps_min=1.0&eps_max=10.0&eps=3.0"
        "&methods=%5B%22model_sensitivity%22%2C%22subsample_aggregate%22%5D")
CHART = "() => !!document.querySelector('[data-testid=\"stPlotlyChart\"] .js-plotly-plot')"


def _idle(page, timeout_ms: int = 120_000) -> None:
    idle(page, timeout_ms, before_ms=400, after_ms=400)


def _texts(page, testid: str) -> list[str]:
    return page.get_by_test_id(testid).all_inner_texts()


@needs_browser
def test_own_data_exports_code_and_narrow_layout_in_chromium(tmp_path):
    csv_path = offset_csv(tmp_path / "sep.csv")
    with streamlit_server(tmp_path) as base, chromium() as browser:
        page = browser.new_context(viewport={"width": 1400, "height": 1600}, accept_downloads=True).new_page()

        # ---- Upload the separable 3-class CSV: as given, the app's model is far below plain LR.
        page.goto(f"{base}/?{FAST}")
        _idle(page)
        page.locator('[data-testid="stSidebar"] input[type="file"]').set_input_files(str(csv_path))
        _idle(page)
        no_exception(page, "after the upload")
        sidebar = page.get_by_test_id("stSidebar")
        assert "Using sep.csv" in sidebar.inner_text()
        assert "data_file=" in page.url and "uploads" not in page.url and str(tmp_path) not in page.url
        page.wait_for_function(CHART, timeout=120_000)
        gap = page.get_by_test_id("stAlert").filter(has_text="plain (non-private) logistic regression")
        gap.first.wait_for(timeout=60_000)
        assert "reaches 1.00" in gap.first.inner_text()

        # ---- Declare public bounds and an intercept: the gap closes.
        sidebar.get_by_text("Standardise with declared public bounds").click()
        _idle(page)
        bounds = sidebar.get_by_label("Public bounds low:high", exact=True).and_(sidebar.get_by_test_id("stTextInputField"))
        bounds.fill("80:140, -5:5")
        bounds.press("Enter")
        _idle(page)
        sidebar.get_by_text("Add an intercept feature").click()
        _idle(page)
        no_exception(page, "after the preprocessing")
        assert "prep=%22bounds%3A80%3A140%2C-5%3A5%2Bintercept%22" in page.url or "bounds" in page.url
        assert "D = 3" in sidebar.inner_text()
        page.wait_for_function(CHART, timeout=120_000)
        page.get_by_text("Plain (non-private) logistic regression on the same split: 1.000; "
                         "the non-private model here: 1.000").wait_for(timeout=60_000)
        assert gap.count() == 0
        sidebar.get_by_text("Preview: 180 rows, 2 features, 3 classes").click()
        assert sidebar.get_by_test_id("stDataFrame").count() == 1
        page.wait_for_timeout(500)
        page.screenshot(path=str(screenshot_dir() / "own_data.png"))  # docs/dashboard.md's, when updating them

        # ---- The calibrations, typeset by KaTeX without errors.
        page.get_by_text("How each method's noise was calibrated").click()
        page.locator(".katex").first.wait_for(timeout=30_000)
        assert page.locator(".katex-error").count() == 0

        # ---- Export metadata: the HTML carries the caption row and the settings, no server path.
        page.wait_for_function(CHART, timeout=120_000)
        _idle(page)
        with page.expect_download(timeout=60_000) as dl:
            page.get_by_role("button", name="HTML", exact=True).first.click()
        html = Path(dl.value.path()).read_text(encoding="utf-8")
        assert '<meta name="privcore-settings"' in html
        for part in ("own file sep.csv", "N = 144", "C = 3", "D = 3", "R = 2", "accounting: corrected",
                     "seed = 0", "bounds:80:140,-5:5+intercept"):
            assert part in html, part
        assert "/uploads/" not in html and str(tmp_path) not in html

        # ---- Copy as code: the CLI command and the Python call, under the user's file name.
        page.get_by_text("Copy as code").first.click()
        code = "\n".join(page.get_by_test_id("stCode").all_inner_texts())
        assert "python -m privcore sweep --dataset file --data-file sep.csv" in code
        assert "--preprocess bounds:80:140,-5:5+intercept" in code and "run_sweep(spec)" in code
        assert "/uploads/" not in code and str(tmp_path) not in code
        url = page.url

        # ---- 800 px: export buttons readable, legend below the x axis, a screenshot.
        narrow = browser.new_context(viewport={"width": 800, "height": 1400}).new_page()
        narrow.goto(url)
        _idle(narrow)
        narrow.wait_for_function(CHART, timeout=120_000)
        _idle(narrow)
        for label in ("PNG", "SVG", "PDF", "HTML", "CSV"):
            button = narrow.get_by_role("button", name=label, exact=True).first
            assert button.inner_text().strip() == label
            clipped = button.evaluate("b => [...b.querySelectorAll('*')].some(e => e.scrollWidth > "
                                      "e.clientWidth + 1 && getComputedStyle(e).overflow === 'hidden')")
            assert not clipped, label
        boxes = narrow.evaluate("""() => {
            const plot = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
            const legend = plot.querySelector('.legend').getBoundingClientRect();
            const xtitle = plot.querySelector('.xtitle').getBoundingClientRect();
            return [legend.top, xtitle.bottom]; }""")
        assert boxes[0] >= boxes[1] - 1, boxes  # the legend starts below the x-axis title
        shot = tmp_path / "explore_800.png"
        narrow.get_by_test_id("stPlotlyChart").first.scroll_into_view_if_needed()
        narrow.screenshot(path=str(shot))
        assert shot.stat().st_size > 20_000

        # ---- A bad URL value: named once, with the reason.
        page.goto(f"{base}/?dataset=%22digits%22&repeats=2&eps=%22lots%22&methods=%5B%22model_sensitivity%22%5D")
        _idle(page)
        no_exception(page, "bad URL value")
        bad = [t for t in _texts(page, "stAlert") if "URL parameter eps=" in t]
        assert len(bad) == 1 and "ignored" in bad[0] and "must be a number" in bad[0], bad
