"""ui/controls.py: typed values beside the sliders (AppTest of the Explore page; synthetic data,
2 repetitions, 1 DP-SGD epoch)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from apptest import APP, open_more_settings, run, texts

FAST = {"dataset": '"synthetic"', "repeats": "2", "epochs": "1", "eps_min": "1.0", "eps_max": "10.0"}

pytestmark = pytest.mark.usefixtures("app_env")


@pytest.mark.slow
def test_typed_values_set_the_slider_and_the_url():
    at = open_more_settings(run(APP, FAST)).run()
    assert not at.exception, at.exception
    # text boxes in the sliders' notation (number boxes 44-55 px wide at 800 px read "0.0000" for δ)
    boxes = {ti.key: ti.value for ti in at.text_input if ti.key.startswith("t:")}
    assert {"t:eps", "t:delta", "t:budget", "t:n", "t:teachers", "t:lam", "t:lr", "t:clip", "t:epochs",
            "t:batch_size"} <= set(boxes) and not [ni for ni in at.number_input if ni.key.startswith("t:")]
    assert (boxes["t:eps"], boxes["t:delta"], boxes["t:budget"], boxes["t:lam"]) == ("3", "1e-5", "10", "0.001")
    at.text_input(key="t:eps").input("8").run()
    at.text_input(key="t:budget").input("250").run()
    at.text_input(key="t:delta").input(" 2.5E-7 ").run()
    assert not at.exception, at.exception
    assert at.select_slider(key="w:eps").value == 8.0 and at.query_params["eps"] == "8.0"
    assert at.select_slider(key="w:budget").value == 250 and at.query_params["budget"] == "250"
    assert at.query_params["delta"] == "2.5e-07" and at.text_input(key="t:delta").value == "2.5e-7"
    at.select_slider(key="w:delta").set_value(1e-4).run()       # the slider rewrites the text box
    assert at.text_input(key="t:delta").value == "1e-4"
    at.text_input(key="t:delta").input("0").run()               # pure DP
    assert at.query_params["delta"] == "0.0" and at.text_input(key="t:delta").value == "0"
    assert any("B = 250" in t for t in texts(at.subheader))       # the computed setting uses it
    # moving the slider rewrites the box
    at.select_slider(key="w:eps").set_value(30.0).run()
    assert at.text_input(key="t:eps").value == "30"
    # lambda and DP-SGD's learning rate (exposed here) take typed values too
    at.text_input(key="t:lam").input("2e-4").run()
    at.text_input(key="t:lr").input("3.5").run()
    assert not at.exception, at.exception
    assert at.query_params["lam"] == "0.0002" and at.select_slider(key="w:lam").value == 2e-4
    assert at.query_params["lr"] == "3.5" and at.text_input(key="t:lam").value == "2e-4"
    at.text_input(key="t:n").input("1,000").run()               # thousands commas are read
    assert not at.exception and at.query_params["n"] == "1000" and at.text_input(key="t:n").value == "1,000"
    # "auto", as the λ slider's left end offers it (a walk-through's typed "auto" was refused as not a number)
    at.text_input(key="t:lam").input(" Auto ").run()
    assert not at.exception and not [t for t in texts(at.warning) if "ignored" in t]
    assert at.query_params["lam"] == "auto" and at.select_slider(key="w:lam").value == "auto"
    assert at.text_input(key="t:lam").value == "auto"
    at.text_input(key="t:eps").input("auto").run()              # only λ has an automatic choice
    assert any("ignored" in t and "must be a number" in t for t in texts(at.warning))


@pytest.mark.slow
def test_out_of_range_values_are_refused_with_the_range():
    at = open_more_settings(run(APP, FAST)).run()
    for typed, reason in (("0,5", "must be a number"), ("**x**", "must be a number"), ("0.5", "must be 0 or 1e-12 to 0.1, got 0.5)")):
        at.text_input(key="t:delta").input(typed).run()
        assert not at.exception, at.exception
        msgs = [t for t in texts(at.warning) if "ignored" in t]
        assert len(msgs) == 1 and msgs[0].startswith(f"δ (0 = pure ε-DP): {typed} ignored") and reason in msgs[0], msgs
        assert "delta" not in at.query_params and at.text_input(key="t:delta").value == "1e-5"  # box restored
    at.text_input(key="t:delta").input("   ").run()             # emptied: nothing changes, no message
    assert not [t for t in texts(at.warning) if "ignored" in t] and at.text_input(key="t:delta").value == "1e-5"
    at.text_input(key="t:eps").input("1e6").run()
    assert not at.exception
    msgs = [t for t in texts(at.warning) if "ignored" in t]
    assert msgs and "10,000" in msgs[0] and "1,000,000" in msgs[0]
    assert "1000000.0" not in msgs[0] and "eps must" not in msgs[0]  # plain numbers, no URL key
    assert at.query_params.get("eps") is None                   # still the default
    at.text_input(key="t:n").input("1000000").run()             # synthetic data cannot grow
    assert any("N must be at most" in t for t in texts(at.warning))
    at.text_input(key="t:budget").input("2.5").run()            # B counts answers
    assert any("must be a whole number, got 2.5" in t for t in texts(at.warning)) and "budget" not in at.query_params


_DIM_CLASSES = """
import streamlit as st
from ui import controls, state
from ui.setting import DataInfo
info = DataInfo(name="synthetic", n_train=1000, n_test=200, dim=20, classes=5)
st.write("DIM", controls.dim_slider(info), "CLASSES", controls.classes_slider(info))
for m in state.url_errors():
    st.error(m)
