"""A user file's declared label set: its classes fixed in advance (public), not read off the file.

Read off the file, the label set depends on the data: a row whose label no other row has adds a
class and renumbers the others (C and every one-hot target change), which the replace-one guarantee
does not cover, and the loader's note says so. Declared, the map from label to class index is the
same for every data set: class k is the k-th declared label (a declared class may have no rows), and
a file holding another label is refused with the label named (a message to the data owner, not a
release). The text form (CLI ``--labels``, the URL, the spec's key) is the labels joined by commas.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from .errors import DataFileError
from .sources import RawSource, readonly

__all__ = ["MAX_LABELS", "normalise_label", "parse_labels", "labels_text", "declare_labels"]

#: At most this many declared labels (a class per label: the models' width).
MAX_LABELS = 1000
_MAX_LABEL_CHARS = 200


def normalise_label(label: Any) -> str:
    """A label as the declared list and the file compare it: an integer-looking label ("3", "3.0", 3.0)
    as its integer's digits, anything else as its stripped text."""
    text = str(label).strip()
    try:
        d = Decimal(text)
    except InvalidOperation:
        return text
    if d.is_finite() and d == d.to_integral_value():
        return str(int(d))
    return text


def parse_labels(value: Any) -> tuple[str, ...] | None:
    """The declared labels from their text form ("a, b, c") or a sequence; None for None or "".

    Raises ``ValueError`` naming ``labels``: fewer than 2 labels, an empty or over-long label, a label
    declared twice (after normalisation: "1" and "1.0" are one), more than :data:`MAX_LABELS`."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        items = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    else:
        raise TypeError(f"labels must be a comma-separated text or a sequence of labels, got {type(value).__name__}")
    out = tuple(normalise_label(v) for v in items)
    if any(not v for v in out):
        raise ValueError(f"labels must not contain an empty label (two commas in a row?), got {value!r:.80}")
    if any(len(v) > _MAX_LABEL_CHARS for v in out):
        raise ValueError(f"each of the labels must have at most {_MAX_LABEL_CHARS} characters")
    if len(out) < 2 or len(out) > MAX_LABELS:
        raise ValueError(f"labels must declare 2 to {MAX_LABELS:,} classes, got {len(out):,}")
    seen: set[str] = set()
    twice = [v for v in out if v in seen or seen.add(v)]
    if twice:
        raise ValueError(f"labels must declare each label once, got {twice[0]!r:.40} twice")
    return out


def labels_text(labels: tuple[str, ...] | None) -> str | None:
    """The text form of declared labels (None when none are declared)."""
    return None if labels is None else ",".join(labels)


def declare_labels(src: RawSource, labels: tuple[str, ...], what: str) -> RawSource:
    """``src`` with class k = the k-th declared label; refuses a file holding a label not declared."""
    names = [normalise_label(n) for n in (src.label_names or ())]
    index = {label: k for k, label in enumerate(labels)}
    unknown = [n for n in names if n not in index]
    if unknown:
        counts = np.bincount(src.y, minlength=len(names))
        rows = sum(int(counts[k]) for k, n in enumerate(names) if n not in index)
        shown = ", ".join(repr(n[:30]) for n in unknown[:5]) + (f", ... ({len(unknown)} labels)" if len(unknown) > 5 else "")
        raise DataFileError(f"{what} has labels not among the declared labels: {shown} ({rows:,} rows); declare "
                            "every label the data may hold, or remove those rows")
    lut = np.asarray([index[n] for n in names], dtype=np.int64)
    declared = ", ".join(f"{label[:30]!r}->{k}" for k, label in enumerate(labels[:12]))
    more = f", ... ({len(labels)} classes)" if len(labels) > 12 else ""
    notes = tuple(n for n in src.notes if "labels mapped" not in n)
    head = next((n.split(";")[0] for n in src.notes if "labels mapped" in n), "user data file")
    notes = (f"{head}; labels declared in advance (public) and mapped {declared}{more}: the same map for "
             "every data set",) + notes
    return replace(src, y=readonly(lut[src.y]), classes=len(labels), label_names=labels, notes=notes)
