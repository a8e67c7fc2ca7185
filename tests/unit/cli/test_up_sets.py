"""`rocketrio up --sets K`: K broker sets of the mode's one set, each its own processes, ports and
store, every other key the template's (cli/up_plan.py `broker_sets`)."""

from __future__ import annotations

import pytest

from rocketrio.cli.up_plan import (
    SET_PORT_STRIDE,
    Layout,
    PlanError,
    broker_sets,
    expected_replicas,
    load_templates,
    plan,
    processes,
)
from tests.harness.paths import REPO

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


def _settings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_the_two_set_templates_are_what_up_sets_2_runs() -> None:
    """deploy/2sets (for systemd / supervisord) holds, key for key, the configs
    `up --sets 2` makes from deploy/controller: the two cannot drift."""
    folder = REPO / "deploy" / "2sets"
    made = broker_sets(load_templates("controller"), 2)
    assert sorted(p.stem for p in folder.glob("*.conf")) == sorted(t.name for t in made)
    for t in made:
        assert _settings((folder / f"{t.name}.conf").read_text()) == _settings(t.text), t.name
    units = {p.name for p in (folder / "systemd").iterdir()}
    assert units == {"rocketrio-namesrv.service", "rocketrio-broker@.service"}
    ini = (folder / "supervisord.ini").read_text()
    assert all(f"-c deploy/2sets/{t.name}.conf" in ini for t in made)
