"""Where the shipped DP-SGD calibration table lives and the digest it must have (no imports).

Read by the memo (:mod:`privcore.accounting.memo`, which consults the table) and written by its builder
(:mod:`privcore.accounting.bundle`): a leaf both import, so neither imports the other. The table and
how it is built and checked are described in :mod:`privcore.accounting.bundle`.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUNDLED_PATH", "TABLE_SHA256"]

BUNDLED_PATH = Path(__file__).resolve().with_name("calibrations_bundled.json")
#: sha256 of calibrations_bundled.json as built (``python -m privcore.accounting.bundle`` prints it):
#: a table with another digest is ignored.
TABLE_SHA256 = "f3b9c415a5b00b51234b1d387e743e765a78691d05c6a349fef41209a0da96c2"
