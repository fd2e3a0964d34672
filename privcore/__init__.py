"""privcore: calibration, batched training and comparison of five private prediction methods.

Never imports Streamlit. Public entry points: :func:`calibrate`, :func:`run_sweep`, the value
types in :mod:`privcore.types` and the method registry in :mod:`privcore.methods`.
"""

from .calibration import calibrate, calibrate_all
from .device import resolve_device
from .methods import METHOD_NAMES, REGISTRY, get_method
from .types import ACCOUNTING_MODES, CalibrationError, NoiseScale, PrivacyBudget, Problem

__all__ = [
    "calibrate", "calibrate_all", "resolve_device", "METHOD_NAMES", "REGISTRY", "get_method",
    "ACCOUNTING_MODES", "CalibrationError", "NoiseScale", "PrivacyBudget", "Problem",
]
__version__ = "0.1.0"
