"""The one shared sidebar, the shared setting controls, the progress runner and inline messages.

Typical page::

    import streamlit as st
    from ui import widgets
    side = widgets.sidebar(require_data=True)   # same sidebar on every page; stops if the data fail
    s = widgets.setting_panel(side)             # epsilon, delta, B, N, T, lambda, D, C, DP-SGD, methods
    spec = widgets.spec_or_error(side, s, epsilons=(s.eps,))   # SweepSpec, or None + st.error
    res = widgets.run_with_progress(spec, key="point") if spec else None
    widgets.show_warnings(res.warnings)

Every control persists in Session State and in the URL through :mod:`ui.state`.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import streamlit as st

from . import state
from .figures import format_number, method_label
from privcore.methods import get_method
from .text import escape_markdown

__all__ = [
    "SidebarSettings", "Setting", "DataInfo", "augmentation_caveat", "sidebar", "setting_panel", "log_select",
    "epsilon_slider", "delta_slider", "budget_slider", "n_slider", "n_options", "checked_n", "teachers_slider", "lam_slider", "dim_slider",
    "classes_slider", "dpsgd_controls", "methods_select", "make_spec", "explore_specs", "spec_or_error",
    "setting_problems", "quick_part", "was_cancelled", "run_with_progress", "show_warnings", "show_error", "show_figure", "data_info",
    "build_data_info", "EPS_GRID", "DELTA_GRID", "BUDGET_GRID", "NEIGHBOURS_NOTE", "curve_epsilons",
    "current_setting",
]

NEIGHBOURS_NOTE = ("Neighbouring datasets differ by replacing one example; λ is the average-form L2 weight, "
                   "same meaning for every method.")

EPS_GRID = (0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 50.0, 100.0, 200.0,
            300.0, 500.0, 1000.0)
DELTA_GRID = (0.0, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
BUDGET_GRID = (1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 300, 500, 1000, 2000, 5000, 10000)
N_GRID = (100, 200, 300, 500, 1000, 1500, 2000, 3000, 4000, 6000, 8000, 10000, 20000, 40000, 60000)
T_GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
LAM_GRID = ("auto", 1e-6, 1e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.5, 1.0)
DIM_GRID = (5, 10, 20, 30, 50, 100, 200, 300, 500)
CLIP_GRID = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
EPOCH_GRID = (1, 2, 3, 5, 10, 20, 30, 50)
BATCH_GRID = (16, 32, 64, 128, 256, 512, 1024, 2048)
DATASET_LABELS = {
    "mnist-5k": "MNIST 5k (bundled, 4,000 train)",
    "digits": "Digits 8x8 (scikit-learn)",
    "synthetic": "Synthetic (10-class Gaussian mixture)",
    "mnist": "MNIST full (downloaded once)",
    "file": "Your file (CSV/NPZ upload)",
}


# ---------------------------------------------------------------- data information

@dataclass(frozen=True)
class DataInfo:
    """What the controls need to know about the selected data set (full training split)."""

    name: str
    n_train: int
    n_test: int
    dim: int
    classes: int
    notes: tuple[str, ...] = ()
    image: bool = False


def build_data_info(name: str, data_file: str | None = None) -> DataInfo:
    """Sizes of a data set, uncached and without Streamlit (see :func:`data_info`)."""
    from privcore.data import load_dataset

    ds = load_dataset(name, data_file=data_file)
    return DataInfo(name, int(ds.n), int(ds.x_test.shape[0]), int(ds.dim), int(ds.classes), tuple(ds.notes),
                    name in ("mnist-5k", "mnist", "digits"))


@st.cache_resource(show_spinner="Loading the data set...", max_entries=16)
def _data_info(name: str, data_file: str | None, mtime: float | None) -> DataInfo:
    return build_data_info(name, data_file)


def data_info(name: str, data_file: str | None = None) -> DataInfo:
    """Sizes of a data set (loaded once per process). Raises the loader's error on failure."""
    mtime = os.path.getmtime(data_file) if data_file and os.path.exists(data_file) else None
    return _data_info(name, data_file, mtime)


# ---------------------------------------------------------------- sidebar

@dataclass(frozen=True)
class SidebarSettings:
    """The shared sidebar's choices. ``info`` is None (and ``error`` set) when the data failed to load."""

    dataset: str
    data_file: str | None
    repeats: int
    accounting: str
    device: str
    info: DataInfo | None
    error: str | None = None

    def data_spec(self, *, n: int | None = None, dim: int | None = None, classes: int | None = None,
                  augment: bool = False):  # noqa: ANN201 - privcore DataSpec
        """A :class:`privcore.engine.specs.DataSpec` for this data set with optional transforms."""
        from privcore.engine.specs import DataSpec

        return DataSpec(name=self.dataset, data_file=self.data_file if self.dataset == "file" else None,
                        n=n, dim=dim, classes=classes, augment=augment)


