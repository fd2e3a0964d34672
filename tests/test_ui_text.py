"""ui/text.py: user text shown as text (Markdown escaped character by character)."""

from __future__ import annotations

import re
import string

import pytest

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
    assert escaped.replace("\\", "").replace("\u2060", "") == INJECTION.replace("\\", "")


# GFM's literal autolinks as remark-gfm finds them in the text once the escapes are resolved
# (mdast-util-gfm-autolink-literal): a match here is a clickable link on the page.
_GFM_URL = re.compile(r"(https?://|www(?=\.))([-.\w]+)", re.IGNORECASE | re.ASCII)
_GFM_EMAIL = re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)", re.ASCII)


def _resolved(markdown: str) -> str:
    return re.sub(r"\\(.)", r"\1", markdown)


@pytest.mark.parametrize("text", ["http://evil.example/a", "see https://evil.example", "www.evil.example",
                                  "WwW.evil.example", "someone@evil.example", "mailto:x@evil.example",
                                  "repeats=http://x.y ignored; www.a.b and c@d.e"])
def test_escape_markdown_leaves_no_autolink(text):
    assert _GFM_URL.search(text) or _GFM_EMAIL.search(text)              # the pattern finds the raw text
    shown = _resolved(escape_markdown(text))
    assert not _GFM_URL.search(shown) and not _GFM_EMAIL.search(shown), shown
    assert shown.replace("\u2060", "") == text                          # and it still reads the same


def test_server_safe_hides_the_cache_folder(tmp_path, monkeypatch):
    from ui.text import server_safe

    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "cache"))
    root = str(tmp_path / "cache")
    text = server_safe(f"put cifar-10-python.tar.gz in {root}/cifar\n(or set the variable)")
    assert text == "put cifar-10-python.tar.gz in <server cache>/cifar (or set the variable)"
