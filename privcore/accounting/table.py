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
TABLE_SHA256 = "1942691e252f27e91030cf7afb7934bec1dbe723851115e20ea445aaa1594828"
