"""The sidebar's controls for a user's own data: label column, declared preprocessing, preview, and the
check against a plain logistic regression. Logic lives in :mod:`privcore.data` (preprocess, reference).

The preprocessing choice is part of the privacy statement: only declared, data-independent maps
are offered (public bounds per feature or globally, or a row norm), and the sidebar says why
scaling computed from the private data would leak (:data:`privcore.data.preprocess.LEAK_EXPLANATION`).
"""

from __future__ import annotations

import os

import streamlit as st

from privcore.data.labels import labels_text, parse_labels
from privcore.data.preprocess import LEAK_EXPLANATION, Preprocess, parse_preprocess

from . import state
from .text import escape_markdown

__all__ = ["draw_controls", "show_preview", "baseline_check", "MODE_LABELS"]

MODE_LABELS = {"none": "As given (only clipped into the unit ball)",
               "bounds": "Standardise with declared public bounds",
               "norm": "Clip each row to a stated norm"}
_AUTO = "(automatic: label / y / target / class)"


def _seed_widgets(prep: Preprocess) -> None:
    """Put the URL's preprocessing into the widgets (first run, or a pasted URL)."""
    ss = st.session_state
    ss["ud:mode"] = prep.mode
    ss["ud:intercept"] = prep.intercept
    if prep.mode == "bounds":
        ss["ud:bounds"] = ", ".join(f"{lo:g}:{hi:g}" for lo, hi in zip(prep.low, prep.high))
    if prep.mode == "norm":
        ss["ud:norm"] = float(prep.norm)


def draw_controls(sb, data_file: str | None) -> tuple[str, str | None, str | None]:  # noqa: ANN001 - the sidebar
    """Label column, declared labels and preprocessing controls for an uploaded file; returns
    (preprocess text, label column, declared labels text or None).

    An unreadable entry (bounds that do not parse) is reported under the control and the last valid
    choice stays in force.
    """
    from privcore.data.userfile import LABEL_COLUMNS, csv_columns

    label = state.get("label_col")
    if data_file:
        try:
            columns = csv_columns(data_file)
        except Exception:  # noqa: BLE001 - the loader reports an unreadable file below
            columns = []
        if columns:
            options = [_AUTO] + columns
            if label not in columns:
                label = None
            ss = st.session_state
            if ss.get("ud:label_seen") != label or "ud:label" not in ss:
                ss["ud:label"] = label or _AUTO
            picked = sb.selectbox("Label column", options, key="ud:label",
                                  help="The column holding the class of each row; every other column is a feature. "
                                       f"Automatic picks the first of {', '.join(LABEL_COLUMNS)}.")
            label = None if picked == _AUTO else picked
            ss["ud:label_seen"] = label
            state.put("label_col", label)
    declared = _declared_labels(sb)

    current = parse_preprocess(state.get("prep"))
    if st.session_state.get("ud:prep_seen") != current.text or "ud:mode" not in st.session_state:
        _seed_widgets(current)
    box = sb.container(border=True)
    box.markdown("**Preprocessing** (part of the privacy statement)")
    mode = box.radio("Feature scaling", list(MODE_LABELS), key="ud:mode", format_func=MODE_LABELS.get,
                     label_visibility="collapsed")
    chosen, problem = current, None
    try:
        if mode == "bounds":
            st.session_state.setdefault("ud:bounds", "-1:1")
            text = box.text_input("Public bounds low:high", key="ud:bounds",
                                  help="One low:high pair for every feature (e.g. -10:10), or one pair per feature "
                                       "in column order, comma-separated (e.g. 0:1, 0:120, -5:5). Values outside are "
                                       "clipped. Take them from public knowledge (units, sensor ranges), not from "
                                       "this file.")
            chosen = parse_preprocess("bounds:" + text.replace(" ", ""))
        elif mode == "norm":
            st.session_state.setdefault("ud:norm", 1.0)
            r = box.number_input("Row norm R", min_value=1e-9, max_value=1e12, key="ud:norm", format="%g",
                                 help="Each row is clipped to L2 norm R, then divided by R.")
            chosen = Preprocess("norm", norm=float(r))
        else:
            chosen = Preprocess()
        intercept = box.checkbox("Add an intercept feature", key="ud:intercept",
                                 help="A constant column (1 before scaling), so the linear model can learn a bias; "
                                      "it is counted in the unit-ball scaling.")
        chosen = Preprocess(chosen.mode, chosen.low, chosen.high, chosen.norm, bool(intercept))
    except ValueError as err:
        problem = str(err)
        chosen = current
    if problem:
        box.error(escape_markdown(f"{problem}. Still using: {current.text}."))
    state.put("prep", chosen.text)
    st.session_state["ud:prep_seen"] = chosen.text
    with box.expander("Why not scale by the data's mean and standard deviation?"):
        st.markdown(escape_markdown(LEAK_EXPLANATION))
    return chosen.text, label, declared