"""


@pytest.mark.parametrize("params, expected", [
    ({}, []),                                                      # once: "dim=null adjusted to all" on every first view
    ({"dim": "5000"}, ["URL parameter dim=5000 adjusted to all"]),   # a real adjustment is still reported
    ({"classes": "8"}, ["URL parameter classes=8 adjusted to all"]),
])
def test_dim_and_classes_sliders_report_only_real_adjustments(params, expected):

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string(_DIM_CLASSES, default_timeout=30)
    at.query_params.update(params)
    at.run()
    assert not at.exception and not at.error
    shown = texts(at.warning)
    assert len(shown) == len(expected) and all(e in w for e, w in zip(expected, shown)), shown


def test_the_classes_slider_left_at_all_stays_at_all_when_the_data_gains_a_class():
    from streamlit.testing.v1 import AppTest

    script = _DIM_CLASSES.replace("classes=5)", "classes=st.session_state.get('C', 3))")
    at = AppTest.from_string(script, default_timeout=30)
    at.run()
    assert "CLASSES `None`" in " ".join(texts(at.markdown))
    at.session_state["C"] = 4  # e.g. a fourth label declared
    at.run()
    assert "CLASSES `None`" in " ".join(texts(at.markdown)) and "classes" not in at.query_params


@pytest.mark.parametrize("value, whole, text", [
    (1e-5, False, "1e-5"), (2.5e-7, False, "2.5e-7"), (1e-4, False, "1e-4"), (1e-10, False, "1e-10"),
    (0.0, False, "0"), (0.001, False, "0.001"), (8.0, False, "8"), (3.5, False, "3.5"), (1.2345e-4, False, "1.2345e-4"),
    (1438, True, "1,438"), (16000, True, "16,000"), (None, False, ""), ("auto", False, "auto"), ("x", False, ""),
])
def test_text_boxes_show_short_exact_values(value, whole, text):
    from ui.controls import box_text, parse_typed

    assert box_text(value, whole=whole) == text
    if text and not isinstance(value, str):
        assert parse_typed(text) == float(value)  # what the box shows reads back as the stored value


def test_typed_text_reads_common_notations_and_refuses_the_rest():
    from ui.controls import parse_typed

    assert parse_typed(" 1E-5 ") == 1e-5 and parse_typed("0.00001") == 1e-5 and parse_typed("16,000") == 16000
    assert parse_typed("") is None and parse_typed("  ") is None
    for bad in ("0,5", "1,43", "abc", "1e", "5 %"):
        with pytest.raises(ValueError, match="must be a number"):
            parse_typed(bad)


def test_dim_slider_runs_from_few_dimensions_to_all():
    """Left to right the D slider grows: 5, 10, ..., then 'all' (it once started at 'all', then 5)."""

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string(_DIM_CLASSES, default_timeout=30)
    at.run()
    options = list(at.select_slider(key="w:dim").options)
    assert options[-1] == "all (20)" and options[:2] == ["5", "10"], options


_METHODS = """
import streamlit as st
from ui import controls
st.write("CHOSEN", controls.methods_select(delta={delta}))
"""


@pytest.mark.parametrize("delta, marked", [(0.0, True), (1e-5, False)])
def test_methods_chips_say_which_method_is_left_out_at_this_delta(delta, marked):
    """At delta = 0 a chosen method with no pure-DP guarantee keeps its chip (raising delta brings it
    back), labelled as left out; at delta > 0 no chip is."""

    from streamlit.testing.v1 import AppTest

    from privcore.methods import REGISTRY

    at = AppTest.from_string(_METHODS.format(delta=delta), default_timeout=30)
    at.run()
    assert not at.exception
    options = list(at.multiselect[0].options)
    needs = [m.label for m in REGISTRY.values() if not m.supports(0.0)]
    assert needs  # DP-SGD has no pure-DP guarantee
    flagged = [o for o in options if "left out" in o]
    if marked:
        assert flagged and all(any(o.startswith(label) for label in needs) for o in flagged), options
    else:
        assert not flagged, options
