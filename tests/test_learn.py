"""app_pages/learn.py (AppTest) as the browser walk-through found it on digits: the noise figure marks
the current data set's D·C, the metrics sit two to a row, and the method cards typeset their formulas."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
from apptest import PAGES, run, texts

pytestmark = pytest.mark.usefixtures("app_env")
PAGE = str(PAGES / "learn.py")
DIGITS = {"dataset": '"digits"', "repeats": "3", "epochs": "1"}


def test_section_1_uses_the_data_sets_size_and_two_metrics_a_row():
    at = run(PAGE, DIGITS).run()
    assert not at.exception, at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    notes = [a.get("text", "") for a in spec["layout"]["annotations"]]
    assert "digits: D·C = 640" in notes and not any("7840" in n or "MNIST" in n for n in notes), notes
    assert "640 for digits" in at.select_slider(key="learn_dim").help
    # Four metrics in one row were cut at 800 px: two per row, each with help.
    blocks = [b for b in at.main.children.values() if type(b).__name__ == "Block"]
    rows = [[len(c.metric) for c in b.children.values()] for b in blocks
            if all(type(c).__name__ == "Column" for c in b.children.values())
            and any(c.metric for c in b.children.values())]
    assert rows == [[1, 1], [1, 1]], rows
    assert len(at.metric) == 4 and all(m.help for m in at.metric)


def test_method_cards_typeset_formulas():
    at = run(PAGE, DIGITS).run()
    at.segmented_control(key="w:learn").set_value("5 · Method cards").run()
    assert not at.exception, at.exception
    assert len(at.latex) >= 8  # one formula per card at least, typeset
    shown = " ".join(texts(at.markdown))
    assert "sqrt(2/B)" not in shown and "chi_{2C}" not in shown
