"""Image data for the deep models: one frozen container, its fingerprint, subsets and augmentation.

Images are kept as uint8 ``[N, C, H, W]`` (the files' own values); :func:`to_float` scales them to
[0, 1] and normalises per channel on the device, batch by batch. Augmentation (random crops with
zero padding and horizontal flips, the paper's "standard data augmentation") draws from an explicit
generator, so a run is reproducible and resumes identically from a checkpoint.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

__all__ = ["ImageData", "to_float", "augment_batch"]


@dataclass(frozen=True, eq=False)
class ImageData:
    """Train and test images (uint8 ``[N, C, H, W]``) with labels 0..classes-1 (int64)."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int = 10
    #: Per-channel normalisation constants in [0, 1]: fixed published values, never computed from
    #: the private training images (that would leak them outside the privacy accounting).
    mean: tuple[float, ...] = (0.5,)
    std: tuple[float, ...] = (0.5,)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for part in ("train", "test"):
            x, y = getattr(self, f"x_{part}"), getattr(self, f"y_{part}")
            if x.dtype != np.uint8 or x.ndim != 4:
                raise ValueError(f"{self.name}: x_{part} must be uint8 [N, C, H, W], got {x.dtype} {x.shape}")
            if y.shape != (x.shape[0],):
                raise ValueError(f"{self.name}: y_{part} must have one label per image ({x.shape[0]}), got {y.shape}")
            if y.size and (int(y.min()) < 0 or int(y.max()) >= self.classes):
                raise ValueError(f"{self.name}: {part} labels must be in 0..{self.classes - 1}")
        if len(self.mean) != self.x_train.shape[1] or len(self.std) != self.x_train.shape[1]:
            raise ValueError(f"{self.name}: mean and std need one value per channel ({self.x_train.shape[1]})")
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise ValueError(f"{self.name}: train images are {self.x_train.shape[1:]}, test {self.x_test.shape[1:]}")

    @property
    def channels(self) -> int:
        return int(self.x_train.shape[1])

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(int(s) for s in self.x_train.shape[1:])  # type: ignore[return-value]

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of the four arrays (shapes and bytes): the data part of every cache key."""
        h = hashlib.sha256(self.name.encode())
        for a in (self.x_train, self.y_train, self.x_test, self.y_test):
            h.update(repr((a.dtype.str, a.shape)).encode())
            h.update(np.ascontiguousarray(a).data)
        return h.hexdigest()

    def subset(self, n_train: int | None, n_test: int | None) -> "ImageData":
        """The first ``n_train`` training and ``n_test`` test images (None: all of them)."""
        def cut(n: int | None, total: int, what: str) -> int:
            if n is None:
                return total
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= total:
                raise ValueError(f"{what} must be an integer in [1, {total:,}] for {self.name}, got {n!r}")
            return n
        a, b = cut(n_train, len(self.y_train), "n_train"), cut(n_test, len(self.y_test), "n_test")
        if (a, b) == (len(self.y_train), len(self.y_test)):
            return self
        return ImageData(self.name, self.x_train[:a], self.y_train[:a], self.x_test[:b], self.y_test[:b],
                         self.classes, self.mean, self.std, self.notes + (f"subset: first {a:,} training and {b:,} test images",))


def to_float(x: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    """uint8 ``[..., C, H, W]`` -> float32 normalised per channel."""
    m = torch.tensor(mean, dtype=torch.float32, device=x.device).view(-1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32, device=x.device).view(-1, 1, 1)
    return (x.to(torch.float32) / 255.0 - m) / s


def augment_batch(x: torch.Tensor, gen: torch.Generator, pad: int) -> torch.Tensor:
    """Random crop (zero padding ``pad``) and horizontal flip of each image of float ``[b, C, H, W]``.

    Every draw comes from ``gen`` (on ``x``'s device): two offsets and one coin per image.
    """
    b, c, h, w = x.shape
    if b == 0:
        return x
    off = torch.randint(0, 2 * pad + 1, (b, 2), generator=gen, device=x.device)
    flip = torch.rand(b, generator=gen, device=x.device) < 0.5
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    rows = (off[:, 0].view(b, 1) + torch.arange(h, device=x.device).view(1, h))  # [b, h]
    cols = (off[:, 1].view(b, 1) + torch.arange(w, device=x.device).view(1, w))  # [b, w]
    cols = torch.where(flip.view(b, 1), cols.flip(1), cols)
    idx_r = rows.view(b, 1, h, 1).expand(b, c, h, padded.shape[3])
    out = padded.gather(2, idx_r)
    idx_c = cols.view(b, 1, 1, w).expand(b, c, h, w)
    return out.gather(3, idx_c)
