"""Measured leakage beside the bound: membership-inference attacks on every method.

``run_leakage(LeakageSpec(method=..., epsilon=..., ...))`` releases what the method releases on
neighbouring data sets and runs the loss-threshold attack (Yeom et al. 2018), offline LiRA
(Carlini et al. 2022) and a canary (worst-case) attack, plus an audit with an empirical epsilon
lower bound (Clopper-Pearson). No Streamlit here.
"""

from __future__ import annotations

from .spec import ATTACKS, NON_PRIVATE, TARGETS, AttackResult, LeakageResult, LeakageSpec, audit_trials_for
from .stats import (EpsilonBound, Roc, auc, clopper_pearson, dp_region_tpr, epsilon_from_rates, epsilon_lower_bound,
                    gaussian_mu, gaussian_tradeoff_tpr, roc, tpr_at_fpr)

__all__ = ["run_leakage", "LeakageCancelled", "observe", "LeakageSpec", "LeakageResult", "AttackResult", "ATTACKS",
           "NON_PRIVATE", "TARGETS", "audit_trials_for", "EpsilonBound", "Roc", "roc", "auc", "tpr_at_fpr", "clopper_pearson",
           "epsilon_from_rates", "epsilon_lower_bound", "dp_region_tpr", "gaussian_mu", "gaussian_tradeoff_tpr"]


def __getattr__(name: str) -> object:  # the runner needs torch: imported on first use, so the CLI's --help stays light
    if name in ("run_leakage", "LeakageCancelled", "observe"):
        from . import run

        return getattr(run, name)
    raise AttributeError(f"module 'privcore.leakage' has no attribute {name!r}")
