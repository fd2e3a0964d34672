"""The one place that decides where tensors live, and how seeded generators are made.

Every random draw in privcore takes a ``torch.Generator`` created here from an experiment seed and a
purpose label, on the same device as the tensors it fills. Nothing seeds torch globally.

A public seed makes every draw reproducible: right for exploring, wrong for a release someone
publishes (whoever knows the seed knows the noise, and can subtract it). :func:`secure_seed` draws
a seed from the operating system's entropy instead (``secrets``), and ``make_generator(None, ...)``
seeds a generator with a fresh one; such a seed is never returned to the caller by the release
paths that use it, printed or stored. (The generators themselves stay torch's; this closes the
public-seed attack, not attacks on the generator or on floating-point sampling.)
"""

from __future__ import annotations

import hashlib
import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - imported where used (start-up stays light)
    import torch

from .validation import check_choice

__all__ = ["resolve_device", "make_generator", "derive_seed", "secure_seed", "DEVICE_CHOICES"]

from .knobs import DEVICE_CHOICES  # declared with the other knobs


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Map ``"auto" | "cpu" | "cuda"`` (or a ``torch.device``) to a concrete ``torch.device``.

    ``auto`` picks CUDA when available, else CPU. Asking for ``cuda`` without a GPU raises
    ``ValueError`` with a clear message instead of failing later inside a kernel.
    """
    import torch
    if isinstance(device, torch.device):
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("device must be 'cpu' or 'auto' here: CUDA was requested but no GPU is available")
        return device
    name = check_choice("device", device, DEVICE_CHOICES)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device must be 'cpu' or 'auto' here: CUDA was requested but no GPU is available")
    return torch.device(name)


def derive_seed(seed: int, *labels: object) -> int:
    """Deterministically derive a 63-bit seed from an experiment seed and labels.

    Streams for different purposes (data split, noise of method m at repetition r, ...) must be
    independent of each other and of what else is computed in the same batch, so each one gets
    its own seed from a hash of (seed, labels), never from a shared generator's position.
    """
    # Seeds are identifiers, not counts: any 64-bit value (derived seeds are 63-bit) is exact.
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 64:
        raise ValueError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    text = repr((int(seed),) + tuple(str(x) for x in labels)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") & ((1 << 63) - 1)


def secure_seed() -> int:
    """A fresh 63-bit seed from the operating system's entropy (``secrets.randbits``).

    For releases that may be published: unlike an experiment seed it is unknown to everyone,
    including whoever runs the code, so the noise it drives cannot be recomputed.
    """
    return secrets.randbits(63)


def make_generator(seed: int | None, *labels: object, device: torch.device | str = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with ``derive_seed(seed, *labels)``; ``seed=None``:
    with a fresh :func:`secure_seed` instead (every call a new, unrepeatable stream)."""
    import torch
    dev = resolve_device(device) if isinstance(device, str) else device
    gen = torch.Generator(device=dev)
    gen.manual_seed(secure_seed() if seed is None else derive_seed(seed, *labels))
    return gen
