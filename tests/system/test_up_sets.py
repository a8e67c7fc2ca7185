"""`rocketrio up --sets 2` (issue 28 item 6): two master/slave sets as separate processes under
one NameServer/controller; the demo topic is created on every set (updateTopic -c) and the
demo's sends land on both sets and are all consumed."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from rocketrio.cli.up_plan import Layout, PlanError, expected_replicas, plan
from tests.harness.system import _all_free, free_port_block, log_problems, rr

pytestmark = pytest.mark.system

SETS = 2
COUNT = 200


def free_sets_base(base_dir: str) -> int:
    for _ in range(50):
        base = free_port_block(1, extra=(200,))
        try:
            specs = plan("controller", Layout(base_dir, namesrv_port=base, broker_port=base + 10),
                         SETS)  # fmt: skip
        except PlanError:
            continue
        if _all_free([use.port for spec in specs for use in spec.listens]):
            return base
    raise RuntimeError("no free port layout for up --sets 2")


def test_up_with_two_sets_spreads_the_demo_over_both(tmp_path: Any) -> None:
    d = str(tmp_path / "c")
    base = free_sets_base(d)
    r = rr(
        "up", "--sets", str(SETS), "--dir", d, "--namesrv-port", str(base),
        "--broker-port", str(base + 10), "--exit-after-demo", "--demo-count", str(COUNT),
        "--no-console", timeout=150,
    )  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "--sets 2: starting 5 processes" in out  # one NameServer, two sets of two
    for name in ("broker-a-0", "broker-a-1", "broker-b-0", "broker-b-1"):
        assert re.search(rf"broker\s+{name}\s+127\.0\.0\.1:\d+\s+pid \d+", out), out
    assert "4 queues on each of 2 broker sets" in out
    m = re.search(rf"produced {COUNT} messages .* \(broker-a (\d+), broker-b (\d+)\)", out)
    assert m is not None, out
    a, b = int(m.group(1)), int(m.group(2))
    assert a + b == COUNT and a > 0 and b > 0, (a, b)
    assert f"consumed {COUNT} distinct messages" in out
    assert sorted(os.listdir(os.path.join(d, "store"))) == [
        "broker-a-0", "broker-a-1", "broker-b-0", "broker-b-1", "controller",
    ]  # fmt: skip
    specs = plan("controller", Layout(d), SETS)
    assert expected_replicas(specs) == {"broker-a": 2, "broker-b": 2}
    assert not log_problems(os.path.join(d, "logs"))
