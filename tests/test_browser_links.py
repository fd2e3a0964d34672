"""Old links in a real browser (Streamlit server + headless Chromium): ``/Explore``, the Explore page's
path before it became the default page served at ``/``, opens Explore (with the link's settings)
without Streamlit's "Page not found" dialog. A few seconds: no result is waited for."""

from __future__ import annotations

from browser_helpers import chromium, idle, needs_browser, no_exception, streamlit_server


@needs_browser
def test_an_old_explore_link_opens_explore_without_page_not_found(tmp_path):
    with streamlit_server(tmp_path) as base, chromium() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(f"{base}/Explore?dataset=%22synthetic%22&repeats=2&eps=10.0")
        page.get_by_role("heading", name="Explore the trade-offs of private prediction").wait_for(timeout=120_000)
        idle(page, before_ms=1500)
        no_exception(page, "Explore through /Explore")
        assert page.get_by_text("Page not found").count() == 0
        assert page.url.startswith(f"{base}/?") and "eps=10.0" in page.url, page.url  # the link's settings kept
        slider = page.get_by_test_id("stSlider").filter(has_text="Privacy loss ε").get_by_role("slider")
        assert slider.get_attribute("aria-valuetext") == "10"
        nav = page.get_by_test_id("stSidebarNav").inner_text()
        assert nav.count("Explore") == 1, nav  # no extra navigation entry for the old path
