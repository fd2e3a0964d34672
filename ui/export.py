"""Chart and data exports: PNG/SVG/PDF through kaleido v1 + Chromium, standalone HTML, CSV.

Static images need a Chromium-family browser. :func:`figure_bytes` starts kaleido's sync server once
per process (a persistent headless browser; the first image also pays for the browser start, every
later one takes a fraction of a second) and raises :class:`ExportUnavailable` with a clear message
when no browser is found. HTML and CSV never need a browser.

:func:`export_buttons` is the Streamlit row of download buttons every chart gets; it is the only
function here that imports Streamlit.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import threading
from typing import Any, Iterable, Mapping, Sequence

import plotly.graph_objects as go

from privcore.csvtext import csv_cell

from .caption import meta_json

__all__ = [
    "ExportUnavailable", "IMAGE_FORMATS", "EXPORT_WIDTH", "EXPORT_HEIGHT", "find_browser", "browser_available",
    "figure_bytes", "figure_html", "embed_metadata", "rows_csv", "csv_context", "export_buttons", "warm_up", "MIME_TYPES",
]

IMAGE_FORMATS: tuple[str, ...] = ("png", "svg", "pdf")
MIME_TYPES: dict[str, str] = {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf",
                              "html": "text/html", "csv": "text/csv"}
#: Size of exported images in layout pixels (PNG is rendered at ``scale=2`` for print).
EXPORT_WIDTH = 1000
EXPORT_HEIGHT = 560
_BROWSER_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome",
                       "/usr/bin/google-chrome-stable")

_lock = threading.Lock()
_server_started = False


class ExportUnavailable(RuntimeError):
    """Static image export is impossible here (no Chromium-family browser, or kaleido failed)."""


def find_browser() -> str | None:
    """Path of a Chromium-family browser: ``$BROWSER_PATH``, the usual system paths, then ``$PATH``."""
    env = os.environ.get("BROWSER_PATH")
    if env and os.path.isfile(env):
        return env
    for path in _BROWSER_CANDIDATES:
        if os.path.isfile(path):
            return path
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_available() -> bool:
    """True when :func:`figure_bytes` can find a browser to render with."""
    return find_browser() is not None


def _ensure_server() -> None:
    """Start kaleido's sync server once per process (thread-safe)."""
    global _server_started
    if _server_started:
        return
    with _lock:
        if _server_started:
            return
        path = find_browser()
        if path is None:
            raise ExportUnavailable(
                "PNG/SVG/PDF export needs Chromium (or Chrome), which was not found on this machine: "
                "install it (e.g. apt-get install chromium) or set BROWSER_PATH. HTML and CSV exports, and "
                "the camera icon in the chart toolbar (PNG from your own browser), still work.")
        try:
            import kaleido
        except ImportError as err:  # pragma: no cover - kaleido is a pinned dependency
            raise ExportUnavailable(f"PNG/SVG/PDF export needs the kaleido package: {err}") from err
        try:
            # mathjax=False: no CDN fetch (offline machines); our figures use no LaTeX.
            kaleido.start_sync_server(path=path, mathjax=False, silence_warnings=True)
        except Exception as err:  # any start failure means "unavailable"
            raise ExportUnavailable(f"could not start the Chromium renderer ({path}): {err}") from err
        _server_started = True


def figure_bytes(fig: go.Figure, fmt: str, *, width: int = EXPORT_WIDTH, height: int | None = None,
                 scale: float | None = None) -> bytes:
    """The figure as PNG, SVG or PDF bytes (rendered by kaleido in headless Chromium).

    ``fmt`` is ``"png"``, ``"svg"`` or ``"pdf"``. PNG defaults to ``scale=2`` (print resolution).
    Raises ``ValueError`` for another format and :class:`ExportUnavailable` when no browser is found
    or rendering fails.
    """
    fmt = str(fmt).lower()
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(IMAGE_FORMATS)}, got {fmt!r}")
    _ensure_server()
    import kaleido

    fig_dict = fig.to_dict() if isinstance(fig, go.Figure) else dict(fig)
    h = height or fig_dict.get("layout", {}).get("height") or EXPORT_HEIGHT
    opts = dict(format=fmt, width=int(width), height=int(h), scale=scale if scale is not None else (2 if fmt == "png" else 1))
    try:
        data = kaleido.calc_fig_sync(fig_dict, opts=opts)
    except Exception as err:
        raise ExportUnavailable(f"rendering the {fmt.upper()} failed: {err}") from err
    return embed_metadata(data, fmt, meta_json(fig_dict))


