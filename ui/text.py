"""User-controlled text shown in the UI: always as text, never as Markdown or HTML.

Streamlit renders the body of ``st.error``/``st.warning``/``st.info``/``st.caption`` as Markdown
(GitHub flavour, with LaTeX between ``$``, ``:emoji:`` and ``:color[...]`` directives). A URL value
such as ``eps=![x](http://host/x.png)``, a file name or a CSV cell copied into a message would be
rendered: an image fetched, a link made clickable. :func:`escape_markdown` backslash-escapes every
ASCII punctuation character (CommonMark shows an escaped punctuation character literally), which
breaks links, images, HTML tags, math and directives. It does not break GFM's literal autolinks:
Streamlit's renderer (remark-gfm) finds ``www.x``, ``http://x`` and ``a@b.c`` in the text *after*
the escapes are resolved, so ``http\\:\\/\\/x`` was still a link. A WORD JOINER (U+2060, invisible,
zero width) between ``:`` and ``//``, after ``www`` and around ``@`` leaves nothing those patterns
match (tests/test_browser_user_text.py counts the <a> elements in Chromium).
"""

from __future__ import annotations

import re
import string

__all__ = ["escape_markdown", "clip", "server_safe"]

_SPECIAL = frozenset(string.punctuation)
#: Where a literal autolink would start: "://", "www." (any case) and "@" (e-mail addresses).
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?=@)|(?<=@)", re.IGNORECASE)
_JOINER = "\u2060"


def escape_markdown(text: object) -> str:
    """``text`` as Markdown source that displays exactly ``text`` (newlines become spaces), never a
    link: an invisible word joiner breaks every would-be autolink (``://``, ``www.``, ``@``)."""
    s = _AUTOLINK.sub(_JOINER, " ".join(str(text).split()))
    return "".join("\\" + ch if ch in _SPECIAL else ch for ch in s)


def clip(text: object, most: int = 80) -> str:
    """``text`` cut to ``most`` characters (with an ellipsis), for values quoted in messages."""
    s = str(text)
    return s if len(s) <= most else s[: most - 1] + "…"


def server_safe(text: object) -> str:
    """``text`` on one line, with the server's cache folder shown as ``<server cache>`` (a visitor
    never sees the server's paths; the operator knows where the cache is)."""
    import os

    from privcore.engine.cache import default_results_dir

    out = " ".join(str(text).split())
    root = str(default_results_dir().parent)
    return out.replace(root + os.sep, "<server cache>/").replace(root, "<server cache>")
