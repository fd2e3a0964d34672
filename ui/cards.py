"""The Learn page's method cards: one per registered method, from its class attributes and each accounting
mode's calibration formula (typeset by :func:`ui.formula.display_latex` where it reads cleanly).

Part of the Learn page's figures (:mod:`ui.teaching`, which re-exports it).
"""

from __future__ import annotations

from typing import Any, Sequence

from privcore import ACCOUNTING_MODES, REGISTRY, CalibrationError, PrivacyBudget, Problem, calibrate
from ui.figures import METHOD_COLORS
from ui.formula import display_latex

__all__ = ["method_cards", "method_card_markdown", "method_card_blocks"]


# --------------------------------------------------------------------------------------------
# 5. Method cards
# --------------------------------------------------------------------------------------------


def _scale_text(scale: Any) -> str:
    parts = []
    for key, fmt in (("sigma", "σ = {:.4g}"), ("beta", "β = {:.4g}"), ("noise_multiplier", "noise multiplier = {:.4g}"),
                     ("rho", "ρ = {:.4g}"), ("per_query_epsilon", "per-query ε = {:.4g}")):
        value = getattr(scale, key, None)
        if value is not None:
            parts.append(fmt.format(value))
    return ", ".join(parts)


def method_cards(epsilon: float, delta: float, problem: Problem | None = None,
                 accountings: Sequence[str] = ACCOUNTING_MODES) -> list[dict[str, Any]]:
    """One card per registered method: class attributes plus each accounting mode's calibration.

    Each card: name, label, family, summary, assumptions, wins_when, uses_budget and
    ``calibrations`` (one dict per mode: accounting, formula, noise, values, notes, error).
    Calibration is instant except DP-SGD (an accountant bisection, well under a second).
    """
    budget = PrivacyBudget(float(epsilon), float(delta))
    pb = problem if problem is not None else Problem()
    cards = []
    for name, m in REGISTRY.items():
        cals = []
        for acc in accountings:
            entry: dict[str, Any] = {"accounting": acc, "formula": "", "noise": "", "values": "", "notes": [], "error": ""}
            try:
                scale = calibrate(name, budget, pb, acc)
                entry.update(formula=scale.formula, noise=scale.noise, values=_scale_text(scale), notes=list(scale.notes))
            except CalibrationError as err:
                entry["error"] = str(err)
            cals.append(entry)
        cards.append({"name": name, "label": m.label, "color": METHOD_COLORS.get(name, "#888888"), "family": m.family, "summary": m.summary,
                      "assumptions": m.assumptions, "wins_when": m.wins_when, "uses_budget": m.uses_budget,
                      "uses": list(m.uses), "supports_pure": m.supports_pure, "calibrations": cals})
    return cards


def method_card_markdown(card: dict[str, Any]) -> str:
    """Markdown for one card from :func:`method_cards` (formulas in code spans, one line per mode)."""
    family = ("private training: the model is private, any number of predictions" if card["family"] == "training"
              else "private prediction: the guarantee covers B predictions only")
    lines = [f"**{card['label']}** (`{card['name']}`) · *{family}*", "",
             card["summary"], "",
             f"- **Assumptions:** {card['assumptions']}",
             f"- **Wins when:** {card['wins_when']}",
             "- **Calibration at the chosen (ε, δ):**"]
    for cal in card["calibrations"]:
        if cal["error"]:
            lines.append(f"    - `{cal['accounting']}`: not available: {cal['error']}")
            continue
        text = f"    - `{cal['accounting']}`: `{cal['formula']}`"
        if cal["values"]:
            text += f" → {cal['values']}"
        lines.append(text)
        for note in cal["notes"]:
            lines.append(f"        - *{note}*")
    return "\n".join(lines)


def method_card_blocks(card: dict[str, Any]) -> list[tuple[str, str]]:
    """One card from :func:`method_cards` as ``(kind, text)`` blocks for the page to draw in order,
    kind in ``markdown``, ``latex``, ``text``, ``caption`` (the Streamlit call of that name).

    Formulas are typeset with :func:`ui.formula.display_latex`, as Explore's and Calibrate's are
    (:func:`ui.display.show_formulas`); one it cannot read safely stays plain text, never half-rendered
    (the cards showed raw ASCII: ``sqrt(2/B)``, ``lam``, ``chi_{2C}``).
    """
    family = ("private training: the model is private, any number of predictions" if card["family"] == "training"
              else "private prediction: the guarantee covers B predictions only")
    blocks = [("markdown", "\n".join([f"**{card['label']}** (`{card['name']}`) · *{family}*", "", card["summary"], "",
                                       f"- **Assumptions:** {card['assumptions']}",
                                       f"- **Wins when:** {card['wins_when']}", "",
                                       "**Calibration at the chosen (ε, δ):**"]))]
    for cal in card["calibrations"]:
        if cal["error"]:
            blocks.append(("markdown", f"`{cal['accounting']}`: not available: {cal['error']}"))
            continue
        blocks.append(("markdown", f"`{cal['accounting']}`" + (f" → {cal['values']}" if cal["values"] else "")))
        if cal["formula"]:
            latex = display_latex(cal["formula"])
            blocks.append(("latex", latex) if latex else ("text", cal["formula"]))
        blocks.extend(("caption", note) for note in cal["notes"])
    return blocks
