"""Network faults on lo: /proc/net/tcp, the packets between two processes, the tc commands
(with a recording runner: no tc is run)."""

from __future__ import annotations

import pytest

from rocketrio.cli.chaos import lonet

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
