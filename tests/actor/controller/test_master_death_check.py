"""The controller leader deposes a master only when a majority of the controller group finds it
dead (upstream #4800: an asymmetric partition that cuts only master <-> controller leader).

Three controller replicas (standalone, or embedded in three NameServers) and a broker set of two
controller-mode brokers that replicate for real (the harness of test_broker_identity.py), on a
seeded `SimNetwork` under MockClock. The brokers heartbeat every controller replica
(controllerHeartBeatTimeoutMills 10 s, every 1 s). The simulated links deliver in 0.2-0.5 ms, so
one confirmation round (connect, ask, answer) takes at most 1.5 ms.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import structlog.testing
import trio
import trio.testing

from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.controller import Controller
from rocketrio.actors.controller.embedded import run_namesrv_with_controller
from rocketrio.actors.controller.failover import ALIVE_CHECK_TIMEOUT_S, ALIVE_CHECK_WAIT_MS
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.observe import events
from rocketrio.actors.raft.node import run_inline
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.controller_headers import (
    CONTROLLER_CHECK_BROKER_ALIVE,
    BrokerAliveVerdict,
    CheckBrokerAliveRequestHeader,
    CheckBrokerAliveResponseHeader,
    ElectMasterRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from tests.harness.replication import (
    CLIENT_HOST,
    CLUSTER,
    CTRL_HOSTS,
    CTRL_IDS,
    Cluster,
    Node,
    awaits_equal,
    awaits_true,
    cluster,
    wait_until,
)
from tests.harness.sim_network import SimNetwork

RC = ResponseCode
HEARTBEAT_TIMEOUT_S = 10.0  # BrokerConfig.controllerHeartBeatTimeoutMills default
LISTEN_WINDOW_S = 10.0  # a new controller leader's grace window (the default timeout)
SCAN_S = 5.0  # scanNotActiveBrokerInterval and scanInactiveMasterInterval defaults
ONE_ROUND_MS = 1.5  # connect + ask + answer, 0.5 ms each at most on SimNetwork
Logs = list[dict[str, Any]]
BrokerSet = tuple[Cluster, Node, Node, Controller, Logs]


async def _two_brokers(c: Cluster, logs: Logs) -> BrokerSet:
    a, b = c.node(), c.node()
    await (await a.start()).wait_role()
    await (await b.start()).wait_role()
    assert a.rm.serving_as_master() and (a.rm.broker_controller_id, b.rm.broker_controller_id) == (
        1,
        2,
    )
    await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "B joined the set")
    await trio.sleep(LISTEN_WINDOW_S + 1)  # past the controller leader's listening window
    return c, a, b, await c.leader(), logs


@asynccontextmanager
async def broker_set(
    tmp: Path, seed: int, controller_ids: tuple[str, ...] = CTRL_IDS
) -> AsyncIterator[BrokerSet]:
    """Standalone controllers, master A (id 1) and slave B (id 2) in the SyncStateSet {1, 2};
    yields (cluster, A, B, controller leader, captured log events)."""
    with structlog.testing.capture_logs() as logs:
        async with cluster(tmp, seed, controller_ids) as c:
            yield await _two_brokers(c, logs)


@asynccontextmanager
async def embedded_broker_set(tmp: Path, seed: int) -> AsyncIterator[BrokerSet]:
    """deploy/controller-embedded's layout: three NameServers, each embedding one controller
    replica on the same host; brokers list all three in namesrvAddr and in controllerAddr."""
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            c = Cluster(SimNetwork(seed), nursery, tmp, CTRL_IDS)
            c.namesrv_addr = ";".join(f"{CTRL_HOSTS[n]}:9876" for n in CTRL_IDS)
            for k, nid in enumerate(CTRL_IDS):
                host = CTRL_HOSTS[nid]
                ctrl_cfg = ControllerConfig(
                    controllerDLegerGroup="group1",
                    controllerDLegerPeers=c.peers,
                    controllerDLegerSelfId=nid,
                    controllerStorePath=str(tmp / "ctrl" / nid),
                )
                ns_cfg = NamesrvConfig(
                    listenHost=host, listenPort=9876, enableControllerInNamesrv=True
                )
                scope = trio.CancelScope()
                c.controllers[nid] = (
                    await nursery.start(
                        partial(
                            _scoped_embedded,
                            scope,
                            ns_cfg,
                            ctrl_cfg,
                            c.net.transport(host),
                            rng=random.Random(k + 1),
                        )
                    )
                )[1]
                c.ctrl_scopes[nid] = scope
            await c.leader()
            async with RemotingClient(c.net.transport(CLIENT_HOST)) as client:
                c.client = client
                yield await _two_brokers(c, logs)
            nursery.cancel_scope.cancel()


async def _scoped_embedded(
    scope: trio.CancelScope, *args: Any, task_status: trio.TaskStatus[Any], **kw: Any
) -> None:
    with scope:
        await run_namesrv_with_controller(
            *args, io_runner=run_inline, task_status=task_status, **kw
        )


def tallies(logs: Logs) -> Logs:
    names = (events.MasterDeathConfirmed.NAME, events.MasterDeathNotConfirmed.NAME)
    return [e for e in logs if e["event"] in names]


def elections(logs: Logs) -> Logs:
    return [e for e in logs if e["event"] == events.ElectMaster.NAME]


async def send_ok(c: Cluster, node: Node) -> None:
    resp = await c.send(node)
    assert resp.code == RC.SUCCESS, resp.remark


async def test_asymmetric_partition_master_leader_keeps_the_master(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with broker_set(tmp_path, 21) as (c, a, b, leader, logs):
        leader_host = CTRL_HOSTS[leader.self_id]
        c.net.partition([a.host], [leader_host])
        cut_at, mark = trio.current_time(), len(logs)
        # two heartbeat timeouts: expiry, scans and inactive-master scans all come and go
        while trio.current_time() - cut_at < 2 * HEARTBEAT_TIMEOUT_S + 1:
            await send_ok(c, a)  # the master keeps taking (replicated) writes throughout
            await trio.sleep(1)
        # the leader alone found A dead, asked, and was told no every time
        assert not leader._is_alive(CLUSTER, "broker-a", 1)
        seen = tallies(logs[mark:])
        assert seen and all(e["event"] == events.MasterDeathNotConfirmed.NAME for e in seen)
        followers = sorted(n for n in CTRL_IDS if n != leader.self_id)
        assert all(e["dead"] == [leader.self_id] and e["alive"] == followers for e in seen)
        assert {e["reason"] for e in seen} >= {"master_heartbeat_timeout", "master_inactive"}
        # the asked replicas held their ALIVE the allowed wait, no longer
        assert all(e["elapsed_ms"] <= ALIVE_CHECK_WAIT_MS + 2 for e in seen)
        assert not elections(logs[mark:])
        sync = await c.sync_state()
        assert (sync.master_broker_id, sync.master_epoch) == (1, 1)
        assert a.rm.serving_as_master() and a.rm.master_epoch == 1
        assert not b.rm.serving_as_master() and b.rm.master_epoch == 1
        # a broker asking for an election (not an admin designating one) is held to the same rule
        assert c.client is not None
        header = ElectMasterRequestHeader.of_broker_trigger(CLUSTER, "broker-a", 2)
        cmd = RemotingCommand(RequestCode.CONTROLLER_ELECT_MASTER, ext_fields=to_ext(header))
        resp = await c.client.invoke(leader.addr, cmd, 5)
        assert resp.code == RC.CONTROLLER_MASTER_STILL_EXIST, resp.remark
        assert (resp.ext_fields["masterBrokerId"], resp.ext_fields["masterEpoch"]) == ("1", "1")
        assert tallies(logs)[-1]["reason"] == "broker_request"
        c.net.heal()
        await send_ok(c, a)


async def test_connection_reset_then_partition_keeps_the_master(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with broker_set(tmp_path, 22) as (c, a, _b, leader, logs):
        leader_host = CTRL_HOSTS[leader.self_id]
        mark = len(logs)
        c.net.cut(a.host, leader_host)  # an RST: the leader sees A's channel close at once
        c.net.partition([a.host], [leader_host])
        cut_at = trio.current_time()
        await trio.sleep(ALIVE_CHECK_TIMEOUT_S)
        first = tallies(logs[mark:])
        assert [e["reason"] for e in first] == ["master_channel_closed"]
        assert first[0]["event"] == events.MasterDeathNotConfirmed.NAME
        while trio.current_time() - cut_at < 2 * HEARTBEAT_TIMEOUT_S + 1:
            await send_ok(c, a)
            await trio.sleep(1)
        assert all(e["event"] == events.MasterDeathNotConfirmed.NAME for e in tallies(logs[mark:]))
        assert not elections(logs[mark:])
        sync = await c.sync_state()
        assert (sync.master_broker_id, sync.master_epoch) == (1, 1)
        assert a.rm.serving_as_master() and a.rm.master_epoch == 1


async def wait_master(c: Cluster, broker_id: int, within_s: float, step_s: float) -> float:
    """Seconds until the controller group's state names `broker_id` master (polled every
    `step_s`); fails after `within_s`."""
    started = trio.current_time()
    with trio.fail_after(within_s):
        while (await c.sync_state()).master_broker_id != broker_id:
            await trio.sleep(step_s)
    return trio.current_time() - started


async def test_master_crash_is_confirmed_in_one_round_trip(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with broker_set(tmp_path, 23) as (c, a, b, leader, logs):
        await send_ok(c, a)
        mark = len(logs)
        a.crash_now()  # kill -9: every connection of A resets at once
        # the decision: one round trip (no heartbeat timeout, no scan period, no held answer),
        # then one Raft commit (a round trip to the followers)
        elected_after = await wait_master(c, 2, 1, 0.0005)
        assert elected_after <= (ONE_ROUND_MS + 1.0 + 0.5) / 1000
        (tally,) = tallies(logs[mark:])
        assert tally["event"] == events.MasterDeathConfirmed.NAME
        assert tally["reason"] == "master_channel_closed"
        assert leader.self_id in tally["dead"] and len(tally["dead"]) >= 2
        assert tally["alive"] == tally["unknown"] == []
        assert tally["elapsed_ms"] <= ONE_ROUND_MS
        await wait_until(lambda: awaits_true(b.rm.serving_as_master()), "B promoted")
        assert b.rm.master_epoch == 2
        await send_ok(c, b)
        # every replica logs the applied election; the leader also says why, from whom, in
        # which controller term (what `rocketrio analyze` puts in the failover timeline)
        lines = [e for e in elections(logs[mark:]) if e["reason"] != "unknown"]
        assert [(e["master_id"], e["epoch"], e["reason"]) for e in lines] == [
            (2, 2, "master_channel_closed")
        ]
        assert lines[0]["candidates"] == [2] and lines[0]["term"] == leader.node.term >= 1


async def test_peer_that_sees_the_close_late_confirms_when_it_does(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The leader's question can overtake a peer's own notice of the close: the peer holds its
    ALIVE answer for up to waitMillis and answers DEAD as soon as its connection closes."""
    async with broker_set(tmp_path, 24) as (c, a, _b, leader, logs):
        mark = len(logs)
        leader_host = CTRL_HOSTS[leader.self_id]
        c.net.cut(a.host, leader_host)  # the leader sees A's channel close now ...
        c.net.partition([a.host], [leader_host])
        cut_at = trio.current_time()
        late_s = 0.1
        await trio.sleep(late_s)
        a.crash_now()  # ... the followers 100 ms later, while they hold their answers
        elected_after = await wait_master(c, 2, 1, 0.0005)
        assert late_s <= trio.current_time() - cut_at <= late_s + 0.005
        assert elected_after <= 0.005
        (tally,) = tallies(logs[mark:])
        assert tally["event"] == events.MasterDeathConfirmed.NAME
        assert late_s * 1000 <= tally["elapsed_ms"] <= late_s * 1000 + ONE_ROUND_MS


