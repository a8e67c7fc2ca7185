"""The pytest-xdist groups of tests/conftest.py name test files that exist, and group them."""

from __future__ import annotations

import re

from tests.conftest import XDIST_GROUPS, xdist_scope
from tests.harness.paths import REPO

# a test function taking the `spark` fixture (one SparkSession, one JVM, per worker process)
_SPARK_ARG = re.compile(r"def test_\w+\([^)]*\bspark\s*:", re.S)


def test_every_grouped_file_exists() -> None:
    missing = [path for path in XDIST_GROUPS if not (REPO / path).is_file()]
    assert missing == [], "XDIST_GROUPS names files that are gone: update tests/conftest.py"


def test_a_grouped_test_is_scheduled_with_its_group_and_the_others_alone() -> None:
    assert xdist_scope("tests/analysis/test_incidents.py::test_x") == "spark"
    assert xdist_scope("tests/system/test_analyze_failover.py::test_y[1]") == "spark"
    assert xdist_scope("tests/unit/storage/test_commitlog.py::test_z") == (
        "tests/unit/storage/test_commitlog.py::test_z"
    )


def test_every_file_using_the_spark_fixture_is_in_the_spark_group() -> None:
    using = {
        str(f.relative_to(REPO))
        for f in (REPO / "tests").rglob("test_*.py")
        if _SPARK_ARG.search(f.read_text(encoding="utf-8"))
    }
    assert using, "no test takes the spark fixture: the pattern is stale"
    outside = sorted(p for p in using if XDIST_GROUPS.get(p) != "spark")
    assert outside == [], "add these to the spark group of XDIST_GROUPS in tests/conftest.py"
