"""The Deep models page's shipped Figure 7 in a real browser (Streamlit server + headless Chromium, ~30 s): in a
1280 x 800 and an 800 px window each panel's legend clears its x axis's title, and the settings caption, the
titles and the legend stay inside the chart. Side by side with the findings in a third column a panel was 305 px
wide at 1280 px (169 px at 800 px): the legend covered the axis title and the caption ran past the right edge."""

from __future__ import annotations

from browser_helpers import chromium, idle, needs_browser, no_exception, streamlit_server

BOXES = """(el) => {
  const box = s => { const e = el.querySelector(s); if (!e) return null;
                     const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const caption = [...el.querySelectorAll('.annotation')].filter(a => a.textContent.startsWith('data:'))
                  .map(a => { const b = a.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; });
  return {svg: box('svg.main-svg'), legend: box('.legend'), xtitle: box('.g-xtitle'), ytitle: box('.g-ytitle'),
          title: box('.g-gtitle'), caption: caption[0] || null};
}"""


def _inside(inner, outer, slack: float = 1.0) -> bool:
    return (inner[0] >= outer[0] - slack and inner[1] >= outer[1] - slack and inner[2] <= outer[2] + slack
            and inner[3] <= outer[3] + slack)


def _apart(a, b) -> bool:
    return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


@needs_browser
def test_the_shipped_figure_7_is_readable_at_1280_and_800_px(tmp_path):
    with streamlit_server(tmp_path) as base, chromium() as browser:
        for width, height in ((1280, 800), (800, 800)):
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(f"{base}/Deep_models")
            page.wait_for_selector('[data-testid="stPlotlyChart"] .legend', timeout=120_000)
            idle(page)
            no_exception(page, f"Deep models at {width} px")
            charts = page.locator('[data-testid="stPlotlyChart"]')
            for i in range(2):  # the shipped run's panels (a) and (b)
                chart = charts.nth(i)
                chart.scroll_into_view_if_needed()
                page.wait_for_timeout(300)
                got = chart.evaluate(BOXES)
                where = (width, "ab"[i], got)
                assert got["svg"][2] - got["svg"][0] >= 0.9 * min(width - 330, 704), where  # the page's full width
                assert got["caption"] is not None and _inside(got["caption"], got["svg"]), where
                for part in ("legend", "xtitle", "ytitle", "title"):
                    assert _inside(got[part], got["svg"]), (part, where)
                assert _apart(got["legend"], got["xtitle"]), where
            page.close()
