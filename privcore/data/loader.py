"""``load_dataset``: source -> class filter -> split -> subsample/grow -> PCA -> unit-ball clip.

Results are memoised in-process for identical arguments (a user file is keyed by path, mtime and
size, full MNIST by its folder and file versions), so repeated calls in one run are free.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Hashable

import numpy as np

from .. import limits
from ..validation import check_choice, check_int, check_real, fmt_value
from . import mnist_download, sources, userfile
from .augment import choose_sources, deform_rows_into, rows_per_original
from .dataset import Dataset
from .errors import DataFileError
from .labels import declare_labels, labels_text, parse_labels
from .preprocess import Preprocess, parse_preprocess
from .sources import RawSource
from .transforms import (clip_to_unit_ball, pca_apply, pca_fit, seeded_split, seeded_subsample,
                         unit_ball_float32)

__all__ = ["DATASET_NAMES", "IMAGE_SOURCES", "MIN_N", "load_dataset", "clear_caches", "forget_file"]

DATASET_NAMES: tuple[str, ...] = ("mnist-5k", "digits", "mnist", "file", "synthetic")
IMAGE_SOURCES: tuple[str, ...] = ("mnist-5k", "mnist", "digits")
MIN_N = 10
_MEMO_MAXSIZE = 8
# A 1M-row augmented MNIST is 3.1 GB; keeping eight of those alive would exhaust memory, so at most
# one data set above this size is memoised (the latest): a sweep that loads it after its caller did
# (bench, warm-up) reuses it, and the training context shares its memory rather than copying it.
_MEMO_MAX_BYTES = 1 << 30
_BUILD_GUARD = threading.Lock()
_BUILDING: dict = {}  # memo key -> the lock its builder holds
_FILE_PRINTS: dict[str, set[str]] = {}  # a user file's path -> fingerprints of the data sets built from it


@dataclass(frozen=True)
class _Args:
    name: str
    data_file: str | None
    n: int | None
    dim: int | None
    classes: int | None
    seed: int
    test_fraction: float
    augment: bool
    cache_dir: str | None
    preprocess: Preprocess = Preprocess()
    label_column: str | None = None
    labels: tuple[str, ...] | None = None


def load_dataset(
    name: str = "mnist-5k",
    *,
    data_file: str | None = None,
    n: int | None = None,
    dim: int | None = None,
    classes: int | None = None,
    seed: int = 0,
    test_fraction: float = 0.2,
    augment: bool = True,
    cache_dir: str | None = None,
    preprocess: "str | Preprocess | None" = None,
    label_column: str | None = None,
    labels: "str | tuple[str, ...] | None" = None,
) -> Dataset:
    """Load, split and normalise a data set; every row of the result lies in the unit L2 ball.

    Steps, in order: a train/test split with ``test_fraction`` drawn from the seed alone, never from
    the labels (``"mnist"`` uses its official 60k/10k split); keep labels ``0..classes-1`` (if
    ``classes``) in each split; subsample the
    training split to ``n`` rows, or grow it to ``n`` with deformed copies of its images when
    ``n`` exceeds it and ``augment`` (image sources only); scale pixels to [0, 1]; PCA to ``dim``
    dimensions fitted on the training split; finally ``x <- x / max(1, ||x||)`` per row.
    A user file (``name="file"``) may name its ``label_column``, declare its ``labels`` (public, fixed in
    advance: :mod:`privcore.data.labels`; else the label set is read off the file, a step the guarantee
    does not cover) and a ``preprocess`` map (declared
    public bounds or a stated norm, optional intercept: :mod:`privcore.data.preprocess`), applied
    right after the split, before PCA.

    Returns a :class:`Dataset` with x float32 ``[rows, dim or D0]`` and y int64 ``[rows]``.
    Raises ``TypeError``/``ValueError`` for bad arguments, :class:`DataFileError` for an unusable
    ``data_file`` and :class:`DataUnavailableError` when full MNIST is neither on disk nor fetchable.
    """
    args = _check_args(name, data_file, n, dim, classes, seed, test_fraction, augment, cache_dir, preprocess,
                       label_column, labels)
    key = _memo_key(args)
    hit = _MEMO.get(key)
    if hit is not None:
        return hit
    with _BUILD_GUARD:  # one build per key at a time: a server's warm-up thread and its first visitor
        lock = _BUILDING.setdefault(key, threading.Lock())  # ask for the same data set at once
    with lock:
        hit = _MEMO.get(key)  # built by the thread we waited for
        if hit is None:
            hit = _build(args)
            _MEMO.put(key, hit)
            if args.name == "file":  # kept after the memo drops it: forget_file finds its training contexts
                with _BUILD_GUARD:
                    _FILE_PRINTS.setdefault(key[1][0], set()).add(hit.fingerprint)
    with _BUILD_GUARD:
        _BUILDING.pop(key, None)
    return hit


def clear_caches(*, raw_sources: bool = True) -> None:
    """Forget memoised data sets and, unless ``raw_sources=False``, the cached raw sources too."""
    _MEMO.clear()
    if not raw_sources:
        return
    sources.load_mnist5k.cache_clear()
    sources.load_digits.cache_clear()
    sources.load_synthetic.cache_clear()
    userfile.clear_cache()
    mnist_download.clear_cache()


def forget_file(path: str | os.PathLike[str]) -> set[str]:
    """Forget every data set built from the user file at ``path`` (any n, PCA, preprocessing or
    label column) and its parsed version; returns the forgotten data sets' fingerprints (their
    training contexts can then be dropped too: :func:`privcore.engine.release.release_data_file`)."""
    target = os.path.realpath(os.fspath(path))
    gone = _MEMO.drop(lambda key: key[0] == "file" and isinstance(key[1], tuple) and key[1][0] == target)
    userfile.forget(target)
    with _BUILD_GUARD:
        prints = _FILE_PRINTS.pop(target, set())
    return prints | {ds.fingerprint for ds in gone}


def _check_path(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(
            f"{name} must be a path (str or os.PathLike) or None, got {fmt_value(value)} ({type(value).__name__})"
        )
    return os.fspath(value)


def _check_args(
    name: Any,
    data_file: Any,
    n: Any,
    dim: Any,
    classes: Any,
    seed: Any,
    test_fraction: Any,
    augment: Any,
    cache_dir: Any,
    preprocess: Any = None,
    label_column: Any = None,
    labels: Any = None,
) -> _Args:
    name = check_choice("name", name, DATASET_NAMES)
    data_file = _check_path("data_file", data_file)
    if name == "file" and data_file is None:
        raise DataFileError("data_file is required when name='file': give the path of a .csv or .npz file")
    if name != "file" and data_file is not None:
        raise ValueError(f"data_file is only used with name='file', got name={name!r}")
    if not isinstance(augment, bool):
        raise TypeError(f"augment must be True or False, got {fmt_value(augment)} ({type(augment).__name__})")
    prep = parse_preprocess(preprocess)
    if name != "file" and (prep != Preprocess() or label_column is not None):
        raise ValueError(f"preprocess and label_column apply to name='file' (a user's data) only, got name={name!r}")
    if label_column is not None and (not isinstance(label_column, str) or not label_column.strip()):
        raise TypeError(f"label_column must be a column name or None, got {fmt_value(label_column)}")
    declared = parse_labels(labels)
    if name != "file" and declared is not None:
        raise ValueError(f"labels apply to name='file' (a user's data) only, got name={name!r}")
    return _Args(
        name=name,
        data_file=data_file,
        n=None if n is None else _check_n(n),
        dim=None if dim is None else check_int("dim", dim, low=1),
        classes=None if classes is None else check_int("classes", classes, low=2),
        seed=check_int("seed", seed, low=0),
        test_fraction=check_real("test_fraction", test_fraction, low=0.0, high=1.0, low_open=True, high_open=True),
        augment=augment,
        cache_dir=_check_path("cache_dir", cache_dir),
        preprocess=prep,
        label_column=label_column.strip() if label_column else None,
        labels=declared,
    )


def _check_n(n: Any) -> int:
    n = check_int("n", n, low=MIN_N)
    if n > limits.max_n():
        raise ValueError(f"n must be at most {limits.max_n():,} training rows, got {fmt_value(n)} "
                         f"({limits.limit_hint('PRIVCORE_MAX_N')})")
    return n


def _data_file(args: _Args) -> str:
    """The checked data_file of a ``file`` source (``_check_args`` already required it)."""
    if args.data_file is None:
        raise ValueError("data_file is required for dataset 'file' (a CSV or NPZ path)")
    return args.data_file


def _memo_key(args: _Args) -> Hashable:
    if args.name == "file":
        version: Hashable = userfile.file_key(_data_file(args))  # raises DataFileError if missing
    elif args.name == "mnist":
        folder = mnist_download.mnist_folder(args.cache_dir)
        stamps = []
        for fname, md5 in mnist_download.MNIST_FILES.items():
            p = folder / fname
            st = p.stat() if p.is_file() else None
            stamps.append((fname, md5, None if st is None else (st.st_mtime_ns, st.st_size)))
        version = (str(folder), tuple(stamps))
    else:
        version = None
    # cache_dir only matters through ``version`` (for mnist), so it is left out of the key.
    return (args.name, version, args.n, args.dim, args.classes, args.seed, args.test_fraction, args.augment,
            args.preprocess.text, args.label_column, args.labels)


def _source(args: _Args) -> RawSource:
    if args.name == "mnist-5k":
        return sources.load_mnist5k()
    if args.name == "digits":
        return sources.load_digits()
    if args.name == "mnist":
        return mnist_download.load_mnist(args.cache_dir)
    if args.name == "file":
        src = userfile.load_user_file(_data_file(args), args.label_column)
        return src if args.labels is None else declare_labels(src, args.labels, _what(args))
    # Synthetic data is generated, so make enough that the training split holds n rows: with
    # per_class rows a class keeps at least per_class * (1 - test_fraction) - 0.5 in training.
    keep = sources.SYNTHETIC_CLASSES if args.classes is None else min(args.classes, sources.SYNTHETIC_CLASSES)
    per_class = sources.SYNTHETIC_MIN_PER_CLASS
    if args.n is not None:  # 15 % more: the seeded split sends a class's rows to training by chance, not by quota
        per_class = max(per_class, math.ceil(1.15 * (math.ceil(args.n / keep) + 0.5) / (1.0 - args.test_fraction)) + 10)
    return sources.load_synthetic(per_class, args.seed)


def _build(args: _Args) -> Dataset:
    src = _source(args)
    classes = src.classes if args.classes is None else check_int("classes", args.classes, low=2, high=src.classes)
    args.preprocess.check_dim(src.x.shape[1], f"data_file {os.path.basename(args.data_file or '')!r}")
    if args.dim is not None:
        check_int("dim", args.dim, low=1, high=args.preprocess.out_dim(src.x.shape[1]))
    notes = list(src.notes)

    if src.test is None:
        # Split every row by the seed alone, then keep the classes asked for in each split: a row's
        # label never moves another row (seeded_split).
        kept = int(np.count_nonzero(src.y < classes))
        if np.bincount(src.y[src.y < classes], minlength=1).max() < 2:  # every label distinct: the wrong column?
            raise DataFileError(
                f"{_what(args)} has no class with at least 2 rows ({kept} rows in {classes} classes): each class "
                "needs at least 2 rows (is the label column right?)")
        tr, te = seeded_split(src.y.shape[0], args.test_fraction, args.seed)
        tr, te = tr[src.y[tr] < classes], te[src.y[te] < classes]
        if te.size == 0 or tr.size == 0:
            raise DataFileError(
                f"{_what(args)} has {tr.size} training and {te.size} test rows in classes 0..{classes - 1} after "
                f"the split: each needs at least one (is the label column right?)")
        x_tr, y_tr, x_te, y_te = src.x[tr], src.y[tr], src.x[te], src.y[te]
    else:
        xt, yt = src.test
        ktr, kte = src.y < classes, yt < classes
        x_tr, y_tr, x_te, y_te = src.x[ktr], src.y[ktr], xt[kte], yt[kte]
    if classes < src.classes:  # any source: the kept rows are chosen by their labels
        notes.append(f"rows labelled outside classes 0..{classes - 1} are dropped by their label, so a row's label "
                     "decides whether it is a training example and N depends on the labels: replacing a kept row "
                     "by a dropped one is not covered by the replace-one guarantee")
    # Fancy indexing made fresh copies, so the cached source stays untouched by these in-place ops.
    scale = np.float32(1.0 / src.pixel_scale)
    x_tr *= scale
    x_te *= scale

    if args.name == "file":
        x_tr, x_te = _preprocess(args.preprocess, x_tr, x_te, notes)
    x_tr, y_tr = _resize(args, src, x_tr, y_tr, notes)

    if args.dim is not None:
        mean, comps = pca_fit(x_tr, args.dim)
        x_tr, x_te = pca_apply(x_tr, mean, comps), pca_apply(x_te, mean, comps)
        notes.append(
            f"PCA to {args.dim} dimensions fitted on the training split: a data-dependent step "
            "not covered by the privacy guarantee"
        )
    clipped_tr, clipped_te = clip_to_unit_ball(x_tr), clip_to_unit_ball(x_te)
    # The training rows exactly as the training context needs them (float64-evaluated norm <= 1 in
    # float32), fixed here, in place, so that the context can share this memory instead of copying
    # it (one copy of the data: 3.1 GB at N = 1e6, D = 784).
    import torch

    unit_ball_float32(torch.from_numpy(x_tr))
    notes.append(
        "rows mapped into the unit L2 ball by the fixed per-example rule x / max(1, ||x||)"
        + (" after PCA" if args.dim is not None else "")
        + f": {clipped_tr} of {x_tr.shape[0]} training and {clipped_te} of {x_te.shape[0]} test rows rescaled"
    )
    arrays = (x_tr, y_tr.astype(np.int64, copy=False), x_te, y_te.astype(np.int64, copy=False))
    return Dataset(
        name=args.name,
        x_train=arrays[0],
        y_train=arrays[1],
        x_test=arrays[2],
        y_test=arrays[3],
        classes=classes,
        fingerprint=_fingerprint(args, arrays),
        notes=tuple(notes),
    )


def _what(args: _Args) -> str:
    """The data set as a message names it (a user's file by its base name only)."""
    if args.name == "file":
        return f"data_file {os.path.basename(args.data_file or '')!r}"
    return f"data set {args.name!r}"


def _preprocess(prep: Preprocess, x_tr: np.ndarray, x_te: np.ndarray, notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """A user's declared, data-independent feature map (the same for every data set)."""
    d = x_tr.shape[1]
    if prep.mode == "none" and not prep.intercept:
        notes.append("user features are used as given (no standardisation, no intercept) before the per-row clip "
                     "to norm 1: declare public bounds or a norm to standardise them")
        return x_tr, x_te
    out_tr, clipped = prep.apply(x_tr)
    out_te, _ = prep.apply(x_te)
    what = "feature values" if prep.mode == "bounds" else "rows"
    notes.append(f"preprocessing ({prep.text}): {prep.describe(d)}; {clipped} training {what} were clipped")
    return out_tr, out_te


def _resize(
    args: _Args, src: RawSource, x_tr: np.ndarray, y_tr: np.ndarray, notes: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Subsample the training split to ``args.n`` rows, or grow it with deformed images."""
    m = y_tr.shape[0]
    n = args.n
    if n is None or n == m:
        return x_tr, y_tr
    if n < m:
        idx = seeded_subsample(m, n, args.seed)
        return x_tr[idx], y_tr[idx]
    if not args.augment:
        raise ValueError(
            f"n={n} exceeds the {m} training rows available in {args.name!r}: choose n <= {m}, "
            "or pass augment=True to grow an image data set with deformed copies"
        )
    if src.image_shape is None:
        raise ValueError(
            f"n={n} exceeds the {m} training rows available in {args.name!r}, and augmentation only "
            f"applies to the image data sets ({', '.join(IMAGE_SOURCES)}): choose n <= {m}"
        )
    need, ram = n * x_tr.shape[1] * 4, limits.physical_memory()
    if ram is not None and need > ram // 2:
        raise ValueError(
            f"n={n:,} rows of {x_tr.shape[1]} features need {need / 2**30:,.1f} GB, more than half of this "
            f"machine's {ram / 2**30:,.1f} GB of memory: choose a smaller n")
    # Fill one preallocated matrix: originals first, then deformed copies written in place.
    grown = np.empty((n, x_tr.shape[1]), dtype=np.float32)
    grown[:m] = x_tr
    picks = choose_sources(m, n - m, args.seed)
    deform_rows_into(grown[:m], picks, src.image_shape, args.seed, grown[m:])
    notes.append(
        f"training set grown from {m} to {n} rows with InfiMNIST-style deformations of training images "
        f"(originals first, then copies); each original shapes at most {rows_per_original(m, n)} rows, so a "
        "per-row privacy guarantee covers an original image only through group privacy"
    )
    return grown, np.concatenate([y_tr, y_tr[picks]])


def _fingerprint(args: _Args, arrays: tuple[np.ndarray, ...]) -> str:
    """sha256 of the name, the transform parameters and the bytes (with dtype and shape) of the arrays."""
    h = hashlib.sha256()
    params = {
        "name": args.name,
        "n": args.n,
        "dim": args.dim,
        "classes": args.classes,
        "seed": args.seed,
        "test_fraction": args.test_fraction,
        "augment": args.augment,
    }
    if args.preprocess != Preprocess() or args.label_column is not None:  # older fingerprints stay valid
        params.update(preprocess=args.preprocess.text, label_column=args.label_column)
    if args.labels is not None:
        params.update(labels=labels_text(args.labels))
    h.update(json.dumps(params, sort_keys=True).encode())
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"|{a.dtype.str}{a.shape}|".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def _nbytes(ds: Dataset) -> int:
    return sum(a.nbytes for a in (ds.x_train, ds.y_train, ds.x_test, ds.y_test))


class _Memo:
    """Thread-safe LRU of built data sets (``functools.lru_cache`` cannot skip oversized entries)."""

    def __init__(self, maxsize: int, max_bytes: int) -> None:
        self._items: OrderedDict[Hashable, Dataset] = OrderedDict()
        self._maxsize, self._max_bytes = maxsize, max_bytes
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Dataset | None:
        with self._lock:
            ds = self._items.get(key)
            if ds is not None:
                self._items.move_to_end(key)
            return ds

    def put(self, key: Hashable, ds: Dataset) -> None:
        with self._lock:
            if _nbytes(ds) > self._max_bytes:  # at most one large data set: it replaces any other
                for other in [k for k, v in self._items.items() if _nbytes(v) > self._max_bytes]:
                    del self._items[other]
            self._items[key] = ds
            self._items.move_to_end(key)
            while len(self._items) > self._maxsize:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def drop(self, which) -> list[Dataset]:  # noqa: ANN001 - a predicate on keys
        """Remove the entries whose key satisfies ``which``; returns their data sets."""
        with self._lock:
            keys = [k for k in self._items if which(k)]
            return [self._items.pop(k) for k in keys]


_MEMO = _Memo(_MEMO_MAXSIZE, _MEMO_MAX_BYTES)
