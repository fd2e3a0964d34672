"""The methods, one module each, gathered in one explicit registry (in the paper's order).

``REGISTRY`` holds the private methods; ``BASELINE`` is the non-private reference. Everything that
lists, labels, colours, explains or rules on methods asks these entries (``get_method`` knows
both), so a new method is its module plus one line here.
"""

from __future__ import annotations

from .base import Method
from .confident_gnmax import ConfidentGNMax
from .dpsgd import DPSGD
from .loss_perturbation import LossPerturbation
from .model_sensitivity import ModelSensitivity
from .non_private import NonPrivate
from .pate_student import PateStudent
from .prediction_sensitivity import PredictionSensitivity
from .private_knn import PrivateKNN
from .sparse_vector import SparseVectorAggregate
from .subsample_aggregate import SubsampleAggregate

__all__ = ["Method", "REGISTRY", "METHOD_NAMES", "BASELINE", "ENTRIES", "get_method", "methods_of_family"]

REGISTRY: dict[str, Method] = {
    m.name: m
    for m in (ModelSensitivity(), LossPerturbation(), DPSGD(), PredictionSensitivity(), SubsampleAggregate(),
              ConfidentGNMax(), SparseVectorAggregate(), PateStudent(), PrivateKNN())  # beyond the paper's five
}
METHOD_NAMES: tuple[str, ...] = tuple(REGISTRY)
BASELINE: Method = NonPrivate()
#: Every entry, private methods first, in the order charts and tables list them.
ENTRIES: dict[str, Method] = {**REGISTRY, BASELINE.name: BASELINE}


def methods_of_family(family: str) -> tuple[str, ...]:
    """Names of the registered methods of ``family`` ("training", "prediction" or "baseline")."""
    return tuple(name for name, m in ENTRIES.items() if m.family == family)


def get_method(name: str) -> Method:
    """The registry entry called ``name`` (a method or the baseline); ``ValueError`` listing the names otherwise."""
    if not isinstance(name, str) or name not in ENTRIES:
        raise ValueError(f"method must be one of {', '.join(ENTRIES)}, got {name!r}")
    return ENTRIES[name]
