"""Controller mode, broker side: the persistent-BrokerId flow with every crash point of the seed,
roles from the controller, NameServer registration as brokerId 0, failover, and the admin API.

Real actors on a seeded `SimNetwork` with Trio's MockClock: controller replicas
(actors/controller), a NameServer and controller-mode brokers (`Broker` + `ReplicasManager`).
A crash point is a `FaultSites` hook that, when the flow reaches the named site, crashes the
broker like kill -9 (no flush, connections reset) and parks; the test then restarts the broker on
the same store and checks the seed's promise: the broker ends with one id, the controller with
one entry per broker, and no id is ever given twice.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerRole
from rocketrio.actors.broker.boot.fault_sites import Fault
from rocketrio.actors.client.controller_admin import ControllerAdmin
from rocketrio.cli import admin as cli_admin
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.controller_headers import EpochEntryCache
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_plain
from rocketrio.storage.epoch_file import EpochFile
from tests.harness.replication import (
    CLIENT_HOST,
    CLUSTER,
    CTRL_IDS,
    WAIT_S,
    Cluster,
    CrashAt,
    Node,
    awaits_equal,
    awaits_true,
    cluster,
    wait_until,
)

RC = ResponseCode


# --------------------------------------------------------------------------- fault hooks


@attrs.define
class Record:
    """Remember the sites reached (a normal restart must reach only REGISTERED)."""

    sites: list[str] = attrs.field(factory=list)

    async def reach(self, site: str) -> None:
        self.sites.append(site)


@attrs.define
class Barrier:
    """Hold every broker at `site` until `parties` of them got there."""

    site: str
    parties: int
    arrived: int = 0
    all_here: trio.Event = attrs.field(factory=trio.Event)

    async def reach(self, site: str) -> None:
        if site != self.site or self.all_here.is_set():
            return
        self.arrived += 1
        if self.arrived == self.parties:
            self.all_here.set()
        await self.all_here.wait()


# --------------------------------------------------------------------------- harness


def assert_one_identity(node: Node, broker_id: int) -> None:
    """The broker's files and memory agree on one id; no temp file is left."""
    meta = node.identity.read_meta()
    assert meta is not None and meta.broker_id == broker_id
    assert node.identity.read_temp() is None
    assert node.rm.broker_controller_id == broker_id


# --------------------------------------------------------------------------- crash points


@pytest.mark.parametrize(
    "site",
    [
        Fault.NEXT_BROKER_ID_RECEIVED,  # CreateTempMetaFile failed
        Fault.TEMP_WRITTEN,  # temp written, ApplyBrokerId not sent
        Fault.APPLY_ANSWERED,  # ApplyBrokerId applied, answer lost / meta not written
        Fault.META_COMMITTED,  # broker.meta written, RegisterBroker not sent
        Fault.REGISTERED,  # registered (and elected), role not taken
    ],
)
async def test_crash_point_recovers_with_one_id(
    site: str, tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 11) as c:
        a = c.node()
        crash = CrashAt(site)
        await a.start(faults=crash)
        with trio.fail_after(WAIT_S):
            await a.done.wait()
        assert crash.hit
        on_disk = (a.identity.read_meta(), a.identity.read_temp())
        if site == Fault.NEXT_BROKER_ID_RECEIVED:
            assert on_disk == (None, None) and await c.id_table() == {}
        elif site in (Fault.TEMP_WRITTEN, Fault.APPLY_ANSWERED):
            assert on_disk[0] is None and on_disk[1] is not None and on_disk[1].broker_id == 1
            expected = {} if site == Fault.TEMP_WRITTEN else {1: f"{a.host}:10911"}
            assert await c.id_table() == expected
        else:
            assert on_disk[0] is not None and on_disk[1] is None

        await (await a.start()).wait_role()
        assert_one_identity(a, 1)
        assert await c.id_table() == {1: a.b.addr}
        # the first broker of the set is its master, alone in the SyncStateSet
        assert a.rm.role is BrokerRole.SYNC_MASTER and a.b.config.brokerId == 0
        assert (await c.sync_state()).sync_state_set == {1}
        await wait_until(
            lambda: awaits_equal(c.namesrv_ids(), {0: a.b.addr}), "master registered as 0"
        )
        assert (await c.send(a)).code == RC.SUCCESS


