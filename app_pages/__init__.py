"""The dashboard's pages: scripts that Streamlit runs (``st.Page``), not modules to import.

``main.py`` is the installed package's entry script (``privcore app`` serves it); ``app.py`` is the
checkout's. They are not named ``pages/``, which Streamlit would also treat as its older automatic
page folder.
"""
