"""The shared sidebar: data set (or an upload), repetitions, accounting and device, drawn once per run.

``app.py`` runs the page inside ``with sidebar.shared(): nav.run()``; the sidebar is drawn at the
page's first :func:`settings` call, which every page makes after its title, so the heading is on screen
before the data set loads (the sidebar is its own container: drawing it later does not move it). A
page that never asks gets it drawn after it. A page run on its own (``streamlit run
app_pages/explore.py``, an AppTest of one page) draws it at each call.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

import streamlit as st

from privcore.engine.specs import TUNING_LABELS
from privcore.knobs import knob

from . import state, uploads, userdata
from .setting import DATASET_LABELS, NEIGHBOURS_NOTE, DataInfo, SidebarSettings, build_data_info, with_value
from .text import escape_markdown, server_safe

__all__ = ["draw", "shared", "settings", "own_settings_note", "data_info", "ACCOUNTING_LABELS"]

ACCOUNTING_LABELS = {"corrected": "corrected (sound; default)", "paper": "paper (as published)",
                     "tight": "tight (exact/optimal composition)"}
_THIS_RUN = "_shared_sidebar"  # Session State key holding the choices while app.py runs the page
_PENDING = "_shared_sidebar_pending"  # set by shared() until the page's first settings() call draws it
#: The user-file controls' widget keys and the marks of what they were seeded from (ui/userdata.py). A run that
#: does not draw them (no file yet, or the browser dropping a bad file before sending the next) drops them, so the
#: next run that draws them seeds them from the store and sends the browser their values. Streamlit drops the state
#: of undrawn widgets only after a run that ends normally: after one a page ends with st.stop() the server kept the
#: declared preprocessing while the browser drew the controls at their defaults, and sent those back.
_USERDATA_KEYS = ("ud:mode", "ud:bounds", "ud:norm", "ud:intercept", "ud:label", "ud:labels",
                  "ud:prep_seen", "ud:label_seen", "ud:labels_seen")


@st.cache_resource(show_spinner="Loading the data set...", max_entries=16)
def _data_info(name: str, data_file: str | None, mtime: float | None, preprocess: str = "none",
               label_column: str | None = None, labels: str | None = None) -> DataInfo:
    return build_data_info(name, data_file, preprocess, label_column, labels)


def data_info(name: str, data_file: str | None = None, preprocess: str = "none",
              label_column: str | None = None, labels: str | None = None) -> DataInfo:
    """Sizes of a data set (loaded once per process). Raises the loader's error on failure."""
    mtime = os.path.getmtime(data_file) if data_file and os.path.exists(data_file) else None
    return _data_info(name, data_file, mtime, preprocess, label_column, labels)


@contextmanager
def shared() -> Iterator[None]:
    """Run the page with one shared sidebar, drawn at its first :func:`settings` call (or after it)."""
    st.session_state.pop(_THIS_RUN, None)
    st.session_state[_PENDING] = True
    try:
        yield
        if st.session_state.get(_PENDING):  # the page never asked: draw it now, so it is always there
            settings()
    finally:  # also on st.stop() and reruns: a later run of a page alone must draw its own
        st.session_state.pop(_THIS_RUN, None)
        st.session_state.pop(_PENDING, None)


def own_settings_note() -> None:
    """The sidebar of a page with its own settings (Deep models): one line instead of the shared
    controls, which act only on the linear pages (their choices are kept for those pages)."""
    st.sidebar.caption("This page has its own settings, on the page. The data set, repetitions, accounting and "
                       "device chosen in the sidebar of the other pages apply to the linear experiments only.")


def settings(*, require_data: bool = False) -> SidebarSettings:
    """The sidebar's choices in this run, drawing it at the first call. With ``require_data`` the
    page stops when the data set failed to load (the message is already shown)."""
    side = st.session_state.get(_THIS_RUN)
    if side is None:
        side = draw()
        if st.session_state.pop(_PENDING, False):  # inside app.py's shared(): later calls reuse it
            st.session_state[_THIS_RUN] = side
    if require_data and side.error:
        st.stop()
    return side


