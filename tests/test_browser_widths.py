"""What a 1,400 px window shows whole (Streamlit server + headless Chromium): every formula on Learn's
method cards (the walk-through found 17 of 24 running past their card, KaTeX does not wrap), measured
as each formula's scrollWidth against its clientWidth."""

from __future__ import annotations

from browser_helpers import chromium, idle, needs_browser, no_exception, streamlit_server

FAST = "dataset=%22synthetic%22&repeats=2&epochs=1&eps_min=1.0&eps_max=10.0"
FORMULAS = """() => [...document.querySelectorAll('[data-testid="stMarkdownContainer"] .katex-display')]
  .filter(e => e.offsetParent !== null).map(e => [e.textContent.slice(0, 60), e.scrollWidth, e.clientWidth])"""


@needs_browser
def test_learn_formulas_fit_their_cards_in_a_1400_px_window(tmp_path):
    with streamlit_server(tmp_path) as base, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1200})
        page.goto(f"{base}/Learn?{FAST}")
        cards = page.get_by_text("5 · Method cards")
        cards.wait_for(timeout=120_000)
        idle(page)
        cards.click()
        idle(page)
        page.wait_for_timeout(1000)
        no_exception(page, "Learn's method cards")
        formulas = page.evaluate(FORMULAS)
        assert len(formulas) >= 20, formulas
        # 2 px: KaTeX's sub-pixel widths round either way
        wide = [f for f in formulas if f[1] > f[2] + 2]
        assert not wide, f"{len(wide)} of {len(formulas)} formulas run past their card: {wide}"


TABLES = """() => [...document.querySelectorAll('[data-testid="stDataFrame"] .dvn-scroller')]
  .map(s => [s.scrollWidth, s.clientWidth])"""


@needs_browser
def test_noise_tables_show_their_last_column_in_a_1400_px_window(tmp_path):
    # paper accounting adds "Real ε" as the last column: it was cut off (the table scrolled 46 px sideways)
    with streamlit_server(tmp_path) as base, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1200})
        for path in ("", "Calibrate"):
            page.goto(f"{base}/{path}?{FAST}&accounting=%22paper%22")
            page.wait_for_selector('[data-testid="stDataFrame"]', timeout=180_000)
            idle(page)
            page.wait_for_timeout(1000)
            no_exception(page, path or "Explore")
            tables = page.evaluate(TABLES)
            assert tables and all(s <= c + 1 for s, c in tables), (path or "Explore", tables)
