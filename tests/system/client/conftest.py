"""One real local cluster (``rocketrio up --mode single``: a NameServer and one broker, real
processes on loopback) shared by every test in this folder: the public client API on both
backends and the examples."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.system import UpProcess, start_up

_names = itertools.count()


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpProcess]:
    up = start_up(str(tmp_path_factory.mktemp("client-cluster") / "c"), "single", "--no-console")
    try:
        yield up
    finally:
        up.stop()


@pytest.fixture
def unique() -> str:
    """A suffix for topic and group names, so tests sharing the cluster never meet."""
    return f"_{os.getpid()}_{next(_names)}"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The loops the client's tests run on (anyio's pytest plugin reads this)."""
    return str(request.param)


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """pytest-trio's trio_mode marks every async test as a Trio test; a test marked ``anyio``
    runs on the backend its ``anyio_backend`` names instead (anyio's plugin runs it)."""
    for item in items:
        if item.get_closest_marker("anyio") is not None:
            item.own_markers[:] = [m for m in item.own_markers if m.name != "trio"]
