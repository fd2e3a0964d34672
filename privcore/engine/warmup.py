"""Pay the one-off costs of a first request ahead of time (for a server such as the dashboard)."""

from __future__ import annotations

__all__ = ["warm_up"]


def warm_up(dataset: str = "mnist-5k") -> None:
    """Import the DP-SGD accountants (Opacus, about 2 s: the package pulls in torch.distributed;
    dp_accounting's PLD, about 1 s: scipy.stats) and load ``dataset`` into the in-process memo, so
    the first calibration and sweep do not wait for them.

    Safe to run in a background thread: both steps are idempotent and results are memoised.
    """
    import importlib

    from ..data import load_dataset

    importlib.import_module("opacus.accountants")  # the import itself is the point
    importlib.import_module("dp_accounting.pld.privacy_loss_distribution")

    load_dataset(dataset)
