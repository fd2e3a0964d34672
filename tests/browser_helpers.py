"""Helpers shared by the browser tests (tests/test_browser*.py): a Streamlit server on a free loopback
port with a fresh result cache, Chromium through Playwright, and waits and checks on a page.

The tests that use them carry ``@needs_browser``: skipped, with the reason, when Chromium or the
playwright package is missing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium" if os.path.isfile("/usr/bin/chromium") else shutil.which("chromium")
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None


def screenshot_dir() -> Path:
    """Where the browser tests save their screenshots: ``docs/screenshots`` (the docs') only when
    ``PRIVCORE_UPDATE_SCREENSHOTS=1``, else a temporary folder, so a test run leaves the tree clean."""
    if os.environ.get("PRIVCORE_UPDATE_SCREENSHOTS") == "1":
        folder = ROOT / "docs" / "screenshots"
    else:
        import tempfile

        folder = Path(tempfile.gettempdir()) / "privcore-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def needs_browser(test):  # a pytest test function
    """Skip ``test``, with the reason, when Chromium or the playwright package is missing."""
    test = pytest.mark.skipif(sync_playwright is None, reason="the playwright Python package is not installed")(test)
    return pytest.mark.skipif(CHROMIUM is None, reason="Chromium not found (/usr/bin/chromium or `chromium` on "
                                                       "PATH): the browser test needs it")(test)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_server(url: str, proc: subprocess.Popen, log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"streamlit exited with code {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"streamlit did not answer within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


@contextmanager
def streamlit_server(tmp_path: Path, env: dict[str, str] | None = None, *,
                     viewer_toolbar: bool = True) -> Iterator[str]:
    """``streamlit run app.py`` on a free loopback port, its cache and log under ``tmp_path``; yields
    the base URL once the server answers and stops it on the way out. ``env`` adds variables;
    ``viewer_toolbar`` hides the developer toolbar (clean screenshots)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "streamlit.log"
    full_env = dict(os.environ, PRIVCORE_CACHE=str(tmp_path / "cache"), PRIVCORE_EXPORT_WARMUP="0",
                    PRIVCORE_CORE_WARMUP="0", **(env or {}))
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    if viewer_toolbar:
        cmd += ["--client.toolbarMode", "viewer"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_server(base, proc, log)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait(timeout=5)


@contextmanager
def chromium() -> Iterator:
    """A headless Chromium (Playwright), closed on the way out."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def idle(page, timeout_ms: int = 180_000, *, before_ms: int = 600, after_ms: int = 700) -> None:
    """Wait until the script run triggered by the last action has finished."""
    page.wait_for_timeout(before_ms)
    page.wait_for_selector(IDLE, timeout=timeout_ms)
    page.wait_for_timeout(after_ms)


def no_exception(page, where: str) -> None:
    exc = page.locator('[data-testid="stException"]')
    assert exc.count() == 0, f"{where}: {exc.first.inner_text()[:2000]}"
