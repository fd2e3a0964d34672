"""The per-method noise tables of the dashboard (pandas frames for ``st.dataframe``): the current
setting's results (:func:`noise_table`, Explore) and pure calibrations (:func:`calibration_table`,
Calibrate), with their ``column_config`` (:func:`noise_table_config`: short headers with help, the
method pinned) and ``column_order`` (:func:`noise_table_order`: method and accuracy first).

The methods' own columns (a threshold, the answered share, PATE's data-dependent epsilon, ...) are read
from their declarations (:attr:`privcore.methods.base.Method.result_fields`): label, short header, help
and format; this module names none of them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from privcore.engine.rows import knobs_picked
from privcore.methods.fields import ResultField, declared_result_fields

from .figures import _ordered_methods, format_number, is_baseline, method_label

if TYPE_CHECKING:  # pandas is imported where a table is built
    import pandas as pd

__all__ = ["NOISE_NAMES", "noise_name", "noise_table", "NOISE_TABLE_HEADERS", "noise_table_headers",
           "noise_table_order", "headed_config", "noise_table_config", "calibration_table"]


def _table_fields() -> tuple[ResultField, ...]:
    """The registered methods' own columns that the noise table shows (those with a table header)."""
    return tuple(f for f in declared_result_fields() if f.table)


def _field_text(f: ResultField, value: Any, digits: int = 3) -> str:
    """One cell of a method's own column: '-' where the row has none (as every other empty cell), a
    share as a percentage, else one short number (a pair in one cell, "2.17 (8.55 to publish)", was cut
    to "2.17 (8.55 to" at 800 and 1,400 px)."""
    if value is None:
        return "-"
    return f"{float(value):.1%}" if f.percent else format_number(value, digits)


#: The noise kinds (privcore.types.NOISE_KINDS) as the tables name them: short, so that a noise table fits
#: a 1,400 px page beside the sidebar without sideways scrolling (measured in Chromium).
NOISE_NAMES = {"gaussian": "Gaussian", "laplace_like": "Laplace-like", "exponential_mechanism": "exponential",
               "none": "none"}


def noise_name(kind: str | None) -> str:
    """A noise kind as the tables show it (unknown kinds with spaces for underscores)."""
    return NOISE_NAMES.get(kind or "none", str(kind).replace("_", " "))


def _up(value: Any) -> Any:
    """A real epsilon rounded up to 3 significant digits (:func:`privcore.validation.epsilon_up`), as every
    sentence shows it; None stays None."""
    from privcore.validation import epsilon_up

    return None if value is None else epsilon_up(value)


def noise_table(rows: Sequence[Mapping[str, Any]]):  # noqa: ANN201 - pandas DataFrame
    """One line per method at the current setting: noise kind and scales, formula, accuracy.

    rows: result rows (one per method; ``non_private`` included as the reference line).
    """
    import pandas as pd

    out = []
    for method in _ordered_methods(r["method"] for r in rows):
        r = next(rr for rr in rows if rr["method"] == method)
        std = r.get("accuracy_std")
        out.append({
            "Method": method_label(method),
            "Noise": noise_name(r.get("noise")),
            "σ (Gaussian std)": format_number(r.get("sigma")),
            "β (inverse scale)": format_number(r.get("beta")),
            "ρ (extra L2)": format_number(r.get("rho")),
            "Noise multiplier": format_number(r.get("noise_multiplier")),
            "Per-query ε": format_number(r.get("per_query_epsilon")),
            "Accuracy": f"{r['accuracy_mean']:.3f} ± {float(std or 0):.3f}" if r.get("accuracy_mean") is not None else "-",
            # The methods' own columns, as they declare them (the accuracy above counts abstentions as wrong).
            **{f.label: _field_text(f, r.get(f.name)) for f in _table_fields()},
            "Sensitivity Δ": format_number(r.get("sensitivity"), 4),
            # Where the row's accounting claims more than its noise gives (paper; tight S&A): the real epsilon.
            **({"Real ε (replace-one)": format_number(_up(r.get("real_epsilon")))} if any(
                rr.get("real_epsilon") is not None for rr in rows) else {}),
            # A tuned comparison (privcore.engine.tuned): the knobs each method was run at.
            **({"Knobs picked": knobs_picked(r.get("tuned"))} if any(
                rr.get("tuned") for rr in rows) else {}),
            "Formula": r.get("formula") or ("no noise (ε = ∞)" if is_baseline(method) else ""),
            "Note": r.get("note") or "",
        })
    return pd.DataFrame(out)


