"""Entry point: ``streamlit run app.py``. The shared sidebar, drawn once (a one-line note instead on a page
with its own settings), and navigation over app_pages/ (plus a hidden page keeping the old /Explore link).

The pages live in ``app_pages/`` (not ``pages/``, which Streamlit would also treat as its older
automatic page folder). Each page reads the sidebar's choices with ``ui.sidebar.settings()``.
"""

from __future__ import annotations

import os
import threading

import streamlit as st

st.set_page_config(page_title="Private prediction trade-offs", page_icon="🔒", layout="wide",
                   initial_sidebar_state="expanded")

from ui import sidebar  # noqa: E402 - after set_page_config

def _warm_all() -> None:
    """The default Explore view first (ui/warmup.py), then kaleido's Chromium for the first export:
    one after the other, so a first visit does not share its two cores with a browser start-up."""
    if os.environ.get("PRIVCORE_CORE_WARMUP", "1") != "0":
        from ui.warmup import warm_default_view

        warm_default_view()
    if os.environ.get("PRIVCORE_EXPORT_WARMUP", "1") != "0":
        from ui import export

        export.warm_up()


@st.cache_resource(show_spinner=False)
def _start_warm_up() -> bool:
    """Start :func:`_warm_all` in a background thread, once per server process."""
    threading.Thread(target=_warm_all, name="privcore-warmup", daemon=True).start()
    return True


_PAGES = [  # file, title, icon, URL path (kept from the earlier pages/ names, so old links still work), shared sidebar
    ("explore.py", "Explore", ":material/insights:", "Explore", True),
    ("who_wins.py", "Who wins", ":material/grid_view:", "Who_wins", True),
    ("reproduce.py", "Reproduce the paper", ":material/science:", "Reproduce", True),
    ("learn.py", "Learn", ":material/school:", "Learn", True),
    ("calibrate.py", "Calibrate", ":material/tune:", "Calibrate", True),
    ("measured_leakage.py", "Measured leakage", ":material/policy:", "Measured_leakage", True),
    ("deep_models.py", "Deep models", ":material/hub:", "Deep_models", False),  # its own settings, on the page
]
# The first page is the default, served at "/"; its old path (/Explore) is a hidden page, not in the
# navigation, that switches to it with the link's query parameters (the settings it carries).
pages = [st.Page(f"app_pages/{file}", title=title, icon=icon, url_path=None if i == 0 else url, default=(i == 0))
         for i, (file, title, icon, url, _) in enumerate(_PAGES)]


def _old_default_link() -> None:
    st.switch_page(pages[0], query_params=st.query_params.to_dict())


old_links = [st.Page(_old_default_link, title=_PAGES[0][1], url_path=_PAGES[0][3], visibility="hidden")]
nav = st.navigation(pages + old_links)
if __name__ != "__mp_main__":  # not in a child process that merely re-imports this file (see below)
    _start_warm_up()
# Outside a Streamlit runtime (e.g. a process that re-imports this file as its __main__, as
# multiprocessing's spawn does for Dask workers started from a test session) pages have no path.
current = getattr(nav, "url_path", "")
if current == _PAGES[0][3]:  # an old link to the default page
    nav.run()  # switches to the page at once
elif current in {url for *_, url, shared in _PAGES if not shared}:
    sidebar.own_settings_note()  # the linear pages' sidebar would do nothing here
    nav.run()
else:
    with sidebar.shared():  # the page draws the sidebar after its title
        nav.run()