def _inside_uploads(path: str | None) -> str | None:
    """The upload that ``path`` names, only if it is a complete file inside the uploads folder.

    ``path`` arrives from the URL, so anything else (``/etc/...``, ``../``, a name that is not the
    content hash of the file, a half-written temporary file) is ignored rather than read: the server
    only parses complete files that a user uploaded. A bare name is looked up in the uploads folder.
    """
    if not path or not isinstance(path, str):
        return None
    try:
        folder = _uploads_dir().resolve()
        candidate = Path(path) if os.path.isabs(path) else folder / path
        resolved = candidate.resolve()
        resolved.relative_to(folder)
        if not resolved.is_file() or not _content_matches_name(resolved):
            return None
    except (OSError, ValueError, RuntimeError):
        return None
    return str(resolved)


def _uploads_dir() -> Path:
    from privcore.engine.cache import default_results_dir

    return default_results_dir().parent / "uploads"


_UPLOAD_SUFFIXES = (".csv", ".npz")
_VERIFIED: dict[tuple[str, int, int], bool] = {}


def _content_matches_name(path: Path) -> bool:
    """True when ``path`` is ``<sha256 of its bytes>.csv|.npz`` (memoised per file version).

    Uploads are content-addressed: a truncated or half-written file cannot carry its own hash.
    """
    stem, suffix = path.stem, path.suffix.lower()
    if suffix not in _UPLOAD_SUFFIXES or len(stem) != 64 or any(c not in "0123456789abcdef" for c in stem):
        return False
    st_ = path.stat()
    key = (str(path), st_.st_mtime_ns, st_.st_size)
    if key not in _VERIFIED:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _VERIFIED[key] = h.hexdigest() == stem
    return _VERIFIED[key]


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file in ``path``'s folder, flush it to disk, then rename it:
    ``path`` is either absent or complete, never half-written."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _clean_leftovers(folder: Path, older_than_s: float = 3600.0) -> None:
    """Remove temporary files of interrupted uploads (``.part-*``) older than an hour."""
    now = time.time()
    try:
        for p in folder.glob(".part-*"):
            try:
                if now - p.stat().st_mtime > older_than_s:
                    p.unlink()
            except OSError:
                pass
    except OSError:
        pass


def _display_name(path: str) -> str:
    """The name the user uploaded ``path`` under (this session), else its file name."""
    names = st.session_state.get("_upload_names", {})
    return names.get(os.path.basename(path), os.path.basename(path))


def _save_upload(upload) -> str:  # noqa: ANN001 - UploadedFile
    """Store an upload as ``uploads/<sha256>.<ext>`` (atomically) and return that path.

    The name is the content hash, so equal uploads share one file, and a file whose bytes do not
    match its name (an interrupted write of an older version) is rewritten, never used.
    """
    data = upload.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    suffix = os.path.splitext(upload.name)[1].lower()
    if suffix not in _UPLOAD_SUFFIXES:
        raise ValueError(f"uploads must be .csv or .npz files, got {suffix or 'no extension'}")
    folder = _uploads_dir()
    folder.mkdir(parents=True, exist_ok=True)
    _clean_leftovers(folder)
    path = folder / f"{digest}{suffix}"
    if not (path.is_file() and _content_matches_name(path)):
        _atomic_write(path, data)
    st.session_state.setdefault("_upload_names", {})[path.name] = os.path.basename(upload.name)[-120:]
    return str(path)


def delete_upload(path: str | None) -> bool:
    """Delete an uploaded file (only one inside the uploads folder); True when it was removed."""
    inside = _inside_uploads(path)
    if inside is None:
        return False
    try:
        os.unlink(inside)
    except OSError:
        return False
    return True


