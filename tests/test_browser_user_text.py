"""User text is shown as text in a real browser: a URL, a www. address or an e-mail address inside a URL
query value or an uploaded CSV's header becomes no link (no <a> element) anywhere on the page
(Streamlit server + headless Chromium; ui/text.py). About half a minute."""

from __future__ import annotations

from urllib.parse import quote

from browser_helpers import chromium, idle, needs_browser, no_exception, streamlit_server

LINKY = ("http://evil.example/a", "https://evil.example/b", "www.evil.example", "WWW.EVIL.EXAMPLE/c",
         "someone@evil.example", "mailto:x@evil.example")
FAST = "dataset=%22synthetic%22&repeats=2&eps_min=1.0&eps_max=10.0&eps=3.0&methods=%5B%22model_sensitivity%22%5D"
ANCHORS = "() => Array.from(document.querySelectorAll('a')).map(a => [a.href, a.innerText])"


def _evil_links(page) -> list:
    return [(href, text) for href, text in page.evaluate(ANCHORS) if "evil" in href.lower() or "evil" in text.lower()]


@needs_browser
def test_urls_in_query_values_and_csv_headers_are_not_links(tmp_path):
    csv = tmp_path / "links.csv"
    rows = [",".join(["www.evil.example", "http://evil.example/col", "someone@evil.example", "label"])]
    rows += [f"{i % 7}.5,{i % 3}.25,{i % 5}.0,{'ab'[i % 2]}" for i in range(60)]
    csv.write_text("\n".join(rows) + "\n")
    with streamlit_server(tmp_path) as base, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1400})

        # ---- Query values and names that are echoed in warnings: each one a would-be link.
        query = "&".join([FAST, "repeats=" + quote(LINKY[0], safe=""), "eps=" + quote(LINKY[2], safe=""),
                          quote(LINKY[1], safe="") + "=1", "lam=" + quote(LINKY[4], safe=""),
                          "accounting=" + quote(LINKY[3] + " " + LINKY[5], safe="")])
        page.goto(f"{base}/?{query}")
        idle(page, before_ms=1500)
        no_exception(page, "query values with URLs")
        alerts = " ".join(page.get_by_test_id("stAlert").all_inner_texts())
        assert "evil" in alerts.lower(), alerts                      # the values are shown ...
        assert _evil_links(page) == []                               # ... and none of them is a link

        # ---- An uploaded CSV whose headers are addresses (shown in the preview's caption, the bounds text).
        page.goto(f"{base}/?{FAST.replace('synthetic', 'file')}")
        idle(page)
        page.locator('[data-testid="stSidebar"] input[type="file"]').set_input_files(str(csv))
        idle(page)
        no_exception(page, "after the upload")
        sidebar = page.get_by_test_id("stSidebar")
        sidebar.get_by_text("Preview:").first.click()
        idle(page, before_ms=300)
        assert "evil" in sidebar.inner_text().lower()
        assert _evil_links(page) == []


@needs_browser
def test_a_rejected_upload_is_not_put_in_the_link_and_a_good_one_is(tmp_path):
    """A walk-through saw a file the page refused ("Could not use your file") named in the URL: a link
    then hands the refusal on. The uploader keeps the file for the session; the URL names it once usable."""
    bad, good = tmp_path / "bad.csv", tmp_path / "good.csv"
    bad.write_text("a,b,label\n" + "".join(f"x{i},y,{'ab'[i % 2]}\n" for i in range(40)))
    good.write_text("a,b,label\n" + "".join(f"{i % 7}.5,{i % 3}.25,{'ab'[i % 2]}\n" for i in range(60)))
    with streamlit_server(tmp_path) as base, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        page.goto(f"{base}/?{FAST.replace('synthetic', 'file')}")
        idle(page)
        uploader = page.locator('[data-testid="stSidebar"] input[type="file"]')
        uploader.set_input_files(str(bad))
        idle(page)
        no_exception(page, "after the bad upload")
        assert "Could not use your file" in " ".join(page.get_by_test_id("stAlert").all_inner_texts())
        assert "data_file" not in page.url, page.url
        uploader.set_input_files(str(good))
        idle(page)
        no_exception(page, "after the good upload")
        assert "data_file" in page.url, page.url
