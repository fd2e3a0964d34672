"""Server memory over upload/close cycles: flat when each upload is released as its session ends.

    python bench/bench_upload_memory.py                 # 20 cycles, released at each close
    python bench/bench_upload_memory.py --keep          # the same, nothing released (what the server did)
    python bench/bench_upload_memory.py --rows 50000 --cols 400 --format csv
    python bench/bench_upload_memory.py --browser       # a dashboard server and 20 Chromium sessions

Each cycle does in one process what a dashboard session does with a new upload, through the same
library calls: a distinct file (NPZ of small integers, or CSV) is stored under its content hash,
checked against the upload limit (rows x columns), parsed (the sidebar's preview), loaded as a data
set (the sidebar's sizes) and trained on (one sweep: model sensitivity and the non-private model,
2 repetitions, CPU, nothing cached); then the session closes and
:func:`privcore.engine.release.release_data_file` releases what the process keeps of the file (the
dashboard calls it when the last session using an upload ends, or the upload is deleted). Prints
the resident memory (RSS) after each close and the peak so far, from /proc/self/status (Linux).

``--browser`` measures the dashboard itself: ``streamlit run app.py`` on a loopback port with a fresh
cache holding the uploads, and one headless Chromium session (Playwright, /usr/bin/chromium) per
upload, opening the Explore page on it (URL ``dataset=file``, ``data_file=<upload>``, 2 repetitions)
and closing once the page is idle; the server's RSS is read while the page is open and ``--wait``
seconds after it closed (the server checks for ended sessions every 15 s), and once more 150 s
after the last.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import tempfile
import time
from pathlib import Path


def _status(field: str) -> float:
    """A /proc/self/status memory field in MB (VmRSS: resident now; VmHWM: the peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def _upload(rng, rows: int, cols: int, fmt: str) -> bytes:
    import numpy as np

    x = rng.integers(0, 4, size=(rows, cols), dtype=np.uint8)  # small integers: a compressible, pixel-like file
    y = rng.integers(0, 2, size=rows)
    if fmt == "npz":
        buf = io.BytesIO()
        np.savez_compressed(buf, x=x, y=y)
        return buf.getvalue()
    header = ",".join([f"f{j}" for j in range(cols)] + ["label"])
    lines = [header] + [",".join(map(str, row)) + f",{label}" for row, label in zip(x.tolist(), y.tolist())]
    return ("\n".join(lines) + "\n").encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--cols", type=int, default=200)
    parser.add_argument("--format", choices=("npz", "csv"), default="npz")
    parser.add_argument("--keep", action="store_true", help="release nothing at close (the old behaviour)")
    parser.add_argument("--browser", action="store_true", help="a dashboard server and one browser session per upload")
    parser.add_argument("--wait", type=float, default=17.0, help="--browser: seconds between a close and the reading")
    args = parser.parse_args(argv)
    if args.browser:
        return _browser(args)

    import numpy as np
    import torch

    from privcore import limits
    from privcore.data import load_dataset
    from privcore.data.userfile import data_shape, load_user_file
    from privcore.engine.cache import ResultCache
    from privcore.engine.release import release_data_file, trim_memory
    from privcore.engine.runner import run_sweep
    from privcore.engine.specs import DataSpec, SweepSpec

    torch.set_num_threads(1)  # the same arithmetic (and allocations) in every cycle
    rng = np.random.default_rng(0)
    print(f"{args.cycles} cycles of a {args.rows:,} x {args.cols:,} {args.format.upper()} upload "
          f"({'nothing released' if args.keep else 'released at each close'}); RSS in MB", flush=True)
    trim_memory()
    print(f"start: RSS {_status('VmRSS'):8.1f}  peak {_status('VmHWM'):8.1f}", flush=True)
    rss = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "uploads"
        folder.mkdir()
        for cycle in range(1, args.cycles + 1):
            t0 = time.perf_counter()
            data = _upload(rng, args.rows, args.cols, args.format)
            shape = data_shape(data, "." + args.format)
            limits.check_upload_cells(*shape, f"upload {cycle}")  # what ui/uploads.save_upload checks first
            path = folder / f"{hashlib.sha256(data).hexdigest()}.{args.format}"
            path.write_bytes(data)
            del data
            load_user_file(path)  # the sidebar's preview
            load_dataset("file", data_file=str(path))  # the sidebar's sizes
            spec = SweepSpec(data=DataSpec(name="file", data_file=str(path)), methods=("model_sensitivity",),
                             epsilons=(1.0,), repeats=2, device="cpu")
            run_sweep(spec, cache=ResultCache(Path(tmp) / "results", enabled=False))
            if not args.keep:  # the session closes
                release_data_file(path)
            path.unlink()
            trim_memory()
            rss.append(_status("VmRSS"))
            print(f"cycle {cycle:2d}: RSS {rss[-1]:8.1f}  peak {_status('VmHWM'):8.1f}  "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
    half = len(rss) // 2
    if half:
        print(f"growth over the second half: {rss[-1] - rss[half - 1]:+.1f} MB; over all cycles: "
              f"{rss[-1] - rss[0]:+.1f} MB")
    return 0


def _browser(args: argparse.Namespace) -> int:
    import json
    import os
    import socket
    import subprocess
    import urllib.parse
    import urllib.request

    import numpy as np
    import psutil
    from playwright.sync_api import sync_playwright

    root = Path(__file__).resolve().parents[1]
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        uploads = Path(tmp) / "cache" / "uploads"
        uploads.mkdir(parents=True)
        names = []
        for _ in range(args.cycles):
            data = _upload(rng, args.rows, args.cols, args.format)
            name = f"{hashlib.sha256(data).hexdigest()}.{args.format}"
            (uploads / name).write_bytes(data)
            names.append(name)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, PRIVCORE_CACHE=str(Path(tmp) / "cache"), PRIVCORE_EXPORT_WARMUP="0",
                   PRIVCORE_CORE_WARMUP="0")
        server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                                   "--server.port", str(port), "--server.address", "127.0.0.1",
                                   "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                                  cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(base + "/_stcore/health", timeout=2)
                    break
                except OSError:
                    time.sleep(0.5)
            proc = psutil.Process(server.pid)
            rss = lambda: proc.memory_info().rss / 2**20  # noqa: E731
            print(f"{args.cycles} browser sessions, each on its own {args.rows:,} x {args.cols:,} "
                  f"{args.format.upper()} upload; server RSS in MB (start {rss():.0f})", flush=True)
            idle = '[data-testid="stApp"][data-test-script-state="notRunning"]'
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
                for cycle, name in enumerate(names, 1):
                    context = browser.new_context()
                    page = context.new_page()
                    query = urllib.parse.urlencode({"dataset": '"file"', "data_file": json.dumps(name), "repeats": "2"})
                    page.goto(f"{base}/?{query}")
                    page.wait_for_timeout(600)
                    page.wait_for_selector(idle, timeout=300_000)
                    page.wait_for_timeout(700)
                    during = rss()
                    context.close()
                    time.sleep(args.wait)
                    print(f"session {cycle:2d}: open {during:7.0f}, {args.wait:.0f} s after close {rss():7.0f}",
                          flush=True)
                browser.close()
            time.sleep(150)  # past Streamlit's 2 minutes for a closed session to reconnect
            print(f"every session closed, 150 s later: {rss():.0f}", flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
