"""The dashboard's pages and its navigation: what every visitor's run draws.

Both entry scripts, ``app.py`` in a checkout and ``app_pages/main.py`` in an installed package
(which ``privcore app`` serves), call :func:`dashboard`. The pages are found next to the
``app_pages`` package, wherever it is installed, so both scripts serve the same files.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

__all__ = ["PAGES", "page_file", "dashboard"]

#: file, title, icon, URL path (kept from the earlier pages/ names, so old links still work), shared sidebar
PAGES = [
    ("explore.py", "Explore", ":material/insights:", "Explore", True),
    ("who_wins.py", "Who wins", ":material/grid_view:", "Who_wins", True),
    ("reproduce.py", "Reproduce the paper", ":material/science:", "Reproduce", True),
    ("learn.py", "Learn", ":material/school:", "Learn", True),
    ("calibrate.py", "Calibrate", ":material/tune:", "Calibrate", True),
    ("measured_leakage.py", "Measured leakage", ":material/policy:", "Measured_leakage", True),
    ("deep_models.py", "Deep models", ":material/hub:", "Deep_models", False),  # its own settings, on the page
]


def page_file(file: str) -> Path:
    """The absolute path of a page script in the ``app_pages`` package."""
    import app_pages

    return Path(app_pages.__file__).resolve().parent / file


def dashboard() -> None:
    """One run of the dashboard for one visitor: the shared sidebar, drawn once (a one-line note
    instead on a page with its own settings), and navigation over the pages (plus a hidden page
    keeping the old /Explore link). Each page reads the sidebar's choices with ``ui.sidebar.settings()``."""
    st.set_page_config(page_title="Private prediction trade-offs", page_icon="🔒", layout="wide",
                       initial_sidebar_state="expanded")
    from ui import freshness

    stale = freshness.changed_modules() if freshness.enabled() else []
    if stale:  # an upgrade under a running server: its pages would call the old modules
        st.error(freshness.restart_message(stale), icon=":material/restart_alt:")
        st.stop()
    from ui import sidebar, warmup

    warmup.start()  # a no-op when the server's lifespan started it (a server started another way)
    # The first page is the default, served at "/"; its old path (/Explore) is a hidden page, not in the
    # navigation, that switches to it with the link's query parameters (the settings it carries).
    pages = [st.Page(page_file(file), title=title, icon=icon, url_path=None if i == 0 else url, default=(i == 0))
             for i, (file, title, icon, url, _) in enumerate(PAGES)]

    def old_default_link() -> None:
        st.switch_page(pages[0], query_params=st.query_params.to_dict())

    old_links = [st.Page(old_default_link, title=PAGES[0][1], url_path=PAGES[0][3], visibility="hidden")]
    nav = st.navigation(pages + old_links)
    current = nav.url_path
    if current == PAGES[0][3]:  # an old link to the default page
        nav.run()  # switches to the page at once
    elif current in {url for *_, url, shared in PAGES if not shared}:
        sidebar.own_settings_note()  # the linear pages' sidebar would do nothing here
        nav.run()
    else:
        with sidebar.shared():  # the page draws the sidebar after its title
            nav.run()
