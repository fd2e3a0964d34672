"""Plain-text calibration formulas (as the methods write them) typeset for ``st.latex``.

The methods state their calibration in ASCII (``sigma = (K/eps) sqrt(8 ln(2/delta) + 4 eps)``), which
is what the CSV and the CLI carry. :func:`to_latex` turns such a line into LaTeX: Greek names become
symbols (``eps1`` -> ε₁), ``sqrt(...)`` a root, ``||x||`` a norm, ``*`` a dot, and runs of ordinary
words stay upright text. It returns None for anything it cannot read with certainty (unbalanced
brackets), and the page then shows the plain text instead: never a half-rendered formula.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

__all__ = ["to_latex", "formula_lines", "display_latex", "line_width"]

_GREEK = {"eps": r"\varepsilon", "epsilon": r"\varepsilon", "delta": r"\delta", "sigma": r"\sigma", "beta": r"\beta",
          "rho": r"\rho", "Delta": r"\Delta", "lambda": r"\lambda", "lam": r"\lambda", "nu": r"\nu", "chi": r"\chi",
          "mu": r"\mu", "alpha": r"\alpha", "gamma": r"\gamma"}
_FUNCS = {"ln": r"\ln", "log": r"\log", "exp": r"\exp", "min": r"\min", "max": r"\max", "ceil": r"\operatorname{ceil}"}
_TOKEN = re.compile(r"\s+|\|\||[A-Za-z]+(?:-[A-Za-z]+)+|[A-Za-z]+(?:_\{[^}]*\}|_[A-Za-z0-9]+|[0-9]+)?|[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?|.")


def _ident(tok: str) -> str | None:
    """LaTeX of an identifier, or None when it is an ordinary word (text)."""
    m = re.fullmatch(r"([A-Za-z]+)(?:_\{([^}]*)\}|_([A-Za-z0-9]+)|([0-9]+))?", tok)
    if not m:
        return None
    base, sub = m.group(1), m.group(2) or m.group(3) or m.group(4)
    if base in _GREEK:
        head = _GREEK[base]
    elif base in _FUNCS and not sub:
        return _FUNCS[base]
    elif len(base) == 1:
        head = base
    elif base == "inf" and not sub:
        return r"\infty"
    else:
        return None
    return head + (f"_{{{sub}}}" if sub else "")


def to_latex(text: str) -> str | None:
    """LaTeX for ``st.latex`` of one plain-text formula, or None when it cannot be read safely."""
    if not text or text.count("(") != text.count(")") or text.count("||") % 2:
        return None
    # "eps*" is epsilon-star (before , = ) or the end), any other "*" a product; "->" an arrow.
    text = re.sub(r"\*(?=\s*(?:[,=);]|$))", "\x02", text).replace("->", "\x01")
    out: list[str] = []
    words: list[str] = []
    stack: list[str] = []  # closing text for each open "(": ")" or "}" after sqrt
    norm_open = False
    pending_sqrt = False

    def flush() -> None:
        if words:
            if out and not out[-1].endswith(r"\ "):  # "500 GNMax labels": a word after a number keeps its space
                out.append(r"\ ")
            out.append(r"\text{" + " ".join(words).replace("_", r"\_") + "}")
            words.clear()
            out.append(r"\ ")

    for tok in _TOKEN.findall(text):
        if tok.isspace():
            continue
        latex = _ident(tok) if tok[0].isalpha() and "-" not in tok else None
        if tok[0].isalpha() and latex is None:
            if tok == "sqrt":
                flush()
                pending_sqrt = True
                continue
            words.append(tok)
            continue
        flush()
        if tok == "(":
            if pending_sqrt:
                out.append(r"\sqrt{")
                stack.append("}")
                pending_sqrt = False
            else:
                out.append(r"\left(")
                stack.append(r"\right)")
        elif tok == ")":
            if not stack:
                return None
            out.append(stack.pop())
        elif tok == "||":
            out.append(r"\lVert " if not norm_open else r"\rVert ")
            norm_open = not norm_open
        elif tok == "*":
            out.append(r"\cdot ")
        elif tok == "\x02":
            out.append("^{*}")
        elif tok == "\x01":
            out.append(r"\to ")
        elif tok in ("{", "}", "\\", "$", "#", "%", "&", "~"):
            return None
        elif tok == ",":
            out.append(r",\ ")
        elif tok == ";":
            out.append(r";\quad ")
        elif tok == "<" or tok == ">":
            out.append(tok)
        elif latex is not None:
            out.append(latex + " ")
        elif re.fullmatch(r"[0-9]+(?:\.[0-9]+)?e[-+]?[0-9]+", tok):  # 2.8e-07 -> 2.8 x 10^-7 (not "2.8e - 07")
            mantissa, exponent = tok.split("e")
            power = f"10^{{{int(exponent)}}}"
            out.append(power if float(mantissa) == 1.0 else rf"{mantissa} \times {power}")
        else:
            out.append(tok)
        if pending_sqrt and tok != "(":
            return None
    flush()
    if stack or norm_open or pending_sqrt:
        return None
    result = "".join(out)
    while result.rstrip().endswith("\\"):
        result = result.rstrip()[:-1]
    result = result.strip()
    return result.replace("<=", r"\le ").replace(">=", r"\ge ")


def _top_level_split(text: str, sep: str) -> list[str]:
    """``text`` split at each ``sep`` outside brackets (parentheses and braces)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "({"
        depth -= ch in ")}"
        if depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i + len(sep)
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def formula_lines(text: str) -> list[str]:
    """A calibration formula as the lines it is shown on: one per statement (``;``), and a clause
    after a top-level comma that defines something (``, r = ...``) on its own line. One long line
    ran off the right edge of the page (KaTeX does not wrap)."""
    lines: list[str] = []
    for statement in _top_level_split(text, ";"):
        clauses = _top_level_split(statement, ", ")
        current = clauses[0]
        for clause in clauses[1:]:
            if re.match(r"^[^=]{1,40}=(?!=)", clause) and "=" in current:
                lines.append(current)
                current = clause
            else:
                current += ", " + clause
        lines.append(current)
    return [part for line in lines for part in _wrap(line)]


