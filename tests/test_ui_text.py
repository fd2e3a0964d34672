"""ui/text.py: user text shown as text (Markdown escaped character by character)."""

from __future__ import annotations

import string

from ui.text import escape_markdown

INJECTION = "![x](http://host/x.png) [click](http://evil) <img src=x> $x^2$ :red[hi] **b** http://bare.example"


def _unescaped(markdown: str) -> list[str]:
    """Punctuation characters of ``markdown`` that are not backslash-escaped (would be syntax)."""
    out, i = [], 0
    while i < len(markdown):
        ch = markdown[i]
        if ch == "\\" and i + 1 < len(markdown):
            i += 2
            continue
        if ch in string.punctuation:
            out.append(ch)
        i += 1
    return out


def test_escape_markdown_leaves_no_markdown_syntax():
    escaped = escape_markdown(INJECTION)
    assert _unescaped(escaped) == []
    assert escaped.replace("\\", "") == INJECTION.replace("\\", "")


def test_server_safe_hides_the_cache_folder(tmp_path, monkeypatch):
    from ui.text import server_safe

    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "cache"))
    root = str(tmp_path / "cache")
    text = server_safe(f"put cifar-10-python.tar.gz in {root}/cifar\n(or set the variable)")
    assert text == "put cifar-10-python.tar.gz in <server cache>/cifar (or set the variable)"
