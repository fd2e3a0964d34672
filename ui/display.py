"""Inline messages and charts: errors and warnings as text (never a traceback), figures, a checked spec."""

from __future__ import annotations

from typing import Any, Iterable

import streamlit as st

from .setting import SidebarSettings, Setting, make_spec, setting_problems
from .text import escape_markdown

__all__ = ["show_error", "show_warnings", "show_caveats", "show_figure", "spec_or_error", "copy_as_code", "show_formulas"]


def spec_or_error(side: SidebarSettings, s: Setting, **kwargs: Any):  # noqa: ANN201 - SweepSpec | None
    """:func:`ui.setting.make_spec`, or None after showing the problem inline (st.error, never a traceback)."""
    errors, _ = setting_problems(side, s)
    if errors:
        for e in errors:
            st.error(e)
        return None
    try:
        return make_spec(side, s, **kwargs)
    except (ValueError, TypeError) as err:
        show_error(err)
        return None


def show_error(err: BaseException | str, *, prefix: str | None = None) -> None:
    """An inline error box with the message only (never a traceback)."""
    text = str(err) if not isinstance(err, str) else err
    st.error(escape_markdown(f"{prefix}: {text}" if prefix else text))


def show_warnings(messages: Iterable[str]) -> None:
    """Each distinct message once, as an inline warning."""
    seen = set()
    for m in messages:
        if m and m not in seen:
            seen.add(m)
            st.warning(escape_markdown(m))


def show_caveats(messages: Iterable[str]) -> None:
    """Standing caveats (true whatever the setting, :func:`ui.setting.setting_caveats`): each distinct one
    once, as a bullet in one collapsed expander, so warning boxes stay for the current setting."""
    distinct = list(dict.fromkeys(m for m in messages if m))
    if distinct:
        with st.expander(f"Caveats of the methods shown ({len(distinct)})", expanded=False):
            for m in distinct:
                st.markdown(f"- {escape_markdown(m)}")


def show_figure(fig, *, key: str | None = None) -> None:  # noqa: ANN001
    """``st.plotly_chart`` with the figure's own (print) styling, not Streamlit's theme. The figure
    is remembered under ``key`` (:func:`ui.progress.show_previous` draws it again after a Cancel)."""
    if key is not None and not key.endswith("_previous"):
        shown = st.session_state.setdefault("_last_figures", {})
        shown.pop(key, None)  # most recent last
        shown[key] = fig
    st.plotly_chart(fig, theme=None, key=key, width="stretch",
                    config={"displaylogo": False,
                            "toImageButtonOptions": {"format": "png", "scale": 2, "filename": key or "chart"}})


def copy_as_code(spec, side: SidebarSettings, *, key: str) -> None:  # noqa: ANN001 - SweepSpec
    """An expander with the CLI command and the privcore Python call that recompute this view
    (``st.code`` blocks carry a copy button). An upload appears under the user's own file name."""
    from privcore.engine.code import cli_command, python_code

    from .userdata import upload_name

    name = upload_name(side)
    with st.expander("Copy as code: the CLI command and Python call for this view", key=key):
        st.caption("Same data, knobs and seed, with secure noise (--secure-noise, secure_noise=True): every noise "
                   "draw comes from the operating system's entropy, never shown or stored, as a release you publish "
                   "needs (anyone who knows the seed can recompute seeded noise). The rows then differ from this "
                   "chart's by the noise; without that flag they are this chart's rows exactly."
                   + (f" Replace {name} by the path of your file." if name else ""))
        cli = cli_command(spec, data_file_name=name)
        if cli.endswith(" --secure-noise"):  # said beside the flag too: the caption above is easily skipped
            cli = ("# --secure-noise: fresh noise from the operating system, never shown or stored, as a release you\n"
                   "# publish needs; without it the rows are this chart's exactly\n" + cli)
        st.code(cli, language="bash", wrap_lines=True)
        st.code(python_code(spec, data_file_name=name), language="python")


#: Characters of a formula line in the formulas expander: KaTeX does not wrap, and at 800 px Calibrate's
#: model-sensitivity formula was cut after "2g/." (the default line, 72 characters, fits 1,400 px only).
FORMULA_LINE = 52


def show_formulas(rows, *, expanded: bool = False) -> None:  # noqa: ANN001 - result rows
    """Each method's calibration formula, typeset with ``st.latex`` where it reads cleanly (else as
    text), and its note; text wraps here, unlike a table cell."""
    from .figures import method_label
    from .formula import display_latex, line_width

    with st.expander("How each method's noise was calibrated (formulas and notes)", expanded=expanded), \
            line_width(FORMULA_LINE):
        for r in rows:
            formula, note = r.get("formula"), r.get("note")
            if not formula and not note:
                continue
            st.markdown(f"**{escape_markdown(method_label(r['method']))}**")
            latex = display_latex(formula) if formula else None
            if latex:
                st.latex(latex)
            elif formula:
                st.text(formula)
            if note:
                st.caption(escape_markdown(note))
