"""ui/forward.py: the privacy-statement picker follows the recommendation (AppTest of the function)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")

_SCRIPT = """
import streamlit as st
from privcore.types import Problem
from ui.forward import statement_buttons
problem = Problem(n=1000, dim=10, classes=2, lam=1e-3, teachers=10, budget=10)
statement_buttons(["model_sensitivity", "subsample_aggregate", "dpsgd"], problem, 3.0, 1e-5, "corrected",
                  first=st.session_state.get("winner", "model_sensitivity"))
"""


def test_the_statement_picker_follows_a_new_recommendation_and_keeps_a_hand_pick():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string(_SCRIPT, default_timeout=60).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="statement_method").value == "model_sensitivity"
    at.selectbox(key="statement_method").set_value("dpsgd").run()     # picked by hand: it stays
    at.run()
    assert at.selectbox(key="statement_method").value == "dpsgd"
    at.session_state["winner"] = "subsample_aggregate"                  # the recommendation changes
    at.run()
    assert at.selectbox(key="statement_method").value == "subsample_aggregate"
