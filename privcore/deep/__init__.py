"""Deep models for the paper's Section 4.3 (Figure 7): DP-SGD against the teacher-vote methods.

One small module per concern: ``images`` (the container, augmentation), ``fashion`` and ``cifar``
(the readers), ``data`` (by name), ``models`` (GroupNorm ResNet-20, small CNN), ``dpsgd``
(clipped sums, noise, scale, the training loop), ``ghost`` (book-keeping ghost clipping: the
clipped sum from one backward pass; ``torch.func`` per-example gradients are the fallback), ``teachers`` (T teachers, vmapped or
one by one), ``votes`` (the registry's teacher-vote methods over their votes), ``loop``
(schedule, momentum, checkpoints), ``spec`` (DeepSpec, presets, DeepRow), ``run`` (run_deep),
``cli`` (``python -m privcore deep``). Nothing here imports torchvision.
"""

from __future__ import annotations

__all__ = ["DeepSpec", "DeepRow", "run_deep", "figure7_specs", "PRESETS"]


def __getattr__(name: str):  # noqa: ANN202 - lazy: importing privcore.deep stays cheap
    if name in ("DeepSpec", "DeepRow", "figure7_specs", "PRESETS"):
        from . import spec

        return getattr(spec, name)
    if name == "run_deep":
        from .run import run_deep

        return run_deep
    raise AttributeError(name)
