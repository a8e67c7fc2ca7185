"""Shared pytest fixtures: a MockClock that jumps whenever all tasks are blocked."""

from __future__ import annotations

import os

import pytest
import trio.testing


@pytest.fixture
def mock_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--seeds", type=int, default=None, help="run N seeds of the seeded simulators (default 200)"
    )
    parser.addoption("--seed", type=int, default=None, help="replay one simulator seed")


def pytest_configure(config: pytest.Config) -> None:
    # the simulators read these when their test modules are collected
    if config.getoption("--seeds") is not None:
        os.environ["RAFT_SIM_SEEDS"] = str(config.getoption("--seeds"))
    if config.getoption("--seed") is not None:
        os.environ["RAFT_SIM_SEED"] = str(config.getoption("--seed"))
