"""The `rocketrio` process's exit status and stderr for the tools (the claim is about processes:
what a shell script sees). In-process tests cover the behaviour against a cluster."""

from __future__ import annotations

import pytest

from tests.harness.system import free_port_block, rr

pytestmark = pytest.mark.system


def test_exit_codes_and_one_line_errors() -> None:
    dead = f"127.0.0.1:{free_port_block(1)}"  # nothing listens there
    for argv in (
        ["consume", "-n", dead, "-t", "Orders", "--idle", "30"],
        ["produce", "-n", dead, "-t", "Orders"],
        ["admin", "clusterList", "-n", dead],
        ["admin", "topicRoute", "-n", dead, "-t", "Orders"],
    ):
        r = rr(*argv)
        tool = " ".join(argv[:2]) if argv[0] == "admin" else argv[0]
        assert r.returncode == 1, (argv, r.stdout, r.stderr)
        assert r.stdout == ""
        assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"rocketrio {tool}: "), r.stderr
        assert f"cannot connect to {dead}" in r.stderr
    r = rr("produce", "-n", dead, "-t", "Orders", "-c", "0")
    assert r.returncode == 2
    assert r.stderr == "rocketrio produce: --count must be at least 1, got 0\n"
    r = rr("admin", "topicRoute", "-n", dead)  # -t missing: argparse's usage error
    assert r.returncode == 2 and "the following arguments are required: -t" in r.stderr
