"""The engine's imports form no circle, and privcore never imports Streamlit (issue 31, item 1).

Every import counts, at module level or inside a function, except those under ``if TYPE_CHECKING:``
(annotations only): a lazy import that closes a circle still ties the two modules together.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Known debts, (importer, imported): none (cache_faults' probe built the cache's JSON disk through
#: ``cache._disk``, a lazy import back into the module that imports it: the disk is now cache_disk's).
KNOWN: set[tuple[str, str]] = set()


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path) -> set[str]:
    """The modules ``path`` imports (relative imports resolved), annotations-only blocks left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
               for child in node.body for n in ast.walk(child)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)  # "from . import context": a module
    return out


def _graph(folder: str) -> dict[str, set[str]]:
    files = {_module(p): p for p in (ROOT / folder).rglob("*.py")}
    return {m: {t for t in _imports(p) if t in files and t != m and (m, t) not in KNOWN} for m, p in files.items()}


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                return stack[stack.index(t):] + [t]
            if t not in state and (found := visit(t)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_engine_imports_no_module_that_imports_it_back():
    assert _circle(_graph("privcore/engine")) is None


def test_the_check_finds_a_circle():
    assert ("privcore.engine.cache", "privcore.engine.cache_faults") in {(m, t) for m, ts in _graph(
        "privcore/engine").items() for t in ts}  # relative imports are resolved
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b"}, "b": set()}) is None


def test_privcore_never_imports_streamlit():
    for path in (ROOT / "privcore").rglob("*.py"):
        assert not any(m.split(".")[0] == "streamlit" for m in _imports(path)), path
