"""Chaos targets: `up`'s generated configs and pids, the config file, the loopback refusal."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from rocketrio.cli.chaos.targets import (
    Cluster,
    Proc,
    TargetError,
    cmdline,
    current_pid,
    from_config_file,
    from_up_dir,
    in_containers,
    not_local,
    pids_from_up_log,
    proc_from_conf,
)

BROKER_CONF = """brokerClusterName=DefaultCluster
brokerName=broker-a
brokerIP1=127.0.0.1
listenPort=21911
haListenPort=21912
storePathRootDir=/tmp/x/store/broker-a-0
enableControllerMode=true
controllerAddr=127.0.0.1:21878
"""
NAMESRV_CONF = """listenPort=21876
listenHost=127.0.0.1
enableControllerInNamesrv=true
controllerDLegerPeers=n0-127.0.0.1:21878
controllerDLegerSelfId=n0
"""


def test_up_processes_read_from_their_generated_configs() -> None:
    b = proc_from_conf("broker-a-0", BROKER_CONF, "/d/conf/broker-a-0.conf")
    assert (b.role, b.addr, b.ports, b.broker_name) == (
        "broker", "127.0.0.1:21911", (21911, 21912), "broker-a",
    )  # fmt: skip
    n = proc_from_conf("namesrv", NAMESRV_CONF, "/d/conf/namesrv.conf")
    assert (n.role, n.addr, n.controller_addr, n.ports) == (
        "namesrv", "127.0.0.1:21876", "127.0.0.1:21878", (21876, 21878),
    )  # fmt: skip
    c = Cluster(n.addr, (n, b))
    assert c.by_addr("127.0.0.1:21878") == n and c.by_addr("127.0.0.1:21912") == b
    assert c.controllers == ["127.0.0.1:21878"]


def test_the_latest_start_of_each_child_gives_its_pid() -> None:
    lines = [
        json.dumps({"event": "child_started", "child": "broker-a-0", "pid": 10, "restart": 0}),
        json.dumps({"event": "child_exited", "child": "broker-a-0", "pid": 10}),
        json.dumps({"event": "child_started", "child": "broker-a-0", "pid": 42, "restart": 1}),
        '{"event": "child_started", "chi',
    ]
    assert pids_from_up_log(lines) == {"broker-a-0": 42}


def test_a_directory_without_a_running_up_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "up.lock").write_text("{}")
    with pytest.raises(TargetError, match="no rocketrio up is running"):
        from_up_dir(str(tmp_path))


def test_anything_off_loopback_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    procs = [{"name": "b", "role": "broker", "addr": "10.0.0.5:10911", "pid": 1}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"namesrv": "127.0.0.1:9876", "processes": procs}))
    c = from_config_file(str(path))
    assert not_local(c) == ["10.0.0.5:10911"]
    local = Cluster("localhost:9876", (Proc("b", "broker", "127.0.0.2:1", (1,)),))
    assert not_local(local) == []
    path.write_text("{")
    with pytest.raises(TargetError, match="not a chaos target file"):
        from_config_file(str(path))


def test_a_containers_brokers_run_in_its_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "namesrv.conf").write_text(NAMESRV_CONF)
    (conf / "broker-a.conf").write_text(BROKER_CONF)
    (conf / "broker-b-s.conf").write_text(BROKER_CONF.replace("broker-a", "broker-b"))
    (conf / "container-1.conf").write_text(
        "listenPort=21951\nbrokerConfigPaths=broker-a.conf:broker-b-s.conf\n"
    )
    procs = [proc_from_conf(p.stem, p.read_text(), str(p)) for p in sorted(conf.glob("*.conf"))]
    by_name = {p.name: p for p in in_containers(procs)}
    assert by_name["broker-a"].host == "container-1"
    assert by_name["broker-b-s"].host == "container-1"
    assert by_name["broker-a"].conf_path == str(conf / "container-1.conf")
    assert by_name["broker-a"].addr == "127.0.0.1:21911"  # its own ports still
    assert by_name["namesrv"].host is None and by_name["container-1"].host is None
    # the container's pid (its command line names its config) is the broker's pid
    logs = tmp_path / "logs"
    logs.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", str(conf / "container-1.conf")]
    )
    try:
        (logs / "up.jsonl").write_text(
            json.dumps({"event": "child_started", "child": "container-1", "pid": child.pid}) + "\n"
        )
        cluster = Cluster("127.0.0.1:21876", tuple(by_name.values()), up_dir=str(tmp_path))
        deadline = time.monotonic() + 10
        while str(conf) not in cmdline(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # until the child has exec'd
        assert current_pid(cluster, by_name["broker-a"]) == child.pid
        assert current_pid(cluster, by_name["namesrv"]) is None  # never started here
    finally:
        child.kill()
        child.wait()
