"""``privcore app``: serve the dashboard, the same Streamlit server as ``streamlit run app.py``.

The dashboard ships with privcore as the packages ``ui`` and ``app_pages``; its entry script is
``app_pages/main.py``. This module only finds that file and starts ``python -m streamlit run`` on it
in a child process: privcore itself never imports Streamlit.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["STREAMLIT_OPTIONS", "main_script", "command", "serve"]

#: The server options of the checkout's ``.streamlit/config.toml``, passed as flags so that an installed
#: package, run from any folder, serves the same way (tests/test_app.py keeps the two equal): headless
#: (print the URL, ask nothing), no file watcher (it resolved the path of every imported module after
#: each script run: bench/bench_first_visit.py --spy), no usage statistics.
STREAMLIT_OPTIONS: dict[str, str] = {
    "server.headless": "true",
    "server.fileWatcherType": "none",
    "browser.gatherUsageStats": "false",
}


def main_script() -> Path:
    """The installed dashboard's entry script, ``app_pages/main.py`` (found without importing it)."""
    spec = importlib.util.find_spec("app_pages")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / "main.py"
        if path.is_file():
            return path.resolve()
    raise FileNotFoundError("the dashboard (package app_pages) is not installed: install privcore with "
                            "`pip install .` from its source folder")


def command(streamlit_args: Sequence[str] = ()) -> list[str]:
    """The command line that serves the dashboard; ``streamlit_args`` (e.g. ``--server.port 8502``)
    come last, so they override the options above."""
    flags = [f"--{name}={value}" for name, value in STREAMLIT_OPTIONS.items()]
    return [sys.executable, "-m", "streamlit", "run", str(main_script()), *flags, *streamlit_args]


def serve(streamlit_args: Sequence[str] = ()) -> int:
    """Run the server until it stops; returns its exit code (Ctrl+C stops it: 0)."""
    argv = command(streamlit_args)
    if os.name == "posix":  # the server takes this process's place: signals and the terminal go to it
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(argv[0], argv)
    try:
        return subprocess.call(argv)
    except KeyboardInterrupt:
        return 0
