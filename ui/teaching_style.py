"""What the Learn page's figures share: one print style, one colour per idea, the argument checks.

Used by :mod:`ui.teaching` and the views split from it (:mod:`ui.amplification`, :mod:`ui.hypothesis`).
"""

from __future__ import annotations

import plotly.graph_objects as go

from privcore import PrivacyBudget
from ui.figures import PRINT_TEMPLATE, plain_log_ticks

__all__ = ["LAPLACE", "GAUSS", "RULE_COLOURS", "RULE_STYLES", "style", "check_eps", "check_delta"]

# One colour per idea, the same in every teaching figure.
LAPLACE = "#1f77b4"
GAUSS = "#d62728"
RULE_COLOURS = {
    "basic": "#7f7f7f",
    "advanced": "#ff7f0e",
    "tight": "#2ca02c",
    "zcdp": "#1f77b4",
    "as published": "#d62728",
    "no subsampling": "#7f7f7f",
    "classic bound": "#ff7f0e",
    "RDP (Opacus)": "#1f77b4",
    "PRV (Opacus)": "#2ca02c",
}

#: One line dash and marker per rule, so that no two curves of a figure look alike in a grey printout (the
#: composition chart drew basic, advanced, zCDP and tight as solid lines with round markers). A figure that draws
#: a rule in two panels opens the second panel's markers (``symbol + "-open"``).
RULE_STYLES = {  # rule -> (dash, marker symbol)
    "basic": ("solid", "circle"),
    "advanced": ("dash", "square"),
    "tight": ("longdash", "diamond"),
    "zcdp": ("dashdot", "triangle-up"),
    "as published": ("dot", "x"),
    "no subsampling": ("dash", "circle"),
    "classic bound": ("dot", "square"),
    "RDP (Opacus)": ("solid", "triangle-up"),
    "PRV (Opacus)": ("dashdot", "diamond"),
}


def style(fig: go.Figure, title: str, height: int = 430) -> go.Figure:
    """The dashboard's print template (white, dark fonts, fixed colours whatever the Streamlit theme)."""
    fig.update_layout(template=PRINT_TEMPLATE, title=dict(text=title), height=height,
                      margin=dict(l=70, r=20, t=80, b=140),
                      legend=dict(orientation="h", yanchor="top", y=-0.24, xanchor="left", x=0.0))
    return plain_log_ticks(fig)


def check_eps(epsilon: float) -> float:
    """``epsilon`` checked as privcore checks a budget's."""
    return PrivacyBudget(float(epsilon), 0.0).epsilon


def check_delta(delta: float) -> float:
    """``delta`` checked as privcore checks a budget's."""
    return PrivacyBudget(1.0, float(delta)).delta
