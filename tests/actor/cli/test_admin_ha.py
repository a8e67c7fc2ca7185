"""`rocketrio admin haStatus` (GET_BROKER_HA_STATUS, 907) against a controller-mode broker set on
the simulated network (MockClock), run in-process through cli.main.main_async.

What an operator must be able to read from it: after a load the master lists its slaves in
sync with diff 0 and bytes flowing; a slave that stops acking is shown out of sync and falling
behind, a stopped one disappears; "in sync" is the controller's SyncStateSet, not a small diff;
a slave shows its master and when it last heard from it (never, once the link is broken); after
a failover the new master reports itself master, first alone, then with the old master as its
slave; a broker without slaves answers like upstream's standalone broker; classic master/slave
report the same way.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerRole
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from rocketrio.protocol.codes import ResponseCode as RC
from tests.harness.classic_ha import M as CLASSIC_M
from tests.harness.classic_ha import S as CLASSIC_S
from tests.harness.classic_ha import classic, until
from tests.harness.clock import EPOCH_MS
from tests.harness.replication import (
    CTRL_HOSTS,
    Acked,
    Cluster,
    Node,
    awaits_equal,
    awaits_true,
    cluster,
    pair,
    send_many,
    wait_until,
)

Capture = pytest.CaptureFixture[str]
HOST = "10.0.9.7"
ISO_DATE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d"


async def ha_status(capsys: Capture, c: Cluster, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with structlog.testing.capture_logs():  # the servers' log lines stay out of stdout
        code = await main_async(
            ["admin", "haStatus", "-n", c.namesrv_addr, *argv], Wiring(c.net.transport(HOST))
        )
    out, err = capsys.readouterr()
    return code, out, err


async def body_of(capsys: Capture, c: Cluster, node: Node) -> dict[str, Any]:
    """The 907 body of one broker, as ``haStatus -b addr --json`` prints it."""
    code, out, err = await ha_status(capsys, c, "-b", node.b.addr, "--json")
    assert code == 0 and err == "", err
    bodies = json.loads(out)
    assert list(bodies) == [node.b.addr]
    body: dict[str, Any] = bodies[node.b.addr]
    return body


def row_of(out: str, host: str) -> list[str]:
    """The cells of the slave row for ``host`` in a master's table."""
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0] == host:
            return cells
    raise AssertionError(f"no row for {host} in:\n{out}")


async def trio_of_replicas(c: Cluster, **overrides: Any) -> tuple[Node, Node, Node]:
    a, b, d = c.node(), c.node(), c.node()
    for n in (a, b, d):
        await (await n.start(**overrides)).wait_role()
    assert a.rm.serving_as_master()
    await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2, 3}), "both slaves in the set")
    return a, b, d


async def test_master_shows_its_slaves_in_sync_then_one_behind_then_one_gone(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    # a partitioned slave keeps its connection (nothing closes it for 60 s), so it can be seen
    # connected but out of the SyncStateSet once haMaxTimeSlaveNotCatchup (15 s) passed
    async with cluster(tmp_path, 51) as c:
        a, b, d = await trio_of_replicas(c, haHousekeepingInterval=60_000)
        acked: Acked = {}

        async def load() -> None:
            for i in range(100):
                assert await send_many(c, a, 1, f"load{i}", acked) == 1
                await trio.sleep(0.02)

        async with trio.open_nursery() as n:
            n.start_soon(load)
            await trio.sleep(1.5)
            during = await body_of(capsys, c, a)
            received = (await body_of(capsys, c, b))["haClientRuntimeInfo"]
        # ~50 messages a second flow to each slave: KBs, far above heartbeats and handshakes
        # (36 bytes each), and never more than was written
        rates = [conn["transferredByteInSecond"] for conn in during["haConnectionInfo"]]
        assert len(rates) == 2, during
        assert all(1024 < r < during["masterCommitLogMaxOffset"] for r in rates), during
        assert 1024 < received["transferredByteInSecond"] < during["masterCommitLogMaxOffset"]

        await trio.sleep(2)  # the load is over: a whole quiet second later nothing flows
        end = a.b.store.message_store.get_commitlog_max_offset()
        body = await body_of(capsys, c, a)
        assert body["master"] is True and body["masterCommitLogMaxOffset"] == end
        assert body["inSyncSlaveNums"] == 2
        conns = {conn["addr"]: conn for conn in body["haConnectionInfo"]}
        assert set(conns) == {b.host, d.host}
        for conn in conns.values():
            assert conn["inSync"] is True and conn["diff"] == 0
            assert conn["slaveAckOffset"] == conn["transferFromWhere"] == end
            assert conn["transferredByteInSecond"] < 1024  # heartbeats at most
        assert "masterAddr" not in body["haClientRuntimeInfo"]

        code, out, _ = await ha_status(capsys, c, "-b", a.b.addr)
        assert code == 0 and f"broker {a.b.addr}: master" in out
        assert re.search(rf"CommitLog max offset\s+{end}$", out, re.M)
        assert re.search(r"slaves in sync\s+2$", out, re.M), out
        for host in (b.host, d.host):
            assert row_of(out, host)[1:4] == [str(end), "0", "yes"], out

        # d stops acking: dropped from the SyncStateSet, still connected, falling behind
        c.net.partition([d.host], [a.host])
        await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "d left the set")
        assert await send_many(c, a, 10, "after", acked) == 10
        end2 = a.b.store.message_store.get_commitlog_max_offset()
        code, out, _ = await ha_status(capsys, c, "-b", a.b.addr)
        assert code == 0 and re.search(r"slaves connected\s+2$", out, re.M), out
        assert re.search(r"slaves in sync\s+1$", out, re.M), out
        assert row_of(out, b.host)[1:4] == [str(end2), "0", "yes"]
        assert row_of(out, d.host)[1:4] == [str(end), str(end2 - end), "no"]

        # d stops: its connection is gone from the master's view
        await d.crash()
        c.net.heal()
        body = await body_of(capsys, c, a)
        assert [conn["addr"] for conn in body["haConnectionInfo"]] == [b.host]
        assert body["inSyncSlaveNums"] == 1


