"""The version of a method's code that its cached results are keyed by.

A cached result must not outlive the code that computed it. :data:`privcore.engine.cache.SCHEMA_VERSION`
re-keys every result when a change alters what a stored result means; :func:`code_version` re-keys one
method's own: a digest of the source of every privcore module among its class's bases (its own module,
and the shared ones it builds on: ``base.py``, ``forward.py``, ``teachers.py`` for the vote methods). Editing
a method's file then computes its points afresh instead of serving the old code's rows, and leaves the other
methods' results cached. Code outside ``privcore/methods/`` that a result depends on (the accountants, the
solver, the engine) still needs the schema version.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path

__all__ = ["code_version"]


def code_version(method: object) -> str:
    """16 hex digits of the source of ``method``'s class and of its privcore bases (by module)."""
    return _of_class(type(method))


@functools.cache
def _of_class(cls: type) -> str:
    digest = hashlib.sha256()
    for module_name in dict.fromkeys(k.__module__ for k in cls.__mro__ if k.__module__.startswith("privcore.")):
        module = sys.modules.get(module_name)
        path = getattr(module, "__file__", None)
        try:
            text = Path(path).read_bytes() if isinstance(path, str) else b""
        except OSError:
            text = b""
        if not text:  # no source beside the module (a frozen build): its version stands for it
            from .. import __version__

            text = f"{module_name}@{__version__}".encode()
        digest.update(module_name.encode() + b"\0" + text + b"\0")
    return digest.hexdigest()[:16]
