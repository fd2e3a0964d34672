"""The deep-model data sets by name: :data:`DEEP_DATASETS` and :func:`load_images`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - images needs torch: the CLI's --help stays light without it
    from .images import ImageData

__all__ = ["DEEP_DATASETS", "load_images"]

#: Names accepted by :func:`load_images` (and the CLI's ``--dataset``).
DEEP_DATASETS: tuple[str, ...] = ("fashion-mnist", "cifar-10")


def load_images(name: str, n_train: int | None = None, n_test: int | None = None) -> ImageData:
    """The data set ``name`` (optionally its first ``n_train``/``n_test`` images)."""
    if name == "fashion-mnist":
        from .fashion import load_fashion_mnist

        data = load_fashion_mnist()
    elif name == "cifar-10":
        from .cifar import load_cifar10

        data = load_cifar10()
    else:
        raise ValueError(f"dataset must be one of {', '.join(DEEP_DATASETS)}, got {name!r}")
    return data.subset(n_train, n_test)