async def test_a_slave_shows_its_master_and_when_it_last_heard_from_it(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 52) as c:
        a, b = await pair(c)
        assert await send_many(c, a, 20, "m", {}) == 20
        await trio.sleep(1)  # the master's confirmOffset reaches the slave
        end = a.b.store.message_store.get_commitlog_max_offset()
        now_ms = EPOCH_MS + int(trio.current_time() * 1000)
        body = await body_of(capsys, c, b)
        info = body["haClientRuntimeInfo"]
        assert body["master"] is False and body["haConnectionInfo"] == []
        assert info["masterAddr"] == a.b.config.ha_addr and info["maxOffset"] == end
        assert info["masterFlushOffset"] == a.b.store.actor.confirm_offset() == end
        # it heard from the master (data, then heartbeats every 5 s) and acked within 5 s
        for key in ("lastReadTimestamp", "lastWriteTimestamp"):
            assert now_ms - 5_000 <= info[key] <= now_ms, (key, info, now_ms)

        code, out, _ = await ha_status(capsys, c, "-b", b.b.addr)
        assert code == 0 and f"broker {b.b.addr}: slave" in out
        assert re.search(rf"master HA address\s+{re.escape(a.b.config.ha_addr)}$", out, re.M)
        assert re.search(rf"last read\s+{ISO_DATE}$", out, re.M), out
        assert re.search(rf"master flush offset\s+{end}$", out, re.M), out
        assert str(EPOCH_MS)[:6] not in out  # dates, not epoch ms

        # the link to the master breaks (the master stays master: the controller still sees
        # it): after haHousekeepingInterval of silence the slave closes it and cannot reconnect
        c.net.partition([b.host], [a.host])
        await trio.sleep(25)
        body = await body_of(capsys, c, b)
        info = body["haClientRuntimeInfo"]
        assert body["master"] is False and info["masterAddr"] == a.b.config.ha_addr
        assert info["lastReadTimestamp"] == 0 and info["lastWriteTimestamp"] > 0
        code, out, _ = await ha_status(capsys, c, "-b", b.b.addr)
        assert code == 0 and re.search(r"last read\s+-$", out, re.M), out


async def test_after_a_failover_the_new_master_reports_itself_master(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 53) as c:
        a, b = await pair(c)
        assert await send_many(c, a, 10, "before", {}) == 10
        await trio.sleep(11)  # past the controller's listening window after its election
        await a.crash()
        await wait_until(lambda: awaits_true(b.rm.serving_as_master()), "b promoted")
        body = await body_of(capsys, c, b)
        assert body["master"] is True and body["haConnectionInfo"] == []
        assert body["inSyncSlaveNums"] == 0
        assert (
            body["masterCommitLogMaxOffset"] == b.b.store.message_store.get_commitlog_max_offset()
        )

        # the old master returns as the new master's slave
        await (await a.start(port=10913)).wait_role()
        await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "a back in the set")
        assert await send_many(c, b, 5, "after", {}) == 5
        end = b.b.store.message_store.get_commitlog_max_offset()
        body = await body_of(capsys, c, b)
        (conn,) = body["haConnectionInfo"]
        assert conn["addr"] == a.host and conn["inSync"] is True and conn["diff"] == 0
        assert body["inSyncSlaveNums"] == 1 and body["masterCommitLogMaxOffset"] == end
        slave = (await body_of(capsys, c, a))["haClientRuntimeInfo"]
        assert slave["masterAddr"] == b.b.config.ha_addr and slave["maxOffset"] == end

        # the whole cluster at once: each broker under its own address, the master first
        await wait_until(
            lambda: awaits_equal(c.namesrv_ids(), {0: b.b.addr, 1: a.b.addr}), "name server updated"
        )
        code, out, err = await ha_status(capsys, c, "-c", "DefaultCluster")
        assert code == 0 and err == "", err
        headers = re.findall(r"^broker (\S+): (\w+)$", out, re.M)
        assert headers == [(b.b.addr, "master"), (a.b.addr, "slave")], out


