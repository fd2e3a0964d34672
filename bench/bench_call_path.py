"""Modules visited on the path of one Explore slider move to its result rows (prints figures; not a test).

    python bench/bench_call_path.py [--data digits] [--eps 2.7] [--show] [--deep]

Traces (``sys.setprofile``) what one Explore refresh does after ε moves, on data not in the cache:
the page's spec (``ui.setting.explore_specs``), the time estimate the page shows
(``ui.progress.estimate_seconds``) and the run (``run_sweep`` with a progress callback), up to the rows.

The trace is reduced to its distinct call paths (a call repeated from the same place, e.g. once per
epsilon or per solver iteration, is walked once), then walked depth first as a sequence of modules:
a *visit* is a stay in one module (entering another module, or coming back to one, starts a new visit)
and a *return* is a visit to a module the path had already left. That rule (``old rule``) also counts the
way back up the stack: A calling B and B returning is A, B, A (a return), so a chain of d stages, each
called by the one before, is 2d - 1 visits and d - 1 returns whatever its design. The ``entry rule``
counts calls only: a *visit* is a call into a module other than its caller's, a *return* such a call into
a module entered before (a stage called again, a callback into a module up the stack, a generator of
the caller resumed by its callee); coming back from a callee is not counted. A chain of stages each
entered once is then one visit per stage and no return. Both are printed. Three scopes:

- ``data path``: the orchestration layers only (``ui.*``, ``app_pages.*``, ``privcore.engine.*``);
  whatever they call elsewhere (a method, the solver, the loader, an accountant, a validator) is one leaf
  and not counted. This is the figure docs/architecture.md reports.
- ``stages``: the stages of the path only (the page's helpers ``ui.setting`` and ``ui.progress``, and
  ``privcore.engine``'s plan, cost, runner, executor and units): the value types and helpers they call
  (specs, cache, rows, progress, the live contexts) are leaves too.
- ``all``: every module of ui/ and privcore/.

A fresh results cache in a temporary folder (``PRIVCORE_CACHE``) makes every point a miss.

``--deep`` traces a deep run instead (``run_deep`` of a small-CNN spec, one epsilon, on a generated
Fashion-MNIST-format folder of 240 + 60 images, as tests/deep do); its data path adds ``privcore.deep.*``,
its stages are :data:`DEEP_STAGES`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LAYERS = ("ui.", "app_pages.", "privcore.engine.")
STAGES = ("ui.setting", "ui.progress", "privcore.engine.plan", "privcore.engine.cost", "privcore.engine.runner",
          "privcore.engine.executor", "privcore.engine.units")
#: The deep run's stages: the runner, the executor, the unit of work, the trainings (teachers, DP-SGD) and the
#: private votes.
DEEP_STAGES = ("privcore.deep.run", "privcore.engine.executor", "privcore.deep.units", "privcore.deep.teachers", "privcore.deep.dpsgd",
               "privcore.deep.votes")


class Node:
    __slots__ = ("module", "name", "children")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name
        self.children: dict[tuple[str, str], Node] = {}


def _module_of(frame) -> str | None:
    name = frame.f_globals.get("__name__", "")
    if name.startswith(("privcore", "ui", "app_pages")) and (name.split(".")[0] in ("privcore", "ui", "app_pages")):
        return name
    return None


def trace(fn):
    root = Node("<bench>", "<bench>")
    stack: list[Node | None] = [root]  # None: a frame outside the project (its project callees hang below the last node)
    frames: list = []
    counts: dict[str, int] = {}

    def last() -> Node:
        for node in reversed(stack):
            if node is not None:
                return node
        return root

    def prof(frame, event, arg):
        if event == "call":
            mod = _module_of(frame)
            if mod is None:
                stack.append(None)
            else:
                parent = last()
                key = (mod, frame.f_code.co_qualname if hasattr(frame.f_code, "co_qualname") else frame.f_code.co_name)
                counts[f"{key[0]}.{key[1]}"] = counts.get(f"{key[0]}.{key[1]}", 0) + 1
                node = parent.children.get(key)
                if node is None:
                    node = parent.children[key] = Node(*key)
                stack.append(node)
            frames.append(frame)
        elif event == "return" and frames:
            frames.pop()
            stack.pop()

    sys.setprofile(prof)
    try:
        value = fn()
    finally:
        sys.setprofile(None)
    return value, root, counts


def walk(root: Node, counted) -> list[str]:
    """The module of every step of a depth-first walk of the counted nodes (consecutive repeats merged)."""
    seq: list[str] = []

    def emit(module: str) -> None:
        if not seq or seq[-1] != module:
            seq.append(module)

    def visit(node: Node) -> None:
        emit(node.module)
        for child in node.children.values():
            if counted(child.module):
                visit(child)
                emit(node.module)

    for child in root.children.values():
        if counted(child.module):
            visit(child)
    return seq


def entries(root: Node, counted) -> list[str]:
    """The entry rule: the module of every call into a module other than its caller's, depth first
    (each call the bench makes counts: it stands for the page)."""
    seq: list[str] = []

    def visit(node: Node, caller: str) -> None:
        if node.module != caller:
            seq.append(node.module)
        for child in node.children.values():
            if counted(child.module):
                visit(child, node.module)

    for child in root.children.values():
        if counted(child.module):
            visit(child, "<bench>")
    return seq


def report(scope: str, root: Node, counted, show: bool) -> None:
    """One scope's figures under both rules (and its sequences with ``show``)."""
    for rule, seq in (("old rule", walk(root, counted)), ("entry rule", entries(root, counted))):
        s = summary(seq)
        print(f"{scope:10s} {rule:10s}: {s['visits']} visits in {s['modules']} modules, {s['returns']} returns, "
              f"{len(edges(root, counted))} distinct module-to-module calls")
        if show:
            print("  " + " -> ".join(seq))


