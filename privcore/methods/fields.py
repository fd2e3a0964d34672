"""A method's own outputs: the numbers it adds to a result row or a noise scale, declared where it lives.

A method module declares them (:attr:`Method.result_fields` for a result row's extra columns,
:attr:`Method.scale_fields` for its calibration's extra numbers on :class:`~privcore.types.NoiseScale`),
and the cache's checks, the rows, the CLI, the exports and the tables read the declarations: a new
method adds its columns without editing any of them. Fields several methods share are declared once
here (the abstention summary of every method that may abstain; the vote threshold of the methods that
test before answering).

:func:`declared_result_fields` / :func:`declared_scale_fields` gather the registry's declarations in
registry order, each name once; two methods declaring one name must declare the same field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from ..validation import fmt_value

__all__ = ["ResultField", "THRESHOLD", "TEST_NOISE", "CAP", "ANSWERED_FRACTION", "ACCURACY_ANSWERED",
           "ACCURACY_ANSWERED_STD", "ABSTENTION_FIELDS", "declared_result_fields", "declared_scale_fields",
           "check_field_value"]


@dataclass(frozen=True)
class ResultField:
    """One extra number of a method: a result row's column or a noise scale's entry.

    name: the column / key (a Python identifier; the same in rows, the cache and every export).
    label: the dashboard table's full column name; short: its short header (at most 11 characters,
    so the noise table fits a 1,400 px page); help: one line, the header's hover text and legend.
    high: the largest allowed value (1.0 for shares and accuracies), None for any finite number >= 0;
    every value is a finite number >= 0 or None (does not apply). integer: a count. percent: shown
    as a percentage. on_scale: a result column copied from the calibrated noise scale (the method
    also lists it in :attr:`Method.scale_fields`) rather than measured by the evaluation. lead: shown
    right after the accuracy (a share the accuracy cannot be read without). table: a column of the
    dashboard's noise table (every field is a column of rows, the cache, the CLI and the exports).
    """

    name: str
    label: str
    short: str
    help: str
    high: float | None = None
    integer: bool = False
    percent: bool = False
    on_scale: bool = False
    lead: bool = False
    table: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"ResultField name must be a Python identifier, got {fmt_value(self.name)}")
        for attr in ("label", "short", "help"):
            if not isinstance(getattr(self, attr), str) or not getattr(self, attr):
                raise ValueError(f"ResultField {self.name}: {attr} must be a non-empty string, got "
                                 f"{fmt_value(getattr(self, attr))}")
        if len(self.short) > 11:
            raise ValueError(f"ResultField {self.name}: short must be at most 11 characters, got {self.short!r}")
        if self.high is not None and not (isinstance(self.high, (int, float)) and self.high > 0):
            raise ValueError(f"ResultField {self.name}: high must be a number > 0 or None, got {fmt_value(self.high)}")

    def check(self, value: Any) -> str | None:
        """None when ``value`` may be stored in this field (None, or a finite number in range), else why not."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{self.name} is not a number"
        try:
            v = float(value)
        except OverflowError:  # a JSON integer of hundreds of digits
            return f"{self.name} is not a finite number"
        if not math.isfinite(v) or v < 0 or (self.high is not None and v > self.high):
            top = f"in [0, {self.high:g}]" if self.high is not None else ">= 0"
            return f"{self.name} is not a finite number {top}"
        if self.integer and v != int(v):
            return f"{self.name} is not a whole number"
        return None


def check_field_value(field: ResultField, value: Any) -> Any:
    """``value`` as stored (int for a count, float otherwise, None kept); ValueError naming the field."""
    problem = field.check(value)
    if problem:
        raise ValueError(f"{problem}, got {fmt_value(value)}")
    if value is None:
        return None
    return int(value) if field.integer else float(value)


# Shared declarations (methods list these objects, so one name has one meaning).

#: Methods that test before answering (Confident-GNMax, sparse vector, Private-kNN): the test's threshold.
THRESHOLD = ResultField("threshold", "Threshold", "Thresh.", "vote threshold of the methods that may abstain",
                        on_scale=True)
#: The scale of the test's noise (Gaussian std, or Laplace scale for sparse vector) and the cap on paid
#: answers per stream of B queries (sparse vector): calibration outputs, not result columns.
TEST_NOISE = ResultField("test_noise", "Test noise", "σ₁", "scale of the noise of the test before answering")
CAP = ResultField("cap", "Cap on paid answers", "c", "the most unstable queries a stream of B pays for", integer=True)

#: Methods that may abstain (:attr:`Method.abstains`): the share of queries answered and the accuracy
#: among them (``accuracy_mean`` counts abstentions as wrong), with its spread over the repetitions.
ANSWERED_FRACTION = ResultField("answered_fraction", "Answered", "Answ.",
                                "share of queries answered (abstentions count as wrong)", high=1.0, percent=True,
                                lead=True)
ACCURACY_ANSWERED = ResultField("accuracy_answered", "Accuracy among answered", "Acc. answ.",
                                "accuracy among the queries answered", high=1.0, table=False)
ACCURACY_ANSWERED_STD = ResultField("accuracy_answered_std", "Accuracy among answered (std)", "± answ.",
                                    "spread of the accuracy among answered queries over the repetitions", high=1.0,
                                    table=False)
ABSTENTION_FIELDS: tuple[ResultField, ...] = (ANSWERED_FRACTION, ACCURACY_ANSWERED, ACCURACY_ANSWERED_STD)


def _gather(methods: Iterable[Any], attr: str) -> tuple[ResultField, ...]:
    seen: dict[str, ResultField] = {}
    for m in methods:
        for f in getattr(m, attr):
            known = seen.setdefault(f.name, f)
            if known != f:
                raise ValueError(f"{m.name} declares {attr} {f.name!r} unlike an earlier method: declare one "
                                 "ResultField and share it (privcore.methods.fields)")
    return tuple(seen.values())


#: The last gathering of the registry's declarations per attribute: (the entries' tuples, the result).
#: Rows read the columns per cell, so the registry's answer is kept while its entries' declarations are
#: the same objects (a method registered, removed or patched since makes a new gathering).
_LAST: dict[str, tuple[list[tuple[ResultField, ...]], tuple[ResultField, ...]]] = {}


def _registry_gather(attr: str) -> tuple[ResultField, ...]:
    from . import ENTRIES

    now = [getattr(m, attr) for m in ENTRIES.values()]
    last = _LAST.get(attr)
    if last is not None and len(last[0]) == len(now) and all(a is b for a, b in zip(last[0], now)):
        return last[1]
    out = _gather(ENTRIES.values(), attr)
    _LAST[attr] = (now, out)
    return out


def declared_result_fields(methods: Iterable[Any] | None = None) -> tuple[ResultField, ...]:
    """Every extra result column of ``methods`` (default: the registry's entries, private methods first),
    in registry order, each once."""
    return _registry_gather("result_fields") if methods is None else _gather(methods, "result_fields")


def declared_scale_fields(methods: Iterable[Any] | None = None) -> tuple[ResultField, ...]:
    """Every extra noise-scale entry of ``methods`` (default: the registry's), in registry order, each once."""
    return _registry_gather("scale_fields") if methods is None else _gather(methods, "scale_fields")
