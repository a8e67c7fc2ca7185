"""The pytest-xdist groups of tests/conftest.py name test files that exist, and group them."""

from __future__ import annotations

from tests.conftest import XDIST_GROUPS, xdist_scope
from tests.harness.paths import REPO


def test_every_grouped_file_exists() -> None:
    missing = [path for path in XDIST_GROUPS if not (REPO / path).is_file()]
    assert missing == [], "XDIST_GROUPS names files that are gone: update tests/conftest.py"


def test_a_grouped_test_is_scheduled_with_its_group_and_the_others_alone() -> None:
    assert xdist_scope("tests/analysis/test_incidents.py::test_x") == "spark"
    assert xdist_scope("tests/system/test_analyze_failover.py::test_y[1]") == "spark"
    assert xdist_scope("tests/unit/storage/test_commitlog.py::test_z") == (
        "tests/unit/storage/test_commitlog.py::test_z"
    )
