"""privcore: calibration, batched training and comparison of five private prediction methods.

Never imports Streamlit. Public entry points: :func:`calibrate`, :func:`run_sweep`, the value
types in :mod:`privcore.types` and the method registry in :mod:`privcore.methods`.
"""

from .calibration import calibrate, calibrate_all
from .methods import METHOD_NAMES, REGISTRY, get_method
from .types import ACCOUNTING_MODES, CalibrationError, NoiseScale, PrivacyBudget, Problem

__all__ = [
    "calibrate", "calibrate_all", "resolve_device", "METHOD_NAMES", "REGISTRY", "get_method",
    "ACCOUNTING_MODES", "CalibrationError", "NoiseScale", "PrivacyBudget", "Problem",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:  # resolve_device needs torch: imported on first use, not at start-up
    if name == "resolve_device":
        from .device import resolve_device

        return resolve_device
    raise AttributeError(f"module 'privcore' has no attribute {name!r}")
