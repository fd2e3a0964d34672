"""Where privcore keeps what it computes: one cache folder for results, calibrations and data.

``$PRIVCORE_CACHE`` when set; else, running from a source checkout (an editable install), the
checkout's ``cache/`` folder; else, an installed package, the user's cache folder
(``$XDG_CACHE_HOME/privcore``, ``~/.cache/privcore``; ``%LOCALAPPDATA%\\privcore`` on Windows),
never a folder inside site-packages.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "checkout_root"]


def checkout_root() -> Path | None:
    """The source checkout privcore runs from (the folder holding ``pyproject.toml`` beside
    ``privcore/``), or None for an installed package."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() and (root / "privcore" / "__init__.py").is_file() else None


def cache_dir() -> Path:
    """The cache folder (not created here): see the module's docstring for the order."""
    env = os.environ.get("PRIVCORE_CACHE")
    if env:
        return Path(env).expanduser()
    root = checkout_root()
    if root is not None:
        return root / "cache"
    if os.name == "nt" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "privcore"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "privcore"
