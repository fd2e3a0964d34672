"""What a first visitor waits for, in a real browser (prints figures; not a test).

    python bench/bench_first_visit.py [--port 8765]

Starts ``streamlit run app.py`` on a fresh, empty result cache, opens the Explore page with the
defaults (mnist-5k, 20 repetitions) in headless Chromium (/usr/bin/chromium, Playwright) 2 s
after the server answers (``--wait``), and times from the request: the page heading, the
controls all drawn (``controls_drawn_s``: no grey placeholder left; ``--cpu-throttle`` emulates a slower
machine's browser), the recommendation, the first chart with data and the end of all computing; then the same moments counted from
the server command (``*_from_launch_s``: the server starts computing the default view as it
starts, so a visitor who comes later waits less). ``--browser-trace`` records Chromium's own trace
of the first visit and prints how long the page's renderer main thread was busy (its tasks, the
longest ones, and the share of script evaluation): the browser's part of the wait. ``--trace`` prints the warm-up's steps with
their times after launch; ``--no-visit S`` traces the warm-up alone for S seconds, with no browser. With ``--floor`` it first times the same request to a
one-line Streamlit app (``st.title`` only): what Streamlit and Chromium themselves take here. Then it opens ``?repeats=200`` in a second tab, clicks
Cancel 2 s after a progress bar appears, and times until the bar is gone. Browser and server share
this machine's cores, as they do when both run on a laptop.

``--busy N`` keeps N cores busy (a Python loop each) while the server runs: with ``--no-visit``, what
a competing browser does to the warm-up, without the browser. ``--spy`` samples the server's Python
threads with py-spy (``pip install py-spy``) from the request to the end of the first visit and prints
the seconds each spent on the CPU: the warm-up, the page's script runs, the web server's event loop,
and two parts of Streamlit's own work after every script run (watching the imported modules' files;
its full garbage collection).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
DONE = f"""() => !!document.querySelector('{IDLE}') && !document.querySelector('[data-testid="stProgress"]')"""
HEADING = "Explore the trade-offs of private prediction"
CURVE = '[data-testid="stPlotlyChart"] .scatterlayer .trace'  # a chart with data (the frame has none)
LAUNCHED = 0.0  # when the last server command was started (perf_counter)
REC = """() => [...document.querySelectorAll('[data-testid="stAlert"]')].some(e => e.innerText.includes('Recommended'))"""


# --trace: the streamlit command itself (its CLI function), with the warm-up's INFO log on stderr.
_TRACED = ("import logging, sys; logging.basicConfig(level=logging.WARNING, format='%(message)s'); "
           "logging.getLogger('ui.warmup').setLevel(logging.INFO); "
           "from streamlit.web.cli import main; sys.argv[0] = 'streamlit'; main()")


def _print_trace(stream) -> None:  # a text pipe
    for line in stream:
        if "warm-up" in line:
            print(f"  [{time.perf_counter() - LAUNCHED:6.2f} s after launch] {line.strip()}", flush=True)


def _serve(app: Path, port: int, env: dict, trace: bool = False) -> subprocess.Popen:
    global LAUNCHED
    LAUNCHED = time.perf_counter()
    head = [sys.executable, "-c", _TRACED] if trace else [sys.executable, "-m", "streamlit"]
    server = subprocess.Popen([*head, "run", str(app), "--server.headless", "true",
                               "--server.port", str(port), "--server.address", "127.0.0.1"],
                              cwd=app.parent if app.name == "app.py" else ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE if trace else subprocess.DEVNULL, text=trace)
    if trace:
        threading.Thread(target=_print_trace, args=(server.stderr,), daemon=True).start()
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                return server
        except OSError:
            if server.poll() is not None:
                raise SystemExit(f"streamlit exited with {server.returncode}")
            time.sleep(0.2)


def _browser(pw):  # playwright objects
    return pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])


#: Page script: when the controls are first all drawn (the ε slider there and no grey placeholder
#: left: Streamlit shows one while a widget's code loads) and the most placeholders seen at once, in
#: ``window.__controlsAt`` (ms from navigation) and ``window.__maxPlaceholders``.
CONTROLS_WATCH = """
window.__maxPlaceholders = 0;
const __watch = setInterval(() => {
  const n = document.querySelectorAll('[data-testid="stSkeleton"]').length;
  window.__maxPlaceholders = Math.max(window.__maxPlaceholders, n);
  if (n === 0 && document.querySelector('.st-key-w-eps [data-testid="stSlider"]')) {
    window.__controlsAt = performance.now(); clearInterval(__watch);
  }
}, 100);
"""


def _open_to_heading(browser, url: str, timeout_ms: int):
    """A new tab on ``url``: (the page, when the request was made, seconds until the heading shows)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1900})
    page.add_init_script(CONTROLS_WATCH)
    t0 = time.perf_counter()
    page.goto(url, wait_until="commit")
    page.get_by_role("heading", name=HEADING).wait_for(timeout=timeout_ms)
    return page, t0, time.perf_counter() - t0


