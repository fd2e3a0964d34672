"""On-disk result cache: plain numbers keyed by a hash of the point, the data and a schema version.

The device is deliberately not part of the key: a result computed on a GPU is reused on a CPU.
Bump :data:`SCHEMA_VERSION` whenever a change alters what a stored number means.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["SCHEMA_VERSION", "ResultCache", "point_key", "default_results_dir"]

SCHEMA_VERSION = 4  # 4: certified solver residual in every sensitivity, replace-one DP-SGD, approximate minima perturbation
# 3: DP-SGD draws batches and noise per chunk of steps; solves in the data eigenbasis
# 2: Gaussian loss perturbation calibrated on ||P b|| ~ sigma chi_2C; L-BFGS memory 5


def default_results_dir() -> Path:
    """``$PRIVCORE_CACHE/results`` if set, else ``<repo>/cache/results``."""
    env = os.environ.get("PRIVCORE_CACHE")
    base = Path(env).expanduser() if env else Path(__file__).resolve().parents[2] / "cache"
    return base / "results"


def point_key(point: dict[str, Any], fingerprint: str) -> str:
    """sha256 of the canonical JSON of ``point`` + data ``fingerprint`` + schema version."""
    text = json.dumps({"point": point, "data": fingerprint, "schema": SCHEMA_VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class ResultCache:
    """A diskcache store of JSON-able dicts; ``enabled=False`` turns it into a no-op."""

    def __init__(self, directory: str | os.PathLike[str] | None = None, enabled: bool = True) -> None:
        self.enabled = enabled
        self.directory = Path(directory) if directory is not None else default_results_dir()
        self._store = None
        if enabled:
            import diskcache

            self.directory.mkdir(parents=True, exist_ok=True)
            self._store = diskcache.Cache(str(self.directory))

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored dict for ``key``, or None."""
        if self._store is None:
            return None
        value = self._store.get(key)
        return json.loads(value) if isinstance(value, str) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` (must be JSON-serialisable: plain numbers, strings, lists)."""
        if self._store is not None:
            self._store.set(key, json.dumps(value))

    def clear(self) -> None:
        """Remove every stored result."""
        if self._store is not None:
            self._store.clear()

    def __len__(self) -> int:
        return 0 if self._store is None else len(self._store)
