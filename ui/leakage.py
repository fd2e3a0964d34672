"""Measured-leakage views: the ROC figure over the DP region, the per-method table, the sentence
that reads them, the specs of a setting and a progress/cancel runner (Streamlit only in the runner).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go

from privcore.methods import get_method

from .figures import PRINT_TEMPLATE, format_number, method_color, method_label, method_style, plain_log_ticks

__all__ = ["ATTACK_LABELS", "specs_for", "split_quick", "was_cancelled", "roc_figure", "leakage_table",
           "leakage_table_config", "LEAKAGE_HEADERS", "no_estimate_note", "describe",
           "run_with_progress", "REFERENCE_CHOICES", "AUDIT_CHOICES", "audit_help",
           "audit_caption", "pending_text", "roc_caption", "bound_crossings", "RETRAIN_WORDS", "QUICK_WORDS",
           "TRIAL_WORDS"]

ATTACK_LABELS = {
    "lira": "LiRA (offline) on training rows",
    "loss": "Loss threshold on training rows",
    "canary": "LiRA on inserted canaries (worst case)",
}
REFERENCE_CHOICES = (8, 16, 32, 64)
AUDIT_CHOICES = (32, 64, 128, 256)
#: The two groups of privcore.leakage.audit_trials_for in the same words everywhere ("train once" named both).
RETRAIN_WORDS = "methods that retrain the model for every release"
QUICK_WORDS = "methods that train once and draw fresh noise for every release"
#: What one audit release is: exactly what the claimed ε covers, so the two compare.
TRIAL_WORDS = ("Each release is one that the claimed ε covers: a model, B answers about the canary (one stream of "
               "B queries for sparse vector) or one student for the PATE student.")


def audit_help() -> str:
    """Hover help of the audit-trials control: which methods get the chosen number (the registry's
    ``trains_per_release`` ones), which get more."""
    from privcore.leakage import NON_PRIVATE, audit_trials_for
    from privcore.leakage.spec import QUICK_AUDIT_FACTOR
    from privcore.methods import REGISTRY

    retrain = ", ".join(m.label for m in REGISTRY.values() if m.trains_per_release)
    return ("Independent releases with and without the canary; half choose the threshold, half bound ε "
            f"(Clopper-Pearson, 95 %). This many for the {RETRAIN_WORDS}: {retrain}. The "
            f"{QUICK_WORDS} (and the non-private model) get {QUICK_AUDIT_FACTOR} times more, up to "
            f"{audit_trials_for(NON_PRIVATE, max(AUDIT_CHOICES)):,}. {TRIAL_WORDS}")


def audit_caption(specs: Sequence, results: Sequence | None = None) -> str:
    """The audit releases of each group of ``specs`` (those shown in ``results`` when given), for the table."""
    specs = [sp for sp in specs if results is None or sp.method in {r.method for r in results}]
    retrain = [sp for sp in specs if get_method(sp.method).trains_per_release]
    once = [sp for sp in specs if sp not in retrain]
    parts = [f"{max(sp.audit_trials for sp in once):,} releases for the {QUICK_WORDS} (and the non-private model)"] if once else []
    if retrain:
        labels = ", ".join(method_label(sp.method) for sp in retrain)
        parts.append(f"{max(sp.audit_trials for sp in retrain):,}{'' if once else ' releases'} for the {RETRAIN_WORDS} "
                     f"— {labels} —")
    return "a 95 % lower bound from " + " and ".join(parts)


def pending_text(slow: Sequence, audit: int) -> str:
    """The note while the retraining methods run: which they are and why they come later."""
    from privcore.leakage import NON_PRIVATE, audit_trials_for

    return (f"Still running: {', '.join(method_label(sp.method) for sp in slow)}, the {RETRAIN_WORDS} ({int(audit):,} "
            f"audit releases on each of the two data sets, against {audit_trials_for(NON_PRIVATE, audit):,} for the "
            f"{QUICK_WORDS}). They follow below.")


def specs_for(side, s, *, references: int = 16, audit_trials: int = 64) -> tuple[list, list[str]]:  # noqa: ANN001
    """(LeakageSpecs, notes) for the chosen methods at setting ``s`` plus the non-private reference.

    Methods without a pure-DP guarantee are left out at delta = 0, and lam = auto becomes
    privcore.knobs.LAM_AUTO_STANDIN (said in the notes).
    """
    from privcore.knobs import LAM_AUTO_STANDIN, fixed_lam
    from privcore.leakage import NON_PRIVATE, LeakageSpec, audit_trials_for

    notes: list[str] = []
    lam = fixed_lam(s.lam)
    if s.lam == "auto":
        notes.append(f"λ = auto is not used here (its private selection would split the budget): the attacks run at λ = {LAM_AUTO_STANDIN:g}.")
    methods = [m for m in s.methods if get_method(m).supports(s.delta)]
    for m in s.methods:
        if m not in methods:
            notes.append(f"{get_method(m).label} needs δ > 0: it is left out at δ = 0.")
    # N beyond the rows of the classes kept is grown by augmentation (the loader's rule)
    augment = bool(s.augment or (s.n is not None and side.info is not None and s.n > side.info.train_rows(s.classes)))
    data = side.data_spec(n=s.n, dim=s.dim, classes=s.classes, augment=augment)
    common = dict(data=data, delta=float(s.delta), budget=int(s.budget), lam=float(lam), teachers=int(s.teachers),
                  batch_size=int(s.batch_size), epochs=int(s.epochs), clip=float(s.clip), accounting=side.accounting,
                  references=int(references), device=side.device)
    specs = [LeakageSpec(method=m, epsilon=1.0 if m == NON_PRIVATE else float(s.eps),
                         audit_trials=audit_trials_for(m, audit_trials), **common) for m in (NON_PRIVATE, *methods)]
    return specs, notes


def split_quick(specs: Sequence) -> tuple[list, list]:
    """(specs of the entries that train once per setting, specs of those that train per release)."""
    slow = [sp for sp in specs if get_method(sp.method).trains_per_release]
    return [sp for sp in specs if sp not in slow], slow


def predicted_seconds(specs: Sequence) -> float | None:
    """Predicted seconds of measuring what is not cached of ``specs`` (privcore's time model, through
    :mod:`privcore.leakage.cost`), or None when it cannot say (the run then reports the problem)."""
    from privcore.engine import cost
    from privcore.engine.specs import SweepSpec
    from privcore.leakage.cost import estimate_seconds
    from privcore.leakage.run import is_cached

    if not specs:
        return 0.0
    try:
        todo = [sp for sp in specs if not is_cached(sp)]
        if not todo:
            return 0.0
        sizes = cost.data_sizes(SweepSpec(data=todo[0].data, seed=todo[0].seed))
        return float(estimate_seconds(todo, sizes))
    except (ValueError, TypeError, RuntimeError, OSError):
        return None


def approved(specs: Sequence, *, key: str, label: str) -> tuple[bool, float | None]:
    """(may run now, predicted seconds): a measurement predicted above the compute threshold waits for
    a "Compute (about N s)" click, as the sweeps do (:func:`ui.progress.compute_approved`)."""
    import streamlit as st

    from .progress import compute_approved, device_text

    sig = _signature(specs)
    if sig in st.session_state.get("_leakage_memo", {}):
        return True, None
    predicted = predicted_seconds(specs)
    device = device_text(specs[0].device) if specs else "CPU"
    return compute_approved(key, sig, label, predicted, device), predicted


def was_cancelled(specs: Sequence, key: str) -> bool:
    """Whether the user cancelled :func:`run_with_progress` for these specs under ``key``."""
    import streamlit as st

    return st.session_state.get("_cancelled", {}).get(key) == _signature(specs)


def _signature(specs: Sequence) -> str:
    return "|".join(sp.to_json() for sp in specs)


def _style(fig: go.Figure, title: str) -> go.Figure:
    # The legend goes below a plot area of 380 px (beside it, it left the plot ~125 px at 800 px wide).
    legend_px = 22 * sum(1 for t in fig.data if t.showlegend is not False)
    fig.update_layout(template=PRINT_TEMPLATE, title=dict(text=title), height=540 + legend_px,
                      legend=dict(orientation="v", yanchor="top", y=-0.19, xanchor="left", x=0.0),
                      margin=dict(l=60, r=20, t=80, b=80 + legend_px))
    return plain_log_ticks(fig)


def _attack(r, attack: str):  # noqa: ANN001, ANN202 - AttackResult | None
    try:
        return r.attack(attack)
    except KeyError:
        return None


def bound_crossings(results: Sequence, attack: str, epsilon: float, delta: float, *,
                    floor: float = 1e-4) -> tuple[list[str], tuple[int, int] | None]:
    """(labels of the private methods whose empirical ROC of ``attack`` lies above the (epsilon, delta)
    bound somewhere above ``floor``, (members, non-members) of the one with the fewest non-members).
    A crossing at FPR < 1/non-members is one member found by chance, not a measured violation."""
    from privcore.leakage import dp_region_tpr

    crossing, fewest = [], None
    for r in results:
        a = None if r.family == "baseline" else _attack(r, attack)
        if a is None:  # the baseline claims no epsilon
            continue
        fpr, tpr = np.asarray(a.roc.fpr), np.asarray(a.roc.tpr)
        if np.any((tpr > dp_region_tpr(fpr, epsilon, delta) + 1e-9) & (tpr > floor)):
            crossing.append(method_label(r.method))
        if a.roc.n_out > 0 and (fewest is None or a.roc.n_out < fewest[1]):
            fewest = (int(a.roc.n_in), int(a.roc.n_out))
    return crossing, fewest


def roc_figure(results: Sequence, attack: str, epsilon: float, delta: float, *, floor: float = 1e-4) -> go.Figure:
    """ROC curves (log-log) of ``attack`` for each result, over the region (eps, delta)-DP allows:
    TPR <= min(e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR)); the Gaussian trade-off curve
    that is exactly (eps, delta)-DP (delta > 0); chance level dotted; a dotted vertical line at one
    false positive among the fewest non-members (left of it no false-positive rate is measured)."""
    from privcore.leakage import dp_region_tpr, gaussian_mu, gaussian_tradeoff_tpr

    grid = np.logspace(math.log10(floor), 0, 200)
    fig = go.Figure()
    bound = dp_region_tpr(grid, epsilon, delta)
    fig.add_trace(go.Scatter(x=grid, y=np.maximum(bound, floor), mode="lines",
                             name=f"DP bound at ε = {format_number(epsilon)} (on the true rates)",
                             line=dict(color="rgba(120,120,120,0.9)", width=1.5),
                             fill="tozeroy", fillcolor="rgba(160,160,160,0.15)",
                             hovertemplate="FPR %{x:.2g}: DP allows TPR ≤ %{y:.3g}<extra></extra>"))
    if delta > 0:
        g = gaussian_tradeoff_tpr(grid, gaussian_mu(epsilon, delta))
        fig.add_trace(go.Scatter(x=grid, y=np.maximum(g, floor), mode="lines", name="Gaussian mechanism at (ε, δ)",
                                 line=dict(color="rgba(90,90,90,0.9)", width=1.5, dash="dash"),
                                 hovertemplate="FPR %{x:.2g}: Gaussian TPR %{y:.3g}<extra></extra>"))
    fig.add_trace(go.Scatter(x=grid, y=grid, mode="lines", name="chance (TPR = FPR)",
                             line=dict(color="#999999", width=1, dash="dot"), hoverinfo="skip"))
    fewest = bound_crossings(results, attack, epsilon, delta, floor=floor)[1]
    if fewest is not None and 1.0 / fewest[1] > floor:  # left of it: members found with no false positive
        fig.add_trace(go.Scatter(x=[1.0 / fewest[1]] * 2, y=[floor, 1.0], mode="lines", hoverinfo="skip",
                                 name=f"1 false positive in {fewest[1]:,} non-members: smallest FPR measured",
                                 line=dict(color="#555555", width=1, dash="dot")))
    for r in results:
        if (a := _attack(r, attack)) is None:
            continue
        # Each method's own dash and marker: every curve was a solid line, the PATE student's grey like the bound's.
        symbol, dash = method_style(r.method)
        fig.add_trace(go.Scatter(x=np.asarray(a.roc.fpr), y=np.maximum(np.asarray(a.roc.tpr), floor),
                                 mode="lines+markers", line_shape="hv",
                                 name=f"{method_label(r.method)} (AUC {a.roc.auc:.2f})",
                                 marker=dict(symbol=symbol, size=7, color=method_color(r.method), maxdisplayed=12),
                                 line=dict(color=method_color(r.method), width=2.5, dash=dash),
                                 hovertemplate=f"{method_label(r.method)}<br>FPR %{{x:.2g}}, TPR %{{y:.3g}}<extra></extra>"))
    fig.update_xaxes(type="log", title="False-positive rate (non-members called members)", range=[math.log10(floor), 0])
    fig.update_yaxes(type="log", title="True-positive rate (members found)", range=[math.log10(floor), 0])
    return _style(fig, f"{ATTACK_LABELS.get(attack, attack)}<br>ROC at ε = {format_number(epsilon)}, "
                       f"δ = {format_number(delta)} (log-log)")


def roc_caption(results: Sequence, attack: str, epsilon: float, delta: float, *, floor: float = 1e-4) -> str:
    """The text under :func:`roc_figure`: what the lines are and why an empirical curve may cross the
    bound (a few canaries, one found by chance) while the audit finds no leak beyond the claim."""
    text = ("Grey area: the rates (ε, δ)-DP allows any test, TPR ≤ e^ε·FPR + δ (and the symmetric bound): a "
            "limit on the true rates. Dashed grey curve: the Gaussian mechanism that is exactly (ε, δ)-DP. Dashed "
            "black: the non-private model. Curves are drawn down to FPR = 10⁻⁴; a curve at the floor found no "
            "member at that FPR.")
    crossing, fewest = bound_crossings(results, attack, epsilon, delta, floor=floor)
    if fewest is None or (1.0 / fewest[1] <= floor and not crossing):
        return text
    n_in, n_out = fewest
    text += (f" The curves are estimates from a sample ({n_in:,} members and {n_out:,} non-members"
             f"{' among the inserted canaries, over all releases,' if attack == 'canary' else ''} for the method "
             f"with the fewest), so no false-positive rate below 1/{n_out:,} ≈ {format_number(1.0 / n_out, 2)} is "
             "measured (dotted line): left of it a curve shows the members found with no false positive at all, "
             "and one member found by chance lifts it above the bound")
    verdict = ("whether a method leaked beyond its claim rests on the audit's Clopper-Pearson 95 % lower bound "
               "on ε (the table's Measured ε ≥).")
    if crossing:
        return text + f" ({', '.join(crossing)} here). That is sampling noise, not a measured violation: " + verdict
    return text + ". " + verdict[0].upper() + verdict[1:]


def _estimate_text(r) -> str:  # noqa: ANN001
    """The audit's plug-in estimate of ε, "none" where one error rate was 0 (:func:`no_estimate_note`)."""
    b = r.audit
    if b is None:
        return "–"
    # One error rate was 0 in the trials: the plug-in estimate is infinite whatever the method, so it
    # is not shown as a number (it read as 'leaks without limit' beside a claim of eps = 3).
    return "none" if math.isinf(b.estimate) else f"{b.estimate:.2f}"


