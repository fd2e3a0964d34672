"""Exceptions raised by the data package."""

from __future__ import annotations

__all__ = ["DataFileError", "DataUnavailableError"]


class DataFileError(ValueError):
    """A data file exists (or was named) but cannot be used; the message says why and where."""


class DataUnavailableError(RuntimeError):
    """A data set that must be fetched is not on disk and cannot be fetched (offline, bad checksum)."""
