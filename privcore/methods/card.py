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

__all__ = ["MethodCard", "colour_difference", "MIN_COLOUR_DIFFERENCE"]

#: Least CIE76 difference between two methods' line colours: sparse vector's former goldenrod, 17.8 from
#: loss perturbation's orange, could not be told apart in a walk-through.
MIN_COLOUR_DIFFERENCE = 25.0


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


def _lab(colour: str) -> tuple[float, float, float]:
    """sRGB hex (``#RRGGBB`` or ``#RGB``) to CIELAB (D65)."""
    hexes = colour[1:] if len(colour) == 7 else "".join(c * 2 for c in colour[1:])

    def lin(c: float) -> float:
        return ((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92

    r, g, b = (lin(int(hexes[i:i + 2], 16) / 255) for i in (0, 2, 4))
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(v: float) -> float:
        return v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def colour_difference(a: str, b: str) -> float:
    """The CIE76 difference of two hex colours (about 2.3 is the least a viewer notices)."""
    import math

    return math.dist(_lab(a), _lab(b))