def no_estimate_note(results: Sequence) -> str:
    """Why some methods have no point estimate ("Model sensitivity: no false positive in 32 trials"),
    or '' when all have one. Said below the table: in a cell it was cut off at 800 and 1,400 px."""
    out = []
    for r in results:
        b = r.audit
        if b is not None and math.isinf(b.estimate):
            which = f"no false positive in {b.n_out} trials" if b.fpr == 0 else f"no missed member in {b.n_in} trials"
            out.append(f"{method_label(r.method)}, {which}")
    return ("No point estimate of ε where an error rate was 0 in the trials that bound ε (half of each data set's "
            "releases; the other half chose the threshold): " + "; ".join(out) + ".") if out else ""


def _attack_headers() -> dict[str, tuple[str, str]]:
    out = {}
    for short, attack in (("loss", "loss threshold"), ("LiRA", "offline LiRA on training rows"),
                          ("canary", "LiRA on the inserted canaries")):
        out[f"AUC {short}"] = (f"AUC {short}", f"area under the ROC curve of the {attack} attack; 0.5 is chance")
        for fpr in ("0.1%", "1%"):
            out[f"TPR@{fpr} {short}"] = (f"TPR@{fpr} {short}", f"share of members the {attack} attack finds while "
                                                               f"wrongly flagging at most {fpr} of non-members")
    return out


