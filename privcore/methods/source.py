"""The version of a method's code that its cached results are keyed by.

A cached result must not outlive the code that computed it. :data:`privcore.engine.cache.SCHEMA_VERSION`
re-keys every result when a change alters what a stored result means; :func:`code_version` re-keys one
method's own: a digest of the source of every privcore module its class's modules import, directly or
through others, at the top or inside a function (read from the files, so an import that has not run yet
counts): its own module and its bases (``base.py``, ``teachers.py``...), and the accountants, samplers
and solver they call. Editing a method's file then computes its points afresh instead of serving the old
code's rows and leaves the other methods' results cached; editing an accountant re-keys the methods that
import it (it was keyed by the methods' own modules only, so a changed accountant's old rows were served
as current).
"""

from __future__ import annotations

import ast
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
    roots = [k.__module__ for k in cls.__mro__ if k.__module__.startswith("privcore.")]
    for module_name in sorted(_closure(tuple(dict.fromkeys(roots)))):
        text = _source(module_name)
        if not text:  # no source beside the module (a frozen build): its version stands for it
            from .. import __version__

            text = f"{module_name}@{__version__}".encode()
        digest.update(module_name.encode() + b"\0" + text + b"\0")
    return digest.hexdigest()[:16]


def _path(module_name: str) -> Path | None:
    """The source file of a privcore module (a loaded one's ``__file__``, else under the package)."""
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if isinstance(path, str):
        return Path(path)
    base = Path(__file__).resolve().parents[1].joinpath(*module_name.split(".")[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _source(module_name: str) -> bytes:
    path = _path(module_name)
    try:
        return path.read_bytes() if path is not None else b""
    except OSError:
        return b""


def _is_module(name: str) -> bool:
    """A privcore module with a file of its own; not a package, whose ``__init__`` imports every method
    (the registry) and would tie every method's key to every other's."""
    path = _path(name) if name.startswith("privcore") else None
    return path is not None and path.name != "__init__.py"


def _imports(module_name: str) -> set[str]:
    """The privcore modules ``module_name``'s source imports (anywhere in it; relative ones resolved)."""
    text = _source(module_name)
    if not text:
        return set()
    path = _path(module_name)
    package = module_name if path is not None and path.name == "__init__.py" else module_name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("privcore"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if not target.startswith("privcore"):
                continue
            found.add(target)  # dropped below when it is a package: its named modules count instead
            found.update(f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}"))
    return {m for m in found if _is_module(m)}


def _closure(roots: tuple[str, ...]) -> set[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_imports(name) - seen)
    return seen
