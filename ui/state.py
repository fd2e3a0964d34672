"""The whole page state <-> URL query parameters (JSON-encoded values; never pickle).

Every control of the dashboard is a :class:`Field` in :data:`FIELDS` with a default and a validator.
Its value lives in Session State under ``"v:<name>"`` (the *store*, which survives page switches),
and the widget showing it uses the key ``"w:<name>"``. The URL carries ``<name>=<json>`` for every
value that differs from its default (so a link reproduces exactly what is on screen).

Rules (see :func:`bind` and :func:`commit`):

* At the start of a run, a URL value that differs from the store was typed or pasted by the user
  (we always write the store back to the URL): it is validated and wins. Invalid values are
  dropped from the URL and reported (:func:`url_errors`), never raised.
* A missing URL key does not reset anything (Streamlit clears the URL on page switches).
* After a widget returns, its value is written to the store and to the URL (removed when default).

The pure half (:func:`encode`, :func:`decode`, :func:`to_params`, :func:`from_params`) has no
Streamlit dependency and is what the round-trip tests exercise.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from privcore.knobs import DECIMAL_TEXT
from privcore.validation import format_value

__all__ = [
    "Field", "FIELDS", "DEFAULTS", "encode", "decode", "to_params", "from_params", "bind", "commit", "get", "put",
    "url_errors", "unknown_params", "OTHER_PARAMS", "widget_key", "store_key", "current_values", "reset",
]

_V = "v:"   # store prefix
_W = "w:"   # widget prefix


@dataclass(frozen=True)
class Field:
    """One URL-persisted value: its default and how to validate/normalise a decoded JSON value.

    kind: ``float``, ``int``, ``str``, ``bool``, ``floats`` (list of floats), ``strs`` (list of
    strings), ``float_or_auto`` (a float or the string ``"auto"``), ``int_or_none``.
    """

    name: str
    default: Any
    kind: str
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    allow_zero: bool = False
    help: str = ""
    #: Extra check of a ``str`` value: returns the normalised value or raises ``ValueError``.
    validator: Callable[[Any], Any] | None = None

    def check(self, value: Any) -> Any:
        """The normalised value, or ``ValueError`` naming the parameter."""
        k = self.kind
        if value is None and self.default is None:
            return None
        if k == "float":
            return self._num(value, float)
        if k == "int":
            return self._num(value, int)
        if k == "int_or_none":
            return None if value is None else self._num(value, int)
        if k == "float_or_auto":
            return "auto" if value == "auto" else self._num(value, float)
        if k == "bool":
            if isinstance(value, bool):
                return value
            raise ValueError(f"{self.name} must be true or false, got {value!r}")
        if k == "str":
            if (self.choices is not None and isinstance(value, int) and not isinstance(value, bool)
                    and str(value) in self.choices):  # figure=3 in a hand-typed link: the choice "3"
                value = str(value)
            if not isinstance(value, str):
                raise ValueError(f"{self.name} must be a string, got {value!r}")
            if self.choices is not None and value not in self.choices:
                raise ValueError(f"{self.name} must be one of {', '.join(map(str, self.choices))}, got {value!r}")
            return self.validator(value) if self.validator is not None else value
        if k in ("floats", "strs"):
            if isinstance(value, str) and value.strip():  # methods=dpsgd,model_sensitivity typed by hand
                value = [v.strip() for v in value.split(",")]
                if any(not v for v in value):  # "1,,2" or a trailing comma: a value left out, said
                    raise ValueError(f"{self.name} must be values separated by single commas, got an empty entry")
                if k == "floats":
                    # ASCII numbers only: float() also reads "1_000" and other scripts' digits
                    if not all(DECIMAL_TEXT.fullmatch(v) for v in value):
                        raise ValueError(f"{self.name} must be numbers separated by commas or a JSON list, "
                                         f"e.g. [1.0, 10.0]")
                    value = [float(v) for v in value]
            if not isinstance(value, (list, tuple)):
                raise ValueError(f"{self.name} must be a JSON list, got {value!r}")
            if k == "strs":
                out = []
                for v in value:
                    if not isinstance(v, str) or (self.choices is not None and v not in self.choices):
                        raise ValueError(f"{self.name} entries must be among {', '.join(map(str, self.choices or ()))}, got {v!r}")
                    if v not in out:
                        out.append(v)
                return out
            return [self._num(v, float) for v in value]
        raise ValueError(f"unknown field kind {k!r}")  # pragma: no cover

    def _num(self, value: Any, typ: type) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{self.name} must be a number, got {value!r}")
        if typ is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(f"{self.name} must be a whole number, got {value!r}")
            value = int(value)
        else:
            try:
                value = float(value)
            except OverflowError:  # an integer beyond float range: not finite either
                raise ValueError(f"{self.name} must be finite, got a {len(str(value))}-digit integer") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{self.name} must be finite, got {value!r}")
        if self.allow_zero and value == 0:
            return value
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            # the range as the control states it ("0 or 1e-12 to 0.1"): "at least 1e-12" hid that 0 is allowed
            raise ValueError(f"{self.name} must be {self.range_text()}, got {format_value(value)}")
        return value

    def range_text(self) -> str:
        """The values the URL accepts, as the controls state them: "0 or 1e-12 to 0.1", "at least 1"."""
        lo = "" if self.low is None else format_value(self.low)
        hi = "" if self.high is None else format_value(self.high)
        zero = "0 or " if self.allow_zero else ""
        auto = " or auto" if self.kind == "float_or_auto" else ""
        return (f"{zero}{lo} to {hi}" if lo and hi else (f"{zero}at least {lo}" if lo else f"at most {hi}")) + auto


def _from_knob(k: Any) -> Field:
    """The URL field of a privcore knob: its URL name, the dashboard's default, the URL's clamp range."""
    if k.kind == "choices":
        return Field(k.url, list(k.choices), "strs", choices=k.choices, help=k.tooltip)
    if k.kind == "choice":
        return Field(k.url, k.first_view, "str", choices=k.choices, help=k.tooltip)
    kind = "int_or_none" if k.kind == "int" and k.first_view is None else k.kind
    return Field(k.url, k.first_view, kind, k.url_low, k.url_high, allow_zero=k.url_zero, help=k.tooltip)


def _upload_name(value: str) -> str:
    """Uploads are named ``<sha256>.csv|.npz``: anything else (a server path, ``../``) is refused."""
    stem, dot, ext = value.rpartition(".")
    if not dot or ext not in ("csv", "npz") or len(stem) != 64 or any(c not in "0123456789abcdef" for c in stem):
        raise ValueError("data_file must name an upload of this server (a 64-hex-digit name ending .csv or .npz, "
                         "set by the uploader); paths are never read")
    return value


def _preprocess_text(value: str) -> str:
    from privcore.data.preprocess import parse_preprocess

    try:
        return parse_preprocess(value).text
    except (TypeError, ValueError) as err:
        raise ValueError(f"prep: {err}") from None


def _column_name(value: str) -> str:
    if not value.strip() or len(value) > 200:
        raise ValueError(f"label_col must be a column name of 1 to 200 characters, got {len(value)} characters")
    return value.strip()


def _declared_labels(value: str) -> str:
    from privcore.data.labels import labels_text, parse_labels

    try:
        return labels_text(parse_labels(value)) or ""
    except (TypeError, ValueError) as err:
        raise ValueError(f"labels: {err}") from None


def _shipped_tag(value: str) -> str:
    if not 1 <= len(value) <= 100 or not all(c.isalnum() or c in "-_" for c in value):
        raise ValueError("deep_shipped must name a shipped Figure 7 run (letters, digits, - and _)")
    return value


#: The paper's linear-model figures, as Reproduce offers them (:func:`ui.paper.paper_figures`; a test keeps
#: the two lists equal).
PAPER_FIGURES = ("1a", "1b", "2a", "2b", "3", "4", "5a", "5b", "6a", "6b")


def _fields() -> dict[str, Field]:
    from privcore.knobs import EPSILON_RANGE, KNOBS

    knob_fields = [_from_knob(k) for k in KNOBS.values() if k.url]
    page_fields = [  # controls of one page only (not knobs of privcore)
        Field("data_file", None, "str", validator=_upload_name),  # an upload's name under cache/uploads
        Field("prep", "none", "str", validator=_preprocess_text),  # a user file's declared feature map
        Field("label_col", None, "str", validator=_column_name),  # a user CSV's label column
        Field("labels", None, "str", validator=_declared_labels),  # a user file's declared label set
        Field("tab", "epsilon", "str", choices=("epsilon", "budget", "delta", "n")),  # Explore
        Field("eps_max", EPSILON_RANGE[1], "float", 0.01, 1e4),  # the default curve's range: a sweep's
        Field("eps_min", EPSILON_RANGE[0], "float", 1e-3, 1e3),  # default epsilons (privcore.knobs.EPSILONS)
        Field("band", "sd", "str", choices=("sd", "ci95")),  # Explore: band around each curve
        Field("answered_only", False, "bool"),  # Explore: score abstaining methods on answered queries
        Field("target", 0.8, "float", 0.0, 1.0),  # Explore: the target accuracy of the inverse view
        Field("augment", False, "bool"),  # Who wins
        Field("map_eps", [0.3, 1.0, 3.0, 10.0, 30.0, 100.0], "floats", 1e-3, 1e4),
        Field("compare", True, "bool"),  # Calibrate
        Field("learn", 1, "int", 1, 5),  # Learn: the section shown (app_pages/learn.py's SECTIONS, numbered)
        # Reproduce: the figure shown (ui.paper.paper_figures' keys), the accountings compared, T
        Field("figure", PAPER_FIGURES[0], "str", choices=PAPER_FIGURES),
        Field("repro_acc", ["paper", "corrected"], "strs", choices=("paper", "corrected", "tight")),
        Field("repro_t", 64, "int", 1, 256),
        # Deep models: the shipped run shown (a tag of privcore.deep.shipped; None: the first), the data set and
        # preset trained here (privcore.deep.data.DEEP_DATASETS, privcore.deep.spec.PRESETS)
        Field("deep_shipped", None, "str", validator=_shipped_tag),
        Field("deep_data", "fashion-mnist", "str", choices=("fashion-mnist", "cifar-10")),
        Field("deep_preset", "cpu-small", "str", choices=("cpu-small", "paper")),
    ]
    return {f.name: f for f in knob_fields + page_fields}


#: Every persisted control: privcore's knobs that have a URL name (privcore/knobs.py: defaults are
#: the dashboard's first view, chosen so the first page teaches) and a few page-only controls.
FIELDS: dict[str, Field] = _fields()
DEFAULTS: dict[str, Any] = {name: f.default for name, f in FIELDS.items()}


# ---------------------------------------------------------------- pure half (no Streamlit)

#: The longest URL value decoded (the longest real one, a user file's per-feature bounds, is far shorter).
MAX_VALUE_CHARS = 100_000


def encode(value: Any) -> str:
    """Compact JSON text of a value (what goes into the URL); a string that is not itself JSON text
    goes bare (``accounting=tight``, not ``accounting=%22tight%22``): :func:`decode` reads it back as
    the same string, while ``"true"`` or ``"1"`` keep their quotes so that they stay strings."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:  # json.JSONDecodeError: not JSON, so decode() keeps it as the word it is
            if value and value == value.strip():
                return value
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def decode(name: str, text: str) -> Any:
    """Parse and validate one URL value. Bare words (``lam=auto``, ``dataset=digits``) are accepted
    as strings for convenience; anything invalid raises ``ValueError`` naming the parameter."""
    if name not in FIELDS:
        raise ValueError(f"unknown parameter {name!r}")
    if isinstance(text, str) and len(text) > MAX_VALUE_CHARS:  # no control's value is anywhere near this long
        raise ValueError(f"{name} must be at most {MAX_VALUE_CHARS:,} characters long, got {len(text):,}")
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        value = text
    except RecursionError:  # "[[[[..." a thousand deep: json gives up with RecursionError, not a ValueError
        raise ValueError(f"{name} must be a flat JSON value, got lists nested too deeply") from None
    except ValueError:  # Python's limit on integer digits (4,300): its message named neither key nor range
        f = FIELDS[name]
        what = f.range_text() if f.low is not None or f.high is not None else {
            "str": "a name or short text", "strs": "a list of names"}.get(f.kind, "a number of ordinary size")
        raise ValueError(f"{name} must be {what}, got a number of {len(text):,} digits") from None
    for part in value if isinstance(value, list) else [value]:
        if isinstance(part, str) and not _utf8(part):  # "\ud800" in JSON: no URL can carry it back
            raise ValueError(f"{name} must be text without unpaired surrogates (\\ud800-\\udfff)")
    return FIELDS[name].check(value)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _equal(a: Any, b: Any) -> bool:
    return encode(a) == encode(b)