#: Short headers (and their hover help) of :func:`leakage_table`'s columns.
LEAKAGE_HEADERS: dict[str, tuple[str, str]] = {
    "Accuracy": ("Accuracy (N/2)", "test accuracy of the release trained on the first random half of the rows: "
                                   "half the examples, so below Explore's accuracy at the same N"),
    "Claimed ε": ("Claimed ε", "the ε the method is calibrated to: the proven upper limit on leakage"),
    "Measured ε ≥ (95 %)": ("Measured ε ≥", "95 % lower bound on ε from the audit (Clopper-Pearson); 0: nothing "
                                            "certified, not nothing leaked"),
    "ε estimate": ("ε estimate", "plug-in estimate from the audit's observed error rates; none when one of them "
                                 "is 0 (said below the table)"),
    **_attack_headers(),
    "Seconds": ("Seconds", "time to measure this method now; 0 when it came from the cache"),
}


def leakage_table(results: Sequence):  # noqa: ANN201 - pandas DataFrame
    """One row per method: accuracy, claimed eps, audited eps lower bound and estimate, AUCs and TPR at
    low FPR; one short value per cell (a phrase in a cell was cut off), see :func:`leakage_table_config`."""
    import pandas as pd

    rows = []
    for r in results:
        row = {
            "Method": method_label(r.method),
            "Accuracy": round(r.accuracy, 3),
            "Claimed ε": "none (∞)" if math.isinf(r.epsilon) else format_number(r.epsilon),
            "Measured ε ≥ (95 %)": None if r.audit is None else round(r.audit.lower, 2),
            "ε estimate": _estimate_text(r),
        }
        attacks = [(short, a) for name, short in (("loss", "loss"), ("lira", "LiRA"), ("canary", "canary"))
                   if (a := _attack(r, name)) is not None]
        for short, a in attacks:  # every AUC first: the summary above quotes the canary's, which sat off-screen
            row[f"AUC {short}"] = round(a.roc.auc, 3)
        for short, a in attacks:
            if short != "loss":
                row[f"TPR@0.1% {short}"] = round(a.roc.tpr_at_0_1, 4)
                row[f"TPR@1% {short}"] = round(a.roc.tpr_at_1, 4)
        row["Seconds"] = 0.0 if r.cached else round(r.seconds, 1)
        rows.append(row)
    return pd.DataFrame(rows)