async def test_refused_temp_starts_over_and_normal_restart_goes_straight_to_register(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 12) as c:
        a, b = c.node(), c.node()
        # A crashes with .broker.meta.temp holding id 1 before it could apply for it ...
        await a.start(faults=CrashAt(Fault.TEMP_WRITTEN))
        with trio.fail_after(WAIT_S):
            await a.done.wait()
        # ... meanwhile B takes id 1
        await (await b.start()).wait_role()
        assert_one_identity(b, 1)
        # A resends ApplyBrokerId from its temp file, is refused, deletes it, starts over
        await (await a.start()).wait_role()
        assert_one_identity(a, 2)
        assert await c.id_table() == {1: b.b.addr, 2: a.b.addr}
        assert a.rm.role is BrokerRole.SLAVE and a.rm.master_broker_id == 1
        assert a.rm.master_address == b.b.addr

        # a normal restart reads broker.meta and goes straight to RegisterBroker
        await a.stop()
        record = Record()
        await (await a.start(faults=record)).wait_role()
        assert record.sites == [Fault.REGISTERED]
        assert_one_identity(a, 2)
        assert (await c.leader()).replicas.replica_info("broker-a").next_assign_broker_id == 3


async def test_two_brokers_racing_for_the_same_id(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 13) as c:
        barrier = Barrier(Fault.NEXT_BROKER_ID_RECEIVED, parties=2)
        a, b = c.node(), c.node()
        await a.start(faults=barrier)
        await b.start(faults=barrier)
        await a.wait_role()
        await b.wait_role()
        # both were told "next is 1"; the controller's CAS gave it to exactly one of them
        ids = sorted([a.rm.broker_controller_id, b.rm.broker_controller_id])
        assert barrier.arrived == 2 and ids == [1, 2]
        table = await c.id_table()
        assert table == {a.rm.broker_controller_id: a.b.addr, b.rm.broker_controller_id: b.b.addr}
        roles = {a.rm.role, b.rm.role}
        assert roles == {BrokerRole.SYNC_MASTER, BrokerRole.SLAVE}
        master, slave = (a, b) if a.rm.serving_as_master() else (b, a)
        await wait_until(
            lambda: awaits_equal(
                c.namesrv_ids(),
                {0: master.b.addr, slave.rm.broker_controller_id: slave.b.addr},
            ),
            "master as 0, slave with its own id",
        )


# --------------------------------------------------------------------------- roles and failover


async def test_slave_refuses_writes_new_port_keeps_identity_and_failover(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 14) as c:
        a, b = c.node(), c.node()
        await (await a.start()).wait_role()
        await (await b.start()).wait_role()
        assert (a.rm.broker_controller_id, b.rm.broker_controller_id) == (1, 2)
        assert b.rm.role is BrokerRole.SLAVE and b.b.config.brokerRole is BrokerRole.SLAVE
        resp = await c.send(b)
        assert resp.code == RC.SERVICE_NOT_AVAILABLE
        assert f"brokerId 1 at {a.b.addr}" in (resp.remark or "") and "SLAVE" in resp.remark
        # the slave replicates and catches up: the master takes it into its SyncStateSet
        await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "B joined the set")
        assert a.rm.sync_state_set == {1, 2}
        assert (await c.send(a)).code == RC.SUCCESS  # acked once B holds it too
        acked_end = a.b.store.message_store.get_commitlog_max_offset()
        await wait_until(
            lambda: awaits_true(b.b.store.message_store.get_commitlog_max_offset() >= acked_end),
            "B holds it",
        )

        # B restarts on a new port: same id, same SyncStateSet membership, new address
        await b.stop()
        await (await b.start(port=10922)).wait_role()
        assert_one_identity(b, 2)
        assert await c.id_table() == {1: a.b.addr, 2: f"{b.host}:10922"}
        # its disconnection shrank the set; caught up again, it is back in
        await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "B back in the set")

        # the master dies: the controller elects B (in the SyncStateSet), B registers as 0
        await trio.sleep(12)  # past the controller's listening window after its election
        await a.crash()
        await wait_until(lambda: awaits_true(b.rm.serving_as_master()), "B promoted")
        assert b.rm.master_epoch == 2 and b.b.config.brokerId == 0
        assert b.b.config.brokerRole is BrokerRole.SYNC_MASTER
        await wait_until(lambda: awaits_equal(_master_addr(c), b.b.addr), "B is brokerId 0")
        assert (await c.send(b)).code == RC.SUCCESS
        # B holds A's acknowledged message (epoch 1); its epoch 2 starts after it
        b_epochs = EpochFile(os.path.join(b.root, "epochFileCheckpoint")).records
        assert [(r.epoch, r.start_offset) for r in b_epochs] == [(1, 0), (2, acked_end)]

        # A comes back on a new port: id 1 kept, now a slave of B
        await (await a.start(port=10913)).wait_role()
        assert_one_identity(a, 1)
        assert a.rm.role is BrokerRole.SLAVE and a.rm.master_address == b.b.addr
        assert await c.id_table() == {1: f"{a.host}:10913", 2: b.b.addr}
        await wait_until(
            lambda: awaits_equal(c.namesrv_ids(), {0: b.b.addr, 1: a.b.addr}), "A registered as 1"
        )
        # GET_BROKER_EPOCH_CACHE answers from the epoch file
        assert c.client is not None
        resp = await c.client.invoke(
            b.b.addr, RemotingCommand(RequestCode.GET_BROKER_EPOCH_CACHE), 5
        )
        cache = from_json(EpochEntryCache, resp.body)
        assert [(e.epoch, e.startOffset) for e in cache.epochList] == [(1, 0), (2, acked_end)]
        assert cache.maxOffset == b.b.store.message_store.get_commitlog_max_offset() > acked_end


