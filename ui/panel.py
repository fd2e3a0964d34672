"""The block every sweep chart of the dashboard ends with, written once.

A chart of a sweep's rows carries its settings (``ui.caption``: title note and export metadata), is
drawn (``ui.display.show_figure``, remembered for Cancel), and is followed by the run's warnings, the
download buttons (``ui.export``) and "Copy as code" (the CLI command and Python call that recompute
it). Keys follow one pattern: ``fig_<key>``, ``export_<key>``, ``code_<key>``.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import streamlit as st

from . import display, userdata
from .caption import add_caption, settings_of
from .export import export_buttons

__all__ = ["result_chart", "result_tail", "result_panel"]


def result_chart(fig: Any, res: Any, spec: Any, side: Any, *, key: str) -> None:
    """Caption ``fig`` with the settings of ``spec`` and the rows it shows, and draw it as ``fig_<key>``."""
    add_caption(fig, settings_of(spec, res.rows, dataset=userdata.dataset_label(side)))
    display.show_figure(fig, key=f"fig_{key}")


def result_tail(fig: Any, res: Any, spec: Any, side: Any, *, key: str, warnings: Iterable[str] | None = None,
                notes: Sequence[str] = ()) -> None:
    """Under a chart: the run's warnings (or ``warnings``), the downloads and "Copy as code"."""
    display.show_warnings(res.warnings if warnings is None else warnings)
    export_buttons(fig, res.rows, key=f"export_{key}", notes=notes)
    display.copy_as_code(spec, side, key=f"code_{key}")


def result_panel(fig: Any, res: Any, spec: Any, side: Any, *, key: str, caption: str = "",
                 warnings: Iterable[str] | None = None, notes: Sequence[str] = ()) -> None:
    """:func:`result_chart`, an optional caption under it, then :func:`result_tail`."""
    result_chart(fig, res, spec, side, key=key)
    if caption:
        st.caption(caption)
    result_tail(fig, res, spec, side, key=key, warnings=warnings, notes=notes)
