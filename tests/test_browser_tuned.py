"""The tuned comparison in a real browser (Streamlit server, Chromium by Playwright): the sidebar switch
"Each method's knobs" moves Explore from the knobs as configured to a tuned comparison, whose
recommendation says what it is and which knobs won, and back; the URL keeps the choice."""

from __future__ import annotations

from browser_helpers import chromium, idle, needs_browser, no_exception, streamlit_server

FAST = ("dataset=%22synthetic%22&repeats=2&epochs=1&eps_min=1.0&eps_max=10.0"
        "&methods=%5B%22model_sensitivity%22%2C%22subsample_aggregate%22%2C%22private_knn%22%5D")


def _main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


@needs_browser
def test_the_knobs_switch_turns_explore_into_a_tuned_comparison_and_back(tmp_path):
    with streamlit_server(tmp_path) as base, chromium() as browser:
        page = browser.new_context(viewport={"width": 1400, "height": 1900}).new_page()
        page.goto(f"{base}/?{FAST}")
        idle(page)
        no_exception(page, "Explore as configured")
        assert "knob grid" not in _main_text(page)

        side = page.get_by_test_id("stSidebar")
        side.get_by_text("tuned: best on the test queries (optimistic, not private)").click()
        idle(page)
        page.wait_for_function("() => document.body.innerText.includes('knob grid')", timeout=180_000)
        no_exception(page, "Explore tuned on held-out data")
        text = _main_text(page)
        assert "picked on the test queries" in text and "no privacy guarantee covers the choice" in text
        assert "tuning=%22held-out%22" in page.url or "tuning=held-out" in page.url.replace("%22", "")

        side.get_by_text("tuned: selected privately (its cost counted in ε)").click()
        idle(page)
        page.wait_for_function("() => document.body.innerText.includes('a private selection picked')",
                               timeout=180_000)
        no_exception(page, "Explore tuned privately")

        side.get_by_text("as configured", exact=True).click()
        idle(page)
        no_exception(page, "Explore back as configured")
        assert "knob grid" not in _main_text(page)
