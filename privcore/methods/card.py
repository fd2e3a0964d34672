"""A method's card: how it is named, drawn and explained, apart from its mechanism.

Every method module declares one :class:`MethodCard` (``card = MethodCard(...)``) beside its
mechanism (calibrate, release, cost). Charts, tables, recommendations and the Learn page read the
card; nothing in it changes a number. The one computed line of prose, why a method wins at a
setting, is the method's :meth:`~privcore.methods.base.Method.win_reason` (it reads the setting and
the method's parameters).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..validation import fmt_value

__all__ = ["MethodCard"]


@dataclass(frozen=True)
class MethodCard:
    """Presentation of one method (plain strings; the same in every view).

    label: its name in legends and tables; short_label: for dense charts (winner maps);
    sentence_label: inside a sentence of a recommendation. colour: a fixed chart colour (Okabe-Ito
    palette, colour-blind safe); marker and dash: a Plotly marker symbol and line dash, distinct per
    method, so charts read without colour (greyscale print); the non-private reference alone is
    dashed "dash". summary: one sentence on what it does; wins_when: where it wins; assumptions:
    what its guarantee assumes. caveats: standing notes, true whatever the setting (the UI lists them
    in one collapsed note; notes about the current setting are the method's ``setting_warnings``).
    covers: what one guarantee covers, when the family's sentence does not say it (the privacy
    statement's "guarantee covers").
    """

    label: str
    short_label: str = ""
    sentence_label: str = ""
    colour: str = "#888888"
    marker: str = "circle"
    dash: str = "solid"
    summary: str = ""
    wins_when: str = ""
    assumptions: str = ""
    caveats: tuple[str, ...] = ()
    covers: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label:
            raise ValueError(f"MethodCard label must be a non-empty string, got {fmt_value(self.label)}")
        if not (isinstance(self.colour, str) and self.colour.startswith("#") and len(self.colour) in (4, 7)):
            raise ValueError(f"MethodCard colour must be a hex colour such as '#0072B2', got {fmt_value(self.colour)}")
        caveats = tuple(self.caveats) if isinstance(self.caveats, (list, tuple)) else None
        if caveats is None or not all(isinstance(c, str) for c in caveats):
            raise TypeError(f"MethodCard caveats must be a tuple of strings, got {fmt_value(self.caveats)}")
        object.__setattr__(self, "caveats", caveats)
