"""Whether the code this server runs is still the code on disk.

Streamlit reads a page's script afresh on every run, but the modules the pages import (``privcore``,
``ui``) stay as the server loaded them: the bundled config watches no source file
(``.streamlit/config.toml``), so nothing reloads them. After an upgrade or a checkout of another version
under a running server, a page's new code called the old modules, and a visitor saw a traceback naming
something the old module lacked. :func:`dashboard` asks :func:`changed_modules` on every run (one
``stat`` per loaded module, about 0.4 ms) and, when a loaded module's file has changed since this process
first saw it, says to restart instead of running a page.
"""

from __future__ import annotations

import os
import sys
import threading

__all__ = ["enabled", "changed_modules", "restart_message"]

#: The top-level packages whose loaded modules are checked (the pages are read afresh on every run).
PACKAGES = ("privcore", "ui")
#: module name -> (the module object first seen under it, its file's mtime then). Keyed by the object too: with
#: ``--server.fileWatcherType auto`` (developing) Streamlit evicts the modules on an edit and the next run
#: imports them afresh, which is not stale.
_SEEN: dict[str, tuple[object, int]] = {}
_LOCK = threading.Lock()


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:  # removed by the upgrade
        return -1


def enabled() -> bool:
    """False with ``PRIVCORE_CODE_CHECK=off`` (the test suite sets it: its AppTests share one process with code
    a developer may be editing, and they test the pages, not the server's upgrade)."""
    return os.environ.get("PRIVCORE_CODE_CHECK", "").strip().lower() not in ("off", "0", "false", "no")


def changed_modules() -> list[str]:
    """The loaded :data:`PACKAGES` modules whose file changed or went since this process first saw them
    loaded (the first call, at import, records what was loaded; a module loaded, or loaded again, later is
    recorded when first seen)."""
    stale = []
    with _LOCK:
        for name, module in list(sys.modules.items()):
            if name.partition(".")[0] not in PACKAGES:
                continue
            path = getattr(module, "__file__", None)
            if not isinstance(path, str):
                continue
            now = _mtime(path)
            seen = _SEEN.get(name)
            if seen is None or seen[0] is not module:  # first seen, or imported afresh
                _SEEN[name] = (module, now)
            elif seen[1] != now:
                stale.append(name)
    return sorted(stale)


def restart_message(stale: list[str]) -> str:
    """What a visitor reads instead of a page when ``stale`` (from :func:`changed_modules`) is not empty."""
    more = f" and {len(stale) - 1} more" if len(stale) > 1 else ""
    return (f"privcore's code changed on disk while this server was running ({stale[0]}{more}): an upgrade, or "
            "another version checked out. The pages would mix the new code with the old, so none runs until the "
            "server restarts: stop it (Ctrl+C) and start it again (`privcore app`). Your settings are in this "
            "page's URL: reload it after the restart.")


changed_modules()  # what the server has loaded when the dashboard first runs
