"""Streamlit dashboard helpers over :mod:`privcore`.

* :mod:`ui.state`   - page state <-> URL query parameters (JSON-encoded values, round-trip safe);
* :mod:`ui.widgets` - the one shared sidebar, shared controls, the progress runner, inline errors;
* :mod:`ui.figures` - plotly figure builders with fixed per-method colours, print-ready template;
* :mod:`ui.export`  - PNG/SVG/PDF (kaleido + Chromium), HTML and CSV exports and download buttons.

Only :mod:`ui.state`, :mod:`ui.widgets` and :mod:`ui.export` (``export_buttons``) import Streamlit;
:mod:`ui.figures` and the byte builders of :mod:`ui.export` are plain Python and unit-testable.
"""
