"""The five methods, one module each, gathered in one explicit registry (in the paper's order)."""

from __future__ import annotations

from .base import Method
from .dpsgd import DPSGD
from .loss_perturbation import LossPerturbation
from .model_sensitivity import ModelSensitivity
from .prediction_sensitivity import PredictionSensitivity
from .subsample_aggregate import SubsampleAggregate

__all__ = ["Method", "REGISTRY", "METHOD_NAMES", "get_method"]

REGISTRY: dict[str, Method] = {
    m.name: m
    for m in (ModelSensitivity(), LossPerturbation(), DPSGD(), PredictionSensitivity(), SubsampleAggregate())
}
METHOD_NAMES: tuple[str, ...] = tuple(REGISTRY)


def get_method(name: str) -> Method:
    """The registered method called ``name``; ``ValueError`` listing the valid names otherwise."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise ValueError(f"method must be one of {', '.join(METHOD_NAMES)}, got {name!r}")
    return REGISTRY[name]
