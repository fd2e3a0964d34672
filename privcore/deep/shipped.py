"""Figure 7 results that ship with the project (docs/figures/fig7a_*.csv and fig7b_*.csv), read as typed rows.

A shipped run is a pair of CSVs written by ``python -m privcore deep --figure7`` (bench/figure7_deep.sh) and
named ``fig7{a,b}_<dataset>_<model>[_<card>][_e<DP-SGD epochs>_t<teacher epochs>].csv``: the name says the
settings that the rows do not (the card and the epochs; everything else is in the columns). Each row is
checked as a :class:`~privcore.deep.spec.DeepRow`; a file that does not read as one is skipped, never shown.
The Deep models page draws these before anyone trains.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .data import DEEP_DATASETS
from .spec import MODEL_NAMES, PRESETS, SAMPLER_FORMULA, DeepRow, row_fields

__all__ = ["ShippedRun", "figures_dir", "shipped_runs", "read_rows", "FIGURES_ENV", "drawn_before_exact_tails"]

#: Another folder of shipped CSVs (default: the checkout's docs/figures).
FIGURES_ENV = "PRIVCORE_FIGURES_DIR"
_NAME = re.compile(r"fig7a_(?P<dataset>[a-z0-9-]+?)_(?P<model>resnet20|small-cnn)(?:_(?P<card>[a-z][a-z0-9]*))?"
                   r"(?:_e(?P<epochs>\d+)_t(?P<teacher_epochs>\d+))?\.csv")
_INTS = ("budget", "teachers", "n_train", "n_test", "repeats", "steps")
#: The row's own float columns; the methods' own columns (:func:`~privcore.deep.spec.row_fields`) are typed
#: by their declarations.
_FLOATS = ("epsilon", "delta", "accuracy_mean", "accuracy_std", "seconds", "noise_multiplier", "sigma", "beta")


def figures_dir() -> Path:
    """The folder of shipped figures: $PRIVCORE_FIGURES_DIR, else docs/figures of this checkout."""
    env = os.environ.get(FIGURES_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[2] / "docs" / "figures"


@dataclass(frozen=True)
class ShippedRun:
    """One shipped pair of panels and the settings its file names carry."""

    dataset: str
    model: str
    card: str | None
    epochs: int | None  # DP-SGD epochs (None: the name does not say, i.e. the paper preset's)
    teacher_epochs: int | None
    panel_a: Path
    panel_b: Path

    @property
    def tag(self) -> str:
        return self.panel_a.name[len("fig7a_"):-len(".csv")]

    def label(self) -> str:
        """The run in words, e.g. "Fashion-MNIST, ResNet-20, H100, DP-SGD epochs 10, teacher epochs 50
        (paper: 100, 500)" ("teachers 50" read as 50 teachers; the run has 16)."""
        paper = PRESETS["paper"]
        parts = [{"fashion-mnist": "Fashion-MNIST", "cifar-10": "CIFAR-10"}.get(self.dataset, self.dataset),
                 {"resnet20": "ResNet-20", "small-cnn": "small CNN"}[self.model]]
        if self.card:
            parts.append(self.card.upper())
        e = self.epochs if self.epochs is not None else paper["epochs"]
        t = self.teacher_epochs if self.teacher_epochs is not None else paper["teacher_epochs"]
        same = e == paper["epochs"] and t == paper["teacher_epochs"]
        parts.append(f"DP-SGD epochs {e}, teacher epochs {t}" + (
            " (the paper's)" if same else f" (paper: {paper['epochs']}, {paper['teacher_epochs']})"))
        return ", ".join(parts)


def shipped_runs(folder: Path | None = None) -> list[ShippedRun]:
    """Every complete pair (both panels present) in ``folder``, runs at the paper's epochs first."""
    folder = figures_dir() if folder is None else folder
    runs = []
    if not folder.is_dir():
        return runs
    for a in sorted(folder.glob("fig7a_*.csv")):
        m = _NAME.fullmatch(a.name)
        b = a.with_name("fig7b_" + a.name[len("fig7a_"):])
        if m is None or m["dataset"] not in DEEP_DATASETS or m["model"] not in MODEL_NAMES or not b.is_file():
            continue
        runs.append(ShippedRun(m["dataset"], m["model"], m["card"],
                               int(m["epochs"]) if m["epochs"] else None,
                               int(m["teacher_epochs"]) if m["teacher_epochs"] else None, a, b))
    return sorted(runs, key=lambda r: (r.epochs is not None, -(r.epochs or 0), r.tag))


def _typed(raw: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names = set(DeepRow.columns())
    ints = set(_INTS) | {f.name for f in row_fields() if f.integer}
    floats = set(_FLOATS) | {f.name for f in row_fields() if not f.integer}
    for k, v in raw.items():
        if k not in names:
            raise ValueError(f"unexpected column {k!r}")
        if k in ints:
            out[k] = int(v) if v != "" else None
        elif k in floats:
            out[k] = float(v) if v != "" else None
        elif k == "cached":
            out[k] = v == "True"
        else:
            out[k] = v
    return out


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of one shipped CSV as dicts of a checked :class:`DeepRow` (plus ``classes``: 10), or
    ``ValueError`` naming the file when any row does not read as one."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = [DeepRow.from_dict(_typed(r), cached=True).to_dict() for r in csv.DictReader(fh)]
    except (OSError, TypeError, ValueError) as err:
        raise ValueError(f"{path.name} does not read as Figure 7 rows: {err}") from None
    return [dict(r, classes=10) for r in rows]


def drawn_before_exact_tails(rows: list[dict[str, Any]]) -> bool:
    """Whether any private row (DP-SGD, votes) of a shipped run was drawn with torch's samplers, whose noise
    tails stop (float32 normals at 5.77 deviations): its formula lacks :data:`SAMPLER_FORMULA`."""
    return any(r.get("method") != "non_private" and SAMPLER_FORMULA not in str(r.get("formula", "")) for r in rows)