def draw() -> SidebarSettings:
    """Draw the shared sidebar and return its choices (app.py, once per run, through :func:`shared`).

    Every URL value is read first, so a bad one in any field is reported here (as text: the message
    quotes it). Data set (mnist-5k default, digits, synthetic, full mnist, or an uploaded CSV/NPZ
    saved under ``cache/uploads``), repetitions, accounting mode and device. A data set that fails to
    load is reported inline (sidebar and page) and ``info`` is None.
    """
    state.current_values()
    for msg in state.url_errors() + state.unknown_params():
        st.warning(escape_markdown(msg))
    sb = st.sidebar
    sb.markdown("### Data and accounting")
    names = list(DATASET_LABELS)
    k = knob("dataset")
    dataset = state.commit("dataset", sb.selectbox(
        k.label, names, key=state.bind("dataset", normalise=lambda v: v if v in names else k.default),
        format_func=lambda n: DATASET_LABELS[n], help=k.tooltip))
    data_file = uploads.inside_uploads(state.get("data_file"))
    if state.get("data_file") and not data_file:  # a valid name, but no such upload here (deleted, or another server)
        st.warning("URL parameter data_file ignored: that upload is not on this server (it was deleted, or the link "
                   "comes from another server). Upload the file again.")
        state.put("data_file", None)
    prep, label_column, labels, too_big, uploaded = "none", None, None, None, False
    if dataset == "file":
        up = sb.file_uploader("CSV (numeric columns and a label column, picked below) or NPZ (arrays x, y)", type=["csv", "npz"],
                              key=f"upload_file_{st.session_state.get('_upload_gen', 0)}")
        if up is not None:
            try:
                data_file = uploads.save_upload(up)
                state.put("data_file", os.path.basename(data_file))  # the URL names the upload, not a server path
                uploaded = True
            except (OSError, ValueError) as err:
                sb.error(escape_markdown(f"Could not store the upload: {getattr(err, 'strerror', None) or err}"))
        if data_file:
            sb.caption(f"Using {escape_markdown(uploads.display_name(data_file))}")
            if sb.button("Delete this upload", key="delete_upload",
                         help="Removes the file from the server; results computed from it stay cached"):
                uploads.delete_upload(data_file)
                uploads.use_upload(None)
                state.put("data_file", None)
                state.put("prep", "none")
                state.put("label_col", None)
                state.put("labels", None)
                st.session_state["_upload_gen"] = st.session_state.get("_upload_gen", 0) + 1  # a fresh, empty uploader
                st.rerun()
            too_big = uploads.size_problem(data_file)  # stored before the limit was lowered: never parsed
            prep, label_column, labels = userdata.draw_controls(sb, data_file)
            if too_big is None:
                userdata.show_preview(sb, data_file, label_column)
    if not (dataset == "file" and data_file):  # the controls are not drawn: forget them (see _USERDATA_KEYS)
        for key in _USERDATA_KEYS:
            st.session_state.pop(key, None)
    uploads.use_upload(data_file)  # an upload this session left, and no other uses, leaves memory now
    k = knob("repeats")
    repeats = state.commit("repeats", sb.select_slider(
        k.label, options=with_value(k.grid, state.get("repeats")), key=state.bind("repeats"), help=k.tooltip))
    k = knob("accounting")
    modes = [k.default] + [m for m in k.choices if m != k.default]
    accounting = state.commit("accounting", sb.radio(
        k.label, modes, key=state.bind("accounting"), format_func=ACCOUNTING_LABELS.get, help=k.tooltip))
    k = knob("tuning")
    tuning = state.commit("tuning", sb.radio(
        k.label, list(k.choices), key=state.bind("tuning"), format_func=TUNING_LABELS.get, help=k.tooltip))
    import torch

    k = knob("device")
    devices = [d for d in k.choices if d != "cuda" or torch.cuda.is_available()]
    device = state.commit("device", sb.radio(
        k.label, devices, key=state.bind("device", normalise=lambda v: v if v in devices else k.default,
                                         explain="no CUDA GPU is available on this server"),
        horizontal=True, help=k.tooltip))
    sb.caption(NEIGHBOURS_NOTE)

    info, error = None, None
    if dataset == "file" and not data_file:
        error = "Upload a CSV or NPZ file in the sidebar to use your own data set."
    elif dataset == "file" and too_big:
        error = f"Could not use your file: {too_big}"
    else:
        try:
            info = data_info(dataset, data_file if dataset == "file" else None, prep, label_column, labels)
        except Exception as err:  # noqa: BLE001 - DataFileError, DataUnavailableError, ValueError...
            error = (f"Could not use your file: {server_safe(uploads.load_error_text(err, data_file))}"
                     if dataset == "file" else f"Could not load the data set {DATASET_LABELS[dataset]}: {server_safe(err)}")
    waiting = dataset == "file" and not data_file  # the first step of using one's own data, not a failure
    if error and waiting:
        sb.caption("Upload a file above to start.")
        st.info(error)
    elif error:  # quotes file names and cell values: shown as text, once (on the page; the sidebar points there)
        sb.caption("This data set cannot be used: the reason is on the page.")
        st.error(escape_markdown(error))
        if uploaded:  # a link must not carry a file that cannot be used; the uploader keeps it for this
            state.put("data_file", None)  # session, so a control that fixes it (label column) still can
    else:
        sb.caption(f"{info.n_train:,} training / {info.n_test:,} test examples, D = {info.dim}, C = {info.classes}")
    settings = SidebarSettings(dataset, data_file if dataset == "file" else None, int(repeats), accounting, device,
                               info, error, prep, label_column, tuning, labels)
    return settings
