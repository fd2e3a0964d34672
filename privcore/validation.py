"""Parameter checks shared by every value type.

Each check raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, out of range)
with one message that names the parameter, the allowed range and the value given. Value types call
these once, at construction; nothing downstream re-checks.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any, Callable, TypeVar

__all__ = ["check_real", "check_int", "check_choice", "fmt_value", "format_value", "memoized", "epsilon_up"]

_F = TypeVar("_F", bound=Callable[..., Any])


#: Largest integer any count may take: every integer up to 2**53 is exact as a float.
MAX_EXACT_INT = 2**53


def fmt_value(value: Any) -> str:
    """Short, unambiguous rendering of a user value for error messages.

    NumPy scalars are shown as plain numbers (``3``, not ``np.int64(3)``) and long values are cut.
    """
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        try:
            value = value.item()
        except Exception:  # noqa: BLE001
            pass
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**20:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_real_number(value: Any) -> bool:
    # bool is an int subclass: True as an epsilon is almost surely a bug, so reject it.
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_real(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
) -> float:
    """Return ``value`` as a float after checking it is a real number inside the given interval.

    ``low``/``high`` bound the interval; ``*_open`` excludes the end point. NaN is always
    rejected; +inf only with ``allow_inf``.
    """
    if not _is_real_number(value):
        raise TypeError(f"{name} must be a real number, got {fmt_value(value)} ({type(value).__name__})")
    lo = "(" if low_open else "["
    hi = ")" if high_open or (high is None and not allow_inf) else "]"
    rng = f"{lo}{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}{hi}"
    try:
        v = float(value)
    except (OverflowError, ValueError):  # an int such as 10**400 has no float
        raise ValueError(f"{name} must be a finite number in {rng}, got {fmt_value(value)}") from None
    if math.isnan(v):
        raise ValueError(f"{name} must be a number in {rng}, got NaN")
    if math.isinf(v) and not (allow_inf and v > 0):
        raise ValueError(f"{name} must be a finite number in {rng}, got {fmt_value(value)}")
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError(f"{name} must be in {rng}, got {fmt_value(value)}")
    if high is not None and (v > high or (high_open and v == high)):
        raise ValueError(f"{name} must be in {rng}, got {fmt_value(value)}")
    return v


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int after checking it is a true integer in ``[low, high]``.

    Rejects bool, str, float (even 3.0: counts must be typed as counts) and NaN. ``high``
    defaults to :data:`MAX_EXACT_INT` (2**53), so every count is exact as a float.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {fmt_value(value)} ({type(value).__name__})")
    v = int(value)
    rng = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(f"{name} must be an integer in {rng}, got {fmt_value(v)}")
    if abs(v) > MAX_EXACT_INT:
        raise ValueError(f"{name} must be an integer in {rng} of at most 2**53 = {MAX_EXACT_INT}, got {fmt_value(v)}")
    return v


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """Return ``value`` after checking it is one of ``choices`` (strings)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {', '.join(choices)}, got {fmt_value(value)}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {fmt_value(value)}")
    return value


def memoized(maxsize: int) -> Callable[[_F], _F]:
    """``functools.lru_cache(maxsize, typed=True)`` for a function that checks its arguments.

    Typed, so ``True`` is never served the result memoised for ``1`` (the function's own check
    refuses it); an argument that cannot be hashed (a list) skips the memo, so that check names
    it instead of the memo failing with "unhashable type". ``cache_clear`` is kept.
    """

    def wrap(fn: _F) -> _F:
        cached = functools.lru_cache(maxsize=maxsize, typed=True)(fn)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                hash((args, tuple(kwargs.items())))
            except TypeError:
                return fn(*args, **kwargs)
            return cached(*args, **kwargs)

        call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return wrap


def format_value(v: Any) -> str:
    """A setting's number for a sentence: thousands separators, 1e-5 style for tiny values, "?" for None."""
    if v is None:
        return "?"
    if isinstance(v, str):
        return v
    try:
        v = float(v)
    except OverflowError:  # an integer beyond float range
        return f"a {len(str(abs(int(v))))}-digit number"
    if math.isinf(v):
        return "∞"
    if v == 0:
        return "0"
    if v.is_integer() and abs(v) <= 1e7:
        return f"{int(v):,}"
    if abs(v) < 1e-3:
        return f"{v:.0e}".replace("e-0", "e-")
    return f"{v:.3g}"



def epsilon_up(value: float, digits: int = 3) -> float:
    """``value`` rounded *up* to ``digits`` significant digits (3.27583 -> 3.28, 3.271 -> 3.28, 3 -> 3):
    an epsilon a guarantee spends is shown at one rounding everywhere, never below what it is.
    Non-finite and non-positive values are returned as they are."""
    from decimal import ROUND_CEILING, Decimal

    v = float(value)
    if not math.isfinite(v) or v <= 0:
        return v
    d = Decimal(repr(v))
    return float(d.quantize(Decimal(1).scaleb(d.adjusted() - digits + 1), rounding=ROUND_CEILING))