#: Longest formula line (characters of the plain text) shown unbroken: KaTeX does not wrap, and a
#: longer line (loss perturbation's output-noise clause, 103 characters) ran off a 1,400 px page.
MAX_LINE = 72
_LINE_WIDTH: ContextVar[int] = ContextVar("formula_line_width", default=MAX_LINE)


@contextmanager
def line_width(chars: int) -> Iterator[None]:
    """Formulas typeset inside this block wrap at ``chars`` characters instead of :data:`MAX_LINE` (a
    narrow column: Learn's method cards). Per thread, so one session's width never leaks into another's."""
    token = _LINE_WIDTH.set(int(chars))
    try:
        yield
    finally:
        _LINE_WIDTH.reset(token)


def _wrap(line: str) -> list[str]:
    """``line`` broken before a top-level " with " or " (", or after a top-level ", " or ": " (greedily, outside
    brackets, so every piece stays balanced) into pieces of at most :func:`line_width` characters
    (:data:`MAX_LINE` by default) where it can."""
    most = _LINE_WIDTH.get()
    if len(line) <= most:
        return [line]
    cuts = []  # positions where a new piece may start
    depth = 0
    for i, ch in enumerate(line):
        depth += ch in "({"
        depth -= ch in ")}"
        if depth == 0 and line.startswith(" with ", i):
            cuts.append((i, i + 1))
        elif depth == 0 and (line.startswith(", ", i) or line.startswith(": ", i)):
            cuts.append((i + 1, i + 2))
        elif depth == 1 and ch == "(" and line[i - 1:i] == " ":  # a remark in brackets starts a line
            cuts.append((i, i))
    pieces, start = [], 0
    for k, (end, nxt) in enumerate(cuts):
        following = cuts[k + 1][0] if k + 1 < len(cuts) else len(line)
        if following - start > most and end > start:
            pieces.append(line[start:end].strip())
            start = nxt
    pieces.append(line[start:].strip())
    return [q for p in pieces if p for q in _words(p, most)]


def _text_word(token: str) -> bool:
    """Whether ``token`` is typeset as upright text (a word, "B-fold"), not as mathematics."""
    return bool(re.fullmatch(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+|[A-Za-z]{2,}", token)) and (
        "-" in token or (_ident(token) is None and token != "sqrt"))


def _words(piece: str, most: int) -> list[str]:
    """``piece`` broken between two words of text (outside brackets; never inside the mathematics) into
    pieces of at most ``most`` characters where it can: the last resort for a clause of words (S&A's tight
    rule ran to 68 characters in a 52-character column)."""
    if len(piece) <= most:
        return [piece]
    depth, spaces = 0, []
    for i, ch in enumerate(piece):
        depth += ch in "({"
        depth -= ch in ")}"
        if depth == 0 and ch == " " and _text_word(piece[:i].rsplit(" ", 1)[-1]) and _text_word(piece[i + 1:].split(" ", 1)[0]):
            spaces.append(i)
    out, start = [], 0
    for k, i in enumerate(spaces):
        following = spaces[k + 1] if k + 1 < len(spaces) else len(piece)
        if following - start > most and i > start:
            out.append(piece[start:i].strip())
            start = i + 1
    out.append(piece[start:].strip())
    return [p for p in out if p]


def display_latex(text: str) -> str | None:
    """LaTeX of :func:`formula_lines` stacked (one ``st.latex`` block), or None when any line cannot
    be read safely (the page then shows the plain text)."""
    parts = [to_latex(line) for line in formula_lines(text)] if text else [None]
    if any(p is None for p in parts):
        return None
    return parts[0] if len(parts) == 1 else r"\begin{gathered}" + r" \\ ".join(parts) + r"\end{gathered}"
