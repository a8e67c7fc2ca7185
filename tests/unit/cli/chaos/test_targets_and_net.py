"""The chaos shells' pure parts: reading `up`'s directory, the loopback refusal, /proc/net/tcp,
the tc commands (with a recording runner: no tc is run) and the report's outputs."""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest

from rocketrio.cli.chaos import checkers, lonet, report
from rocketrio.cli.chaos.history import Ack, Consume, FaultWindow, History, TopicSpec
from rocketrio.cli.chaos.targets import (
    Cluster,
    Proc,
    TargetError,
    from_config_file,
    from_up_dir,
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


TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  inode
   0: 0100007F:5597 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1
   1: 0100007F:9C40 0100007F:55A1 01 00000000:00000000 00:00000000 00000000     0        0 222 1
   2: 0100007F:55A1 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 333 1
"""


def test_proc_net_tcp_rows_and_the_packets_between_two_processes() -> None:
    rows = lonet.parse_proc_net_tcp(TCP)
    assert [(c.local_port, c.remote_port, c.inode, c.listening) for c in rows] == [
        (21911, 0, 111, True), (40000, 21921, 222, False), (21921, 40000, 333, False),
    ]  # fmt: skip
    a = [rows[0], rows[1]]  # listens on 21911, connected out from 40000 to 21921
    b = [rows[2]]  # the other end, on 21921
    assert lonet.pairs_between(a, b) == {(40000, 21921), (21921, 40000)}
    assert lonet.pairs_between(a, []) == set()


def test_tc_setup_filters_and_teardown_commands() -> None:
    ran: list[list[str]] = []

    def run(args: list[str], check: bool) -> str:
        ran.append(args)
        return "qdisc noqueue 0: root refcnt 2\n" if args[:2] == ["qdisc", "show"] else ""

    net = lonet.LoopbackNet(128, run)
    net.setup()
    assert ran[1][:7] == ["qdisc", "add", "dev", "lo", "root", "handle", "1:"]
    assert ["pfifo", "limit", "0"] == ran[4][-3:]  # the partition band drops everything
    assert "128kbit" in ran[5]
    prio = net.new_prio()
    net.add(prio, lonet.DROP_BAND, [(40000, 21921)])
    assert " ".join(ran[-1]).endswith(
        "u32 match ip sport 40000 0xffff match ip dport 21921 0xffff flowid 1:4"
    )
    assert ran[-1][-1] == "1:4"
    net.remove(prio)
    assert ran[-1][:2] == ["filter", "del"] and str(prio) in ran[-1]
    net.teardown()
    assert ran[-1] == ["qdisc", "del", "dev", "lo", "root"]
    assert not net.up


def test_tc_refuses_a_loopback_that_already_has_a_qdisc() -> None:
    net = lonet.LoopbackNet(128, lambda args, check: "qdisc htb 1: root refcnt 2\n")
    with pytest.raises(OSError, match="already has a qdisc"):
        net.setup()
    assert not net.up


def test_report_json_text_and_an_svg_marking_each_fault() -> None:
    h = History(start_ms=0, end_ms=10_000, topics=[TopicSpec("T", 4, 4, 6, ("g",))])
    h.acks = [Ack(f"m{i}", "T", "b", 0, i, i * 100, 3 + i % 7) for i in range(100)]
    h.consumes = [Consume(a.msg_id, "g", "T", "b", 0, a.queue_offset, a.ts_ms + 5) for a in h.acks]
    h.faults = [FaultWindow(0, "kill-master", "kill", ("broker-a-0",), 4000, 4000)]
    checks, recs = checkers.run_all(h)
    res = report.result(h, checks, recs, {"run_id": "r1"})
    assert res["ok"] and res["acked"] == 100
    assert any("kill-master" in line for line in report.summary(res))
    assert report.kind_table(res)[2].startswith("| kill-master | 1 |")
    svg = report.latency_svg(h)
    root = ElementTree.fromstring(svg)  # well-formed, no script
    assert root.tag.endswith("svg") and "<script" not in svg
    assert svg.count("<circle") == 100 and "kill-master on broker-a-0" in svg
    page = report.html_report(h, res)
    assert "<svg" in page and "OK" in page
