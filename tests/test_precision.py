"""privcore.precision: TF32 off inside the block on CUDA, the previous setting back after the last
block (nested and concurrent blocks), nothing touched for the CPU. The effect on a GPU is tested in
tests/deep/test_deep_gpu.py (a clipped contribution stays within the clip; without the block it does not)."""

from __future__ import annotations

import threading

import pytest

from privcore import precision
from privcore.precision import exact_fp32


def test_the_block_turns_tf32_off_and_restores_the_setting():
    before = precision._read()
    with exact_fp32("cuda"):
        inside = precision._read()
        with exact_fp32("cuda"):
            assert precision._read() == inside
        assert precision._read() == inside  # the outer block is still open
    assert precision._read() == before
    assert inside[1:] in (("ieee",) * 4, (False, False))


def test_the_cpu_is_left_alone():
    before = precision._read()
    with exact_fp32("cpu"):
        assert precision._read() == before


def test_an_error_inside_still_restores():
    before = precision._read()
    with pytest.raises(RuntimeError):
        with exact_fp32("cuda"):
            raise RuntimeError("boom")
    assert precision._read() == before


def test_overlapping_blocks_in_two_threads_keep_tf32_off_until_both_leave():
    before = precision._read()
    entered, release = threading.Event(), threading.Event()
    seen = []

    def other() -> None:
        with exact_fp32("cuda"):
            entered.set()
            release.wait(5)
            seen.append(precision._read())

    t = threading.Thread(target=other)
    with exact_fp32("cuda"):
        t.start()
        entered.wait(5)
    # this thread's block has closed; the other's is still open, so TF32 must still be off
    assert precision._read() != before
    release.set()
    t.join(5)
    assert seen and seen[0] != before
    assert precision._read() == before