def edges(root: Node, counted) -> set[tuple[str, str]]:
    """The distinct (caller module, callee module) pairs among the counted nodes."""
    out: set[tuple[str, str]] = set()

    def visit(node: Node) -> None:
        for child in node.children.values():
            if counted(child.module):
                if child.module != node.module:
                    out.add((node.module, child.module))
                visit(child)

    for child in root.children.values():
        if counted(child.module):
            visit(child)
    return out


#: Calls that say how often the sweep is planned: data loads, variants, point identities, cache lookups.
PLANNING = ("privcore.data.loader.load_dataset", "privcore.engine.specs.SweepSpec.variants",
            "privcore.engine.cache.point_key", "privcore.engine.cache.ResultCache.get")


def summary(seq: list[str]) -> dict:
    seen: set[str] = set()
    returns = 0
    for m in seq:
        if m in seen:
            returns += 1
        seen.add(m)
    return {"visits": len(seq), "modules": len(seen), "returns": returns}


def _fake_fashion(folder: str) -> None:
    """A tiny Fashion-MNIST-format folder (the format of the real files; random pixels shifted by label)."""
    import gzip

    import numpy as np

    rng = np.random.default_rng(0)
    for split, k in (("train", 240), ("t10k", 60)):
        y = np.arange(k) % 10
        for name, arr in (("images-idx3", rng.integers(0, 100, (k, 28, 28)) + 15 * y.reshape(-1, 1, 1)),
                          ("labels-idx1", y)):
            head = (2048 + arr.ndim).to_bytes(4, "big") + b"".join(int(v).to_bytes(4, "big") for v in arr.shape)
            with gzip.open(f"{folder}/{split}-{name}-ubyte.gz", "wb") as fh:
                fh.write(head + arr.astype(np.uint8).tobytes())


def deep_main(show: bool) -> None:
    from privcore.deep import fashion

    folder = tempfile.mkdtemp(prefix="call_path_fashion_")
    _fake_fashion(folder)
    os.environ[fashion.FASHION_ENV] = folder
    from privcore.deep.run import run_deep
    from privcore.deep.spec import DeepSpec

    spec = DeepSpec(n_train=None, n_test=None, epochs=1, batch_size=40, teachers=4, teacher_epochs=1, teacher_batch=20,
                    epsilons=(1.0,), budgets=(1, 10), repeats=2, device="cpu")
    import privcore.engine.executor  # noqa: F401 - imports are not part of a run

    result, root, counts = trace(lambda: run_deep(spec, progress=lambda fraction, message: None))
    print(f"deep: {len(result.rows)} rows, {result.computed} computed")
    for scope, counted in (("data path", lambda m: m.startswith(LAYERS + ("privcore.deep.",))),
                           ("stages", lambda m: m in DEEP_STAGES), ("all", lambda m: True)):
        report(scope, root, counted, show)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="digits", help="data set of the refresh (default digits: the path, not the time, is measured)")
    ap.add_argument("--eps", type=float, default=2.7, help="the epsilon the slider moves to")
    ap.add_argument("--show", action="store_true", help="print the sequence of modules")
    ap.add_argument("--deep", action="store_true", help="trace a deep run instead")
    args = ap.parse_args()
    os.environ["PRIVCORE_CACHE"] = tempfile.mkdtemp(prefix="call_path_")
    if args.deep:
        deep_main(args.show)
        return

    from ui.setting import build_data_info, explore_specs
    from ui.state import DEFAULTS

    info = build_data_info(args.data)
    values = {**DEFAULTS, "dataset": args.data, "eps": args.eps, "repeats": 2}

    # Imports and the data set's first load are not part of a slider move (a ``from`` import of the runner
    # would also call its module ``__getattr__``).
    import privcore.engine.cost  # noqa: F401
    from privcore.engine.runner import run_sweep
    from ui import progress

    def refresh():
        spec = explore_specs(info, values)[0]  # the current setting's point
        if hasattr(progress, "plan_and_estimate"):  # one plan for the estimate and the run
            plan, _ = progress.plan_and_estimate(spec)
            return run_sweep(spec, progress=lambda fraction, message: None, plan=plan)
        progress.estimate_seconds(spec)  # before issue 31: the estimate planned on its own
        return run_sweep(spec, progress=lambda fraction, message: None)

    result, root, counts = trace(refresh)
    print(f"{len(result.rows)} rows, {result.computed} computed, {result.cached} cached")
    for scope, counted in (("data path", lambda m: m.startswith(LAYERS)), ("stages", lambda m: m in STAGES),
                           ("all", lambda m: True)):
        report(scope, root, counted, args.show)
    print("planning calls: " + ", ".join(f"{name.rsplit('.', 1)[-1] if 'Sweep' not in name else 'variants'} "
                                         f"{counts.get(name, 0)}" for name in PLANNING))


if __name__ == "__main__":
    main()