def _already_rendered(widget_user_key: str) -> bool:
    """True when a widget with this user key was already created in the current script run."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        if ctx is None:
            return False
        shared = getattr(ctx, "shared", None)
        keys = getattr(shared, "widget_user_keys_this_run", None) if shared is not None else None
        if keys is None:
            keys = getattr(ctx, "widget_user_keys_this_run", set())
        return widget_user_key in keys
    except Exception:  # noqa: BLE001
        return False


def sidebar(*, require_data: bool = False) -> SidebarSettings:
    """Draw the shared sidebar (once per run; later calls return the same settings).

    Data set (mnist-5k default, digits, synthetic, full mnist, or an uploaded CSV/NPZ saved under
    ``cache/uploads``), repetitions, accounting mode and device. A data set that fails to load is
    reported inline (sidebar and page) and ``info`` is None; with ``require_data`` the page then
    stops there (the message is already shown).
    """
    settings = _sidebar()
    if require_data and settings.error:
        st.stop()
    return settings


def _sidebar() -> SidebarSettings:
    wkey = state.widget_key("dataset")
    if _already_rendered(wkey) and "_sidebar" in st.session_state:
        return st.session_state["_sidebar"]
    for msg in state.url_errors():
        st.warning(escape_markdown(msg))  # the message quotes the URL value: text, never Markdown
    sb = st.sidebar
    sb.markdown("### Data and accounting")
    names = list(DATASET_LABELS)
    dataset = state.commit("dataset", sb.selectbox(
        "Data set", names, key=state.bind("dataset", normalise=lambda v: v if v in names else "mnist-5k"),
        format_func=lambda n: DATASET_LABELS[n],
        help="Every row is scaled into the unit L2 ball; 20 % of the rows are held out as the test set."))
    data_file = _inside_uploads(state.get("data_file"))
    if dataset == "file":
        up = sb.file_uploader("CSV (numeric columns + a 'label' column) or NPZ (arrays x, y)", type=["csv", "npz"],
                              key=f"upload_file_{st.session_state.get('_upload_gen', 0)}")
        if up is not None:
            try:
                data_file = _save_upload(up)
                state.put("data_file", os.path.basename(data_file))  # the URL names the upload, not a server path
            except (OSError, ValueError) as err:
                sb.error(escape_markdown(f"Could not store the upload: {getattr(err, 'strerror', None) or err}"))
        if data_file:
            sb.caption(f"Using {escape_markdown(_display_name(data_file))}")
            if sb.button("Delete this upload", key="delete_upload",
                         help="Removes the file from the server; results computed from it stay cached"):
                delete_upload(data_file)
                state.put("data_file", None)
                st.session_state["_upload_gen"] = st.session_state.get("_upload_gen", 0) + 1  # a fresh, empty uploader
                st.rerun()
    repeats = state.commit("repeats", sb.select_slider(
        "Repetitions R (noise draws per point)", options=_with((2, 3, 5, 10, 20, 50, 100), state.get("repeats")),
        key=state.bind("repeats"),
        help="Mean and standard deviation over R independent private releases. More = smoother, slower."))
    modes = ["corrected", "paper", "tight"]
    accounting = state.commit("accounting", sb.radio(
        "Accounting", modes, key=state.bind("accounting"),
        format_func={"corrected": "corrected (sound; default)", "paper": "paper (as published)",
                     "tight": "tight (exact/optimal composition)"}.get,
        help="paper: the published calibrations (some are too optimistic). corrected: fixed proofs. "
             "tight: exact Gaussian / optimal bounded-range composition, finer replace-one PLD grid for DP-SGD."))
    import torch

    devices = ["auto", "cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    device = state.commit("device", sb.radio(
        "Device", devices, key=state.bind("device", normalise=lambda v: v if v in devices else "auto"),
        horizontal=True, help="auto uses the GPU when there is one. Cached results are reused on any device."))
    sb.caption(NEIGHBOURS_NOTE)

    info, error = None, None
    if dataset == "file" and not data_file:
        error = "Upload a CSV or NPZ file in the sidebar to use your own data set."
    else:
        try:
            info = data_info(dataset, data_file if dataset == "file" else None)
        except Exception as err:  # noqa: BLE001 - DataFileError, DataUnavailableError, ValueError...
            error = f"Could not load data set {dataset!r}: {err}"
    if error:  # quotes file names and cell values: shown as text
        sb.error(escape_markdown(error))
        st.error(escape_markdown(error))
    else:
        sb.caption(f"{info.n_train:,} training / {info.n_test:,} test examples, D = {info.dim}, C = {info.classes}")
    settings = SidebarSettings(dataset, data_file if dataset == "file" else None, int(repeats), accounting, device,
                               info, error)
    st.session_state["_sidebar"] = settings
    return settings


# ---------------------------------------------------------------- shared controls

def _with(options: Iterable[Any], value: Any) -> list[Any]:
    """Options plus ``value`` (sorted, numbers only; strings such as 'auto' stay first)."""
    opts = list(options)
    if value is not None and value not in opts:
        opts.append(value)
    words = [o for o in opts if isinstance(o, str) or o is None]
    nums = sorted(o for o in opts if not (isinstance(o, str) or o is None))
    return words + nums


def _nearest(options: Sequence[Any], value: Any) -> Any:
    if value in options:
        return value
    nums = [o for o in options if isinstance(o, (int, float)) and not isinstance(o, bool) and o > 0]
    if not nums or not isinstance(value, (int, float)) or value <= 0:
        return options[0]
    return min(nums, key=lambda o: abs(math.log(o) - math.log(value)))


def log_select(name: str, label: str, grid: Sequence[Any], *, container=None, fmt: Callable[[Any], str] = format_number,
               help: str | None = None, to_widget: Callable[[Any], Any] | None = None,
               from_widget: Callable[[Any], Any] | None = None, keep_value: bool = True, disabled: bool = False) -> Any:
    """A select slider over a (log-spaced) grid bound to state field ``name``; returns the value.

    ``to_widget``/``from_widget`` map between the stored value and the option shown (e.g. None <->
    "all"). With ``keep_value`` a stored value off the grid (from a URL) is added to the options;
    otherwise it snaps to the nearest option.
    """
    where = container if container is not None else st
    to_w = to_widget or (lambda v: v)
    from_w = from_widget or (lambda v: v)
    current = to_w(state.get(name))
    options = _with(grid, current) if keep_value else list(grid)
    wkey = state.bind(name, normalise=lambda v: _nearest(options, to_w(v) if v not in options else v))
    chosen = where.select_slider(label, options=options, key=wkey, format_func=fmt, help=help, disabled=disabled)
    return state.commit(name, from_w(chosen))


def epsilon_slider(container=None, *, name: str = "eps", label: str = "Privacy loss ε") -> float:
    return log_select(name, label, EPS_GRID, container=container,
                      help="Total privacy loss over everything released (all B predictions for the prediction "
                           "methods). Smaller = more private = more noise.")


def delta_slider(container=None) -> float:
    return log_select("delta", "δ (0 = pure ε-DP)", DELTA_GRID, container=container,
                      fmt=lambda v: "0 (pure DP)" if v == 0 else f"{v:.0e}".replace("e-0", "e-"),
                      help="Probability mass allowed to exceed e^ε. δ = 0 rules out DP-SGD; keep δ ≪ 1/N.")


def budget_slider(container=None) -> int:
    return log_select("budget", "Inference budget B (private predictions)", BUDGET_GRID, container=container,
                      help="How many predictions the prediction methods may release under (ε, δ). The training "
                           "methods (model/loss perturbation, DP-SGD) do not depend on B.")


def n_slider(info: DataInfo, container=None, *, allow_augment: bool = False) -> int | None:
    """Training-set size N (None = the full training split). Beyond it only with ``allow_augment``."""
    full = info.n_train
    grid = [v for v in N_GRID if v < full] + [full]
    if allow_augment and info.image:
        grid += [v for v in N_GRID if v > full]
    return log_select("n", "Training examples N", grid, container=container, keep_value=False,
                      to_widget=lambda v: full if v is None else v, from_widget=lambda v: None if v == full else int(v),
                      fmt=lambda v: f"{v:,} (all)" if v == full else f"{v:,}",
                      help="A stratified subsample of the training split (the test set is unchanged).")


def n_options(info: DataInfo) -> list[int]:
    """The N values the N slider offers for a data set (no augmentation): the grid below the full
    training split, then the full split."""
    full = info.n_train
    return [v for v in N_GRID if v < full] + [full]


def checked_n(info: DataInfo | None, n: int | None) -> tuple[int | None, str | None]:
    """N as the N slider would take it, for pages that read N from the URL without drawing the
    slider: snapped to :func:`n_options` (None = the full split), plus a message when it moved."""
    if n is None or info is None:
        return n, None
    options = n_options(info)
    snapped = _nearest(options, n)
    if snapped == n:
        return (None if n == info.n_train else n), None
    note = (f"N = {n:,} is not available for this data set (it has {info.n_train:,} training examples): "
            f"using N = {snapped:,}, as the N slider on the Explore page would.")
    return (None if snapped == info.n_train else int(snapped)), note


def teachers_slider(container=None) -> int:
    return log_select("teachers", "Teachers T (subsample-and-aggregate)", T_GRID, container=container,
                      help="Subsample-and-aggregate trains T models on disjoint parts of N/T examples each.")


def lam_slider(container=None) -> float | str:
    return log_select("lam", "L2 weight λ (average form)", LAM_GRID, container=container,
                      fmt=lambda v: "auto (tuned)" if v == "auto" else format_number(v),
                      help="Weight of 0.5||θ||² in the average-form objective, same meaning for every method. "
                           "Larger λ shrinks the sensitivity 2K/(Nλ) but biases the model. 'auto' tunes λ per "
                           "method and ε on a validation split (slower; that tuning itself is not accounted for).")


def dim_slider(info: DataInfo, container=None) -> int | None:
    grid = ["all"] + [d for d in DIM_GRID if d < info.dim]
    return log_select("dim", "Input dimension D (PCA)", grid, container=container, keep_value=False,
                      to_widget=lambda v: "all" if v is None or v >= info.dim else v,
                      from_widget=lambda v: None if v == "all" else int(v),
                      fmt=lambda v: f"all ({info.dim})" if v == "all" else str(v),
                      help="Project the inputs on their first D principal components (fitted on the training split).")


def classes_slider(info: DataInfo, container=None) -> int | None:
    grid = list(range(2, info.classes + 1))
    return log_select("classes", "Classes C", grid, container=container, keep_value=False,
                      to_widget=lambda v: info.classes if v is None or v > info.classes else v,
                      from_widget=lambda v: None if v == info.classes else int(v),
                      fmt=lambda v: f"{v} (all)" if v == info.classes else str(v),
                      help="Keep only the first C classes (labels 0..C-1).")


def dpsgd_controls(container=None) -> tuple[float, int, int]:
    """(clip, epochs, batch size) of DP-SGD, in one container or in a sequence of three."""
    if isinstance(container, (list, tuple)):
        g, h, i = container
    else:
        g = h = i = container if container is not None else st
    clip = log_select("clip", "DP-SGD clip ν", CLIP_GRID, container=g,
                      help="Per-example gradient norm bound. Noise std = noise multiplier × ν.")
    epochs = log_select("epochs", "DP-SGD epochs", EPOCH_GRID, container=h,
                        help="Passes over the data; more steps need a larger noise multiplier for the same ε.")
    batch = log_select("batch_size", "DP-SGD batch size", BATCH_GRID, container=i,
                       help="Expected (Poisson) batch size; sampling rate q = batch / N.")
    return float(clip), int(epochs), int(batch)


def methods_select(container=None) -> list[str]:
    from privcore.methods import METHOD_NAMES

    where = container if container is not None else st
    chosen = where.multiselect("Methods", list(METHOD_NAMES), key=state.bind(
        "methods", normalise=lambda v: [m for m in v if m in METHOD_NAMES]), format_func=method_label,
        help="Private training: model sensitivity, loss perturbation, DP-SGD. Private prediction: prediction "
             "sensitivity, subsample-and-aggregate. The non-private model is always shown for reference.")
    return state.commit("methods", list(chosen))


# ---------------------------------------------------------------- the setting

@dataclass(frozen=True)
class Setting:
    """One setting of every knob besides the data set and the sidebar."""

    eps: float = 3.0
    delta: float = 1e-5
    budget: int = 10
    n: int | None = None
    teachers: int = 16
    lam: float | str = 1e-3
    dim: int | None = None
    classes: int | None = None
    clip: float = 0.5
    epochs: int = 5
    batch_size: int = 256
    methods: tuple[str, ...] = ()
    augment: bool = False

    def effective_n(self, info: DataInfo | None) -> int | None:
        if self.n is not None:
            return self.n
        return info.n_train if info is not None else None


def current_setting() -> Setting:
    """The stored setting (without drawing widgets), e.g. for a page that shows no controls."""
    v = state.current_values()
    return Setting(eps=v["eps"], delta=v["delta"], budget=v["budget"], n=v["n"], teachers=v["teachers"], lam=v["lam"],
                   dim=v["dim"], classes=v["classes"], clip=v["clip"], epochs=v["epochs"], batch_size=v["batch_size"],
                   methods=tuple(v["methods"]), augment=v["augment"])


def setting_panel(side: SidebarSettings, *, expanded: bool = False, show_n: bool = True) -> Setting:
    """Explore-style controls: ε, δ, B and methods in view; N, T, λ, D, C and DP-SGD in an expander."""
    info = side.info
    c1, c2, c3 = st.columns(3)
    eps = epsilon_slider(c1)
    delta = delta_slider(c2)
    budget = budget_slider(c3)
    methods = methods_select()
    with st.expander("More settings: N, T, λ, D, C and DP-SGD", expanded=expanded):
        a, b, c = st.columns(3)
        n = n_slider(info, a) if (info is not None and show_n) else state.get("n")
        teachers = teachers_slider(b)
        lam = lam_slider(c)
        d, e, f = st.columns(3)
        dim = dim_slider(info, d) if info is not None else state.get("dim")
        classes = classes_slider(info, e) if info is not None else state.get("classes")
        with f:
            st.caption("DP-SGD")
        clip, epochs, batch = dpsgd_controls(st.columns(3))
    return Setting(eps=float(eps), delta=float(delta), budget=int(budget), n=n, teachers=int(teachers), lam=lam,
                   dim=dim, classes=classes, clip=float(clip), epochs=int(epochs), batch_size=int(batch),
                   methods=tuple(methods), augment=bool(state.get("augment")))


def curve_epsilons(eps_min: float, eps_max: float, current: float | None = None, per_decade: int = 2) -> tuple[float, ...]:
    """Log-spaced epsilons 1-3-10 (per_decade=2) between the bounds, plus ``current``."""
    steps = {1: (1.0,), 2: (1.0, 3.0), 3: (1.0, 2.0, 5.0)}.get(per_decade, (1.0, 3.0))
    out = set()
    lo, hi = min(eps_min, eps_max), max(eps_min, eps_max)
    for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        for s in steps:
            v = round(s * 10.0 ** k, 10)
            if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                out.add(v)
    out.update((lo, hi))
    if current is not None and lo <= current <= hi:
        out.add(float(current))
    return tuple(sorted(out))


# ---------------------------------------------------------------- spec and problems

def method_knobs(s: Setting) -> dict[str, Any]:
    """The setting's values that methods' rules read (keys as in privcore's Problem, plus delta)."""
    return {"delta": float(s.delta), "teachers": int(s.teachers), "batch_size": int(s.batch_size)}


def available_methods(s: Setting, n: int | None, methods: Sequence[str] | None = None) -> tuple[str, ...]:
    """The chosen methods that can run at this setting (each method's ``unavailable`` rule)."""
    knobs = method_knobs(s)
    return tuple(m for m in (methods if methods is not None else s.methods) if get_method(m).unavailable(knobs, n) is None)


def min_train_size(s: Setting) -> int:
    """The smallest N every chosen method can be trained on (at least 10)."""
    knobs = method_knobs(s)
    return max([10] + [get_method(m).min_train_size(knobs) for m in s.methods])


def setting_problems(side: SidebarSettings, s: Setting) -> tuple[list[str], list[str]]:
    """(errors, warnings) about a setting, in plain words, before anything runs.

    Errors make the spec invalid (no method, or none that can run); warnings flag extreme choices
    and the methods left out by their own rules (e.g. a method needing δ > 0, T > N, batch > N).
    """
    errors: list[str] = []
    warnings: list[str] = []
    n = s.effective_n(side.info)
    if not s.methods:
        errors.append("Choose at least one method.")
    knobs = method_knobs(s)
    for name in s.methods:  # each method's own rules: it is left out, the others still run
        entry = get_method(name)
        why = entry.unavailable(knobs, n)
        if why:
            warnings.append(f"{entry.label} is left out at this setting: {why}.")
        warnings.extend(entry.setting_warnings(knobs, n))
    if s.methods and not available_methods(s, n):
        errors.append("None of the chosen methods can run at this setting (see the notes above).")
    if n is not None and s.delta > 0 and s.delta >= 1.0 / n:
        warnings.append(f"δ = {format_number(s.delta)} is not small compared with 1/N = {format_number(1.0 / n)}: "
                        "such a δ allows releasing a few training examples outright. Use δ ≪ 1/N (e.g. 1e-5).")
    if s.eps < 0.05:
        warnings.append(f"ε = {format_number(s.eps)} is extremely small: expect every method near chance level.")
    if s.eps > 100:
        warnings.append(f"ε = {format_number(s.eps)} is extreme: e^ε ≈ {format_number(math.exp(min(s.eps, 700)), 2)}, "
                        "the guarantee means little at this level.")
    if s.lam == "auto":
        warnings.append("λ = auto chooses λ privately: 10 % of ε (and δ) pays for a noisy choice among 6 candidates "
                        "trained on 80 % of the data and scored on the rest; the release gets the other 90 %. It is "
                        "about 6× slower.")
    if s.n is not None and side.info is not None and s.n > side.info.n_train:
        warnings.append(augmentation_caveat(side.info.n_train, s.n, s.eps))
    return errors, warnings


def augmentation_caveat(n_real: int, n: int, eps: float) -> str:
    """What growing N = ``n`` from ``n_real`` real examples by deformed copies means for privacy."""
    k = n / n_real
    return (f"N = {n:,} exceeds the {n_real:,} real training examples: the rest are deformed copies "
            f"(augmentation), slow to build and not independent. Each real image shapes about {k:.1f} rows, and "
            f"the guarantee is per row: for the person behind an image it holds only by group privacy, about "
            f"{format_number(k * eps)}-DP at ε = {format_number(eps)} (k rows cost kε, and δ grows too). The "
            "paper's InfiMNIST study shares this caveat.")


def make_spec(side: SidebarSettings, s: Setting, *, epsilons: Sequence[float], vary: str | None = None,
              values: Sequence[Any] = (), methods: Sequence[str] | None = None, baseline: bool = True,
              seed: int = 0):  # noqa: ANN201 - SweepSpec
    """The :class:`SweepSpec` of a setting. Raises ``ValueError``/``TypeError`` like privcore does."""
    from privcore.engine.specs import SweepSpec

    meths = tuple(methods if methods is not None else s.methods)
    if vary not in ("delta", "n"):  # methods that cannot run here are left out (setting_problems says why)
        meths = available_methods(s, s.effective_n(side.info), meths) or meths
    augment = bool(s.augment or (s.n is not None and side.info is not None and s.n > side.info.n_train))
    return SweepSpec(
        data=side.data_spec(n=s.n, dim=s.dim, classes=s.classes, augment=augment),
        methods=meths, epsilons=tuple(float(e) for e in epsilons), delta=float(s.delta), budget=int(s.budget),
        lam=s.lam, teachers=int(s.teachers), batch_size=int(s.batch_size), epochs=int(s.epochs), clip=float(s.clip),
        accounting=side.accounting, repeats=int(side.repeats), seed=seed, device=side.device, vary=vary,
        values=tuple(values), baseline=baseline)


def explore_specs(info: DataInfo, values: dict[str, Any] | None = None) -> list:  # noqa: ANN201 - [SweepSpec]
    """What the Explore page computes first for these control values (default: every default):
    the current setting, then the accuracy-vs-ε curve. Pure (no Streamlit calls)."""
    v = {**state.DEFAULTS, **(values or {})}
    side = SidebarSettings(v["dataset"], None, int(v["repeats"]), v["accounting"], v["device"], info)
    s = Setting(eps=float(v["eps"]), delta=float(v["delta"]), budget=int(v["budget"]), n=v["n"],
                teachers=int(v["teachers"]), lam=v["lam"], dim=v["dim"], classes=v["classes"], clip=float(v["clip"]),
                epochs=int(v["epochs"]), batch_size=int(v["batch_size"]), methods=tuple(v["methods"]),
                augment=bool(v["augment"]))
    return [make_spec(side, s, epsilons=(s.eps,)),
            make_spec(side, s, epsilons=curve_epsilons(float(v["eps_min"]), float(v["eps_max"]), current=s.eps))]


def spec_or_error(side: SidebarSettings, s: Setting, **kwargs: Any):  # noqa: ANN201 - SweepSpec | None
    """:func:`make_spec`, or None after showing the problem inline (st.error, never a traceback)."""
    errors, _ = setting_problems(side, s)
    if errors:
        for e in errors:
            st.error(e)
        return None
    try:
        return make_spec(side, s, **kwargs)
    except (ValueError, TypeError) as err:
        show_error(err)
        return None


# ---------------------------------------------------------------- running

def _device_text(device: str) -> str:
    try:
        import torch

        from privcore.device import resolve_device

        dev = resolve_device(device)
        if dev.type == "cuda":
            return f"GPU ({torch.cuda.get_device_name(dev)})"
        return f"CPU ({torch.get_num_threads()} threads)"
    except Exception as err:  # noqa: BLE001
        return f"device unavailable: {err}"


def _fmt_seconds(s: float) -> str:
    if s < 1:
        return "<1 s"
    if s < 90:
        return f"{s:.0f} s"
    return f"{s / 60:.1f} min"


_MEMO_SIZE = 64


def _memo() -> OrderedDict:
    memo = st.session_state.get("_sweep_memo")
    if memo is None:
        memo = st.session_state["_sweep_memo"] = OrderedDict()
    return memo


def quick_part(spec):  # noqa: ANN001, ANN201 - SweepSpec -> SweepSpec | None
    """The methods of ``spec`` that train nothing per release, as a spec of their own, to draw
    while the slow ones (loss perturbation, DP-SGD) compute; None when that would not help (all
    methods are of one kind, or the whole result is already in this session or on disk)."""
    from dataclasses import replace

    from privcore.engine.runner import read_cached
    from privcore.methods import REGISTRY

    quick = tuple(m for m in spec.methods if not REGISTRY[m].trains_per_release)
    if not quick or len(quick) == len(spec.methods) or spec.key in _memo():
        return None
    try:
        if read_cached(spec) is not None:
            return None
    except (ValueError, TypeError, RuntimeError):  # the full run will report the problem itself
        return None
    return replace(spec, methods=quick)


def was_cancelled(spec, key: str) -> bool:  # noqa: ANN001
    """Whether the user cancelled :func:`run_with_progress` for this spec under ``key``."""
    return st.session_state.get("_cancelled", {}).get(key) == spec.key


def run_with_progress(spec, *, key: str, label: str = "Computing", show_done: bool = False):  # noqa: ANN001, ANN201
    """Run (or fetch) a sweep with a progress bar showing device, progress and ETA, and a Cancel button.

    Returns the :class:`SweepResult`, or None when the run failed (shown inline) or was cancelled
    (finished points stay cached; a "Resume" button continues). Results are memoised per session
    and on disk, so repeating a spec is instant. Cancelling takes effect at the next progress
    update (at most 0.25 s apart, also inside a batch): the progress callback is where Streamlit
    can stop the script.
    """
    from privcore.engine.runner import SweepCancelled, run_sweep

    sig = spec.key
    memo = _memo()
    if sig in memo:
        memo.move_to_end(sig)
        return memo[sig]
    cancelled = st.session_state.setdefault("_cancelled", {})
    if cancelled.get(key) == sig:
        box = st.container(border=True)
        box.info(f"{label}: cancelled. Finished parts are cached; resume to compute the rest.")
        if box.button("Resume", key=f"{key}_resume"):
            cancelled.pop(key, None)
            st.rerun()
        return None
    holder = st.empty()
    with holder.container(border=True):
        device = _device_text(spec.device)
        bar = st.progress(0.0, text=f"{label} on {device}: starting...")
        if st.button("Cancel", key=f"{key}_cancel", help="Stop now; finished points stay cached"):
            cancelled[key] = sig
            holder.empty()
            st.rerun()
    t0 = time.perf_counter()

    def progress(fraction: float, message: str) -> None:
        elapsed = time.perf_counter() - t0
        eta = "estimating..." if fraction <= 0 else f"ETA {_fmt_seconds(elapsed * (1 - fraction) / fraction)}"
        bar.progress(min(max(fraction, 0.0), 1.0),
                     text=f"{label} on {device}: {message} · {fraction:.0%} · {_fmt_seconds(elapsed)} elapsed · {eta}")

    try:
        result = run_sweep(spec, progress=progress)
    except SweepCancelled:
        holder.empty()
        st.info(f"{label}: cancelled; finished points are cached.")
        return None
    except (ValueError, TypeError, RuntimeError) as err:
        holder.empty()
        show_error(err, prefix=f"{label} failed")
        return None
    holder.empty()
    if show_done and result.computed:
        st.caption(f"{label}: {result.computed} points computed in {_fmt_seconds(result.seconds)} on {device}, "
                   f"{result.cached} from the cache.")
    memo[sig] = result
    while len(memo) > _MEMO_SIZE:
        memo.popitem(last=False)
    return result


# ---------------------------------------------------------------- messages and charts

def show_error(err: BaseException | str, *, prefix: str | None = None) -> None:
    """An inline error box with the message only (never a traceback)."""
    text = str(err) if not isinstance(err, str) else err
    st.error(escape_markdown(f"{prefix}: {text}" if prefix else text))


def show_warnings(messages: Iterable[str]) -> None:
    """Each distinct message once, as an inline warning."""
    seen = set()
    for m in messages:
        if m and m not in seen:
            seen.add(m)
            st.warning(escape_markdown(m))


def show_figure(fig, *, key: str | None = None) -> None:  # noqa: ANN001
    """``st.plotly_chart`` with the figure's own (print) styling, not Streamlit's theme."""
    st.plotly_chart(fig, theme=None, key=key, width="stretch",
                    config={"displaylogo": False,
                            "toImageButtonOptions": {"format": "png", "scale": 2, "filename": key or "chart"}})
