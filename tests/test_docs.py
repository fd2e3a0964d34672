"""The documents name only what exists.

README.md and every docs/**/*.md are read for what they point at in the repository:

- repository paths (``privcore/...``, ``tests/...``, ``bench/...``, ``docs/...``, ``app_pages/...``,
  ``ui/...``, top-level files such as ``app.py``), brace forms (``fig7{a,b}_...``) and globs included,
  and ``tests/x.py::test_name`` (the test must be defined in that file);
- relative Markdown links (``[text](docs/spec.md)``, ``(../README.md)``);
- dotted module names ``privcore.x.y`` (also ``ui.x``, ``app_pages.x``) and a function, class or
  constant named after them (``privcore.engine.runner.running_elsewhere``), resolved in the source
  with ``ast``, so nothing heavy is imported;
- code names in backticks that look like identifiers (``_warm_all``, ``TrainContext.solve``,
  ``NEWTON_HESSIAN_ROWS``): they must occur in the code;
- "<number> methods": the count of registered methods;
- every ``privcore ...`` / ``python -m privcore ...`` command line: its sub-command, flags and choices
  must parse with the CLI's own parser (nothing is run).

CHANGELOG.md is not read: its entries are history and may name files that were since removed.
``check`` returns the stale references, so a test can show it finds a planted one.
"""

from __future__ import annotations

import ast
import functools
import glob
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TOP_DIRS = ("privcore", "tests", "bench", "docs", "app_pages", "ui", ".ci", ".streamlit")
TOP_FILES = r"app\.py|pyproject\.toml|pytest\.ini|requirements(?:-[a-z]+)?\.txt|CHANGELOG\.md|README\.md"
#: Written by a run, never committed (git-ignored): named in the docs as where output goes.
RUNTIME_OUTPUTS = ("bench/out/",)

PATH_RE = re.compile(r"(?<![\w$./-])((?:%s)/[\w.{},*/-]*[\w*}](?:::\w+)?)" % "|".join(re.escape(d) for d in TOP_DIRS))
TOP_FILE_RE = re.compile(r"(?<![\w./-])(%s)(?![\w-])" % TOP_FILES)
LINK_RE = re.compile(r"\]\(([^)\s#]*)(?:#([^)\s]*))?\)")
MODULE_RE = re.compile(r"(?<![\w./-])((?:privcore|ui|app_pages)(?:\.[A-Za-z_]\w*)+)")
TICK_RE = re.compile(r"`([^`\n]+)`")
IDENT_RE = re.compile(r"^([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?(?:\(.*\))?$")
NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                "ten": 10, "eleven": 11, "twelve": 12}
#: "the five methods" / "all eight methods" claim the whole registry ("the three methods added since" does not).
COUNT_RE = re.compile(r"\b(?:the|all) (%s) (?:private )?methods\b(?! (?:added|beyond|since|of|that|from))"
                      % "|".join(NUMBER_WORDS), re.IGNORECASE)
