"""CPU threads for a run, chosen from the cores other jobs leave free, and the speed they give.

On a shared machine, torch's intra-op threads beyond the free cores do not share the cores fairly:
each OpenMP parallel region waits at its barrier for a thread the scheduler has parked, and the
waiting threads spin. So a run uses as many threads as there are free cores, at least one
(:func:`choose_threads`), and the time model prices work at the speed those threads get
(:func:`speed`). docs/benchmarks.md ("Predicted time and ETA") has the measurements behind both.

The load of others is the machine's runnable jobs less this process's own. A long-lived process (the
dashboard's server) watches it: from the first reading on, a daemon thread counts twice a second the jobs
runnable on the machine less this process's runnable threads, and the load of others is the median of
the last seconds' counts (:class:`LoadWatch`). That leaves out this process's own past work exactly, and
the median passes over a browser's bursts (a page redraw after a slider move runs a dozen threads for a
fraction of a second, which no run beside it would notice) while it follows a load that lasts. Until the
watch has seen enough, the 1-minute load average (less this process's recent CPU seconds per second,
which the average still holds after a run) and the jobs runnable at this moment stand in, averaged,
since the first lags and the second flickers (:func:`others_load`).

``PRIVCORE_THREADS`` (a whole number >= 1) fixes the threads; ``keep`` leaves torch's setting alone (the
test suite: results compared bit for bit must not change threads between runs). Where neither it nor
``OMP_NUM_THREADS`` is set, threads follow the load. Results do not depend on the threads beyond the
last digits of float sums; the privacy of a release never does (calibration and noise do not read them).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time

__all__ = ["LoadWatch", "others_load", "choose_threads", "planned_threads", "use_threads", "speed", "DEFAULT_EFFICIENCY"]

#: Speed-up of each thread beyond the first on an idle machine, as a share of a whole core: a run on
#: two idle cores is 1 + e times as fast as on one. Measured on the 2-core development machine over
#: Explore's views (docs/benchmarks.md); ``bench/bench_cost.py --write`` may store this machine's as
#: the time model's ``parallel`` constant.
DEFAULT_EFFICIENCY = 0.45


def _runnable_now(samples: int = 5, pause: float = 0.003) -> float | None:
    """Runnable threads on the machine now (this one included): the mean of a few reads of the
    fourth field of /proc/loadavg over about 12 ms; None where there is no such file."""
    counts = []
    for i in range(samples):
        try:
            with open("/proc/loadavg") as fh:
                counts.append(int(fh.read().split()[3].split("/")[0]))
        except (OSError, ValueError, IndexError):
            return None
        if i + 1 < samples:
            time.sleep(pause)
    return sum(counts) / len(counts)


_OWN: dict[str, float] = {}  # the last reading of this process's CPU time: wall, cpu, recent load


def _own_load() -> float:
    """This process's share of the 1-minute load average: its CPU seconds per second, averaged with the
    kernel's weights (exp(-t / 60 s)) over the readings of this function (the first one: since the
    process started)."""
    wall, cpu = time.monotonic(), time.process_time()
    if not _OWN:
        try:
            with open("/proc/self/stat") as fh:
                start = int(fh.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
            with open("/proc/uptime") as fh:
                age = max(float(fh.read().split()[0]) - start, 1e-3)
        except (OSError, ValueError, IndexError):
            age = 60.0
        _OWN.update(wall=wall - age, cpu=0.0, load=0.0)
    dt = max(wall - _OWN["wall"], 1e-3)
    keep = math.exp(-dt / 60.0)
    load = _OWN["load"] * keep + (cpu - _OWN["cpu"]) / dt * (1.0 - keep)
    _OWN.update(wall=wall, cpu=cpu, load=load)
    return load


def _own_runnable() -> int:
    """Threads of this process runnable now (this one included), from /proc/self/task; 1 where unreadable."""
    count = 0
    try:
        for task in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{task}/stat") as fh:
                    count += fh.read().rsplit(")", 1)[1].split()[0] == "R"
            except (OSError, IndexError):
                continue
    except OSError:
        return 1
    return max(count, 1)


class LoadWatch:
    """Other processes' runnable jobs over the last :attr:`window` seconds.

    Every :attr:`interval` seconds a daemon thread reads the jobs runnable on the machine now (the fourth
    field of /proc/loadavg) less this process's runnable threads (its own included) and keeps the counts
    of the last :attr:`window` seconds. :meth:`read` gives their median, with the seconds they cover;
    the thread starts on the first read, and again in a forked child (threads do not survive a fork).
    A median, not a mean: a browser's redraw runs ten or more threads for a few tenths of a second, which
    a mean over the window would count as a steady job although it takes a run beside it a fraction of
    a second; a load that lasts holds most of the counts (docs/benchmarks.md, "Predicted time and ETA")."""

    interval = 0.5
    window = 15.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._since: float | None = None
        self._counts: list[tuple[float, float]] = []

    def add(self, others: float, now: float) -> None:
        """Keep one count of ``others`` runnable jobs, read at ``now`` (monotonic seconds)."""
        with self._lock:
            if self._since is None:
                self._since = now
            self._counts.append((now, float(others)))
            while self._counts and self._counts[0][0] < now - self.window:
                self._counts.pop(0)

    def read(self) -> tuple[float | None, float]:
        """(the median count of the window, None before the first; the seconds watched, at most the window),
        starting the watch if needed."""
        self._start()
        with self._lock:
            if not self._counts or self._since is None:
                return None, 0.0
            values = sorted(c for _, c in self._counts)
            mid = len(values) // 2
            median = values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])
            return median, min(self._counts[-1][0] - self._since, self.window)

    def close(self) -> None:
        """Stop the watch's thread (at its next count); a later :meth:`read` starts it again."""
        with self._lock:
            self._pid = -1

    def _start(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid, self._since, self._counts = os.getpid(), None, []
        threading.Thread(target=self._run, name="privcore-load-watch", daemon=True).start()

    def _run(self) -> None:
        pid = os.getpid()
        while self._pid == pid:
            now = _runnable_now(samples=1)
            if now is None:
                return  # no /proc/loadavg: others_load uses the load average alone
            self.add(max(now - _own_runnable(), 0.0), time.monotonic())
            time.sleep(self.interval)


_WATCH = LoadWatch()


def others_load() -> float:
    """Runnable jobs of other processes, >= 0.

    The process's :class:`LoadWatch` once it has watched for its window; before that, its median is
    blended (by the share of the window watched) with the mean of the 1-minute load average's (less
    this process's recent work) and this moment's (less this process's runnable threads). The load
    average's alone where there is no /proc/loadavg, 0 where there is no load average at all."""
    try:
        past = max(os.getloadavg()[0] - _own_load(), 0.0)
    except (OSError, AttributeError):
        return 0.0
    now = _runnable_now()
    if now is None:
        return past
    start = 0.5 * (past + max(now - _own_runnable(), 0.0))
    watched, seconds = _WATCH.read()
    if watched is None:
        return start
    share = min(seconds / LoadWatch.window, 1.0)
    return share * watched + (1.0 - share) * start


def choose_threads(cores: int, others: float) -> int:
    """Threads for a run beside ``others`` runnable jobs on ``cores`` cores: the free cores, rounded
    down unless within a quarter of a core of the next, at least 1 and at most ``cores``."""
    if cores < 1:
        raise ValueError(f"cores must be >= 1, got {cores}")
    if not (math.isfinite(others) and others >= 0):
        raise ValueError(f"others must be a finite load >= 0, got {others}")
    return max(1, min(cores, math.floor(cores - others + 0.25)))


def _setting() -> int | str:
    """``PRIVCORE_THREADS`` read: a whole number, ``"keep"``, or ``"auto"`` (unset, and no ``OMP_NUM_THREADS``)."""
    text = os.environ.get("PRIVCORE_THREADS", "").strip().lower()
    if not text:
        return "keep" if os.environ.get("OMP_NUM_THREADS", "").strip() else "auto"
    if text in ("auto", "keep"):
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"environment variable PRIVCORE_THREADS must be a whole number >= 1, 'auto' or 'keep', "
                         f"got {text!r}")
    return value


