"""Pay the one-off costs of a first request ahead of time (for a server such as the dashboard)."""

from __future__ import annotations

__all__ = ["warm_up"]


def warm_up(dataset: str = "mnist-5k", accounting: str = "corrected") -> None:
    """Import DP-SGD's accountant for ``accounting`` and load ``dataset`` into the in-process memo,
    so the first calibration and sweep do not wait for them.

    ``corrected`` and ``tight`` calibrate with dp_accounting's replace-one PLD (about 1 s to import:
    scipy.stats); only ``paper`` uses Opacus's RDP accountant (about 2 s: the package pulls in
    torch.distributed), so Opacus is imported only for it: on a 2-core machine a first visit
    shares the cores with this warm-up. Safe to run in a background thread: every step is
    idempotent and memoised.
    """
    import importlib

    from ..data import load_dataset

    if accounting == "paper":
        importlib.import_module("opacus.accountants")  # the import itself is the point
    else:
        importlib.import_module("dp_accounting.pld.privacy_loss_distribution")

    load_dataset(dataset)
