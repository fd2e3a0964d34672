"""Measured leakage: membership-inference attacks on every method, beside the bound DP proves.

For the shared setting, each chosen method (and the non-private model, for contrast) is released on
random halves of the data and attacked: loss threshold, offline LiRA with K reference models, and
LiRA on inserted canaries; an audit on two neighbouring data sets gives a 95 % lower bound on ε.
"""

from __future__ import annotations

import streamlit as st

from ui import controls, display, sidebar, userdata
from ui import leakage as lk
from ui.caption import add_caption
from ui.export import export_buttons
from ui.leakage_export import leakage_rows, leakage_settings
from ui.figures import format_number
from ui.text import clip

st.title("Measured leakage beside the bound")
st.caption("What an attacker actually learns about membership, next to what differential privacy promises. "
           "Each release trains on a random half of the N rows (plus inserted canaries); the other half are the "
           "non-members. The attacker sees exactly what the method publishes: the model for private training, "
           "B noisy answers about the target for private prediction.")

side = sidebar.settings(require_data=True)
s = controls.checked_setting_panel(side, allow_augment=True)  # the N of the other pages, augmented or not


def _url_choice(name: str, options: tuple, default):  # noqa: ANN001, ANN202
    """A page-local control persisted in the URL under ``name`` (validated; bad values fall back)."""
    raw = st.query_params.get(name)
    value = default
    if raw is not None:
        try:
            cand = type(default)(raw)
        except (TypeError, ValueError):
            cand = None
        if cand in options:
            value = cand
        else:  # reported, never silently replaced
            display.show_warnings([f"URL parameter {name}={clip(raw)} ignored: must be one of "
                                   f"{', '.join(map(str, options))}"])
    return value


def _url_store(name: str, value, default) -> None:  # noqa: ANN001
    if value == default:
        if name in st.query_params:
            del st.query_params[name]
    elif st.query_params.get(name) != str(value):
        st.query_params[name] = str(value)


with st.expander("Attack settings: reference models K and audit trials", expanded=False):
    c1, c2 = st.columns(2)
    k_default = _url_choice("lk_refs", lk.REFERENCE_CHOICES, 16)
    refs = c1.select_slider("LiRA reference models K", options=list(lk.REFERENCE_CHOICES), value=k_default,
                            key="lk_refs_w", help="Non-private models the attacker trains on random halves; each "
                                                  "row is left out of about half of them (offline LiRA).")
    a_default = _url_choice("lk_audit", lk.AUDIT_CHOICES, 64)
    audit = c2.select_slider("Audit trials per data set (retraining methods)", options=list(lk.AUDIT_CHOICES),
                             value=a_default, key="lk_audit_w", help=lk.audit_help())
    _url_store("lk_refs", refs, 16)
    _url_store("lk_audit", audit, 64)

attack_options = list(lk.ATTACK_LABELS)
attack_default = _url_choice("lk_attack", tuple(attack_options), "lira")
attack = st.segmented_control("Attack", attack_options, format_func=lk.ATTACK_LABELS.get, key="lk_attack_w",
                              default=attack_default if attack_default in attack_options else "lira")
attack = attack or "lira"
_url_store("lk_attack", attack, "lira")

specs, notes = lk.specs_for(side, s, references=refs, audit_trials=audit)
display.show_warnings(notes)
quick, slow = lk.split_quick(specs)
view, pending = st.empty(), st.empty()


def show(results: list, *, final: bool) -> None:
    """The figure, the reading, the table (drawn again, in place, when the slow methods arrive)."""
    with view.container():
        fig = lk.roc_figure(results, attack, s.eps, s.delta)
        add_caption(fig, leakage_settings(specs, results, lk.ATTACK_LABELS[attack], userdata.dataset_label(side)))
        display.show_figure(fig, key="fig_leakage" if final else "fig_leakage_quick")
        st.caption(lk.roc_caption(results, attack, s.eps, s.delta))  # under the chart it explains
        st.markdown(lk.describe(results, s.eps))
        st.subheader(f"Leakage per method (ε = {format_number(s.eps)}, δ = {format_number(s.delta)}, "
                     f"B = {s.budget:,})")
        table = lk.leakage_table(results)
        st.dataframe(table, hide_index=True, width="stretch", column_config=lk.leakage_table_config(table.columns))
        st.caption(f"Each release trains on {results[0].n_train:,} rows. Measured ε: "
                   f"{lk.audit_caption(specs, results)} on each of two data sets that differ only in the label of one "
                   "out-of-distribution canary (the attacker knows both); the estimate uses the observed "
                   "error rates (none when one of them is 0, which few trials often give). TPR@x%: members found "
                   "while wrongly flagging at most x % of non-members. The loss and LiRA AUCs pool every "
                   "training row; the canary AUC only the inserted canaries. " + lk.no_estimate_note(results))
        display.show_warnings([n for r in results for n in r.notes])
        if final:
            export_buttons(fig, leakage_rows(specs, results), key="export_leakage", filename="measured_leakage")


# The methods that train once answer in seconds: draw them first, then add the ones that retrain for
# every release (lk.RETRAIN_WORDS) when they are done.
# Either part waits for a "Compute (about N s)" click when it is predicted above the threshold.
first = None
if slow:
    go, expected = lk.approved(quick, key="leakage_quick", label="Measuring leakage (quick methods)")
    if not go:
        st.stop()
    first = lk.run_with_progress(quick, key="leakage_quick", label="Measuring leakage (quick methods)",
                                 predicted=expected)
    if first is None and lk.was_cancelled(quick, "leakage_quick"):
        st.stop()
if first:
    show(first, final=False)
    pending.caption(lk.pending_text(slow, audit))
go, expected = lk.approved(specs, key="leakage", label="Measuring leakage")
if not go:
    st.stop()
results = lk.run_with_progress(specs, key="leakage", label="Measuring leakage", predicted=expected)
pending.empty()
if results is None:
    st.stop()
show(results, final=True)
