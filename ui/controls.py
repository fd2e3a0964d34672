"""The shared setting controls: one log-scale select slider per knob, bound to the URL state.

Labels, option grids and help texts come from :mod:`privcore.knobs`; values persist in Session
State and in the URL through :mod:`ui.state`. :func:`setting_panel` draws the Explore-style block
(ε, δ, B and methods in view, the rest in an expander) and returns a :class:`ui.setting.Setting`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Sequence

import streamlit as st

from privcore.knobs import knob
from privcore.methods import get_method

from . import state
from .figures import format_number, method_label
from .setting import DataInfo, Setting, SidebarSettings, nearest, setting_from_values, with_value
from .text import clip, escape_markdown

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator  # st itself, st.sidebar, a column, a container

__all__ = ["log_select", "epsilon_slider", "delta_slider", "budget_slider", "n_slider", "teachers_slider",
           "lam_slider", "dim_slider", "classes_slider", "dpsgd_controls", "learning_rate_slider", "typed_input", "parse_typed", "box_text", "methods_select", "current_setting",
           "setting_panel", "checked_setting_panel", "EPS_GRID"]

EPS_GRID = knob("epsilon").grid


def log_select(name: str, label: str, grid: Sequence[Any], *, container: DeltaGenerator | None = None,
               fmt: Callable[[Any], str] = format_number, help: str | None = None,  # noqa: A002 - Streamlit's name
               to_widget: Callable[[Any], Any] | None = None,
               from_widget: Callable[[Any], Any] | None = None, keep_value: bool = True, disabled: bool = False,
               typed: bool = False, to_typed: Callable[[Any], Any] | None = None,
               from_typed: Callable[[Any], Any] | None = None) -> Any:
    """A select slider over a (log-spaced) grid bound to state field ``name``; returns the value.

    ``to_widget``/``from_widget`` map between the stored value and the option shown (e.g. None <->
    "all"). With ``keep_value`` a stored value off the grid (from a URL or typed) is added to the
    options; otherwise it snaps to the nearest option. ``typed`` adds a box under the slider to type
    any value in the field's valid range (:func:`typed_input`).
    """
    where = container if container is not None else st
    to_w = to_widget or (lambda v: v)
    from_w = from_widget or (lambda v: v)
    current = to_w(state.get(name))
    options = with_value(grid, current) if keep_value else list(grid)
    wkey = state.bind(name, normalise=lambda v: nearest(options, to_w(v) if v not in options else v),
                      explain=None if keep_value else f"{label} offers {', '.join(fmt(o) for o in options)}; the "
                                                      "nearest one is used", stored=from_w)
    chosen = where.select_slider(label, options=options, key=wkey, format_func=fmt, help=help, disabled=disabled)
    value = state.commit(name, from_w(chosen))
    if typed:
        typed_input(name, label, container=where, to_typed=to_typed, from_typed=from_typed, disabled=disabled)
    return value


def _typed_key(name: str) -> str:
    return "t:" + name


def _range_text(f: state.Field) -> str:
    return f.range_text()  # the URL's message and the control's help state one range


_GROUPED = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?")  # 16,000 or 1,438.5: commas group thousands


def parse_typed(text: str) -> float | None:
    """The number typed in a text box: ``1e-5``, ``2.5E-7``, ``0.00001``, ``16,000``; None when the box
    is empty. ``ValueError`` for anything else (``0,5`` too: a comma only groups thousands)."""
    t = text.strip().replace(" ", "")
    if not t:
        return None
    if _GROUPED.fullmatch(t):
        t = t.replace(",", "")
    try:
        return float(t)
    except ValueError:
        raise ValueError("must be a number such as 8, 0.001 or 1e-5") from None


def box_text(value: Any, *, whole: bool = False) -> str:
    """A stored value as a text box shows it: whole numbers with thousands commas, tiny or huge values
    in the sliders' e-notation (``1e-5``, ``2.5e-7``), the rest as typed (``0.001``, ``3.5``); full
    precision, so an untouched box holds exactly the stored value."""
    if value is None:
        return ""
    if isinstance(value, str):  # λ = "auto" shows as typed
        return value if value == "auto" else ""
    v = float(value)
    if whole and v.is_integer():
        return f"{int(v):,}"
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        return f"{v:.12g}"
    mantissa, exponent = f"{v:.11e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def _on_typed(name: str, label: str, from_typed: Callable[[Any], Any]) -> None:
    """A value was typed: validate it against the field's range and adopt it (store, slider, URL)."""
    raw = str(st.session_state.get(_typed_key(name)) or "")
    errors = st.session_state.setdefault("_typed_errors", {})
    errors.pop(name, None)
    if not raw.strip():  # an emptied box changes nothing
        return
    f = state.FIELDS[name]
    try:
        if f.kind == "float_or_auto" and raw.strip().lower() == "auto":  # λ = auto, as the slider's left end offers
            state.put(name, f.check("auto"))
            return
        number = parse_typed(raw)
        whole = f.kind in ("int", "int_or_none")
        if whole and not float(number).is_integer():  # before from_typed, which may round (N)
            raise ValueError(f"{name} must be a whole number, got {format_number(number)}")
        value = from_typed(number)
        if whole and value is not None:
            if float(value) != int(value):
                raise ValueError(f"{name} must be a whole number, got {format_number(value)}")
            value = int(value)
        value = f.check(value)
    except ValueError as err:
        reason = str(err)  # the field's message names its URL key ("eps must be ..."): the label says which here
        reason = reason[len(name) + 1:] if reason.startswith(name + " ") else reason
        valid = "" if _range_text(f) in reason else f"; valid: {_range_text(f)}"  # a range error states it already
        errors[name] = f"{label}: {escape_markdown(clip(raw.strip(), 24))} ignored ({reason}{valid})."
        return
    state.put(name, value)