#: Short headers (and their hover help) for the noise tables' long column names, so the table fits
#: a 1,400 px page without sideways scrolling; the frame keeps the long names (exports, tests). The
#: methods' own columns add theirs (:func:`noise_table_headers`).
NOISE_TABLE_HEADERS: dict[str, tuple[str, str]] = {
    "σ (Gaussian std)": ("σ", "std of the Gaussian noise"),
    "β (inverse scale)": ("β", "inverse scale of Laplace-like noise, or inverse temperature of the vote"),
    "ρ (extra L2)": ("ρ", "loss perturbation's extra L2 weight"),
    "Noise multiplier": ("z", "noise multiplier: DP-SGD's σ / clip; Private-kNN's vote noise per unit of sensitivity"),
    "Per-query ε": ("ε/query", "what each of the B answers may spend"),
    # Short headers, explained by the hover help and the legend under the table: with paper accounting's
    # "Real ε" the table ran 46 px past a 1,400 px page beside the sidebar (tests/test_browser_widths.py).
    "Sensitivity Δ": ("Δ", "sensitivity the noise is calibrated to"),
    "Real ε (replace-one)": ("Real ε", "what the noise really guarantees at this δ under replace-one neighbours "
                                        "and adaptive queries, where the accounting mode claims more (paper; "
                                        "tight subsample-and-aggregate)"),
    "Sensitivity": ("Δ", "sensitivity the noise is calibrated to"),
}


def noise_table_headers() -> dict[str, tuple[str, str]]:
    """:data:`NOISE_TABLE_HEADERS` with the registered methods' own columns (label -> (short header, help))."""
    return {**{f.label: (f.short, f.help) for f in _table_fields()}, **NOISE_TABLE_HEADERS}


#: Columns read first (on a narrow screen, before any sideways scrolling), with the methods' own columns
#: declared ``lead`` (the answered share) after the accuracy; the long text is typeset below.
_NOISE_TABLE_FIRST = ("Method", "Accuracy")
_NOISE_TABLE_BELOW = ("Formula", "Note", "Notes", "Knobs picked")


def knobs_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """"Method: knobs" for each method of a tuned comparison, typeset below the noise table (its
    "Knobs picked" cell cut "teachers=64, threshold_fraction=0.8, sigma_ratio=3.75" short); "as
    configured" where a method kept its knobs; [] when no row was tuned."""
    if not any(r.get("tuned") for r in rows):
        return []
    return [f"{method_label(m)}: {knobs_picked(next(r for r in rows if r['method'] == m).get('tuned')) or 'as configured'}"
            for m in _ordered_methods(r["method"] for r in rows) if not is_baseline(m)]


def noise_table_order(columns: Iterable[str], table: Any = None) -> list[str]:
    """``column_order`` of a noise table: method, accuracy and the lead columns (the answered share)
    first, then the noise columns; the formulas and notes are left out (typeset below the table, where
    text wraps). With ``table`` (the frame), a column that is "-" for every method shown is left out
    too: at 1280 px the table scrolled sideways to show columns that said nothing for those methods."""
    cols = [c for c in columns if c not in _NOISE_TABLE_BELOW]
    if table is not None:
        keep = set(_NOISE_TABLE_FIRST)
        cols = [c for c in cols if c in keep or any(str(v) not in ("-", "", "None", "nan") for v in table[c])]
    # "Real ε" right after them where the accounting claims more: the warning above the table points to it,
    # and as the last column it needed a sideways scroll at 1280 px
    first = _NOISE_TABLE_FIRST + tuple(f.label for f in _table_fields() if f.lead) + ("Real ε (replace-one)",)
    return [c for c in first if c in cols] + [c for c in cols if c not in first]


