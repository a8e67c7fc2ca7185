"""Shared pytest fixtures: a MockClock that jumps whenever all tasks are blocked."""

from __future__ import annotations

import pytest
import trio.testing


@pytest.fixture
def mock_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)