def embed_metadata(data: bytes, fmt: str, meta: str | None) -> bytes:
    """The file with the chart's settings (JSON) embedded: a PNG ``tEXt`` chunk (keyword
    ``privcore-settings``) after the header, an SVG ``<desc>`` element, a PDF ``/Subject`` in a
    comment line read by ``strings``-style tools; unchanged when ``meta`` is None."""
    if not meta:
        return data
    if fmt == "png" and data[:8] == b"\x89PNG\r\n\x1a\n":
        import struct
        import zlib

        body = b"privcore-settings\x00" + meta.encode("latin-1", "replace")
        chunk = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
        end_ihdr = 8 + 4 + 4 + 13 + 4  # signature, IHDR length, type, data, CRC
        return data[:end_ihdr] + chunk + data[end_ihdr:]
    if fmt == "svg":
        from html import escape

        text = data.decode("utf-8")
        close = text.find(">", text.find("<svg"))
        if close > 0:
            text = text[: close + 1] + f"<desc id=\"privcore-settings\">{escape(meta)}</desc>" + text[close + 1:]
        return text.encode("utf-8")
    if fmt == "pdf" and data.startswith(b"%PDF"):
        # A comment line after the header: ignored by readers, kept by the file, greppable.
        head_end = data.find(b"\n") + 1
        line = b"% privcore-settings " + meta.encode("ascii", "backslashreplace") + b"\n"
        if head_end > 0:
            return _pdf_shift(data, head_end, line)
    return data


def _pdf_shift(data: bytes, at: int, insert: bytes) -> bytes:
    """Insert bytes after the PDF header, fixing the cross-reference offsets that follow."""
    import re

    out = data[:at] + insert + data[at:]
    shift = len(insert)

    def fix_xref(m: "re.Match[bytes]") -> bytes:
        lines = m.group(0).split(b"\n")
        fixed = []
        for ln in lines:
            parts = ln.split(b" ")
            if len(parts) >= 3 and len(parts[0]) == 10 and parts[0].isdigit() and parts[2][:1] == b"n":
                parts[0] = b"%010d" % (int(parts[0]) + shift)
                ln = b" ".join(parts)
            fixed.append(ln)
        return b"\n".join(fixed)

    out = re.sub(rb"xref\n(?:.*\n)*?trailer", fix_xref, out, count=1)
    out = re.sub(rb"startxref\s+(\d+)", lambda m: b"startxref\n" + str(int(m.group(1)) + shift).encode(), out, count=1)
    return out


def warm_up() -> bool:
    """Start the renderer and draw one tiny figure so the user's first export is fast.

    Returns False (never raises) when export is unavailable. Safe to call from a background thread.
    """
    try:
        figure_bytes(go.Figure(go.Scatter(x=[0, 1], y=[0, 1])), "svg", width=200, height=150)
        return True
    except Exception:  # noqa: BLE001
        return False


def figure_html(fig: go.Figure) -> bytes:
    """A standalone, interactive HTML file (plotly.js embedded, works offline), UTF-8 bytes."""
    html = fig.to_html(full_html=True, include_plotlyjs=True,
                       config={"displaylogo": False, "toImageButtonOptions": {"format": "svg"}})
    meta = meta_json(fig)
    if meta:
        from html import escape

        html = html.replace("<head>", f'<head><meta name="privcore-settings" content="{escape(meta)}">', 1)
    return html.encode("utf-8")


def _csv_value(value: Any) -> Any:
    """One cell: privcore.csvtext's short round-trip numbers; NaN (a missing value) empty."""
    return csv_cell(value, nan="")