async def test_a_broker_without_slaves_is_a_master_with_no_connections(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 54) as c:
        a = c.node()
        await (await a.start()).wait_role()
        assert await send_many(c, a, 3, "m", {}) == 3
        body = await body_of(capsys, c, a)
        assert body == {
            "master": True,
            "masterCommitLogMaxOffset": a.b.store.message_store.get_commitlog_max_offset(),
            "inSyncSlaveNums": 0,
            "haConnectionInfo": [],
            "haClientRuntimeInfo": {
                "transferredByteInSecond": 0,
                "maxOffset": 0,
                "lastReadTimestamp": 0,
                "lastWriteTimestamp": 0,
                "masterFlushOffset": 0,
            },
        }
        code, out, _ = await ha_status(capsys, c, "-b", a.b.addr)
        assert code == 0 and re.search(r"slaves connected\s+0$", out, re.M), out


async def test_interval_repeats_until_interrupted(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    """``-i 2`` prints a fresh status every 2 seconds (mqadmin's -i) until cancelled."""
    async with cluster(tmp_path, 55) as c:
        a = c.node()
        await (await a.start()).wait_role()
        capsys.readouterr()
        started = trio.current_time()
        with trio.move_on_after(5.5), structlog.testing.capture_logs():
            await main_async(
                ["admin", "haStatus", "-n", c.namesrv_addr, "-b", a.b.addr, "-i", "2"],
                Wiring(c.net.transport(HOST)),
            )
        assert trio.current_time() - started >= 5.5
        out = capsys.readouterr().out
        assert out.count(f"broker {a.b.addr}: master") == 3, out  # at 0, 2 and 4 s


async def test_a_caught_up_slave_is_in_sync_only_once_the_controller_agrees(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    """ "in sync" is the controller's SyncStateSet (what an election picks from), not a small
    diff: a slave that caught up while the master cannot reach the controller shows diff 0 but
    not in sync until its expansion is accepted."""
    async with cluster(tmp_path, 56) as c:
        a = c.node()
        await (await a.start()).wait_role()
        assert await send_many(c, a, 5, "m", {}) == 5
        end = a.b.store.message_store.get_commitlog_max_offset()
        c.net.partition([a.host], [CTRL_HOSTS["n0"]])  # shorter than brokerNotActiveTimeout
        b = c.node()
        await (await b.start()).wait_role()

        async def caught_up() -> bool:
            conns = (await body_of(capsys, c, a))["haConnectionInfo"]
            return [x["slaveAckOffset"] for x in conns] == [end]

        await wait_until(caught_up, "b caught up")
        body = await body_of(capsys, c, a)
        (conn,) = body["haConnectionInfo"]
        assert conn["diff"] == 0 and conn["inSync"] is False and body["inSyncSlaveNums"] == 0
        c.net.heal()
        await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "the controller added b")
        await wait_until(
            lambda: awaits_equal(body_of(capsys, c, a), {**body, "inSyncSlaveNums": 1,
                                               "haConnectionInfo": [{**conn, "inSync": True}]}),
            "a shows b in sync",
        )  # fmt: skip


async def test_classic_master_and_slave_report_the_same_way(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    """Classic master/slave (no controller): the master's set is applied locally, so its
    caught-up slave is in sync; the slave names the master it found through the NameServer."""
    async with classic(tmp_path, 57) as c:
        m = await c.start(CLASSIC_M, BrokerRole.SYNC_MASTER, 0)
        s = await c.start(CLASSIC_S, BrokerRole.SLAVE, 1)
        await until(
            lambda: m.ha_master.gate is not None and len(m.ha_master.gate.core.applied) == 2
        )
        for i in range(5):
            assert (await c.send(CLASSIC_M, f"m{i}".encode())).code == RC.SUCCESS
        end = m.store.message_store.get_commitlog_max_offset()
        capsys.readouterr()
        with structlog.testing.capture_logs():
            code = await main_async(
                ["admin", "haStatus", "-n", c.ns, "-c", "DefaultCluster", "--json"],
                Wiring(c.net.transport(HOST)),
            )
        bodies = json.loads(capsys.readouterr().out)
        assert code == 0 and list(bodies) == [m.addr, s.addr]
        master, slave = bodies[m.addr], bodies[s.addr]
        (conn,) = master["haConnectionInfo"]
        assert conn["addr"] == CLASSIC_S and conn["inSync"] is True and conn["diff"] == 0
        assert master["inSyncSlaveNums"] == 1 and master["masterCommitLogMaxOffset"] == end
        info = slave["haClientRuntimeInfo"]
        assert slave["master"] is False and info["masterAddr"] == m.config.ha_addr
        assert info["maxOffset"] == end