def _declared_labels(sb) -> str | None:  # noqa: ANN001 - the sidebar
    """The label set declared in advance (privcore.data.labels), or None: read off the file (labelled)."""
    declared = state.get("labels") or None
    ss = st.session_state
    if ss.get("ud:labels_seen") != declared or "ud:labels" not in ss:
        ss["ud:labels"] = declared or ""
    text = sb.text_input("Labels, declared in advance (optional)", key="ud:labels", placeholder="e.g. cat, dog, bird",
                         help="Every label the data may hold, comma-separated; class k is the k-th. Declared, the "
                              "classes are the same for every data set and the guarantee covers them; left empty, "
                              "they are read off this file, a step the guarantee does not cover (a row whose label "
                              "no other row has would add a class).")
    try:
        declared = labels_text(parse_labels(text))
    except (TypeError, ValueError) as err:
        sb.error(escape_markdown(f"{err}. Still using: {declared or 'the labels read off the file'}."))
    state.put("labels", declared)
    ss["ud:labels_seen"] = declared
    return declared


def show_preview(sb, data_file: str, label_column: str | None) -> None:  # noqa: ANN001
    """The first rows as parsed (features and the original labels) and each column's observed range."""
    import pandas as pd

    from privcore.data.userfile import load_user_file

    try:
        src = load_user_file(data_file, label_column)
    except Exception:  # noqa: BLE001 - the loader's message is shown by the sidebar
        return
    names = list(src.columns or [f"x{j + 1}" for j in range(src.x.shape[1])])
    with sb.expander(f"Preview: {src.x.shape[0]:,} rows, {len(names)} features, {src.classes} classes"):
        rows = min(8, src.x.shape[0])
        frame = pd.DataFrame(src.x[:rows, : min(len(names), 30)], columns=names[:30])
        labels = src.label_names or tuple(str(k) for k in range(src.classes))
        frame["label"] = [labels[int(k)] for k in src.y[:rows]]
        st.dataframe(frame, hide_index=True)
        st.caption("Observed range per column (min .. max): "
                   + escape_markdown(", ".join(f"{n}: {src.x[:, j].min():.3g} .. {src.x[:, j].max():.3g}"
                                               for j, n in enumerate(names[:30])))
                   + ". Declared bounds should come from public knowledge; copying these observed values makes "
                     "the scaling depend on the private data.")


@st.cache_data(show_spinner="Fitting a plain logistic regression for comparison...", max_entries=8)
def _plain(data_file: str, label_column: str | None, mtime: float) -> float:
    from privcore.data.reference import plain_logistic_accuracy

    return plain_logistic_accuracy(data_file, label_column=label_column)


def baseline_check(side, rows) -> None:  # noqa: ANN001 - SidebarSettings, result rows
    """Warn when the non-private model is far below a plain logistic regression on the same split."""
    import os

    from privcore.data.reference import baseline_gap_warning
    from privcore.methods import BASELINE

    if side.dataset != "file" or not side.data_file:
        return
    ours = [r["accuracy_mean"] for r in rows if r.get("method") == BASELINE.name and r.get("accuracy_mean") is not None]
    if not ours:
        return
    try:
        plain = _plain(side.data_file, side.label_column, os.path.getmtime(side.data_file))
    except Exception:  # noqa: BLE001 - a reference that cannot be fitted is not shown
        return
    msg = baseline_gap_warning(max(ours), plain)
    if msg:
        st.warning(escape_markdown(msg))
    else:
        st.caption(f"Plain (non-private) logistic regression on the same split: {plain:.3f}; the non-private model "
                   f"here: {max(ours):.3f}.")


def dataset_label(side) -> str:  # noqa: ANN001 - SidebarSettings
    """The data set as a chart caption names it: the user's own file name for an upload, never a server path."""
    from . import uploads

    if side.dataset == "file" and side.data_file:
        name = uploads.display_name(side.data_file)
        if name == os.path.basename(side.data_file):  # uploaded in another session: its content hash
            name = f"upload {name[:10]}…{os.path.splitext(name)[1]}"
        return f"own file {name}"
    return side.dataset


def upload_name(side) -> str | None:  # noqa: ANN001 - SidebarSettings
    """The user's own name for the uploaded file (for generated code and captions), None without one."""
    from . import uploads

    if side.dataset == "file" and side.data_file:
        return uploads.display_name(side.data_file)
    return None
