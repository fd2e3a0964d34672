"""Narrow and ordinary screens in a real browser (Streamlit server + headless Chromium, ~30 s):
at 800 px the Who wins ε multiselect shows every chosen ε (its chips wrap instead of hiding in one
scrolled row) and δ's typed box reads 1e-5 in full; at 1,400 px with the sidebar open the Explore noise table needs no sideways scrolling.
(At 800 px the noise table still scrolls sideways, with the method column pinned: tests/test_ui_figures.py.)"""

from __future__ import annotations

from browser_helpers import chromium, idle, needs_browser, no_exception, streamlit_server

FAST = "dataset=%22synthetic%22&repeats=2&epochs=1&eps_min=1.0&eps_max=10.0"
SEVEN = "map_eps=%5B0.1%2C0.3%2C1.0%2C3.0%2C10.0%2C30.0%2C100.0%5D"
SCROLL = """() => { const s = document.querySelector('[data-testid="stDataFrame"] .dvn-scroller');
  return s ? [s.scrollWidth, s.clientWidth] : null; }"""


@needs_browser
def test_eps_chips_visible_at_800_px_and_noise_table_fits_1400_px(tmp_path):
    with streamlit_server(tmp_path) as base, chromium() as browser:
        page = browser.new_page(viewport={"width": 800, "height": 1200})
        page.goto(f"{base}/Who_wins?{FAST}&{SEVEN}")
        widget = page.get_by_test_id("stMultiSelect").filter(has_text="ε values")
        widget.wait_for(timeout=120_000)
        page.wait_for_timeout(1000)
        box = widget.bounding_box()
        chips = widget.locator('[data-testid="stMultiSelectTagsContainer"] [data-tag]')
        assert chips.count() == 7
        for i in range(7):
            chip = chips.nth(i).bounding_box()
            assert chip["x"] >= box["x"] and chip["x"] + chip["width"] <= box["x"] + box["width"], (i, chip, box)
            assert chip["y"] + chip["height"] <= box["y"] + box["height"], (i, chip, box)
        # Explore at 800 px: delta's typed box reads 1e-5 in full (a number box showed "0.0000").
        page.goto(f"{base}/?{FAST}")
        delta = page.get_by_role("textbox", name="δ (0 = pure ε-DP) (type a value)", exact=True)
        delta.wait_for(timeout=120_000)
        assert delta.input_value() == "1e-5"
        fits = delta.evaluate("e => e.scrollWidth <= e.clientWidth")
        assert fits, delta.evaluate("e => [e.scrollWidth, e.clientWidth]")
        page.close()

        page = browser.new_page(viewport={"width": 1400, "height": 1200})
        page.goto(f"{base}/?{FAST}")
        page.wait_for_selector('[data-testid="stDataFrame"]', timeout=120_000)
        idle(page)
        no_exception(page, "Explore at 1,400 px")
        scroll_width, client_width = page.evaluate(SCROLL)
        assert scroll_width <= client_width + 1, (scroll_width, client_width)