def typed_input(name: str, label: str, *, container: DeltaGenerator | None = None,
                to_typed: Callable[[Any], Any] | None = None, from_typed: Callable[[Any], Any] | None = None, disabled: bool = False) -> None:
    """A box to type field ``name`` (any value in its valid range, e.g. ε = 8, δ = 2.5e-7 or B = 250),
    kept in sync with the slider through Session State: typing sets the stored value (the slider then
    shows it); moving the slider rewrites the box. An out-of-range value is refused with the range,
    never raised.

    A text box, showing :func:`box_text` (``1e-5``, ``1,438``) and reading :func:`parse_typed`: a
    number box in a third of an 800 px page keeps 44-55 px for the digits beside its clear and step
    buttons, and showed δ = 1e-5 as "0.0000", λ = 0.001 as "0.00" and N = 1,438 as "143" (its
    format "%g" writes 0.00001 in the browser; the step buttons added 0.01 to any float)."""
    where = container if container is not None else st
    f = state.FIELDS[name]
    to_t = to_typed or (lambda v: v)
    from_t = from_typed or (lambda v: v)
    tkey = _typed_key(name)
    shown = to_t(state.get(name))
    is_int = f.kind in ("int", "int_or_none")
    st.session_state[tkey] = box_text(shown, whole=is_int)
    where.text_input(f"{label} (type a value)", key=tkey, on_change=_on_typed, args=(name, label, from_t),
                     label_visibility="collapsed", placeholder=f"type {label.split(' (')[0]}", disabled=disabled,
                     help=f"Type any value ({_range_text(f)}); 1e-5 means 0.00001.")
    message = st.session_state.get("_typed_errors", {}).pop(name, None)
    if message:
        where.warning(message)


def _knob_select(name: str, container: DeltaGenerator | None = None, **kwargs: Any) -> Any:
    """:func:`log_select` for privcore knob ``name``: its URL field, label, grid and help."""
    k = knob(name)
    kwargs.setdefault("typed", True)
    return log_select(k.url, kwargs.pop("label", k.label), kwargs.pop("grid", k.grid), container=container,
                      help=k.tooltip, **kwargs)


def epsilon_slider(container: DeltaGenerator | None = None, *, name: str = "eps", label: str | None = None) -> float:
    k = knob("epsilon")
    return log_select(name, label or k.label, k.grid, container=container, help=k.tooltip, typed=True)


def delta_slider(container: DeltaGenerator | None = None) -> float:
    return _knob_select("delta", container, fmt=lambda v: "0 (pure DP)" if v == 0 else f"{v:.0e}".replace("e-0", "e-"))


def budget_slider(container: DeltaGenerator | None = None) -> int:
    return _knob_select("budget", container)


