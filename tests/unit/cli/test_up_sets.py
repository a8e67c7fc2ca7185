"""`rocketrio up --sets K`: K broker sets of the mode's one set, each its own processes, ports and
store, every other key the template's (cli/up_plan.py `broker_sets`)."""

from __future__ import annotations

import pytest

from rocketrio.cli.up_plan import (
    SET_PORT_STRIDE,
    Layout,
    PlanError,
    expected_replicas,
    plan,
    processes,
)

SAME_KEYS = {
    "namesrvAddr",
    "controllerAddr",
    "brokerClusterName",
    "enableControllerMode",
    "controllerHeartBeatTimeoutMills",
    "brokerHeartbeatInterval",
    "flushDiskType",
}


@pytest.mark.parametrize("sets", [1, 2, 4])
def test_k_sets_of_the_controller_mode(sets: int) -> None:
    specs = plan("controller", Layout("/data/c", namesrv_port=20000, broker_port=20010), sets)
    names = [chr(ord("a") + k) for k in range(sets)]
    assert expected_replicas(specs) == {f"broker-{n}": 2 for n in names}
    assert len(processes(specs)) == 1 + 2 * sets  # one NameServer (with the controller)
    a0 = next(s for s in specs if s.name == "broker-a-0")
    for k, n in enumerate(names):
        for i in (0, 1):
            s = next(s for s in specs if s.name == f"broker-{n}-{i}")
            assert s.config["brokerName"] == f"broker-{n}"
            assert int(s.config["listenPort"]) == 20010 + k * SET_PORT_STRIDE + 10 * i
            assert s.config["storePathRootDir"] == f"/data/c/store/broker-{n}-{i}"
            assert {k: s.config[k] for k in SAME_KEYS} == {k: a0.config[k] for k in SAME_KEYS}


def test_the_single_mode_repeats_its_master() -> None:
    specs = plan("single", Layout("/d"), 3)
    assert expected_replicas(specs) == {"broker-a": 1, "broker-b": 1, "broker-c": 1}


@pytest.mark.parametrize(("mode", "sets"), [("2m-2s-async", 2), ("container-2m-2s", 2),
                                             ("controller", 0), ("controller", 27)])  # fmt: skip
def test_refused_with_a_one_line_reason(mode: str, sets: int) -> None:
    with pytest.raises(PlanError, match="--sets"):
        plan(mode, Layout("/d"), sets)


def test_ports_past_the_range_are_refused() -> None:
    with pytest.raises(PlanError, match=r"outside 1\.\.65535"):
        plan("controller", Layout("/d", namesrv_port=9876, broker_port=65400), 8)