async def test_one_controller_down_the_other_confirms(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with broker_set(tmp_path, 25) as (c, a, _b, leader, logs):
        down = next(n for n in CTRL_IDS if n != leader.self_id)
        c.crash_controller(down)
        await trio.sleep(1)
        mark = len(logs)
        a.crash_now()
        assert await wait_master(c, 2, 1, 0.0005) <= 0.005
        (tally,) = tallies(logs[mark:])
        assert tally["event"] == events.MasterDeathConfirmed.NAME
        assert len(tally["dead"]) == 2 and down not in tally["dead"]


async def test_minority_of_controllers_cannot_depose(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Both followers down (only the leader itself is reachable, a minority) when the master
    dies: the leader cannot confirm the death (nor commit an election); once one follower is
    back, the majority confirms it and B takes over."""
    async with broker_set(tmp_path, 26) as (c, a, b, leader, logs):
        followers = [n for n in CTRL_IDS if n != leader.self_id]
        mark = len(logs)
        for nid in followers:
            c.crash_controller(nid)
        a.crash_now()
        await trio.sleep(ALIVE_CHECK_TIMEOUT_S + 0.1)
        (tally,) = tallies(logs[mark:])
        assert tally["event"] == events.MasterDeathNotConfirmed.NAME
        assert tally["reason"] == "master_channel_closed"
        assert tally["dead"] == [leader.self_id]
        assert tally["no_answer"] == sorted(followers)
        assert tally["elapsed_ms"] <= ALIVE_CHECK_TIMEOUT_S * 1000
        assert not elections(logs[mark:])
        assert leader.replicas.sync_state_info("broker-a").master_broker_id == 1
        await trio.sleep(30)
        assert not elections(logs[mark:])
        # one follower back: a majority again; after the new leader's listening window the
        # inactive-master scan confirms A's death with 2 of 3 and elects B
        await c.start_controller(followers[0])
        back_at = trio.current_time()
        mark = len(logs)
        await wait_master(c, 2, LISTEN_WINDOW_S + SCAN_S + 5, 0.1)
        assert trio.current_time() - back_at >= LISTEN_WINDOW_S - 1
        confirmed = [
            e for e in tallies(logs[mark:]) if e["event"] == events.MasterDeathConfirmed.NAME
        ]
        assert confirmed and confirmed[-1]["no_answer"] == [followers[1]]
        await wait_until(lambda: awaits_true(b.rm.serving_as_master()), "B promoted")


async def test_grace_window_after_controller_leader_change_still_applies(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with broker_set(tmp_path, 27) as (c, a, _b, old, logs):
        c.crash_controller(old.self_id)
        new = await c.leader()
        became = trio.current_time()
        mark = len(logs)
        a.crash_now()  # inside the new leader's listening window
        await trio.sleep(LISTEN_WINDOW_S - 0.2)
        assert not tallies(logs[mark:]) and not elections(logs[mark:])
        assert new.replicas.sync_state_info("broker-a").master_broker_id == 1
        # settled: the next inactive-master scan asks, both live replicas say DEAD
        await wait_master(c, 2, SCAN_S + 1, 0.05)
        assert trio.current_time() - became <= LISTEN_WINDOW_S + SCAN_S + 0.5
        (tally,) = tallies(logs[mark:])
        assert tally["event"] == events.MasterDeathConfirmed.NAME
        assert tally["reason"] == "master_inactive" and tally["no_answer"] == [old.self_id]


async def test_a_new_leader_listens_one_broker_heartbeat_timeout_not_ten_seconds(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Issue 26: brokers with controllerHeartBeatTimeoutMills=2000 (heartbeats every 500 ms);
    the controller leader changes and the master dies inside the new leader's window: the new
    leader deposes it after one broker timeout (2 s) and a scan, not after a fixed 10 s."""
    fast = {"controllerHeartBeatTimeoutMills": 2000, "brokerHeartbeatInterval": 500}
    with structlog.testing.capture_logs() as logs:
        async with cluster(tmp_path, 28, CTRL_IDS) as c:
            a, b = c.node(), c.node()
            await (await a.start(**fast)).wait_role()
            await (await b.start(**fast)).wait_role()
            await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "B joined")
            await trio.sleep(3)
            old = await c.leader()
            c.crash_controller(old.self_id)
            new = await c.leader()
            became = trio.current_time()
            assert new.heartbeats.grace_ms() == 2000  # heard from the brokers as a follower
            mark = len(logs)
            a.crash_now()
            await wait_master(c, 2, 2 + SCAN_S + 1, 0.05)
            assert trio.current_time() - became < LISTEN_WINDOW_S
            (tally,) = tallies(logs[mark:])
            assert tally["event"] == events.MasterDeathConfirmed.NAME


async def test_after_every_controller_restarts_verdicts_are_unknown_one_timeout_only(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Issue 26 ("UNKNOWN verdicts from 3 controllers after restarts"): every controller
    replica restarts and has heard nobody; each answers UNKNOWN for a broker it has not heard
    only until it has listened for one broker heartbeat timeout (2 s here, learned from the
    first heartbeats), not for a fixed 10 s, so a master that dies then is replaced within
    about one timeout and a scan."""
    fast = {"controllerHeartBeatTimeoutMills": 2000, "brokerHeartbeatInterval": 500}
    with structlog.testing.capture_logs() as logs:
        async with cluster(tmp_path, 29, CTRL_IDS) as c:
            a, b = c.node(), c.node()
            await (await a.start(**fast)).wait_role()
            await (await b.start(**fast)).wait_role()
            await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "B joined")
            for nid in CTRL_IDS:
                c.crash_controller(nid)
            await trio.sleep(1)
            for nid in CTRL_IDS:
                await c.start_controller(nid)
            leader = await c.leader()
            back = trio.current_time()
            mark = len(logs)
            a.crash_now()
            await wait_master(c, 2, 2 + SCAN_S + 2, 0.05)
            assert trio.current_time() - back < LISTEN_WINDOW_S
            assert leader.heartbeats.grace_ms() == 2000
            assert any(e["event"] == events.MasterDeathConfirmed.NAME for e in tallies(logs[mark:]))


async def test_single_controller_decides_alone_at_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with broker_set(tmp_path, 28, ("n0",)) as (c, a, _b, _leader, logs):
        mark = len(logs)
        a.crash_now()
        assert await wait_master(c, 2, 1, 0.0005) <= 0.002  # no question asked: one commit
        (tally,) = tallies(logs[mark:])
        assert tally["event"] == events.MasterDeathConfirmed.NAME
        assert (tally["dead"], tally["group_size"], tally["elapsed_ms"]) == (["n0"], 1, 0)


async def test_embedded_controllers_partition_and_crash(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with embedded_broker_set(tmp_path, 29) as (c, a, _b, leader, logs):
        # every replica hears both brokers (direct heartbeats, and A as id 0 via its NameServer)
        now_ms = int(trio.current_time() * 1000)
        for ctrl in c.controllers.values():
            for broker_id in (1, 2):
                assert ctrl.heartbeats.verdict(CLUSTER, "broker-a", broker_id, now_ms) == (
                    BrokerAliveVerdict.ALIVE
                )
        mark = len(logs)
        leader_host = CTRL_HOSTS[leader.self_id]  # its NameServer and its controller
        c.net.cut(a.host, leader_host)
        c.net.partition([a.host], [leader_host])
        cut_at = trio.current_time()
        while trio.current_time() - cut_at < 2 * HEARTBEAT_TIMEOUT_S + 1:
            await send_ok(c, a)
            await trio.sleep(1)
        seen = tallies(logs[mark:])
        assert seen and all(e["event"] == events.MasterDeathNotConfirmed.NAME for e in seen)
        assert not elections(logs[mark:]) and a.rm.serving_as_master() and a.rm.master_epoch == 1
        c.net.heal()
        await wait_until(
            lambda: awaits_true(leader._is_alive(CLUSTER, "broker-a", 1)),
            "the leader hears A again",
        )
        mark = len(logs)
        a.crash_now()
        assert await wait_master(c, 2, 1, 0.0005) <= (ONE_ROUND_MS + 1.5) / 1000
        (tally,) = tallies(logs[mark:])
        assert tally["event"] == events.MasterDeathConfirmed.NAME


async def test_check_request_over_the_wire(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """CONTROLLER_CHECK_BROKER_ALIVE answered by a follower from its own table."""
    async with broker_set(tmp_path, 30) as (c, a, _b, leader, _logs):
        follower = next(n for n in CTRL_IDS if n != leader.self_id)
        at = f"{CTRL_HOSTS[follower]}:9878"

        async def ask(broker_id: int, wait_ms: int = 0) -> tuple[Any, float]:
            assert c.client is not None
            header = CheckBrokerAliveRequestHeader(CLUSTER, "broker-a", broker_id, wait_ms)
            cmd = RemotingCommand(CONTROLLER_CHECK_BROKER_ALIVE, ext_fields=to_ext(header))
            started = trio.current_time()
            resp = await c.client.invoke(at, cmd, 5)
            assert resp.code == RC.SUCCESS, resp.remark
            answer = from_ext(CheckBrokerAliveResponseHeader, resp.ext_fields)
            return answer, trio.current_time() - started

        answer, took = await ask(1)
        assert answer.verdict is BrokerAliveVerdict.ALIVE and 0 <= answer.silentMillis <= 1000
        assert took <= 0.0015
        answer, took = await ask(1, wait_ms=200)  # alive all along: held the whole wait
        assert answer.verdict is BrokerAliveVerdict.ALIVE and 0.2 <= took <= 0.2015
        answer, took = await ask(7, wait_ms=200)  # never heard, table settled: at once
        assert answer.verdict is BrokerAliveVerdict.DEAD and answer.silentMillis is None
        assert took <= 0.0015
        resp = await c.client.invoke(
            at, RemotingCommand(CONTROLLER_CHECK_BROKER_ALIVE, ext_fields={"brokerName": "x"}), 5
        )
        assert resp.code == RC.INVALID_PARAMETER and "clusterName" in (resp.remark or "")
        # A falls silent towards the follower (no close): asked with a wait that spans the
        # expiry of its heartbeat, the follower answers DEAD when it expires, not at the end
        c.net.partition([a.host], [CTRL_HOSTS[follower]])
        info = c.controllers[follower].heartbeats.live_info(CLUSTER, "broker-a", 1)
        assert info is not None
        await trio.sleep(info.dead_from_ms / 1000 - 0.3 - trio.current_time())
        answer, took = await ask(1, wait_ms=1000)
        assert answer.verdict is BrokerAliveVerdict.DEAD
        assert answer.silentMillis == HEARTBEAT_TIMEOUT_S * 1000 + 2
        assert 0.3 <= took <= 0.3035
