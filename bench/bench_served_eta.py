"""The served dashboard's time estimates against the actual time, as a user sees them (prints figures).

    python bench/bench_served_eta.py [--moves 3] [--slider LABEL] [--load N] [--visit PAGE ...] [--threads N] [--port 8791]
        [--raw FILE]

Serves the dashboard (``streamlit run app.py``) on an empty result cache, opens Explore in headless
Chromium (/usr/bin/chromium) and, once the first view is drawn, moves the ε slider (or ``--slider``)
one step left at a time with the keyboard (``--moves`` new values), as a user does. A script in the page reads every
progress bar's text every 100 ms. For each bar it prints what the user was told at its start
("expected about N s", the cost model's prediction; where the first redraw came before a reading,
the first ETA plus the time elapsed then) and the first ETA, against the bar's own
elapsed time when it finished (its last text; its time on screen where it never showed 100 %),
with the threads its device line names. ``--visit Measured_leakage`` then opens that page from the menu
and times its default measurements the same way. Browser and server share this machine's cores, as they do
on a laptop. ``--load N`` adds N busy single-threaded processes (started 60 s before the visit).
The "Compute (about N s)" gate is off, so a run starts on the move itself.

Bench/bench_estimates.py measures the same estimates in fresh processes without a browser; this
script is the end-to-end check (issue 32: within 1.5x, quiet and at load 4).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_estimates import busy
from bench_first_visit import CURVE, DONE, REC, _browser, _serve

ROOT = Path(__file__).resolve().parents[1]
SLIDER_TEXT = "Privacy loss ε"

#: Page script: every 100 ms, the texts of the progress bars on screen, with the time (ms since the
#: page's start) in ``window.__bars``, only when they change.
WATCH = """
window.__bars = []; let __last = '';
setInterval(() => {
  const texts = [...document.querySelectorAll('[data-testid="stProgress"]')].map(e => e.innerText.trim());
  const key = JSON.stringify(texts);
  if (key !== __last) { window.__bars.push([performance.now(), texts]); __last = key; }
}, 100);
"""

_SECONDS = r"(\d+(?:\.\d+)?) (s|min)"


def _seconds(number: str, unit: str) -> float:
    return float(number) * (60.0 if unit == "min" else 1.0)


def bars(log: list) -> list[dict]:
    """The bars of a page's log (:data:`WATCH`): one entry per bar from its appearance to its end,
    with its label, device line, prediction, first ETA, last elapsed and fraction, and time on screen."""
    done, open_ = [], {}
    for t, texts in log + [[log[-1][0] if log else 0.0, []]]:
        seen = set()
        for text in texts:
            label, _, rest = text.partition(" on ")
            seen.add(label)
            bar = open_.get(label)
            if bar is None:
                bar = open_[label] = {"label": label, "start": t, "predicted": None, "eta": None,
                                      "elapsed": None, "fraction": 0.0, "device": rest.split(":")[0],
                                      "waited": "being computed" in text or "waiting for" in text}
            bar["end"] = t
            m = re.search(r"expected about " + _SECONDS, text)
            if m and bar["predicted"] is None:
                bar["predicted"] = _seconds(*m.groups())
            m = re.search(r"ETA " + _SECONDS, text)
            if m and bar["eta"] is None:
                bar["eta"] = _seconds(*m.groups())
                first = re.search(_SECONDS + r" elapsed", text)
                if bar["predicted"] is None:  # the "starting" text was redrawn before a reading: the first ETA
                    bar["predicted"] = bar["eta"] + (_seconds(*first.groups()) if first else 0.0)
            m = re.search(_SECONDS + r" elapsed", text)
            if m:
                bar["elapsed"] = _seconds(*m.groups())
            m = re.search(r"· (\d+)% ·", text)
            if m:
                bar["fraction"] = int(m.group(1)) / 100.0
        for label in [k for k in open_ if k not in seen]:
            open_[label]["end"] = t  # the first reading without it: the log holds changes only
            done.append(open_.pop(label))
    for bar in done:
        bar["on_screen"] = (bar["end"] - bar["start"]) / 1000.0
        full = bar["fraction"] >= 1.0 and bar["elapsed"] is not None
        bar["actual"] = bar["elapsed"] if full else bar["on_screen"]
    return done


def move_slider(page, label: str = SLIDER_TEXT) -> str:  # a playwright page
    """Move the slider ``label`` one step left with the keyboard (again where a re-draw lost the key); its new value."""
    slider = page.get_by_test_id("stSlider").filter(has_text=label).get_by_role("slider")
    before = slider.get_attribute("aria-valuetext")
    for attempt in range(3):
        slider.focus()
        page.keyboard.press("ArrowLeft")
        for _ in range(20):
            now = slider.get_attribute("aria-valuetext")
            if now != before:
                return now
            page.wait_for_timeout(250)
    raise SystemExit(f"the slider {label!r} did not move from {before}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moves", type=int, default=3, help="new values, one slider step left each")
    ap.add_argument("--slider", default=SLIDER_TEXT,
                    help="the label of the Explore slider to move (e.g. 'δ (0 = pure ε-DP)': every method computes anew)")
    ap.add_argument("--load", type=int, default=0, help="busy processes to run beside the server and browser")
    ap.add_argument("--visit", nargs="*", default=[],
                    help="pages to open from the menu after the moves, e.g. Measured_leakage (its default measurements)")
    ap.add_argument("--port", type=int, default=8791)
    ap.add_argument("--raw", default="", help="write every step's bar texts, with their times, to this JSON file")
    ap.add_argument("--threads", default="", help="PRIVCORE_THREADS for the server (default: the free cores)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "PRIVCORE_SLOWDOWN", "PRIVCORE_THREADS")}
    env.update(PRIVCORE_CACHE=tempfile.mkdtemp(), PRIVCORE_COMPUTE_THRESHOLD_S="1e9")
    if args.threads:
        env["PRIVCORE_THREADS"] = args.threads
    with busy(args.load):  # started 60 s before the visit
        print(f"# served estimates vs actual ({os.cpu_count()} cores, {args.load} busy processes added; "
              f"load average {os.getloadavg()[0]:.2f})", flush=True)
        server = _serve(ROOT / "app.py", args.port, env)
        try:
            with sync_playwright() as pw:
                browser = _browser(pw)
                page = browser.new_page(viewport={"width": 1400, "height": 1900})
                page.add_init_script(WATCH)
                page.goto(f"http://127.0.0.1:{args.port}/")
                page.wait_for_function(REC, timeout=600_000, polling=200)  # the first view: the recommendation,
                page.wait_for_selector(CURVE, timeout=600_000)              # the curve, and nothing left running
                page.wait_for_function(DONE, timeout=600_000, polling=200)
                steps = [("first visit", page.evaluate("window.__bars"))]
                for _ in range(args.moves):
                    page.wait_for_timeout(3000)  # a user reads the page before moving on
                    page.evaluate("window.__bars = []")
                    load = os.getloadavg()[0]
                    value = move_slider(page, args.slider)
                    page.wait_for_timeout(1500)
                    page.wait_for_function(DONE, timeout=600_000, polling=200)
                    steps.append((f"{args.slider[:8]}={value} (load {load:.2f})", page.evaluate("window.__bars")))
                for name in args.visit:  # another page, in the same tab, as a click in the menu would open it
                    page.evaluate("window.__bars = []")
                    load = os.getloadavg()[0]
                    page.get_by_test_id("stSidebarNav").get_by_role("link", name=name.replace("_", " ")).click()
                    page.wait_for_timeout(1500)
                    page.wait_for_function(DONE, timeout=1_200_000, polling=200)
                    steps.append((f"{name[:14]} (load {load:.2f})", page.evaluate("window.__bars")))
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
        if args.raw:
            Path(args.raw).write_text(json.dumps(steps, indent=1, ensure_ascii=False))
        print(f"{'step':24s} {'bar':18s} {'device':48s} {'pred s':>6s} {'ETA1 s':>6s} {'actual s':>8s} {'ratio':>6s}")
        worst = 1.0
        for step, log in steps:
            for bar in bars(log):
                ratio = bar["predicted"] / bar["actual"] if bar["predicted"] and bar["actual"] else float("nan")
                if bar["predicted"] and bar["actual"] and bar["actual"] > 1.5 and not bar["waited"]:
                    worst = max(worst, ratio, 1.0 / ratio)
                note = " (waited for another run)" if bar["waited"] else ""
                print(f"{step:24s} {bar['label'][:18]:18s} {bar['device'][:48]:48s} "
                      f"{bar['predicted'] or float('nan'):6.1f} {bar['eta'] or float('nan'):6.1f} "
                      f"{bar['actual']:8.1f} {ratio:6.2f}{note}", flush=True)
        print(f"# worst factor {worst:.2f} over bars of more than 1.5 s (target <= 1.5); load average after "
              f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