def leakage_table_config(columns) -> dict[str, Any]:  # noqa: ANN001
    """``column_config`` of :func:`leakage_table`: the method pinned, the measured ε with two decimals,
    short headers with hover help (:func:`ui.tables.headed_config`)."""
    from .tables import headed_config

    return headed_config(columns, LEAKAGE_HEADERS, formats={"Measured ε ≥ (95 %)": "%.2f"})


def _auc(r, attack: str) -> float:  # noqa: ANN001
    a = _attack(r, attack)
    return float("nan") if a is None else a.auc


def describe(results: Sequence, epsilon: float) -> str:
    """A plain-words reading: does anything leak beyond chance, which method leaks most, and how
    the measured epsilon compares with the claim."""
    ref = next((r for r in results if r.family == "baseline"), None)
    priv = [r for r in results if r.family != "baseline"]
    parts = []
    if ref is not None:
        text = f"Without noise the model is attacked with AUC {_auc(ref, 'lira'):.2f} on ordinary training rows"
        if not math.isnan(_auc(ref, "canary")):
            text += f" and {_auc(ref, 'canary'):.2f} on the inserted canaries"
        parts.append(text)
        if ref.audit is not None and ref.audit.lower > 0:
            parts[-1] += f", and the audit certifies ε ≥ {ref.audit.lower:.2f} for it"
    if priv:
        which = "canary" if all(not math.isnan(_auc(r, "canary")) for r in priv) else "lira"
        worst = max(priv, key=lambda r: _auc(r, which))
        over = [r for r in priv if r.audit is not None and r.audit.lower > r.epsilon]
        parts.append(f"at ε = {format_number(epsilon)} the most exposed private method is {method_label(worst.method)} "
                     f"({'canary' if which == 'canary' else 'LiRA'} AUC {_auc(worst, which):.2f})")
        if over:
            parts.append("the audit measured more leakage than claimed for " +
                         ", ".join(method_label(r.method) for r in over) + ": its calibration is unsound here (each "
                         "bound holds at 95 %: a sound method is flagged in at most one audit in 20)")
        else:
            top = max((r for r in priv if r.audit is not None), key=lambda r: r.audit.lower, default=None)
            if top is not None:  # all tied at 0: naming one of them read as if it leaked most
                parts.append("the audit found no method leaking beyond its claim (" + (
                    f"largest measured lower bound ε ≥ {top.audit.lower:.2f}, {method_label(top.method)})"
                    if round(top.audit.lower, 2) > 0 else "no method's lower bound on ε is above 0)"))
    text = "; ".join(parts) + "."
    return text[0].upper() + text[1:] + (" A lower bound of 0 means the attacks found nothing they can certify, "
                                         "not that nothing leaks; the claimed ε is the proven upper limit.")