def _proc_table() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command name, CPU seconds so far incl. waited-for children) from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2:].split()
        table[int(entry.name)] = (int(fields[1]), name, sum(int(f) for f in fields[11:15]) / tick)
    return table


def cpu_split(server_pid: int) -> dict[str, float]:
    """CPU seconds used so far by the server's Python process, its child processes (kaleido's
    Chromium), every other Chromium process (the visitor's browser), Playwright's driver (node) and
    this script (the harness)."""
    table = _proc_table()
    out = {"server_s": 0.0, "server_children_s": 0.0, "browser_s": 0.0, "browser_renderer_s": 0.0,
           "browser_gpu_s": 0.0, "harness_s": 0.0}
    for pid, (_, name, cpu) in table.items():
        ancestor, seen = pid, set()
        while ancestor in table and ancestor not in seen and ancestor != server_pid:
            seen.add(ancestor)
            ancestor = table[ancestor][0]
        if pid == server_pid:
            out["server_s"] += cpu
        elif ancestor == server_pid:
            out["server_children_s"] += cpu
        elif "chrom" in name.lower() or "headless" in name.lower():
            out["browser_s"] += cpu  # all of it; the renderers' and the GPU process's shares also apart
            try:
                kind = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                kind = b""
            if b"--type=renderer" in kind:
                out["browser_renderer_s"] += cpu
            elif b"--type=gpu-process" in kind:
                out["browser_gpu_s"] += cpu
        elif pid == os.getpid() or (name == "node" and table[pid][0] == os.getpid()):
            out["harness_s"] += cpu
    return out


def renderer_busy(trace: dict, until_s: float) -> dict[str, float]:
    """Busy time of the page's renderer main thread in a Chromium trace, up to ``until_s`` after its first event.

    Sums the top-level ``RunTask`` slices on ``CrRendererMain`` (of the renderer with the most such
    time, i.e. the visited page), the longest five, and the module/script evaluation inside them.
    """
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    mains = {(e["pid"], e["tid"]) for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("args", {}).get("name") == "CrRendererMain"}
    best: dict[str, float] = {}
    for thread in mains:
        mine = [e for e in events if (e.get("pid"), e.get("tid")) == thread and e.get("ph") == "X" and "dur" in e]
        if not mine:
            continue
        start = min(e["ts"] for e in mine)
        mine = [e for e in mine if e["ts"] - start <= until_s * 1e6]
        tasks = sorted((e["dur"] / 1e6 for e in mine if e["name"] == "RunTask"), reverse=True)
        scripts = sum(e["dur"] / 1e6 for e in mine if e["name"] in ("v8.evaluateModule", "EvaluateScript"))
        if sum(tasks) > best.get("main_thread_busy_s", -1.0):
            best = {"main_thread_busy_s": sum(tasks), "script_evaluation_s": scripts, "tasks": float(len(tasks)),
                    **{f"longest_task_{i + 1}_s": t for i, t in enumerate(tasks[:5])}}
    return best


#: --spy: frames that mark Streamlit's own work after a script run (any thread).
SPY_PARTS = {"file_watcher_s": "LocalSourcesWatcher", "post_run_gc_s": "_on_script_finished"}