def rows_csv(rows: Sequence[Mapping[str, Any]], columns: Iterable[str] | None = None, *,
             context: Mapping[str, Any] | None = None) -> bytes:
    """Result rows as UTF-8 CSV bytes.

    Columns: ``columns`` if given, else privcore's result columns
    (:func:`privcore.engine.rows.result_columns`: the core columns and every registered method's own
    fields) followed by any extra keys in first-seen order. Rows with a ``method`` id also get its
    display name (``method_label``, right after it). ``context`` ({column: value}, e.g. the data set
    and seed of the chart) is written first, the same on every row. Infinity is written ``inf``, None
    and NaN empty, other floats in the shortest form that round-trips at 12 significant digits
    (privcore.csvtext).
    """
    context = {k: v for k, v in (context or {}).items() if v is not None}
    if any(r.get("tuned") for r in rows):  # a tuned row's spec-level knobs (clip, learning rate) are its own
        from privcore.engine.rows import tuned_knobs

        rows = [{**tuned_knobs(r.get("tuned")), **r} for r in rows]  # a row's own column (lam, T) is its tuned value
    if rows and any("method" in r for r in rows) and not any("method_label" in r for r in rows):
        from .figures import method_label

        rows = [{**r, "method_label": method_label(r["method"])} if "method" in r else r for r in rows]
        if columns is not None:
            columns = [name for c in columns for name in ((c, "method_label") if c == "method" else (c,))]
    if context:
        rows = [{**context, **r} for r in rows]
        if columns is not None:
            columns = [*context, *(c for c in columns if c not in context)]
    if columns is None:
        try:
            from privcore.engine.rows import result_columns  # core columns + the registry's declared fields
            cols = list(result_columns())
        except Exception:  # noqa: BLE001 - keep working without the engine
            cols = []
        cols = [*context, *(c for c in cols if c not in context)]
        if "method" in cols:
            cols.insert(cols.index("method") + 1, "method_label")
        seen = set(cols)
        present = set()
        for row in rows:
            present.update(row.keys())
            for key in row:
                if key not in seen:
                    cols.append(key)
                    seen.add(key)
        if rows:
            cols = [c for c in cols if c in present]
    else:
        cols = list(columns)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(cols)
    for row in rows:
        writer.writerow([_csv_value(row.get(c)) for c in cols])
    return buf.getvalue().encode("utf-8")


_GREEK = {"ε": "eps", "δ": "delta", "λ": "lambda", "σ": "sigma", "β": "beta", "ρ": "rho", "ν": "nu", "×": "x"}


def _slug(text: str) -> str:
    """An ASCII file name stem: Greek letters spelled out, everything else non-alphanumeric -> '-'."""
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text)  # "N = 4,000" -> n-4000, not n-4-000
    text = "".join(_GREEK.get(ch, ch) for ch in text.lower())
    keep = "".join(ch if (ch.isascii() and ch.isalnum()) or ch == "." else "-" for ch in text)
    while "--" in keep:
        keep = keep.replace("--", "-")
    return keep.strip("-") or "chart"


def csv_context(fig: go.Figure) -> dict[str, Any]:
    """The data set, seed and DP-SGD knobs (where the chart has them) of a chart's caption
    (:func:`ui.caption.add_caption`), for its CSV rows."""
    from .caption import DPSGD_KNOBS

    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    settings = meta.get("privcore") if isinstance(meta.get("privcore"), dict) else {}
    return {k: settings[k] for k in ("dataset", "seed", *DPSGD_KNOBS) if k in settings}


def state_guarantee(fig: go.Figure, rows: Sequence[Mapping[str, Any]], notes: Sequence[str] = ()) -> str:
    """Where rows claim more than their noise gives (``paper``; tight subsample-and-aggregate), write what is
    really guaranteed into the figure: lines under the chart and ``meta.privcore.guarantee`` (which
    :func:`embed_metadata` puts into every image file). ``notes``: the data's caveats (augmentation's group
    privacy, PCA on the private split), stated the same way. Returns the text ("" when there is none)."""
    from privcore.accounting.forward import real_epsilon_summary

    from .figures import method_label

    text = " ".join(part if part.endswith(".") else part + "." for part in
                    [real_epsilon_summary(rows, method_label), *notes] if part)
    if not text:
        return ""
    meta = dict(fig.layout.meta) if isinstance(fig.layout.meta, dict) else {}
    settings = dict(meta.get("privcore") or {})
    settings["guarantee"] = text
    meta["privcore"] = settings
    bottom = fig.layout.margin.b if fig.layout.margin and fig.layout.margin.b is not None else 80
    lines: list[str] = []
    for word in text.split(" "):  # rows of at most ~90 characters, so the line fits the exported width
        if lines and len(lines[-1]) + 1 + len(word) <= 90:
            lines[-1] += " " + word
        else:
            lines.append(word)
    # Below the axis title, in a margin of its own, in the dashboard's warning colour.
    fig.add_annotation(text="<br>".join(lines), xref="paper", yref="paper", x=0.0, y=0.0, xanchor="left",
                       yanchor="top", yshift=-(bottom - 4), showarrow=False, align="left",
                       font=dict(size=11, color="#9a3412"), name="privcore-guarantee")
    extra = 15 * len(lines) + 6
    # The figure grows with the lines, so its plot keeps the height a legend below the axis was placed for
    # (in paper units, ui.figures.reserve_legend_rows): a smaller plot moved the legend onto the axis title.
    height = fig.layout.height + extra if fig.layout.height else None
    fig.update_layout(meta=meta, margin=dict(b=bottom + extra), height=height)
    return text


