"""Streamlit dashboard helpers over :mod:`privcore`, one module per job (see docs/architecture.md).

* :mod:`ui.sidebar`  - the shared sidebar (data set, repetitions, accounting, device), drawn once by app.py;
* :mod:`ui.uploads`  - uploaded data files, content-addressed and written atomically;
* :mod:`ui.controls` - one slider per knob (from :mod:`privcore.knobs`), bound to the URL state;
* :mod:`ui.setting`  - the setting, what can run at it, its spec and Problem (no Streamlit);
* :mod:`ui.progress` - running a sweep with a progress bar, Cancel/Resume and a per-session memo;
* :mod:`ui.display`  - inline errors and warnings, figures, a checked spec;
* :mod:`ui.state`    - page state <-> URL query parameters (JSON-encoded values, round-trip safe);
* :mod:`ui.figures`  - plotly figure builders with fixed per-method colours, print-ready template;
* :mod:`ui.export`   - PNG/SVG/PDF (kaleido + Chromium), HTML and CSV exports and download buttons.

:mod:`ui.setting`, :mod:`ui.figures`, the pure half of :mod:`ui.state` and the byte builders of
:mod:`ui.export` are plain Python and unit-testable.
"""