def spy_start(pid: int, seconds: float, path: Path) -> subprocess.Popen:
    """py-spy recording ``pid``'s threads (40 samples a second, CPU time only) into ``path``."""
    return subprocess.Popen(["py-spy", "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "40", "--threads",
                             "--nonblocking", "-f", "raw", "-o", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def spy_summary(path: Path, rate: float = 40.0) -> dict[str, float]:
    """Seconds on the CPU per thread group, and Streamlit's post-run parts, from py-spy's raw output."""
    out = {"warm_up_s": 0.0, "script_runs_s": 0.0, "event_loop_s": 0.0, "other_threads_s": 0.0,
           **{k: 0.0 for k in SPY_PARTS}}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        seconds = int(count) / rate
        thread = stack.split(";", 1)[0]
        key = ("warm_up_s" if "privcore-warmup" in thread else "script_runs_s" if "scriptThread" in thread
               else "event_loop_s" if "MainThread" in thread else "other_threads_s")
        out[key] += seconds
        for part, frame in SPY_PARTS.items():
            if frame in stack:
                out[part] += seconds
    return out


def floor_heading(port: int) -> float:
    """Seconds to the heading of a one-line Streamlit app, measured like the real page."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp, "hello.py")
        app.write_text(f'import streamlit as st\nst.title("{HEADING}")\n')
        server = _serve(app, port, dict(os.environ))
        try:
            time.sleep(2)
            with sync_playwright() as pw:
                browser = _browser(pw)
                _, _, took = _open_to_heading(browser, f"http://127.0.0.1:{port}/", 60_000)
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to serve (e.g. a worktree of an older commit)")
    ap.add_argument("--cache", default=None, help="use this result cache instead of a fresh, empty one (a warm visit)")
    ap.add_argument("--threads", type=int, default=None,
                    help="OMP_NUM_THREADS for the server (torch's intra-op threads; default: torch's own, the cores)")
    ap.add_argument("--trace", action="store_true", help="print the warm-up's steps (seconds after launch)")
    ap.add_argument("--no-visit", type=float, default=None, metavar="S",
                    help="only start the server and trace its warm-up for S seconds, with no browser")
    ap.add_argument("--wait", type=float, default=2.0, help="seconds between the server's answer and the request")
    ap.add_argument("--browser-trace", action="store_true",
                    help="record Chromium's trace of the first visit and print its renderer main thread's busy time")
    ap.add_argument("--cpu", action="store_true",
                    help="print the CPU seconds of the server, its children and the browser between the moments timed")
    ap.add_argument("--floor", action="store_true", help="first time a one-line app's heading (Streamlit's floor)")
    ap.add_argument("--cpu-throttle", type=float, default=None, metavar="RATE",
                    help="slow the page's CPU down RATE times (Chromium's DevTools emulation of a slower machine)")
    ap.add_argument("--busy", type=int, default=0, metavar="N", help="keep N cores busy while the server runs")
    ap.add_argument("--spy", action="store_true", help="sample the server's threads with py-spy during the first visit")
    args = ap.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        _main(args)
    finally:
        for proc in busy:
            proc.kill()


def _main(args: argparse.Namespace) -> None:
    from playwright.sync_api import sync_playwright

    if args.floor:
        print("floor:", json.dumps({"heading_s": round(floor_heading(args.port + 1), 2)}), flush=True)
    base = f"http://127.0.0.1:{args.port}"
    # No "Compute" gate: the cancel test needs the slow run to start by itself.
    env = dict(os.environ, PRIVCORE_CACHE=args.cache or tempfile.mkdtemp(), PRIVCORE_COMPUTE_THRESHOLD_S="1e9")
    if args.threads is not None:
        env["OMP_NUM_THREADS"] = str(args.threads)
    server = _serve(args.root / "app.py", args.port, env, trace=args.trace or args.no_visit is not None)
    out: dict[str, float | int] = {"server_answers_s": time.perf_counter() - LAUNCHED}
    if args.no_visit is not None:
        time.sleep(args.no_visit)
        server.terminate()
        server.wait(timeout=30)
        print(json.dumps({k: round(v, 2) for k, v in out.items()}))
        return
    try:
        time.sleep(args.wait)
        with sync_playwright() as pw:
            browser = _browser(pw)
            tracing = Path(tempfile.mkdtemp(), "trace.json") if args.browser_trace else None
            if tracing is not None or args.cpu_throttle:  # the page is opened first (blank): traced, throttled
                page = browser.new_page(viewport={"width": 1400, "height": 1900})
                page.add_init_script(CONTROLS_WATCH)
                if args.cpu_throttle:
                    page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": args.cpu_throttle})
            if tracing is not None:
                browser.start_tracing(page=page, path=str(tracing), categories=["disabled-by-default-devtools.timeline", "devtools.timeline", "v8.execute"])
                t0 = time.perf_counter()
                page.goto(base + "/", wait_until="commit")
                page.get_by_role("heading", name=HEADING).wait_for(timeout=300_000)
                out["heading_s"] = time.perf_counter() - t0
            elif args.cpu_throttle:
                t0 = time.perf_counter()
                page.goto(base + "/", wait_until="commit")
                page.get_by_role("heading", name=HEADING).wait_for(timeout=300_000)
                out["heading_s"] = time.perf_counter() - t0
            else:
                page, t0, out["heading_s"] = _open_to_heading(browser, base + "/", 300_000)
            marks = {"request": cpu_split(server.pid)} if args.cpu else {}
            spied = Path(tempfile.mkdtemp(), "spy.txt") if args.spy else None
            spy = spy_start(server.pid, 600, spied) if spied is not None else None
            page.wait_for_function(REC, timeout=300_000, polling=50)
            out["recommendation_s"] = time.perf_counter() - t0
            if args.cpu:
                marks["recommendation"] = cpu_split(server.pid)
            page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=300_000)
            out["chart_frame_s"] = time.perf_counter() - t0  # the empty frame drawn before results (or the chart)
            page.wait_for_selector(CURVE, timeout=300_000)
            out["first_chart_s"] = time.perf_counter() - t0
            # Done: no run going and no progress bar (a sweep the warm-up computes shows a bar between
            # the page's short polling runs, ui/progress.py wait_in_background).
            page.wait_for_function(DONE, timeout=300_000, polling=100)
            out["all_done_s"] = time.perf_counter() - t0
            if spy is not None:
                spy.send_signal(2)  # SIGINT: py-spy writes what it has and exits
                spy.wait(timeout=60)
                print("server threads on the CPU, request -> all done:",
                      json.dumps({k: round(v, 2) for k, v in spy_summary(spied).items()}), flush=True)
            if args.cpu:
                marks["all_done"] = cpu_split(server.pid)
                names = list(marks)
                for a, b in zip(names, names[1:]):
                    print(f"cpu {a} -> {b}:", json.dumps({k: round(marks[b][k] - marks[a][k], 2) for k in marks[b]}),
                          flush=True)
                print("cpu launch -> request:", json.dumps({k: round(v, 2) for k, v in marks["request"].items()}),
                      flush=True)
            out["exceptions"] = page.locator('[data-testid="stException"]').count()
            watched = page.evaluate("() => [window.__controlsAt ?? null, window.__maxPlaceholders ?? 0]")
            out["controls_drawn_s"] = None if watched[0] is None else watched[0] / 1000.0  # from navigation start
            out["placeholders_max"] = watched[1]
            if tracing is not None:
                browser.stop_tracing()
                busy = renderer_busy(json.loads(tracing.read_text()), out["all_done_s"])
                print("browser:", json.dumps({k: round(v, 3) for k, v in busy.items()}), flush=True)
            # The same moments counted from the server command (the warm-up starts with the server).
            request_after = t0 - LAUNCHED
            out["request_after_launch_s"] = request_after
            for k in ("recommendation_s", "first_chart_s", "all_done_s"):
                out[k.replace("_s", "_from_launch_s")] = out[k] + request_after
            print("first visit:", json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}),
                  flush=True)
            slow = browser.new_page(viewport={"width": 1400, "height": 1900})
            slow.goto(base + "/?repeats=200")
            cancel = slow.get_by_role("button", name="Cancel").first
            cancel.wait_for(timeout=300_000)
            slow.wait_for_timeout(2000)
            t1 = time.perf_counter()
            cancel.click()
            slow.get_by_text("cancelled", exact=False).first.wait_for(timeout=60_000)
            slow.wait_for_selector('[data-testid="stProgress"]', state="detached", timeout=60_000)
            out["cancel_s"] = time.perf_counter() - t1
            out["exceptions"] += slow.locator('[data-testid="stException"]').count()
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}))


if __name__ == "__main__":
    main()