def export_buttons(fig: go.Figure, rows: Sequence[Mapping[str, Any]] | None, key: str, *,
                   filename: str | None = None, notes: Sequence[str] = ()) -> None:
    """A row of Streamlit download buttons: PNG, SVG, PDF, HTML and CSV (of ``rows``).

    ``key`` must be unique on the page (it prefixes the buttons' keys). Files are generated only
    when a button is clicked (Streamlit's deferred ``data`` callables), so drawing the page never
    waits on the renderer. If Chromium is missing the image buttons are replaced by a note, and the
    chart's own camera button (PNG from the user's browser) stays available. ``rows=None`` hides
    the CSV button. The figure is copied, so later changes to ``fig`` do not leak into the files. Where the
    rows claim more than their noise gives, or ``notes`` (the data's caveats) are given, the files say what is
    really guaranteed (:func:`state_guarantee`).
    """
    import streamlit as st

    from .column import offers_column

    title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else key
    base = _slug(filename or title)
    frozen = go.Figure(fig)
    frozen_rows = [dict(r) for r in rows] if rows is not None else None
    if frozen_rows or notes:
        state_guarantee(frozen, frozen_rows or [], notes)
    # One horizontal row of buttons sized to their labels (wrapping on narrow screens), so "PNG" never
    # shrinks to "P…" in a fifth of an 800 px column.
    row = st.container(horizontal=True, gap="small", key=f"{key}_row")
    if browser_available():
        for fmt in IMAGE_FORMATS:
            row.download_button(fmt.upper(), data=lambda f=fmt: figure_bytes(frozen, f), file_name=f"{base}.{fmt}",
                                mime=MIME_TYPES[fmt], key=f"{key}_{fmt}", on_click="ignore", width="content",
                                help=f"Print-ready {fmt.upper()} (white background, fixed method colours and "
                                     "markers, the settings in a caption row and the file's metadata)")
    if browser_available() and offers_column(frozen):
        from .column import COLUMN_WIDTH_PX, column_figure

        row.download_button("PDF (column)", data=lambda: figure_bytes(column_figure(frozen), "pdf", width=COLUMN_WIDTH_PX),
                            file_name=f"{base}-column.pdf", mime=MIME_TYPES["pdf"], key=f"{key}_column",
                            on_click="ignore", width="content",
                            help="For one column of a two-column paper: 3.3 inches (240 pt) wide with 8-point text, "
                                 "to place at 100 %; the same caption, settings and guarantee lines")
    row.download_button("HTML", data=lambda: figure_html(frozen), file_name=f"{base}.html", mime=MIME_TYPES["html"],
                        key=f"{key}_html", on_click="ignore", width="content", help="Interactive chart, works offline")
    if frozen_rows is not None:
        context = csv_context(fig)
        if notes:  # the data's caveats on every row, beside the data set they are about
            context["data_caveats"] = " ".join(notes)
        row.download_button("CSV", data=lambda: rows_csv(frozen_rows, context=context), file_name=f"{base}.csv",
                            mime=MIME_TYPES["csv"], key=f"{key}_csv", on_click="ignore", width="content",
                            help="The numbers behind the chart")
    if not browser_available():
        st.caption("PNG/SVG/PDF export needs Chromium, which was not found here: use the camera icon "
                   "in the chart's toolbar for a PNG.")