def run_with_progress(specs: Sequence, *, key: str, label: str = "Measuring leakage",  # noqa: ANN201
                      predicted: float | None = None):
    """Run every spec (or fetch it from the cache) with one progress bar and a Cancel button.

    Returns the list of :class:`LeakageResult` or None when cancelled or failed (said inline).
    Results are memoised per session by the specs' JSON and cached on disk by privcore.
    """
    import streamlit as st

    from privcore.leakage import run_leakage
    from privcore.types import CalibrationError

    from .progress import device_text as _device_text, run_jobs

    sig = _signature(specs)
    memo = st.session_state.setdefault("_leakage_memo", {})
    if sig in memo:
        return memo[sig]
    device = _device_text(specs[0].device) if specs else "CPU"

    def run(spec, progress):  # noqa: ANN001, ANN202 - LeakageSpec -> LeakageResult
        name = method_label(spec.method)
        return run_leakage(spec, progress=lambda fraction, message: progress(fraction, f"{name}, {message}"))

    results = run_jobs(specs, run, key=key, sig=sig, label=label, device=device, what="methods",
                       predicted=predicted or None, errors=(ValueError, TypeError, RuntimeError, CalibrationError))
    if results is None:
        return None
    memo[sig] = results
    while len(memo) > 16:
        memo.pop(next(iter(memo)))
    return results
