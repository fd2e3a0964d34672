"""privcore.engine.warmup: the background warm-up imports the accountant in use and memoises the data."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


@pytest.mark.slow
def test_warm_up_imports_the_accountant_and_memoises_the_data() -> None:
    # A fresh interpreter: in this one other tests may already have imported Opacus.
    code = textwrap.dedent("""
        import sys
        from privcore.data import loader
        from privcore.engine.warmup import warm_up
        assert "opacus" not in sys.modules
        before = len(loader._MEMO._items)
        from privcore.accounting import bundle
        warm_up("digits")
        assert "opacus" not in sys.modules  # corrected accounting: dp_accounting's PLD only
        # ... and not even that where the shipped calibration table answers the defaults (that it
        # does with the pinned libraries: tests/accounting/test_bundle.py)
        assert ("dp_accounting" in sys.modules) is (not bundle.covers("digits"))
        assert len(loader._MEMO._items) == before + 1
        t = warm_up("synthetic", "corrected", wait=False)  # returns at once with the import under way
        t.join()
        assert not t.is_alive() and len(loader._MEMO._items) == before + 2
        assert "dp_accounting.pld.privacy_loss_distribution" in sys.modules  # no table for synthetic data
        warm_up("digits", "paper")
        assert "opacus.accountants" in sys.modules
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
