"""Client tests on both event loops: the ``anyio_backend`` fixture (asyncio and trio; anyio's
pytest plugin runs a test marked ``anyio`` once per value) and the hook that keeps
pytest-trio's ``trio_mode`` (which marks every async test a Trio test) off those tests.

A conftest imports both names: ``from tests.harness.anyio_backends import anyio_backend,
pytest_collection_modifyitems``."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("anyio") is not None:
            item.own_markers[:] = [m for m in item.own_markers if m.name != "trio"]