async def _master_addr(c: Cluster) -> str | None:
    return (await c.namesrv_ids()).get(0)


async def test_broker_follows_the_controller_leader(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 15, CTRL_IDS) as c:
        leader = await c.leader()
        followers = [n for n in CTRL_IDS if n != leader.self_id]
        a = c.node()
        await (await a.start()).wait_role()
        assert a.rm.calls.link.leader_addr == leader.addr
        # the leader dies: the broker finds the new one (syncControllerMetadataPeriod) ...
        c.crash_controller(leader.self_id)
        new_leader = await c.leader()
        assert new_leader.self_id in followers
        await wait_until(lambda: awaits_equal(_leader_of(a), new_leader.addr), "new leader found")
        # ... and a second broker of the set registers through it as a slave of A
        b = c.node()
        await (await b.start()).wait_role()
        assert b.rm.broker_controller_id == 2 and b.rm.master_address == a.b.addr


async def _leader_of(node: Node) -> str | None:
    return node.rm.calls.link.leader_addr


# --------------------------------------------------------------------------- admin


async def test_controller_admin_commands(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster(tmp_path, 16) as c:
        a, b = c.node(), c.node()
        await (await a.start()).wait_role()
        await (await b.start()).wait_role()
        await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "B caught up and joined")
        await wait_until(
            lambda: awaits_equal(c.namesrv_ids(), {0: a.b.addr, 2: b.b.addr}), "registered"
        )
        async with ControllerAdmin(
            c.controller_addr, c.namesrv_addr, c.net.transport(CLIENT_HOST)
        ) as admin:
            meta = await admin.get_controller_metadata()
            assert meta.controllerLeaderAddress == c.controller_addr and meta.isLeader
            info = await admin.get_sync_state_set(cluster=CLUSTER)
            replicas = info.replicasInfoTable["broker-a"]
            assert replicas.masterBrokerId == 1 and replicas.masterAddress == a.b.addr
            assert [(r.brokerId, r.alive) for r in replicas.inSyncReplicas] == [
                (1, True),
                (2, True),
            ]
            epochs = await admin.get_broker_epoch(cluster=CLUSTER)
            assert sorted(e.brokerId for e in epochs) == [0, 2]
            master_cache = next(e for e in epochs if e.brokerId == 0)
            assert [e.epoch for e in master_cache.epochList] == [1]

            # electMaster hands the set to B: the push makes B master, A its slave
            result = await admin.elect_master(CLUSTER, "broker-a", 2)
            assert result.header.masterBrokerId == 2 and result.header.masterEpoch == 2
            await wait_until(
                lambda: awaits_true(b.rm.serving_as_master() and not a.rm.serving_as_master()),
                "switched",
            )
            # the demoted master gets its own id back at the NameServer
            await wait_until(
                lambda: awaits_equal(c.namesrv_ids(), {0: b.b.addr, 1: a.b.addr}), "A back to id 1"
            )

            # cleanBrokerMetadata refuses a living broker, then forgets a dead one
            with pytest.raises(Exception, match="still alive"):
                await admin.clean_broker_metadata(CLUSTER, "broker-a", [1])
            await a.crash()
            await admin.clean_broker_metadata(CLUSTER, "broker-a", "1", clean_living=True)
            assert await c.id_table() == {2: b.b.addr}

            # the human tables of the CLI commands
            args: Any = attrs.make_class("Args", {"json": attrs.field(default=False)})()
            printers = cli_admin._COMMANDS
            printers["getControllerMetaData"].printer(meta, args)
            printers["getSyncStateSet"].printer(await admin.get_sync_state_set(["broker-a"]), args)
            printers["electMaster"].printer(result, args)
            printers["getBrokerEpoch"].printer(await admin.get_broker_epoch(b.b.addr), args)
        out = capsys.readouterr().out
        assert f"leader  n0 at {c.controller_addr}" in out
        assert "broker-a" in out and "in sync" in out
        assert "brokerId 2" in out and "masterEpoch 2" in out
        assert to_plain(result)["header"]["masterBrokerId"] == 2

        # a cleaned broker that restarts does not get its id back (it is never handed out
        # again): it stays without a role, refusing writes, until the operator acts
        await a.start()
        await trio.sleep(20)
        assert a.rm.broker_controller_id == 1 and a.rm.role is None
        assert await c.id_table() == {2: b.b.addr}
        resp = await c.send(a)
        assert resp.code == RC.SERVICE_NOT_AVAILABLE and "no role yet" in (resp.remark or "")
