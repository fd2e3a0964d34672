"""Entry point: ``streamlit run app.py``. This one file is both the server and the dashboard.

The server: ``streamlit run`` first reads this file for an ``st.App`` and, finding one, imports it
once as a module, outside any Streamlit session. That ``st.App`` runs this same file for every
visitor, and its lifespan starts the warm-up (``ui/warmup.py``) as the server starts, so the default
view is computing before the first visitor arrives. ``python app.py`` starts the same server.

The dashboard (every run inside a session): the shared sidebar, drawn once (a one-line note instead
on a page with its own settings), and navigation over app_pages/ (plus a hidden page keeping the
old /Explore link). The pages live in ``app_pages/`` (not ``pages/``, which Streamlit would also
treat as its older automatic page folder). Each page reads the sidebar's choices with
``ui.sidebar.settings()``.
"""

from __future__ import annotations

import os

# Before anything loads torch (its OpenMP runtime reads this once): threads waiting at the end of a
# parallel region sleep instead of spinning. The server computes beside a browser and its own web
# threads on the same cores; with spinning, one busy core stalled torch's two threads at every
# barrier: the default view's first setting took 11.2 / 10.4 s with one core kept busy, 6.6 / 6.5 s
# with this (`bench/bench_first_visit.py --no-visit 25 --busy 1`), and 4.1 / 4.5 s on an idle machine
# (`--no-visit 22`; README, issue 16). A value set by the user is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import streamlit as st  # noqa: E402 - after the environment above

_PAGES = [  # file, title, icon, URL path (kept from the earlier pages/ names, so old links still work), shared sidebar
    ("explore.py", "Explore", ":material/insights:", "Explore", True),
    ("who_wins.py", "Who wins", ":material/grid_view:", "Who_wins", True),
    ("reproduce.py", "Reproduce the paper", ":material/science:", "Reproduce", True),
    ("learn.py", "Learn", ":material/school:", "Learn", True),
    ("calibrate.py", "Calibrate", ":material/tune:", "Calibrate", True),
    ("measured_leakage.py", "Measured leakage", ":material/policy:", "Measured_leakage", True),
    ("deep_models.py", "Deep models", ":material/hub:", "Deep_models", False),  # its own settings, on the page
]


def dashboard() -> None:
    """One run of the dashboard for one visitor."""
    st.set_page_config(page_title="Private prediction trade-offs", page_icon="🔒", layout="wide",
                       initial_sidebar_state="expanded")
    from ui import sidebar, warmup

    warmup.start()  # a no-op when the server's lifespan started it (a server started another way)
    # The first page is the default, served at "/"; its old path (/Explore) is a hidden page, not in the
    # navigation, that switches to it with the link's query parameters (the settings it carries).
    pages = [st.Page(f"app_pages/{file}", title=title, icon=icon, url_path=None if i == 0 else url, default=(i == 0))
             for i, (file, title, icon, url, _) in enumerate(_PAGES)]

    def old_default_link() -> None:
        st.switch_page(pages[0], query_params=st.query_params.to_dict())

    old_links = [st.Page(old_default_link, title=_PAGES[0][1], url_path=_PAGES[0][3], visibility="hidden")]
    nav = st.navigation(pages + old_links)
    current = nav.url_path
    if current == _PAGES[0][3]:  # an old link to the default page
        nav.run()  # switches to the page at once
    elif current in {url for *_, url, shared in _PAGES if not shared}:
        sidebar.own_settings_note()  # the linear pages' sidebar would do nothing here
        nav.run()
    else:
        with sidebar.shared():  # the page draws the sidebar after its title
            nav.run()


if __name__ == "__mp_main__":
    pass  # a child process re-importing its parent's main file (multiprocessing's spawn, e.g. a Dask worker)
elif st.runtime.exists():
    dashboard()
else:  # the server's start: `streamlit run app.py` imports this file as the module `app`; or `python app.py`
    from ui.warmup import lifespan

    app = st.App(__file__, lifespan=lifespan)
    if __name__ == "__main__":
        app.run()
