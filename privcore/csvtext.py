"""Numbers as CSV text: the shortest form that round-trips at the precision the data has.

Means, standard deviations and accuracies computed in floating point carry binary noise in their last
digits (``0.12065000000000001``). :func:`number_text` rounds a non-integral float to
:data:`SIGNIFICANT_DIGITS` significant digits and writes the shortest ``repr`` of the result, so
``0.12065000000000001`` becomes ``0.12065``. Significant (not decimal) digits keep small p-values and
deltas (``3.1e-12``) whole; integers, and floats holding an integer value, are written exactly.
Every CSV writer (the dashboard's downloads and the CLIs) formats its cells with :func:`csv_cell`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["SIGNIFICANT_DIGITS", "number_text", "csv_cell", "csv_text"]

#: float64 holds 15-17 significant digits; the last few are arithmetic noise in anything computed.
SIGNIFICANT_DIGITS = 12


def number_text(value: float, *, nan: str = "nan") -> str:
    """``value`` as short CSV text: ``inf``/``-inf``, ``nan`` (or the ``nan`` given), exact integers,
    else the shortest repr of the value rounded to :data:`SIGNIFICANT_DIGITS` significant digits."""
    if isinstance(value, numbers.Integral):  # int and numpy integers: exact
        return str(int(value))
    dtype = getattr(value, "dtype", None)
    if dtype is not None and getattr(dtype, "itemsize", 8) < 8 and not math.isnan(float(value)):
        value = float(str(value))  # float32/16: numpy's shortest text at that precision (0.1, not 0.10000000149)
    x = float(value)
    if math.isnan(x):
        return nan
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x.is_integer():
        return repr(x)  # 4000.0 stays 4000.0; 1e+16 keeps every digit it has
    return repr(float(f"{x:.{SIGNIFICANT_DIGITS}g}"))


def csv_cell(value: Any, *, nan: str = "nan") -> Any:
    """One CSV cell: None -> empty, real numbers through :func:`number_text` (bools and ints unchanged),
    lists and tuples joined with ``"; "``, anything else as it is."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return number_text(value, nan=nan)
    if isinstance(value, (list, tuple)):
        return "; ".join(str(csv_cell(v, nan=nan)) for v in value)
    return value


def csv_text(rows: Iterable[Mapping[str, Any]], fieldnames: Sequence[str], *, nan: str = "nan") -> str:
    """A header line and one line per row (``\\n`` line ends), each cell through :func:`csv_cell`;
    keys of a row outside ``fieldnames`` are left out."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(fieldnames))
    for row in rows:
        writer.writerow([csv_cell(row.get(k), nan=nan) for k in fieldnames])
    return buf.getvalue()
