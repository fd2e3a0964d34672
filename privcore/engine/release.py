"""Giving back the memory a user's data file holds, when nobody needs it any more.

A data file is held in up to four places in a process: its parsed matrix
(:mod:`privcore.data.userfile`), the data sets built from it (:mod:`privcore.data.loader`'s memo),
the training context of the last sweep on it (:mod:`privcore.engine.runner`) and the last leakage
game on it (:mod:`privcore.leakage.run`). Each is bounded in count, but a server that keeps them
after the session that uploaded the file has ended holds several copies of the largest files it
has seen. :func:`release_data_file` drops them all (the dashboard calls it when an upload is
deleted or its last session ends; ``bench/bench_upload_memory.py`` measures the effect), and
:func:`trim_memory` hands the freed heap back to the operating system.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys

__all__ = ["release_data_file", "trim_memory", "trim_heap"]


def release_data_file(path: str | os.PathLike[str]) -> int:
    """Drop everything this process keeps of the user file at ``path``; returns how many data sets
    built from it were known. Computations under way keep what they hold until they end."""
    from ..data.loader import forget_file
    from . import context

    prints = forget_file(path)
    context.forget(prints)
    if prints:  # lam = "auto"'s validation context is built from a subset: its own fingerprint
        from . import tuning

        tuning.clear_selection_context()
    leakage = sys.modules.get("privcore.leakage.run")  # only if a leakage game was ever played here
    if leakage is not None:
        leakage.forget(prints)
    trim_memory()
    return len(prints)


def trim_memory() -> None:
    """Collect garbage and return free heap pages to the operating system (:func:`trim_heap`)."""
    gc.collect()
    trim_heap()


def trim_heap() -> None:
    """Return free heap pages to the operating system (glibc's ``malloc_trim``, every thread's arena):
    matrices below glibc's mmap threshold come from the heap, which otherwise keeps its peak size."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # another C library: the heap keeps its size
            pass
