"""One local SparkSession for the analysis tests (starting Spark takes seconds)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from rocketrio.analysis.incidents import session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    s = session("local[2]", app="rocketrio-tests")
    yield s
    s.stop()
