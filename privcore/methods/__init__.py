"""The methods, one module each, gathered in one explicit registry (in the paper's order).

``REGISTRY`` holds the private methods; ``BASELINE`` is the non-private reference. Everything that
lists, labels, colours, explains or rules on methods asks these entries (``get_method`` knows
both), so a new method is its module plus one line here.

:func:`register` / :func:`unregister` are the same entry made at run time (a plug-in, or a test's
toy method): they check the method's declarations and keep ``REGISTRY``, ``ENTRIES`` and
``METHOD_NAMES`` in step. Code that lists the methods reads these names from this module when it
runs (``methods.METHOD_NAMES``), not a copy taken at import.
"""

from __future__ import annotations

from ..validation import check_choice
from .base import Method
from .card import MIN_COLOUR_DIFFERENCE, MethodCard, colour_difference
from .fields import ABSTENTION_FIELDS, ResultField, declared_result_fields, declared_scale_fields
from .forward import ForwardAccounting, NoiseInput, declared_noise_inputs
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

__all__ = ["Method", "MethodCard", "ResultField", "NoiseInput", "REGISTRY", "METHOD_NAMES", "BASELINE", "ENTRIES", "get_method",
           "methods_of_family", "method_name", "check_method_name", "register", "unregister", "check_declarations"]

REGISTRY: dict[str, Method] = {
    m.name: m
    for m in (ModelSensitivity(), LossPerturbation(), DPSGD(), PredictionSensitivity(), SubsampleAggregate(),
              ConfidentGNMax(), SparseVectorAggregate(), PateStudent(), PrivateKNN())  # beyond the paper's five
}
METHOD_NAMES: tuple[str, ...] = tuple(REGISTRY)
BASELINE: Method = NonPrivate()
#: Every entry, private methods first, in the order charts and tables list them.
ENTRIES: dict[str, Method] = {**REGISTRY, BASELINE.name: BASELINE}