def to_params(values: Mapping[str, Any]) -> dict[str, str]:
    """Query parameters for ``values``: every known field that differs from its default."""
    return {k: encode(v) for k, v in values.items() if k in FIELDS and not _equal(v, FIELDS[k].default)}


def from_params(params: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Decode query parameters into (values of the known fields given, error messages).

    Unknown parameters (e.g. ones other pages own) are ignored silently.
    """
    values: dict[str, Any] = {}
    errors: list[str] = []
    for k, raw in params.items():
        if k not in FIELDS:
            continue
        if isinstance(raw, (list, tuple)):
            raw = raw[-1] if raw else ""
        try:
            values[k] = decode(k, raw)
        except ValueError as err:
            from .text import clip

            errors.append(f"URL parameter {k}={clip(raw)} ignored: {clip(err, 200)}")
    return values, errors


# ---------------------------------------------------------------- Streamlit half

def store_key(name: str) -> str:
    return _V + name


def widget_key(name: str) -> str:
    return _W + name


def get(name: str) -> Any:
    """Current value of a field (store, else default), after applying a pending URL value."""
    import streamlit as st

    _apply_url(name)
    return st.session_state.get(store_key(name), FIELDS[name].default)


def put(name: str, value: Any) -> None:
    """Set a field's value programmatically (store + URL); the widget picks it up next run."""
    import streamlit as st

    value = FIELDS[name].check(value)
    st.session_state[store_key(name)] = value
    wkey = widget_key(name)
    if wkey in st.session_state:
        try:
            st.session_state[wkey] = value
        except Exception:  # noqa: BLE001 - widget already drawn this run: it syncs on the next run
            pass
    _write_url(name, value)


def url_errors() -> list[str]:
    """Messages about invalid URL values found so far in this session (cleared when read)."""
    import streamlit as st

    errs = st.session_state.get("_url_errors", [])
    st.session_state["_url_errors"] = []
    return list(errs)


#: Query parameters that are not fields here but are expected: a page's own (Measured leakage) and Streamlit's.
OTHER_PARAMS = frozenset({"lk_refs", "lk_audit", "lk_attack", "embed", "embed_options"})


def unknown_params() -> list[str]:
    """Messages for URL parameters no control reads (a typo such as ``batch=``), each removed from the
    URL once reported, so that a link never seems to set something it does not."""
    import difflib

    import streamlit as st

    from .text import clip

    out = []
    for key in list(st.query_params):
        if key in FIELDS or key in OTHER_PARAMS:
            continue
        close = difflib.get_close_matches(key, list(FIELDS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        out.append(f"URL parameter {clip(key, 40)} ignored: no setting of this dashboard has that name{hint}")
        del st.query_params[key]
    return out


def _apply_url(name: str) -> None:
    """If the URL holds a (valid) value for ``name`` that differs from the store, adopt it."""
    import streamlit as st

    raw = st.query_params.get_all(name) if name in st.query_params else []
    if not raw:
        return
    text = raw[-1]
    current = st.session_state.get(store_key(name), FIELDS[name].default)
    if text == encode(current):
        return
    # A value this session wrote itself is an echo: a rerun that the browser sent before it had applied a
    # later write (keys pressed faster than the page reruns). Adopting it threw the newer widget value away
    # and left slider, page and URL disagreeing; within a session the URL changes only by these writes.
    if text in st.session_state.get(_WRITTEN, {}).get(name, ()):
        return
    try:
        value = decode(name, text)
    except ValueError as err:
        from .text import clip

        st.session_state.setdefault("_url_errors", []).append(f"URL parameter {name}={clip(text)} ignored: {clip(err, 200)}")
        _write_url(name, current)
        return
    if _equal(value, current):
        return
    st.session_state[store_key(name)] = value
    st.session_state.pop(widget_key(name), None)  # re-seeded from the store by bind()


def _say_adjusted(name: str, given: Any, used: Any, why: str) -> None:
    """One warning per session and value: a stored (usually pasted) value this control cannot show."""
    import streamlit as st

    from .text import clip, escape_markdown

    seen = st.session_state.setdefault("_adjusted_seen", set())
    mark = (name, encode(given))
    if mark in seen:
        return
    seen.add(mark)
    st.warning(escape_markdown(f"URL parameter {name}={clip(encode(given))} adjusted to {clip(encode(used))}: {why}"))


def bind(name: str, *, normalise: Callable[[Any], Any] | None = None, explain: str | None = None,
         stored: Callable[[Any], Any] | None = None) -> str:
    """Prepare the widget key of ``name`` for this run and return it.

    Call right before creating the widget with ``key=bind(name)`` and no ``value``/``index``;
    then pass the widget's return value to :func:`commit`. ``normalise`` maps the stored value to
    one the widget accepts (e.g. snap to the slider's options); with ``explain`` a value it changes
    is reported once ("URL parameter ... adjusted to ...: <explain>"), never silently. ``stored`` maps
    a widget option back to the stored value it stands for (e.g. "all" -> None), so that a value the
    widget shows under another name is not reported as changed.
    """
    import streamlit as st

    _apply_url(name)
    wkey = widget_key(name)
    value = st.session_state.get(store_key(name), FIELDS[name].default)
    if normalise is not None:
        fixed = normalise(value)
        if explain is not None and encode(stored(fixed) if stored is not None else fixed) != encode(value):
            _say_adjusted(name, value, fixed, explain)
        value = fixed
    if wkey not in st.session_state:
        st.session_state[wkey] = value
    else:
        # Always write the value back, even unchanged: after a page switch the key still belongs to the
        # previous page's widget, and a widget with a new id only adopts values set through the API.
        current = st.session_state[wkey]
        st.session_state[wkey] = normalise(current) if normalise is not None else current
    return wkey


def commit(name: str, value: Any) -> Any:
    """Record a widget's returned value in the store and the URL; returns the normalised value."""
    import streamlit as st

    try:
        value = FIELDS[name].check(value)
    except ValueError:
        value = st.session_state.get(store_key(name), FIELDS[name].default)
    st.session_state[store_key(name)] = value
    _write_url(name, value)
    return value


#: Session key: {field: the URL texts this session wrote}, whose echoes :func:`_apply_url` does not adopt.
_WRITTEN = "_url_written"


def _write_url(name: str, value: Any) -> None:
    import streamlit as st

    is_default = _equal(value, FIELDS[name].default)
    present = name in st.query_params
    if is_default:
        if present:
            del st.query_params[name]
        return
    text = encode(value)
    st.session_state.setdefault(_WRITTEN, {}).setdefault(name, set()).add(text)
    if not present or st.query_params.get(name) != text:
        st.query_params[name] = text


def current_values(names: Iterable[str] | None = None) -> dict[str, Any]:
    """{name: value} of the given fields (all by default), as stored now."""
    return {n: get(n) for n in (names or FIELDS)}


def keep_in_url(names: Iterable[str]) -> None:
    """Write the stored values of ``names`` to the URL (defaults are left out, as everywhere): for a
    page that uses settings it draws no widget for (Who wins uses the Explore page's λ, T, N and
    DP-SGD settings), so that its link reproduces what it shows. Streamlit clears the URL on a page
    switch; without this a shared link of such a page showed maps at the default λ and T."""
    for n in names:
        _write_url(n, get(n))


def reset(names: Iterable[str] | None = None) -> None:
    """Back to defaults (store, widgets and URL) for the given fields (all by default)."""
    import streamlit as st

    for n in list(names or FIELDS):
        st.session_state.pop(store_key(n), None)
        st.session_state.pop(widget_key(n), None)
        if n in st.query_params:
            del st.query_params[n]