#: Names outside this repository's code that the docs quote in backticks (other libraries' API).
EXTERNAL_NAMES = {
    "functional_call", "stack_module_state", "from_gaussian_mechanism", "pessimistic_estimate",
    "sampling_prob", "neighboring_relation", "NeighboringRelation", "REPLACE_ONE", "GradSampleModule",
    "PLDAccountant", "SelfComposedDpEvent", "RandomizedResponse", "epsilon_tolerance", "mnist_data",
    "weights_only", "run_every", "on_change", "fileWatcherType", "index_select", "setInterval",
    "stSkeleton", "tEXt", "OMP_NUM_THREADS", "mechanism_calibration", "job_script",
}


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@functools.cache
def _code_text() -> str:
    parts = []
    for pattern in ("privcore/**/*.py", "ui/**/*.py", "app_pages/**/*.py", "bench/**/*.py", "bench/*.sh",
                    "tests/**/*.py", "app.py", ".ci/run", ".streamlit/config.toml", "pytest.ini", "*.toml"):
        for p in ROOT.glob(pattern):
            if p.is_file() and p.name != "test_docs.py":
                parts.append(p.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


def _in_code(word: str) -> bool:
    return re.search(r"(?<![\w])%s(?![\w])" % re.escape(word), _code_text()) is not None


def _expand_braces(path: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [q for alt in m.group(1).split(",") for q in _expand_braces(path[:m.start()] + alt + path[m.end():])]


def _anchors(md: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens."""
    found = set()
    for heading in re.findall(r"^#+\s+(.+?)\s*$", md.read_text(encoding="utf-8"), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", "")).replace(" ", "-")
        found.add(slug)
    return found


def _path_problem(ref: str) -> str | None:
    path, _, test = ref.partition("::")
    path = path.rstrip(".,;:")
    if path.startswith(RUNTIME_OUTPUTS):
        return None
    for one in _expand_braces(path):
        if "*" in one:
            if not glob.glob(str(ROOT / one)):
                return f"no file matches {one}"
            continue
        if not (ROOT / one).exists():
            return f"no such path {one}"
        if test:
            source = (ROOT / one).read_text(encoding="utf-8")
            prefix = test.rstrip("_")
            if not re.search(r"def %s" % re.escape(prefix), source):
                return f"{one} defines no test {test}"
    return None


@functools.cache
def _module_ast(parts: tuple[str, ...]) -> ast.Module | None:
    base = ROOT.joinpath(*parts)
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return ast.parse(f.read_text(encoding="utf-8"))
    return None


def _bound_names(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """Names a module or class body binds: defs, classes, assignments, imports (also under if/try)."""
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names[n.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names[(a.asname or a.name).split(".")[0]] = node
        elif isinstance(node, (ast.If, ast.Try)):
            inner = node.body + node.orelse + [s for h in getattr(node, "handlers", []) for s in h.body]
            names.update(_bound_names(inner))
    return names


def _module_problem(dotted: str) -> str | None:
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        tree = _module_ast(tuple(parts[:k]))
        if tree is None:
            continue
        rest = parts[k:]
        if not rest:
            return None
        names = _bound_names(tree.body)
        if rest[0] not in names:
            return f"{'.'.join(parts[:k])} defines no {rest[0]}"
        node = names[rest[0]]
        if len(rest) > 1 and isinstance(node, ast.ClassDef):
            members = _bound_names(node.body)
            if rest[1] not in members and not _in_code(rest[1]):
                return f"{'.'.join(parts[:k + 1])} has no {rest[1]}"
        return None
    return f"no module {dotted}"


@functools.cache
def _classes() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for pattern in ("privcore/**/*.py", "ui/**/*.py", "app_pages/**/*.py", "bench/**/*.py", "app.py"):
        for p in ROOT.glob(pattern):
            for m in re.finditer(r"^\s*class (\w+)", p.read_text(encoding="utf-8"), re.MULTILINE):
                found.setdefault(m.group(1), []).append(p)
    return found


def _looks_like_code_name(word: str) -> bool:
    return "_" in word.strip("_") or word.startswith("_") or re.search(r"[a-z][A-Z]|^[A-Z][a-z]+[A-Z]", word) is not None


def _tick_problem(token: str) -> str | None:
    m = IDENT_RE.match(token.strip())
    if not m:
        return None
    first, second = m.group(1), m.group(2)
    if first in ("privcore", "ui", "app_pages") or first in EXTERNAL_NAMES:
        return None  # dotted modules are checked above
    if second is None:
        if _looks_like_code_name(first) and not _in_code(first):
            return f"`{first}` occurs nowhere in the code"
        return None
    if second in EXTERNAL_NAMES:
        return None
    if first in _classes():
        files = _classes()[first]
        if not any(re.search(r"\b%s\b" % re.escape(second), f.read_text(encoding="utf-8")) for f in files):
            return f"class {first} has no {second}"
        return None
    modules = [p for d in ("privcore", "ui") for p in (ROOT / d).rglob(f"{first}.py")]
    if modules:
        if not any(re.search(r"\b%s\b" % re.escape(second), p.read_text(encoding="utf-8")) for p in modules):
            return f"module {first} names no {second}"
        return None
    if _looks_like_code_name(second) and not _in_code(second):
        return f"`{second}` occurs nowhere in the code"
    return None


CLI_RE = re.compile(r"^\s*(?:\$ )?(?:python -m privcore|privcore)\s+([^`#]*)")


def _cli_problem(args_text: str) -> str | None:
    """A command line the CLI's parser refuses (or that is cut by a line continuation: not checked)."""
    import contextlib
    import io
    import shlex

    from privcore.cli import build_parser

    text = args_text.strip()
    if not text or text.endswith("\\") or "..." in text or "<" in text:
        return None
    try:
        argv = shlex.split(text)
    except ValueError:
        return None
    parser = build_parser()
    if not any(a.startswith("-") for a in argv):  # a sub-command named in prose: it must exist (its --help)
        argv = [*argv, "--help"]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args, extra = parser.parse_known_args(argv)
    except SystemExit as exc:
        if exc.code == 0:  # --help
            return None
        return f"the CLI refuses `{text}`: {(err.getvalue().strip().splitlines() or [''])[-1]}"
    except Exception as exc:  # noqa: BLE001 - the CLI's own usage error (privcore.cli._UsageError)
        return f"the CLI refuses `{text}`: {exc}"
    if extra and getattr(args, "command", None) != "app":
        return f"the CLI refuses `{text}`: unrecognized {' '.join(extra)}"
    return None


def _registry_size() -> int:
    from privcore.methods import REGISTRY  # light: the registry imports no torch (tests/test_cli_startup.py)

    return len(REGISTRY)


def check(text: str, where: Path) -> list[str]:
    """Every stale reference in ``text`` (a document at ``where``), as 'file:line: what'."""
    problems = []
    registry = None
    fenced = False
    for lineno, line in enumerate(text.splitlines(), 1):
        found: list[str] = []
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        for m in PATH_RE.finditer(line):
            found.append(_path_problem(m.group(1)))
        for m in TOP_FILE_RE.finditer(line):
            if not (ROOT / m.group(1)).exists():
                found.append(f"no such file {m.group(1)}")
        for m in LINK_RE.finditer(line):
            target, anchor = m.group(1), m.group(2)
            if re.match(r"^[a-z]+:", target):
                continue
            linked = (where.parent / target) if target else where
            if not linked.exists():
                found.append(f"broken link {target}")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                found.append(f"no heading #{anchor} in {target or where.name}")
        for m in MODULE_RE.finditer(line):
            found.append(_module_problem(m.group(1)))
        for m in TICK_RE.finditer(line):
            found.append(_tick_problem(m.group(1)))
        commands = [line] if fenced else [t for t in TICK_RE.findall(line)]
        for command in commands:
            m = CLI_RE.match(command)
            if m:
                found.append(_cli_problem(m.group(1)))
        for m in COUNT_RE.finditer(line):
            if registry is None:
                registry = _registry_size()
            if NUMBER_WORDS[m.group(1).lower()] != registry:
                found.append(f"'{m.group(0)}' but the registry holds {registry} methods")
        rel = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
        problems += [f"{rel}:{lineno}: {p}" for p in found if p]
    return problems


def test_every_reference_in_the_docs_exists():
    problems = [p for f in doc_files() for p in check(f.read_text(encoding="utf-8"), f)]
    assert not problems, "stale references in the docs:\n" + "\n".join(problems)


def test_the_check_finds_stale_names():
    """A check that cannot fail proves nothing: names that were once in the docs and are gone."""
    where = ROOT / "docs" / "example.md"
    stale = {
        "a removed module file": "see `privcore/audit_canaries.py`",
        "a moved module file": "privcore/deep/precision.py holds exact_fp32",
        "a removed test file": "tests/accounting/test_gaussian_stdlib.py checks it",
        "a test that is not in its file": "tests/test_certify.py::test_no_such_thing",
        "a removed function": "starts one background thread (`_warm_all`)",
        "a dotted name": "`privcore.engine.runner.no_such_function`",
        "a module": "privcore.audit_canaries.audit_method",
        "a class member": "`TrainContext.no_such_member`",
        "a broken link": "[spec](nowhere.md)",
        "a link to a heading that is not there": "[spec](../docs/spec.md#no-such-heading)",
        "a wrong count": "the five methods",
        "a brace form": "docs/figures/fig1{a,z}_eps_delta0.csv",
        "a flag the CLI does not have": "```bash\nprivcore sweep --teachers 16 --no-such-flag 3\n```",
        "a sub-command the CLI does not have": "run `python -m privcore nosuch`",
        "a value outside a flag's choices": "`python -m privcore calibrate --method no_such_method --epsilon 1`",
    }
    for what, line in stale.items():
        assert check(line, where), f"not caught: {what} ({line!r})"
    fine = ("`privcore/audit.py` and `tests/audit_canaries.py`; privcore.engine.runner.run_sweep; "
            "`TrainContext.solve`; the paper's five methods; [spec](spec.md); docs/figures/fig2{a,b}_budget_delta0.csv"
            .replace("fig2{a,b}_budget_delta0", "fig1{a,b}_eps_delta{0,1e-5}"))
    assert check(fine, where) == ["docs/example.md:1: no such path docs/figures/fig1a_eps_delta1e-5.csv"]


def test_the_readme_names_every_method_of_the_registry():
    """The README lists the methods by hand: a method added to the registry must be named there too."""
    import re
    from pathlib import Path

    from privcore.methods import REGISTRY

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text().lower()
    names = {m.name: re.sub(r"^pate (?=confident)|\s*\(.*\)$", "", m.label.lower()) for m in REGISTRY.values()}
    assert "confident-gnmax" in names.values() and "pate student" in names.values()
    assert [n for n, label in names.items() if label not in text] == []