def headed_config(columns: Iterable[str], headers: Mapping[str, tuple[str, str]], *,
                  formats: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``column_config`` for ``st.dataframe``: each column in ``headers`` (name -> (short header, hover
    help)) under its short header, number ``formats`` where given (name -> printf format), and the
    Method column pinned (it stays in view when a narrow screen scrolls the table sideways)."""
    import streamlit as st

    columns = list(columns)
    formats = formats or {}
    config: dict[str, Any] = {}
    for c in columns:
        if c in headers:
            label, help_text = headers[c]
            config[c] = (st.column_config.NumberColumn(label, help=help_text, format=formats[c]) if c in formats
                         else st.column_config.Column(label, help=help_text))
    if "Method" in columns:
        config["Method"] = st.column_config.TextColumn("Method", pinned=True)
    return config


def noise_table_legend(columns: Iterable[str], *, answered_only: bool = False) -> str:
    """One line explaining every short header shown (from :func:`noise_table_headers`, so the legend
    and the hover help never disagree): "σ: std of the Gaussian noise; ...; Δ: sensitivity ...", so no
    header shown is left unexplained."""
    headers = noise_table_headers()
    answered = {f.label for f in _table_fields() if f.lead and f.percent}  # the answered share
    seen: dict[str, str] = {}
    for c in columns:
        if c in headers and c not in _NOISE_TABLE_BELOW:
            short, help_text = headers[c]
            if c in answered and answered_only:  # the toggle above scores abstaining methods on answers only
                help_text = "share of queries answered (the accuracy of abstaining methods counts answered queries only)"
            seen.setdefault(short, help_text)
    return "; ".join(f"{short}: {text}" for short, text in seen.items()) + ("; -: does not apply" if seen else "")


def noise_table_config(columns: Iterable[str]) -> dict[str, Any]:
    """``column_config`` of a noise table (:func:`headed_config` with :func:`noise_table_headers`). Widths
    stay automatic: a fixed "small" width (75 px) is wider than the automatic one of a short number
    (measured at 800 px)."""
    return headed_config(columns, noise_table_headers())


def calibration_table(scales: Mapping[str, Any], *, with_notes: bool = True,
                      real: Mapping[str, float | None] | None = None) -> "pd.DataFrame":
    """Noise scales of :func:`privcore.calibration.calibrate_all` as a table.

    scales: {method: NoiseScale or CalibrationError}; errors become a line with the message.
    real: {method: the epsilon its noise really reaches} where the accounting mode claims more
    (:func:`privcore.accounting.forward.real_guarantee`); a "Real ε" column when any is set.
    """
    real_col = {} if not real or all(v is None for v in real.values()) else real
    scale_columns = [f for f in _table_fields() if f.on_scale]  # the methods' own calibrated columns
    import pandas as pd

    out = []
    for method, s in scales.items():
        if isinstance(s, Exception):
            out.append({"Method": method_label(method), "Noise": "not available", "σ (Gaussian std)": "-",
                        "β (inverse scale)": "-", "ρ (extra L2)": "-", "Noise multiplier": "-", "Per-query ε": "-",
                        "Per-query δ": "-", **{f.label: "-" for f in scale_columns}, "Sensitivity": "-",
                        **({"Real ε (replace-one)": "-"} if real_col else {}), "Formula": "", "Notes": str(s)})
            continue
        out.append({
            "Method": method_label(method),
            "Noise": noise_name(s.noise),
            "σ (Gaussian std)": format_number(s.sigma, 4),
            "β (inverse scale)": format_number(s.beta, 4),
            "ρ (extra L2)": format_number(s.rho, 4),
            "Noise multiplier": format_number(s.noise_multiplier, 4),
            "Per-query ε": format_number(s.per_query_epsilon, 4),
            "Per-query δ": format_number(s.per_query_delta, 3),
            **{f.label: _field_text(f, s.extras.get(f.name), 4) for f in scale_columns},
            "Sensitivity": format_number(s.sensitivity, 4),
            **({"Real ε (replace-one)": format_number(_up(real_col.get(method)))} if real_col else {}),
            "Formula": s.formula,
            "Notes": "; ".join(s.notes) if with_notes else "",
        })
    return pd.DataFrame(out)
