"""Compatibility alias: the training context lives in :mod:`privcore.context` (below the methods)."""

from ..context import TrainContext, accuracy, unit_ball_float32

__all__ = ["TrainContext", "accuracy", "unit_ball_float32"]