def n_slider(info: DataInfo, container: DeltaGenerator | None = None, *, allow_augment: bool = False) -> int | None:
    """Training-set size N (None = the full training split). Beyond it only with ``allow_augment``
    (image data: deformed copies, with the caveat :func:`ui.setting.augmentation_caveat`); a typed
    N above the data size is refused for other data."""
    full = info.n_train
    grid = [v for v in knob("n").grid if v < full] + [full]
    grow = allow_augment and info.image
    if grow:
        grid += [v for v in knob("n").grid if v > full]

    def from_typed(v: Any) -> int | None:
        n = int(v)
        if n > full and not grow:
            raise ValueError(f"N must be at most {full:,} for this data set ({full:,} training examples"
                             + ("" if info.image else "; only image data can grow by augmentation") + f"), got {n:,}")
        return None if n == full else n

    return _knob_select("n", container, grid=grid,
                        to_widget=lambda v: full if v is None or (v > full and not grow) else v, from_widget=lambda v: None if v == full else int(v),
                        fmt=lambda v: f"{v:,} (all)" if v == full else f"{v:,}",
                        to_typed=lambda v: full if v is None else v, from_typed=from_typed)


def teachers_slider(container: DeltaGenerator | None = None) -> int:
    return _knob_select("teachers", container)


def lam_slider(container: DeltaGenerator | None = None) -> float | str:
    return _knob_select("lam", container, fmt=lambda v: "auto (tuned)" if v == "auto" else format_number(v))


def dim_slider(info: DataInfo, container: DeltaGenerator | None = None) -> int | None:
    grid = [d for d in knob("dim").grid if d < info.dim] + ["all"]  # left to right: fewer to all dimensions
    return _knob_select("dim", container, grid=grid, keep_value=False, typed=False,
                        to_widget=lambda v: "all" if v is None or v >= info.dim else v,
                        from_widget=lambda v: None if v == "all" else int(v),
                        fmt=lambda v: f"all ({info.dim})" if v == "all" else str(v))


def classes_slider(info: DataInfo, container: DeltaGenerator | None = None) -> int | None:
    # "all" is a value of its own (as for D): a slider left at all classes stays there when the data set's
    # C changes (declared labels, another file), instead of keeping the old C as a filter.
    grid = list(range(2, info.classes)) + ["all"]
    return _knob_select("classes", container, grid=grid, keep_value=False, typed=False,
                        to_widget=lambda v: "all" if v is None or v >= info.classes else v,
                        from_widget=lambda v: None if v == "all" else int(v),
                        fmt=lambda v: f"all ({info.classes})" if v == "all" else str(v))


def dpsgd_controls(container: DeltaGenerator | Sequence[DeltaGenerator] | None = None) -> tuple[float, int, int]:
    """(clip, epochs, batch size) of DP-SGD, in one container or in a sequence of three."""
    if isinstance(container, (list, tuple)):
        g, h, i = container
    else:
        g = h = i = container if container is not None else st
    clip = _knob_select("clip", g)
    epochs = _knob_select("epochs", h)
    batch = _knob_select("batch_size", i)
    return float(clip), int(epochs), int(batch)


def learning_rate_slider(container: DeltaGenerator | None = None) -> float:
    """DP-SGD's step size (accuracy only: the guarantee does not depend on it)."""
    return float(_knob_select("learning_rate", container))


def methods_select(container: DeltaGenerator | None = None, delta: float | None = None) -> list[str]:
    """The methods chips. At ``delta`` a method without a guarantee there (DP-SGD at delta = 0) keeps
    its chip, so that raising delta brings it back, but the chip says it is left out."""
    k = knob("methods")
    names = list(k.choices)
    where = container if container is not None else st

    def label(name: str) -> str:
        if delta is not None and not get_method(name).supports(float(delta)):
            return f"{method_label(name)} (left out: needs δ > 0)" if float(delta) == 0.0 else f"{method_label(name)} (left out at this δ)"
        return method_label(name)

    chosen = where.multiselect(k.label, names, key=state.bind(
        "methods", normalise=lambda v: [m for m in v if m in names],
        explain="methods not offered on this page are left out"), format_func=label, help=k.tooltip)
    return state.commit("methods", list(chosen))


