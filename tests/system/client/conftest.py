"""One real local cluster (``rocketrio up --mode single``: a NameServer and one broker, real
processes on loopback) shared by every test in this folder: the public client API on both
backends and the examples."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.anyio_backends import anyio_backend, pytest_collection_modifyitems
from tests.harness.system import UpProcess, start_up

__all__ = ["anyio_backend", "pytest_collection_modifyitems"]  # the both-loop fixture and hook

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


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
