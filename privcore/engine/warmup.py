"""Pay the one-off costs of a first request ahead of time (for a server such as the dashboard)."""

from __future__ import annotations

import atexit
import importlib
import logging
import threading

__all__ = ["warm_up"]

_LOG = logging.getLogger(__name__)


#: Background imports started in this process (joined at exit, see :func:`_join_imports`).
_IMPORTS: list[threading.Thread] = []
_IMPORTS_LOCK = threading.Lock()


def _join_imports(timeout: float = 30.0) -> None:
    for thread in list(_IMPORTS):
        thread.join(timeout)


def _import_quietly(module: str) -> None:
    try:
        importlib.import_module(module)  # the import itself is the point
    except Exception:  # noqa: BLE001 - the calibration that needs it will report the error itself
        _LOG.exception("warm-up: importing %s failed", module)


def warm_up(dataset: str = "mnist-5k", accounting: str = "corrected", *, wait: bool = True) -> threading.Thread:
    """Import DP-SGD's accountant for ``accounting`` in a background thread while ``dataset`` loads
    into the in-process memo, so the first calibration and sweep do not wait for either.

    ``corrected`` and ``tight`` calibrate with dp_accounting's replace-one PLD (about 1 s to import:
    scipy.signal, .stats, .optimize), only ``paper`` uses Opacus's RDP accountant (about 2 s: the
    package pulls in torch.distributed). The import runs beside the data load and, with
    ``wait=False``, beside whatever the caller computes next (the methods before DP-SGD release the
    interpreter lock in their matrix products); the thread is returned. Safe to run in a background
    thread: every step is idempotent, and concurrent loads of one data set build it once.

    No import when the calibration table shipped with privcore answers this data set's default
    settings (``corrected`` accounting, privcore/accounting/bundle.py): the default view then never
    calls the accountant, and a first visit's two cores are better spent elsewhere; a setting
    outside the table imports it when first calibrated.
    """
    from ..accounting import bundle
    from ..data import load_dataset

    module = "opacus.accountants" if accounting == "paper" else "dp_accounting.pld.privacy_loss_distribution"
    if accounting == "corrected" and bundle.covers(dataset):
        module = "privcore.accounting.pld_approx"  # what the table's re-check uses (numpy only, milliseconds)
    thread = threading.Thread(target=_import_quietly, args=(module,), name="privcore-accountant-import", daemon=True)
    with _IMPORTS_LOCK:
        if not _IMPORTS:
            # An interpreter that exits while a daemon thread is inside a native import aborts
            # ("terminate called without an active exception", exit code 134): let them finish first.
            atexit.register(_join_imports)
        _IMPORTS.append(thread)
    thread.start()
    load_dataset(dataset)
    if wait:
        thread.join()
    return thread