def current_setting(*, in_url: bool = False) -> Setting:
    """The stored setting (without drawing widgets), e.g. for a page that shows no controls. With
    ``in_url`` its values are also written to the page's URL (:func:`ui.state.keep_in_url`)."""
    values = state.current_values()
    if in_url:
        state.keep_in_url(SETTING_FIELDS)
    return setting_from_values(values)


#: The stored fields a :class:`Setting` is built from (what a page using one must keep in its URL).
SETTING_FIELDS = ("eps", "delta", "budget", "n", "teachers", "lam", "dim", "classes", "clip", "epochs", "batch_size",
                  "lr", "methods", "augment")


#: Session-state key of the "More settings" expander's open state (its contents are drawn only while open).
MORE_KEY = "more_settings"


class _Undrawn:
    """A container that draws nothing: a slider "drawn" in it returns the value its key holds after
    :func:`ui.state.bind` (exactly what the slider would return untouched), a text box or a warning
    shows nothing. For the closed "More settings" expander, whose values must still be read (from
    the store and the URL) and normalised the same way as when its sliders are on screen."""

    def select_slider(self, label: str, *, key: str, **_: Any) -> Any:  # the slider's signature
        return st.session_state[key]

    def text_input(self, *_: Any, **__: Any) -> None:
        return None

    def warning(self, *_: Any, **__: Any) -> None:
        return None


def setting_panel(side: SidebarSettings, *, expanded: bool = False, show_n: bool = True,
                  allow_augment: bool = False) -> Setting:
    """Explore-style controls: ε, δ, B and methods in view; N, T, λ, D, C and DP-SGD in an expander.
    ``allow_augment``: N may exceed the real training examples (image data; see :func:`n_slider`).

    The expander's sliders are drawn only while it is open (``on_change="rerun"``: opening it reruns
    the page); closed, the same values come from the store and the URL through :class:`_Undrawn`.
    Sixteen sliders and boxes fewer on a first visit is what lets the page's widgets appear while
    it computes on a slow machine: Streamlit's running indicator re-renders every 200 ms, and a
    first render of the lazily loaded widgets that takes longer never completes until the run ends
    (the widgets stay grey placeholders; ``bench/bench_first_visit.py`` prints when they are drawn)."""
    info = side.info
    c1, c2, c3 = st.columns(3, vertical_alignment="bottom")  # inputs level when a label wraps (800 px)
    eps = epsilon_slider(c1)
    delta = delta_slider(c2)
    budget = budget_slider(c3)
    methods = methods_select(delta=delta)
    more = st.expander("More settings: N, T, λ, D, C and DP-SGD", expanded=expanded, key=MORE_KEY, on_change="rerun")
    with more:
        if more.open:
            a, b, c = st.columns(3)
            d, e, f = st.columns(3)
            g, h, i = st.columns(3)
        else:
            a = b = c = d = e = f = g = h = i = _Undrawn()
        n = n_slider(info, a, allow_augment=allow_augment) if (info is not None and show_n) else state.get("n")
        teachers = teachers_slider(b)
        lam = lam_slider(c)
        dim = dim_slider(info, d) if info is not None else state.get("dim")
        classes = classes_slider(info, e) if info is not None else state.get("classes")
        lr = learning_rate_slider(f)
        clip, epochs, batch = dpsgd_controls((g, h, i))
    return Setting(eps=float(eps), delta=float(delta), budget=int(budget), n=n, teachers=int(teachers), lam=lam,
                   dim=dim, classes=classes, clip=float(clip), epochs=int(epochs), batch_size=int(batch),
                   learning_rate=lr, methods=tuple(methods), augment=bool(state.get("augment")))


def checked_setting_panel(side: SidebarSettings, *, allow_augment: bool = False) -> Setting:
    """The setting panel, with its problems shown: errors stop the page, warnings about the setting are
    listed, the methods' standing caveats follow in one collapsed expander."""
    from .display import show_caveats, show_warnings
    from .setting import setting_caveats, setting_problems

    s = setting_panel(side, allow_augment=allow_augment)
    errors, warns = setting_problems(side, s)
    for e in errors:
        st.error(e)
    if errors:
        st.stop()
    show_warnings(warns)
    show_caveats(setting_caveats(side, s))
    return s

