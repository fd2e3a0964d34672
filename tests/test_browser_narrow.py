"""Narrow and ordinary screens in a real browser (Streamlit server + headless Chromium, ~30 s):
at 800 px the Who wins ε multiselect shows every chosen ε (its chips wrap instead of hiding in one
scrolled row); at 1,400 px with the sidebar open the Explore noise table needs no sideways scrolling;
at 800 and 1,400 px every typed box under a slider shows its whole value (δ = 1e-5 read "0.0000").
(At 800 px the noise table still scrolls sideways, with the method column pinned: tests/test_ui_figures.py.)"""

from __future__ import annotations

from browser_helpers import chromium, idle, needs_browser, no_exception, streamlit_server

FAST = "dataset=%22synthetic%22&repeats=2&epochs=1&eps_min=1.0&eps_max=10.0"
SEVEN = "map_eps=%5B0.1%2C0.3%2C1.0%2C3.0%2C10.0%2C30.0%2C100.0%5D"
BOXES = """() => [...document.querySelectorAll('input[aria-label$="(type a value)"]')]
  .filter(e => e.offsetParent !== null).map(e => [e.getAttribute('aria-label'), e.value, e.scrollWidth, e.clientWidth])"""
SCROLL = """() => { const s = document.querySelector('[data-testid="stDataFrame"] .dvn-scroller');
  return s ? [s.scrollWidth, s.clientWidth] : null; }"""


@needs_browser
def test_eps_chips_and_typed_boxes_at_800_px_and_noise_table_fits_1400_px(tmp_path):
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
        page.close()

        page = browser.new_page(viewport={"width": 1400, "height": 1200})
        page.goto(f"{base}/?{FAST}")
        page.wait_for_selector('[data-testid="stDataFrame"]', timeout=120_000)
        idle(page)
        no_exception(page, "Explore at 1,400 px")
        scroll_width, client_width = page.evaluate(SCROLL)
        assert scroll_width <= client_width + 1, (scroll_width, client_width)
        _boxes_show_whole_values(page, "1,400 px")
        page.close()

        page = browser.new_page(viewport={"width": 800, "height": 1200})  # the setting is cached by now
        page.goto(f"{base}/?{FAST}")
        page.wait_for_selector('[data-testid="stDataFrame"]', timeout=120_000)
        idle(page)
        page.get_by_text("More settings: N, T, λ, D, C and DP-SGD").click()  # N, T, λ and DP-SGD's boxes too
        page.wait_for_timeout(500)
        _boxes_show_whole_values(page, "800 px")


def _boxes_show_whole_values(page, where: str) -> None:
    boxes = {label: (value, scroll, client) for label, value, scroll, client in page.evaluate(BOXES)}
    assert boxes["δ (0 = pure ε-DP) (type a value)"][0] == "1e-5", (where, boxes)
    assert len(boxes) >= 3 and all(s <= c + 1 for _, s, c in boxes.values()), (where, boxes)
