"""Threads from the free cores (privcore/threads.py): the choice, the speed it prices, the setting."""

from __future__ import annotations

import os
import time

import pytest
import torch

from privcore import threads


@pytest.mark.parametrize("cores, others, expected", [
    (2, 0.0, 2), (2, 0.1, 2), (2, 0.5, 1), (2, 1.0, 1), (2, 4.0, 1),      # the development machine
    (16, 0.0, 16), (16, 3.2, 13), (16, 3.8, 12), (16, 40.0, 1), (1, 0.0, 1)])
def test_a_run_takes_the_free_cores(cores, others, expected):
    assert threads.choose_threads(cores, others) == expected


def test_bad_cores_or_load_are_named():
    with pytest.raises(ValueError, match="cores must be >= 1, got 0"):
        threads.choose_threads(0, 0.0)
    with pytest.raises(ValueError, match="others must be a finite load >= 0, got nan"):
        threads.choose_threads(2, float("nan"))
    with pytest.raises(ValueError, match="threads and cores must be >= 1"):
        threads.speed(0, 0.0, 2)


def test_speed_is_the_share_of_cores_held():
    e = threads.DEFAULT_EFFICIENCY
    assert threads.speed(1, 0.0, 2) == 1.0
    assert threads.speed(2, 0.0, 2) == pytest.approx(1 + e)
    assert threads.speed(1, 4.0, 2) == pytest.approx(2 / 5)               # 1 of 5 runnable jobs on 2 cores
    assert threads.speed(2, 4.0, 2) == pytest.approx(2 * 2 / 6)           # (the spinning is not priced)
    assert threads.speed(8, 8.0, 16) == pytest.approx(1 + 7 * e)
    # never faster for fewer cores held, never faster than the cores
    for others in (0.0, 0.5, 1.0, 3.0):
        assert threads.speed(1, others, 2) <= threads.speed(2, max(others - 1, 0.0), 2) + 1e-12
        assert threads.speed(2, others, 2) <= 2.0


@pytest.mark.parametrize("text, omp, expected", [
    ("", "", "auto"), ("auto", "", "auto"), ("keep", "", "keep"), ("3", "", 3), (" Keep ", "", "keep"),
    ("", "4", "keep"),           # OMP_NUM_THREADS set by the user: torch's own count stands
    ("2", "4", 2)])
def test_the_setting(monkeypatch, text, omp, expected):
    monkeypatch.setenv("PRIVCORE_THREADS", text)
    monkeypatch.setenv("OMP_NUM_THREADS", omp)
    assert threads._setting() == expected


@pytest.mark.parametrize("bad", ["0", "-2", "two", "1.5"])
def test_a_bad_setting_is_named(monkeypatch, bad):
    monkeypatch.setenv("PRIVCORE_THREADS", bad)
    with pytest.raises(ValueError, match=r"PRIVCORE_THREADS must be a whole number >= 1, 'auto' or 'keep', got"):
        threads.planned_threads()


def test_use_threads_sets_torch_and_keep_leaves_it(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("PRIVCORE_THREADS", "auto")
        monkeypatch.setattr(threads, "others_load", lambda: 5.0)          # a loaded machine: one thread
        assert threads.use_threads() == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("PRIVCORE_THREADS", "keep")
        torch.set_num_threads(2)
        assert threads.use_threads() == 2 and torch.get_num_threads() == 2
        monkeypatch.setenv("PRIVCORE_THREADS", "1")
        assert threads.use_threads() == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


class _Watched:
    def __init__(self, mean, seconds):
        self.value = (mean, seconds)

    def read(self):
        return self.value


def test_others_load_leaves_out_this_process(monkeypatch):
    monkeypatch.setattr(threads, "_WATCH", _Watched(None, 0.0))          # a process that has not watched yet
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    monkeypatch.setattr(threads, "_own_load", lambda: 2.0)               # two of the three were this process's
    monkeypatch.setattr(threads, "_runnable_now", lambda: 2.0)
    monkeypatch.setattr(threads, "_own_runnable", lambda: 1)             # the reading thread itself
    assert threads.others_load() == pytest.approx(0.5 * (1.0 + 1.0))
    monkeypatch.setattr(threads, "_runnable_now", lambda: None)         # no /proc/loadavg: the average alone
    assert threads.others_load() == pytest.approx(1.0)
    monkeypatch.setattr(threads, "_own_load", lambda: 5.0)              # never below 0
    assert threads.others_load() == 0.0


def test_a_watched_process_trusts_its_watch_over_the_load_average(monkeypatch):
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (3.0, 3.0, 3.0))  # this process's past work, mostly
    monkeypatch.setattr(threads, "_own_load", lambda: 1.0)
    monkeypatch.setattr(threads, "_runnable_now", lambda: 2.0)
    monkeypatch.setattr(threads, "_own_runnable", lambda: 1)
    start = 0.5 * (2.0 + 1.0)
    monkeypatch.setattr(threads, "_WATCH", _Watched(0.0, 2 * threads.LoadWatch.window))  # watched: nobody else ran
    assert threads.others_load() == 0.0
    monkeypatch.setattr(threads, "_WATCH", _Watched(0.0, 0.5 * threads.LoadWatch.window))  # half a window: blended
    assert threads.others_load() == pytest.approx(0.5 * start)
    monkeypatch.setattr(threads, "_WATCH", _Watched(4.0, 3 * threads.LoadWatch.window))   # four busy jobs
    assert threads.others_load() == pytest.approx(4.0)


def test_the_watch_passes_over_bursts_and_follows_a_lasting_load():
    watch = threads.LoadWatch()
    watch._pid = os.getpid()  # counted by hand below, no thread
    t = 100.0
    for i in range(30):  # 15 s: a browser's redraw of 12 threads in 3 counts of 30, nobody else otherwise
        watch.add(12.0 if i in (10, 11, 12) else 0.0, t + i * watch.interval)
    assert watch.read() == (0.0, pytest.approx(14.5))
    for i in range(30, 60):  # then 4 busy jobs for 15 s: the old counts leave the window
        watch.add(4.0, t + i * watch.interval)
    assert watch.read() == (4.0, watch.window)


def test_the_watch_counts_other_jobs_not_this_process(monkeypatch):
    monkeypatch.setattr(threads, "_runnable_now", lambda samples=5: 5.0)  # five runnable, two of them ours
    monkeypatch.setattr(threads, "_own_runnable", lambda: 2)
    watch = threads.LoadWatch()
    try:
        mean, seconds = watch.read()  # starts its thread
        deadline = time.monotonic() + 10.0
        while (mean is None or seconds < watch.interval) and time.monotonic() < deadline:
            time.sleep(0.1)
            mean, seconds = watch.read()
        assert mean == pytest.approx(3.0) and seconds >= watch.interval
    finally:
        watch.close()


def test_own_load_follows_this_process_cpu_time():
    threads._own_load()
    end = time.process_time() + 0.3
    while time.process_time() < end:  # 0.3 CPU-s now
        pass
    assert threads._own_load() > 0.0 and threads._own_runnable() >= 1


def test_the_jobs_runnable_now_count_this_one():
    import os

    now = threads._runnable_now()
    assert now is None if not os.path.exists("/proc/loadavg") else now >= 1.0  # the reader itself runs


def test_the_cli_runs_on_the_threads_chosen(monkeypatch, tmp_path):
    import argparse

    from privcore import cli_jobs

    calls = []
    monkeypatch.setattr(threads, "use_threads", lambda: calls.append(1) or 1)
    args = argparse.Namespace(executor="local", scheduler=None, workers=None)
    assert cli_jobs.run_jobs([], args) == [] and calls == [1]
