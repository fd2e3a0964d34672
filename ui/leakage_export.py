"""What a Measured leakage chart and its CSV say about the setting they came from (no Streamlit here).

Explore's and Reproduce's exports carry a caption row and file metadata (:mod:`ui.caption`); the leakage
chart had neither, and its CSV lacked the data set, B, N, the seed and the attack's sizes, so a file could
not be traced back to its setting on its own.
"""

from __future__ import annotations

from typing import Any, Sequence

from .caption import chart_settings

__all__ = ["leakage_settings", "leakage_rows"]

#: Each spec's settings a leakage CSV row carries beside its result (:meth:`LeakageResult.summary`).
ROW_SETTINGS = ("budget", "lam", "teachers", "batch_size", "epochs", "clip", "seed", "worlds", "repeats",
                "references", "canaries", "audit_trials")


def _by_method(specs: Sequence) -> dict[str, Any]:
    return {sp.method: sp for sp in specs}


def leakage_settings(specs: Sequence, results: Sequence, attack_label: str, dataset: str) -> dict[str, Any]:
    """The caption and metadata settings of the ROC chart: data set, δ, B, N, λ, T, accounting, seed, the
    attack and the attack's sizes (references, canaries and audit trials per data set, where they differ by
    method a range)."""
    spec = _by_method(specs)
    rows = [{"delta": r.delta, "budget": spec[r.method].budget, "n": r.n_train, "lam": spec[r.method].lam,
             "teachers": spec[r.method].teachers, "accounting": r.accounting}
            for r in results if r.method in spec]
    first = specs[0]
    trials = sorted({sp.audit_trials for sp in specs})
    extra = {"attack": attack_label, "reference models": first.references, "canaries": first.canaries,
             "audit trials": trials[0] if len(trials) == 1 else f"{trials[0]:,}–{trials[-1]:,}"}
    return chart_settings(rows, dataset=dataset, seed=first.seed, accounting=first.accounting, extra=extra)


def leakage_rows(specs: Sequence, results: Sequence) -> list[dict[str, Any]]:
    """One CSV row per method: its result (:meth:`LeakageResult.summary`) and its spec's settings."""
    spec = _by_method(specs)
    out = []
    for r in results:
        row = r.summary()
        sp = spec.get(r.method)
        if sp is not None:
            row.update({k: getattr(sp, k) for k in ROW_SETTINGS})
            row["data_n"], row["data_classes"], row["data_dim"] = sp.data.n, sp.data.classes, sp.data.dim
        out.append(row)
    return out
