"""Fixtures shared by the accounting tests."""

from __future__ import annotations

from functools import lru_cache

import pytest

from privcore.accounting import dpsgd


@pytest.fixture
def accountant_calls(monkeypatch):
    """Every call DP-SGD's search makes to the replace-one PLD accountant, in a list (the
    accountant itself still answers); the multiplier's result memo is cleared before and after."""
    calls: list[tuple] = []
    raw = dpsgd._pld_epsilon.__wrapped__

    def one(*args):
        calls.append(args)
        return raw(*args)

    monkeypatch.setattr(dpsgd, "_pld_epsilon", lru_cache(maxsize=None)(one))
    dpsgd.dpsgd_noise_multiplier.cache_clear()
    yield calls
    dpsgd.dpsgd_noise_multiplier.cache_clear()
