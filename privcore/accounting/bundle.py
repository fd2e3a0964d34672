"""A calibration table shipped with privcore: DP-SGD multipliers for the dashboard's default settings.

A first replace-one DP-SGD calibration imports dp_accounting (about 1 s of scipy.signal, .stats and
.optimize, 9-11x a bare Python start here) before its few accountant evaluations. For the settings a
first visitor and a first ``python -m privcore calibrate --method dpsgd`` meet, the answer is
computed once, here, by the same verified search (``dpsgd.pld_noise_multiplier``: every multiplier
it returns was evaluated by dp_accounting's pessimistic PLD and met the target), and shipped as
``calibrations_bundled.json`` beside this file, in the on-disk memo's own format and keys
(privcore/accounting/memo.py). :func:`privcore.accounting.memo.lookup` consults it after the
user's memo, for replace-one calibrations only, and only when the file's sha256 is
:data:`~privcore.accounting.table.TABLE_SHA256` (so changing the table takes changing the code); every multiplier read from it
is also re-checked on reading against the independent numpy privacy-loss distribution
(``pld_approx.recheck``) exactly like a memo entry, and a refused one is recomputed by the accountant.
That re-check refuses a multiplier more than about 0.5 % too small, not one just below: over this
table the smallest factor it still accepts is 0.9958 at worst (epsilon then up to 0.65 % over the
target on the search's grid; ``python bench/bench_bundle.py``). The table's values therefore rest on
the test that checks every entry with the accountant itself (tests/accounting/test_bundle.py).

The keys hold a hash of the calibration code and the installed dp-accounting, numpy and scipy
versions, so the table only answers for the code and libraries that computed it; anything else
misses and calibrates as before. ``tests/accounting/test_bundle.py`` fails when the table no longer
matches the code (regenerate it with ``python -m privcore.accounting.bundle`` and put the sha256 it
prints in ``TABLE_SHA256``, privcore/accounting/table.py), checks every entry against the accountant's own condition (the
pessimistic PLD epsilon on the search's grid at most the target), recomputes a few exactly, and
shows that a tampered entry is refused.

Covered: the built-in data sets :data:`DATASETS` at their full training size, the knobs' default
batch size and epochs, every epsilon and every delta > 0 of the knobs' grids (the dashboard's
sliders), the ``moderate`` PLD grid (``corrected`` accounting, the default), replace-one neighbours.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

from .table import BUNDLED_PATH, TABLE_SHA256

__all__ = ["BUNDLED_PATH", "TABLE_SHA256", "DATASETS", "settings", "build", "covers"]

#: Data sets whose default DP-SGD settings are bundled (mnist-5k's N = 4,000 is also the CLI's default N).
DATASETS: tuple[str, ...] = ("mnist-5k", "digits")
#: Training-set sizes of :data:`DATASETS` (checked against the loaders by the tests; kept here so
#: that :func:`covers` needs no data).
TRAIN_SIZES: dict[str, int] = {"mnist-5k": 4000, "digits": 1438}
_GRID = "moderate"
_REL_TOL = 1e-3


def settings() -> list[tuple]:
    """The memo arguments ``(epsilon, delta, q, steps, relation, rel_tol, grid)`` bundled, in order."""
    from ..knobs import KNOBS

    batch, epochs = int(KNOBS["batch_size"].default), int(KNOBS["epochs"].default)
    out = []
    for name in DATASETS:
        n = TRAIN_SIZES[name]
        q, steps = batch / n, math.ceil(epochs * n / batch)
        for delta in KNOBS["delta"].grid:
            if delta <= 0:
                continue
            for eps in KNOBS["epsilon"].grid:
                out.append((float(eps), float(delta), float(q), int(steps), "replace_one", _REL_TOL, _GRID))
    return out


def covers(dataset: str) -> bool:
    """Whether the table answers this data set's default DP-SGD calibrations for this code and these
    libraries (one key looked up; :func:`build` writes all of a data set's keys or none)."""
    from . import memo

    if dataset not in DATASETS:
        return False
    from ..knobs import KNOBS

    q = int(KNOBS["batch_size"].default) / TRAIN_SIZES[dataset]
    probe = next((a for a in settings() if a[2] == q and a[0] == KNOBS["epsilon"].default), None)
    return probe is not None and memo.bundled_value("dpsgd_noise_multiplier", probe) is not None


def build(path: Path = BUNDLED_PATH, *, log=print) -> int:  # noqa: ANN001 - a print-like callable
    """Compute every setting of :func:`settings` with the verified PLD search and write the table.

    Multipliers the independent re-check cannot judge (below 0.1, at very large epsilon) are left
    out: a lookup would refuse them anyway. Returns the number of entries written.
    """
    from . import memo
    from .dpsgd import pld_noise_multiplier
    from .pld_approx import recheck

    entries: dict[str, list] = {}
    for i, args in enumerate(settings()):
        eps, delta, q, steps, rel, rel_tol, grid = args
        z = pld_noise_multiplier(eps, delta, q, steps, rel, rel_tol, grid)
        if z >= 0.1 and recheck(z, eps, delta, q, steps):
            key = memo.key("dpsgd_noise_multiplier", args)
            entries[key] = [z, memo.checksum(key, z)]
        if (i + 1) % 50 == 0:
            log(f"{i + 1} of {len(settings())} settings")
    memo.write_entries(path, entries, versions=memo.library_versions())
    path.chmod(0o644)  # shipped with the package: readable by every user
    return len(entries)


if __name__ == "__main__":  # python -m privcore.accounting.bundle
    written = build()
    json.loads(BUNDLED_PATH.read_text(encoding="utf-8"))  # readable back
    digest = hashlib.sha256(BUNDLED_PATH.read_bytes()).hexdigest()
    print(f"wrote {written} verified multipliers to {BUNDLED_PATH}; put its sha256 in TABLE_SHA256 "
          f"(privcore/accounting/table.py):\n{digest}", file=sys.stderr)
