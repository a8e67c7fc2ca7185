"""Shared pytest fixtures: a MockClock that jumps whenever all tasks are blocked, `disk`
(storage tests on the real disk and on the simulated one), and `spark` (one local SparkSession)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio.testing
from hypothesis import settings

from rocketrio.storage.fs import OS_FS
from tests.harness import seeds
from tests.harness.disk_view import DiskView
from tests.harness.sim_disk import SimFileSystem

# No wall-clock deadline on a hypothesis example: a deadline is a speed assertion, and on a
# loaded 2-core machine an example of a correct codec took 744 ms against the 200 ms default
# (a FlakyFailure that says nothing about the code). Every other setting stays hypothesis's.
settings.register_profile("rocketrio", deadline=None)
settings.load_profile("rocketrio")


@pytest.fixture
def mock_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


@pytest.fixture(params=["os", "sim"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> DiskView:
    """A place for storage files: the real disk under tmp_path, or a SimFileSystem."""
    if request.param == "os":
        return DiskView(OS_FS, str(tmp_path))
    return DiskView(SimFileSystem(random.Random(0)), "/sim/test")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--seeds",
        type=int,
        default=None,
        help="run seeds 0..N-1 of the seeded simulators (a soak; by default the cluster "
        "simulation runs a rotating window of seeds, the others 200)",
    )
    parser.addoption(
        "--seeds-from",
        type=int,
        default=None,
        help="with --seeds N: the cluster simulation's soak runs seeds K..K+N-1 instead",
    )
    parser.addoption("--seed", type=int, default=None, help="replay one simulator seed")
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="also run the tests marked long (minute-long real-process runs kept out of the "
        "12-minute default: chaos on a broken build, acting master in the container mode)",
    )
    parser.addoption(
        "--mutant",
        default=None,
        help="run the cluster simulation's seeds against a mutant (tests/sim/mutants.py)",
    )


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for every test that runs the incident job in-process (starting
    Spark takes seconds), with the settings for tiny inputs (`TINY_INPUT_CONF`) and a driver
    JVM that compiles with C1 only (`quick_jvm`); the `rocketrio analyze` system test runs the
    job with the product's own settings (on such a JVM too)."""
    from rocketrio.analysis.incidents import session
    from tests.harness.spark import TINY_INPUT_CONF, quick_jvm

    with quick_jvm():
        s = session("local[2]", app="rocketrio-tests")
    for key, value in TINY_INPUT_CONF.items():
        s.conf.set(key, value)
    yield s
    s.stop()


STRICT_LOGGING: dict[str, object] = {}


@pytest.fixture(autouse=True)
def strict_logging() -> None:
    """Every test starts with the strict logging configuration, whatever an earlier test
    configured (a tool run in-process, `configure_logging` in a system test)."""
    import structlog

    structlog.configure(**STRICT_LOGGING)  # type: ignore[arg-type]


def pytest_configure(config: pytest.Config) -> None:
    # every test logs strictly: a name or field missing from the event catalogue
    # (rocketrio.actors.observe.events) raises UncataloguedEvent where it is logged
    import structlog

    from rocketrio.actors.observe.logs import check_catalogued

    processors = list(structlog.get_config()["processors"])
    structlog.configure(processors=[check_catalogued(True), *processors])
    STRICT_LOGGING.update(structlog.get_config())
    # the simulators read these when their test modules are collected
    if config.getoption("--seeds") is not None:
        os.environ["RAFT_SIM_SEEDS"] = str(config.getoption("--seeds"))
    if config.getoption("--seeds-from") is not None:
        os.environ[seeds.FROM_ENV] = str(config.getoption("--seeds-from"))
    if config.getoption("--seed") is not None:
        os.environ["RAFT_SIM_SEED"] = str(config.getoption("--seed"))
    if config.getoption("--mutant") is not None:
        os.environ["CLUSTER_SIM_MUTANT"] = config.getoption("--mutant")
    # the cluster simulation's rotating window: chosen here, in the controlling process, so
    # pytest-xdist's workers (started later, with this environment) collect the same seeds
    seeds.choose_window()


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller says it
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(seeds.describe())


# Tests that run as one unit on one pytest-xdist worker (`-n 3`), one after the other: the
# tests on the in-process SparkSession (the `spark` fixture is per worker process: one JVM
# instead of two), the network-namespace test (one bridge at a time), and the real-process
# tests with timing assertions or a mount, which must not overlap each other. (pytest-xdist's
# own xdist_group marks do not work with pytest 9.2, whose node ids it can no longer suffix;
# tests/unit/harness/test_xdist_groups.py checks these paths exist.)
XDIST_GROUPS: dict[str, str] = {
    "tests/analysis/test_incidents.py": "spark",
    "tests/analysis/test_sim_ground_truth.py": "spark",
    "tests/analysis/test_required_fields.py": "spark",
    "tests/analysis/test_files_count.py": "spark",
    "tests/system/test_analyze_failover.py": "spark",
    "tests/system/test_partition_netns.py": "netns",
    "tests/system/test_controller_processes.py": "quiet",
    "tests/system/test_server_limits_process.py": "quiet",
    "tests/system/test_console_browser.py": "quiet",
    "tests/system/test_disk_full_process.py": "quiet",
    "tests/system/test_up_supervisor_shell.py": "quiet",
    # one tc setup on lo at a time; a group of its own, so its three minutes of real
    # processes run beside the quiet group on the other worker, not after it
    "tests/system/test_chaos_processes.py": "chaos",
    "tests/system/test_chaos_disk_full.py": "chaos",
}


def xdist_scope(nodeid: str) -> str:
    """The unit of work a test belongs to under pytest-xdist: its group, else itself."""
    return XDIST_GROUPS.get(nodeid.split("::", 1)[0], nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`-n N`: each test on its own, except `XDIST_GROUPS` (pytest-xdist's loadscope
    machinery with our scopes: bigger units first, then the collection order below)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--long"):
        skip = pytest.mark.skip(reason="long: run with --long")
        for item in items:
            if "long" in item.keywords:
                item.add_marker(skip)
    # longest first, so two workers end together: the Spark tests, then the real-process
    # tests, then the simulations, then the many short unit and actor tests (a stable sort:
    # the same order in every worker, as pytest-xdist requires)
    items.sort(key=_schedule_rank)


def _schedule_rank(item: pytest.Item) -> int:
    if xdist_scope(item.nodeid) == "spark":
        return 0
    if item.get_closest_marker("system") is not None:
        return 1
    if item.nodeid.startswith("tests/sim/"):
        return 2
    return 3