def _torch_threads(cores: int) -> int:
    """Torch's intra-op threads where torch is loaded, else every core."""
    torch = sys.modules.get("torch")
    try:
        return max(1, int(torch.get_num_threads())) if torch is not None else cores
    except (AttributeError, TypeError, ValueError):
        return cores


def planned_threads(cores: int | None = None, others: float | None = None) -> int:
    """The threads the next run will compute on (what :func:`use_threads` will set)."""
    cores = cores or os.cpu_count() or 1
    setting = _setting()
    if setting == "keep":
        return _torch_threads(cores)
    if setting == "auto":
        return choose_threads(cores, others_load() if others is None else others)
    return int(setting)


def use_threads() -> int:
    """Set torch's intra-op threads for the run about to start in this thread (OpenMP keeps the count
    per calling thread), per :func:`planned_threads`; returns them. With ``keep`` torch is left alone."""
    threads = planned_threads()
    if _setting() != "keep":
        import torch  # the run imports it anyway

        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
    return threads


def speed(threads: int, others: float, cores: int, efficiency: float = DEFAULT_EFFICIENCY) -> float:
    """How fast a run on ``threads`` threads goes beside ``others`` runnable jobs on ``cores`` cores,
    relative to one thread on an idle machine: the share of the cores it gets (its threads' share of
    every runnable job, when they are more than the cores), each core beyond the first counted at
    ``efficiency``. Threads beyond the free cores are priced at their fair share only: the spinning of
    OpenMP's barriers is why :func:`choose_threads` does not ask for them."""
    if threads < 1 or cores < 1:
        raise ValueError(f"threads and cores must be >= 1, got {threads} and {cores}")
    cores_held = threads * min(1.0, cores / (max(others, 0.0) + threads))
    return cores_held if cores_held <= 1.0 else 1.0 + efficiency * (cores_held - 1.0)
