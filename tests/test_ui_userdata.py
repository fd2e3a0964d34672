"""ui/userdata.py + the sidebar: a user's file with a label picker, declared preprocessing, a preview,
and clear messages for rejected URL values (never a server path)."""

from __future__ import annotations

import hashlib
import json

from streamlit.testing.v1 import AppTest

from apptest import texts
from test_preprocess import offset_csv

_SIDEBAR = """
import streamlit as st
from ui import sidebar
side = sidebar.settings()
st.write("SPEC " + (side.data_spec().preprocess if side.info else "-") + " D=" + str(side.info.dim if side.info else 0))
"""


def _upload(folder, tmp_path) -> str:
    data = offset_csv(tmp_path / "mine.csv").read_bytes()
    name = hashlib.sha256(data).hexdigest() + ".csv"
    (folder / name).write_bytes(data)
    return name


def _app(**params) -> AppTest:
    at = AppTest.from_string(_SIDEBAR, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    return at


def test_declared_bounds_with_intercept_reach_the_spec(uploads, tmp_path):
    name = _upload(uploads, tmp_path)
    at = _app(dataset='"file"', data_file=json.dumps(name), prep='"bounds:80:140,-5:5+intercept"')
    at.run()
    assert not at.exception
    shown = " ".join(texts(at.markdown))
    assert "SPEC bounds:80:140,-5:5+intercept D=3" in shown
    assert at.sidebar.radio(key="ud:mode").value == "bounds"
    assert at.sidebar.text_input(key="ud:bounds").value == "80:140, -5:5"
    assert any("Preview: 180 rows, 2 features, 3 classes" in e.label for e in at.sidebar.expander)
    assert len(at.sidebar.dataframe) == 1  # the parsed rows
    # switching to a stated norm updates the URL and the data set
    at.sidebar.radio(key="ud:mode").set_value("norm").run()
    at.sidebar.number_input(key="ud:norm").set_value(150.0).run()
    assert at.query_params["prep"] in ("norm:150+intercept", ["norm:150+intercept"])  # a bare word in the URL
    assert "SPEC norm:150+intercept D=3" in " ".join(texts(at.markdown))


def test_unreadable_bounds_keep_the_last_valid_choice(uploads, tmp_path):
    name = _upload(uploads, tmp_path)
    at = _app(dataset='"file"', data_file=json.dumps(name), prep='"bounds:-1:1"')
    at.run()
    at.sidebar.text_input(key="ud:bounds").set_value("5:1").run()
    assert any("low < high" in e for e in texts(at.sidebar.error))
    assert "SPEC bounds:-1:1 D=2" in " ".join(texts(at.markdown))


def test_rejected_url_values_say_what_was_ignored_and_never_read_a_path(uploads, tmp_path):
    at = _app(dataset='"file"', data_file='"/etc/passwd"', prep='"zscore"', eps='"lots"')
    at.run()
    assert not at.exception
    warnings = texts(at.warning)
    assert any("data_file" in w and "ignored" in w and "paths are never read" in w for w in warnings), warnings
    assert any("prep" in w and "ignored" in w for w in warnings), warnings
    assert any(w.startswith("URL parameter eps=") for w in warnings), warnings
    assert sum("URL parameter" in w for w in warnings) == 3  # each once
    assert not any(str(tmp_path) in w for w in warnings + texts(at.error))


def test_a_missing_upload_is_reported(uploads):
    at = _app(dataset='"file"', data_file=json.dumps("a" * 64 + ".csv"))
    at.run()
    assert any("not on this server" in w for w in texts(at.warning))
    assert "data_file" not in at.query_params


def test_delete_removes_the_upload_and_its_choices(uploads, tmp_path):
    name = _upload(uploads, tmp_path)
    at = _app(dataset='"file"', data_file=json.dumps(name), prep='"norm:150+intercept"', label_col='"label"')
    at.run()
    at.sidebar.button(key="delete_upload").click().run()
    assert not at.exception
    assert not (uploads / name).exists()
    for key in ("data_file", "prep", "label_col"):
        assert key not in at.query_params
    # the first step of using one's own data, stated as such (a red error box read as a failure)
    assert any("Upload a CSV or NPZ file" in e for e in texts(at.info)) and not at.error, texts(at.error)


def test_a_file_without_a_label_column_points_to_the_picker_and_hides_the_server_name(uploads, tmp_path):
    data = b"height,weight,species\n" + b"1.0,2.0,cat\n2.0,1.0,dog\n" * 20
    name = hashlib.sha256(data).hexdigest() + ".csv"
    (uploads / name).write_bytes(data)
    at = _app(dataset='"file"', data_file=json.dumps(name))
    at.run()
    assert not at.exception
    errors = texts(at.error)
    assert errors, "no message for a file without a label column"
    for e in errors:
        assert name not in e and name[:16] not in e, e                 # never the server's content-hash name
        assert "'file'" not in e and "data_file" not in e, e            # no code names
        assert '"Label column" in the sidebar' in e, e                  # where to fix it
        assert "'species'" in e, e                                      # the header is quoted
    # choosing the column there loads the file
    at.sidebar.selectbox(key="ud:label").set_value("species").run()
    assert not at.error, texts(at.error)
    assert "D=2" in " ".join(texts(at.markdown))


_LABELS = """
import streamlit as st
from ui import sidebar
side = sidebar.settings()
st.write("LABELS " + str(side.data_spec().labels if side.info else "-") + " C=" + str(side.info.classes if side.info else 0))
"""


def test_declared_labels_reach_the_spec_and_the_url_and_a_bad_entry_keeps_the_last(uploads, tmp_path):
    name = _upload(uploads, tmp_path)  # labels a, b, c
    at = AppTest.from_string(_LABELS, default_timeout=120)
    at.query_params["dataset"], at.query_params["data_file"] = '"file"', json.dumps(name)
    at.run()
    assert not at.exception
    assert "LABELS None C=3" in " ".join(texts(at.markdown))  # read off the file (labelled in the notes)
    at.sidebar.text_input(key="ud:labels").set_value("c, b, a, d").run()
    assert "LABELS c,b,a,d C=4" in " ".join(texts(at.markdown))  # a declared class may have no rows
    assert at.query_params["labels"] in ("c,b,a,d", ["c,b,a,d"])
    at.sidebar.text_input(key="ud:labels").set_value("a,,b").run()
    assert any("empty label" in e and "Still using: c,b,a,d" in e for e in texts(at.sidebar.error))
    assert "LABELS c,b,a,d C=4" in " ".join(texts(at.markdown))
    at.sidebar.text_input(key="ud:labels").set_value("a, b").run()  # the file holds 'c' too: refused, by name
    assert any("not among the declared labels: 'c'" in e for e in texts(at.error))
    assert not at.exception


def test_declared_labels_from_the_url(uploads, tmp_path):
    name = _upload(uploads, tmp_path)
    at = AppTest.from_string(_LABELS, default_timeout=120)
    at.query_params.update(dataset='"file"', data_file=json.dumps(name), labels='"a,b,c,z"')
    at.run()
    assert "LABELS a,b,c,z C=4" in " ".join(texts(at.markdown))
    assert at.sidebar.text_input(key="ud:labels").value == "a,b,c,z"


_CAVEATS = """
import streamlit as st
from ui import controls, setting, sidebar
side = sidebar.settings()
s = controls.current_setting()
for c in setting.data_caveats(side, s):
    st.write("CAVEAT " + c)
"""


def test_labels_read_off_the_file_are_a_caveat_on_the_page_and_in_the_statement(uploads, tmp_path):
    """A walk-through found the privacy statement of an upload silent about its labels read off the file: the
    page's caveats (which reach the statement as a step not covered) say so, and a declared label set does not."""
    from privcore.statement import privacy_statement
    from privcore.types import Problem

    name = _upload(uploads, tmp_path)
    at = AppTest.from_string(_CAVEATS, default_timeout=120)
    at.query_params.update(dataset='"file"', data_file=json.dumps(name))
    at.run()
    caveats = [t[len("CAVEAT "):] for t in texts(at.markdown) if t.startswith("CAVEAT ")]
    said = [c for c in caveats if "label set was read off your file" in c]
    assert said and "/" not in said[0], caveats  # no server path
    statement = privacy_statement("model_sensitivity", 1.0, 1e-5, Problem(n=100, dim=2, classes=3), "corrected",
                                  preprocessing=caveats)
    assert any(not p["covered"] and "read off your file" in p["step"] for p in statement["preprocessing"]), statement
    declared = AppTest.from_string(_CAVEATS, default_timeout=120)
    declared.query_params.update(dataset='"file"', data_file=json.dumps(name), labels='"a,b,c"')
    declared.run()
    assert not any("read off your file" in t for t in texts(declared.markdown))
