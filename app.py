"""The dashboard from a checkout: ``streamlit run app.py`` (or ``python app.py``).

``privcore app`` serves ``app_pages/main.py``, this file's twin inside the installed package; both
are the same few lines (tests/test_app.py) and draw :func:`ui.navigation.dashboard`.

The server: ``streamlit run`` first reads this file for an ``st.App`` and, finding one, imports it
once as a module, outside any Streamlit session. That ``st.App`` runs this same file for every
visitor, and its lifespan starts the warm-up (``ui/warmup.py``) as the server starts, so the default
view is computing before the first visitor arrives.
"""

from __future__ import annotations

import os

# Before anything loads torch (its OpenMP runtime reads this once): threads waiting at the end of a
# parallel region sleep instead of spinning, so the server's web threads and a browser on the same
# cores do not stall torch's threads at every barrier (bench/bench_first_visit.py --busy 1 measures
# it). A value set by the user is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import streamlit as st  # after the environment above

if __name__ == "__mp_main__":
    pass  # a child process re-importing its parent's main file (multiprocessing's spawn, e.g. a Dask worker)
elif st.runtime.exists():
    from ui.navigation import dashboard

    dashboard()
else:  # the server's start: `streamlit run` imports this file as a module; or `python app.py`
    from ui.warmup import lifespan

    app = st.App(__file__, lifespan=lifespan)
    if __name__ == "__main__":
        app.run()