def check_declarations(method: Method) -> None:
    """TypeError/ValueError naming the method and what is wrong with its declarations: a
    :class:`MethodCard`, :class:`ResultField` tuples, the abstention summary where it may abstain, each
    ``on_scale`` column among its scale fields, and no name declared unlike another method's field
    (the result rows refuse a field named like one of their core columns); its forward direction's
    :class:`NoiseInput` tuple with a ``spent_epsilon`` where it declares any."""
    name = getattr(method, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a method's name must be an identifier, got {name!r}")
    if not isinstance(getattr(type(method), "card", None), MethodCard):
        raise TypeError(f"{name} must declare card = MethodCard(...) (privcore.methods.card)")
    for attr in ("result_fields", "scale_fields"):
        declared = getattr(method, attr)
        if not isinstance(declared, tuple) or not all(isinstance(f, ResultField) for f in declared):
            raise TypeError(f"{name}.{attr} must be a tuple of ResultField, got {declared!r}")
    if method.abstains and not set(ABSTENTION_FIELDS) <= set(method.result_fields):
        raise ValueError(f"{name} may abstain: its result_fields must include ABSTENTION_FIELDS")
    scale_names = {f.name for f in method.scale_fields}
    missing = [f.name for f in method.result_fields if f.on_scale and f.name not in scale_names]
    if missing:
        raise ValueError(f"{name}: the on_scale result fields {', '.join(missing)} must be among its scale_fields")
    if method.uses_budget != ("budget" in method.uses):
        raise ValueError(f"{name}: uses_budget follows from uses (whether it lists 'budget'); do not declare it apart")
    inputs = method.noise_inputs
    if not isinstance(inputs, tuple) or not all(isinstance(i, NoiseInput) for i in inputs):
        raise TypeError(f"{name}.noise_inputs must be a tuple of NoiseInput, got {inputs!r}")
    if inputs and type(method).spent_epsilon is ForwardAccounting.spent_epsilon:
        raise ValueError(f"{name} declares noise_inputs but no spent_epsilon: the forward direction needs both "
                         "(privcore.methods.forward)")
    others = [m for m in ENTRIES.values() if m.name != name]
    declared_result_fields([*others, method])  # one name, one field (ValueError otherwise)
    declared_scale_fields([*others, method])
    declared_noise_inputs([*others, method])  # one noise name, one CLI flag
    _check_drawing(method, [m for m in others if m.name != BASELINE.name])


def _check_drawing(method: Method, others: list[Method]) -> None:
    """ValueError naming the method it clashes with unless ``method``'s chart colour differs clearly from every
    other method's (:data:`~privcore.methods.card.MIN_COLOUR_DIFFERENCE`) and its marker and dash are its own
    (charts must read in greyscale; the reference alone is dashed like ``BASELINE``)."""
    if method.name == BASELINE.name:
        return
    if method.dash == BASELINE.dash:
        raise ValueError(f"{method.name}: dash {method.dash!r} is the non-private reference's; choose another")
    for other in others:
        for what in ("marker", "dash"):
            if getattr(method, what) == getattr(other, what):
                raise ValueError(f"{method.name}: {what} {getattr(method, what)!r} is {other.name}'s already; "
                                 f"every method needs its own {what} (greyscale charts)")
        gap = colour_difference(method.colour, other.colour)
        if gap < MIN_COLOUR_DIFFERENCE:
            raise ValueError(f"{method.name}: colour {method.colour} is too close to {other.name}'s {other.colour} "
                             f"(CIE76 difference {gap:.1f}, at least {MIN_COLOUR_DIFFERENCE:g} needed)")


def register(method: Method) -> Method:
    """Add ``method`` to the registry (after the methods already there), as a line in ``REGISTRY``
    above would; ValueError if its name is taken. Returns it."""
    global METHOD_NAMES, ENTRIES
    if not isinstance(method, Method):
        raise TypeError(f"method must be a Method instance, got {type(method).__name__}")
    if method.name in ENTRIES:
        raise ValueError(f"a method called {method.name!r} is registered already")
    check_declarations(method)
    REGISTRY[method.name] = method
    entries = {**REGISTRY, BASELINE.name: BASELINE}  # the baseline stays last
    ENTRIES.clear()
    ENTRIES.update(entries)
    METHOD_NAMES = tuple(REGISTRY)
    return method


def unregister(name: str) -> None:
    """Remove a method :func:`register` added (and its parameterised variants)."""
    global METHOD_NAMES
    if name not in REGISTRY:
        raise ValueError(f"no registered method called {name!r}")
    del REGISTRY[name]
    del ENTRIES[name]
    for key in [k for k, m in _VARIANTS.items() if m.base_name == name]:
        del _VARIANTS[key]
    METHOD_NAMES = tuple(REGISTRY)


def methods_of_family(family: str) -> tuple[str, ...]:
    """Names of the registered methods of ``family`` ("training", "prediction" or "baseline")."""
    return tuple(name for name, m in ENTRIES.items() if m.family == family)


#: Parameterised instances made so far, by canonical name (instances are stateless: one per name).
_VARIANTS: dict[str, Method] = {}


def get_method(name: str) -> Method:
    """The registry entry called ``name`` (a method or the baseline), or a parameterised variant
    ``base[param=value,...]`` of a method that declares those :attr:`Method.params`; ``ValueError``
    naming the names, the parameters and the value otherwise."""
    if isinstance(name, str) and name in ENTRIES:
        return ENTRIES[name]
    if not isinstance(name, str) or "[" not in name:
        raise ValueError(f"method must be one of {', '.join(ENTRIES)}, got {name!r}")
    known = _VARIANTS.get(name)
    if known is not None:
        return known
    base, _, rest = name.partition("[")
    if base not in REGISTRY or not rest.endswith("]"):
        raise ValueError(f"method must be one of {', '.join(REGISTRY)} or base[param=value,...], got {name!r}")
    entry = REGISTRY[base]
    values: dict[str, str] = {}
    for item in filter(None, rest[:-1].split(",")):
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or key not in entry.params:
            allowed = ", ".join(entry.params) or "none"
            raise ValueError(f"{base} takes the parameters {allowed}; got {item.strip()!r} in {name!r}")
        values[key] = text.strip()
    canonical = method_name(base, **{k: _parse(entry, k, v) for k, v in values.items()})
    if canonical == base:
        return entry
    made = _VARIANTS.get(canonical)
    if made is None:
        kwargs = {**entry.param_values(), **{k: _parse(entry, k, v) for k, v in values.items()}}
        made = type(entry)(**kwargs)
        made.name = canonical  # the instance's name: its cache keys, rows and noise labels
        _VARIANTS[canonical] = made
    _VARIANTS[name] = made
    return made


def _parse(entry: Method, key: str, text: str) -> int | float:
    default = getattr(entry, key)
    try:
        return int(text) if isinstance(default, int) else float(text)
    except ValueError:
        raise ValueError(f"{entry.name} parameter {key} must be a number, got {text!r}") from None


def method_name(base: str, **params: int | float) -> str:
    """The canonical name of ``base`` with ``params``: the base name itself at the default values,
    else ``base[k=v,...]`` listing the non-default ones in declaration order."""
    entry = REGISTRY.get(base)
    if entry is None:
        raise ValueError(f"method must be one of {', '.join(REGISTRY)}, got {base!r}")
    unknown = sorted(set(params) - set(entry.params))
    if unknown:
        raise ValueError(f"{base} takes the parameters {', '.join(entry.params) or 'none'}; got {', '.join(unknown)}")
    made = type(entry)(**{**entry.param_values(), **params})  # the constructor checks each value by name
    diff = [f"{p}={getattr(made, p)!r}" for p in entry.params if getattr(made, p) != getattr(entry, p)]
    return f"{base}[{','.join(diff)}]" if diff else base


def check_method_name(name: object) -> str:
    """``name`` as a private method's canonical name (a registry name or a parameterised variant)."""
    if not isinstance(name, str) or "[" not in name:
        check_choice("method", name, tuple(REGISTRY))  # the message names the registry
        return name
    return get_method(name).name


for _entry in ENTRIES.values():  # the built-in entries meet the rules register() checks
    check_declarations(_entry)
del _entry
