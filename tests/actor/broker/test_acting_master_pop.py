"""POP on a slave acting for its dead master (RIP-32, SPEC A1/A3) on the simulated network,
MockClock, simulated disks.

Three classic groups on one NameServer with supportActingMaster: broker-a (master M, slave S),
broker-b (master B) and broker-c (master X), so the acting slave has two masters of other groups
to choose from. M dies; S serves POP, ACK and CHANGE_INVISIBLE_TIME from the log it replicated;
every CK / ACK record of one message reaches ONE pinned master, whose revive reads the messages
back from S: acked messages are never revived, an unacked one exactly once, and a returning M
loses nothing (re-consumption counted, within at-least-once).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerRole
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.client.simple_consumer import receipts_of
from rocketrio.protocol.bodies import TopicRouteData
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import GetRouteInfoRequestHeader
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.pop_checkpoint import BatchAck, BatchAckMessageRequestBody
from rocketrio.protocol.pop_extra_info import ExtraInfo, pop_retry_topic
from rocketrio.protocol.pop_headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext
from tests.harness.classic_ha import NS, TOPIC, Classic, M, S, classic, until
from tests.harness.clock import EPOCH_MS

B, X = "10.3.0.4", "10.3.0.5"
ACTING: dict[str, Any] = {"enableSlaveActingMaster": True, "enableRemoteEscape": True}
RETRY = pop_retry_topic(TOPIC, "PG", False)
# replay or soak with ACTING_POP_SEED=N pytest tests/actor/broker/test_acting_master_pop.py
SEED = int(os.environ.get("ACTING_POP_SEED", "0"))


def now_ms() -> int:
    return EPOCH_MS + int(trio.current_time() * 1000)


async def call(c: Classic, host: str, code: int, header: object) -> RemotingCommand:
    assert c.client is not None
    cmd = RemotingCommand(code, ext_fields=to_ext(header))
    return await c.client.invoke(f"{host}:10911", cmd, 10)


async def route_len(c: Classic) -> int:
    assert c.client is not None
    cmd = RemotingCommand(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields=to_ext(GetRouteInfoRequestHeader(TOPIC))
    )
    got = await c.client.invoke(f"{NS}:9876", cmd, 10)
    return len(from_json(TopicRouteData, got.body).brokerDatas) if got.code == RC.SUCCESS else 0


async def three_groups(c: Classic, n_msgs: int) -> tuple[Broker, Broker, Broker, Broker]:
    m = await c.start(M, BrokerRole.ASYNC_MASTER, 0, **ACTING)
    s = await c.start(S, BrokerRole.SLAVE, 1, **ACTING)
    b = await c.start(B, BrokerRole.ASYNC_MASTER, 0, brokerName="broker-b", **ACTING)
    x = await c.start(X, BrokerRole.ASYNC_MASTER, 0, brokerName="broker-c", **ACTING)
    for host in (B, X):
        assert (await c.send(host, b"other-group")).code == RC.SUCCESS  # topic C everywhere
    for i in range(n_msgs):
        assert (await c.send(M, b"a-%d" % i)).code == RC.SUCCESS
    await until(lambda: s.roles.master_to_sync() == f"{M}:10911")
    with trio.fail_after(10):
        while await route_len(c) < 3:
            await trio.sleep(0.1)
    m_end = m.store.message_store.get_commitlog_max_offset()
    await until(lambda: s.store.message_store.get_commitlog_max_offset() == m_end)
    await until(lambda: s.tables.topics.select(TOPIC) is not None)
    return m, s, b, x


async def pop(c: Classic, host: str, invisible_ms: int = 30_000) -> dict[bytes, str]:
    """body -> receipt of what one POP of group PG on queue 0 got."""
    h = PopMessageRequestHeader(
        consumerGroup="PG", topic=TOPIC, queueId=0, maxMsgNums=32, invisibleTime=invisible_ms,
        pollTime=0, bornTime=now_ms(), initMode=0,
    )  # fmt: skip
    resp = await call(c, host, RequestCode.POP_MESSAGE, h)
    if resp.code != RC.SUCCESS:
        return {}
    msgs = list(iter_stored(resp.body))
    receipts = receipts_of(from_ext(PopMessageResponseHeader, resp.ext_fields), msgs, "broker-a")
    return {m.body: r for m, r in zip(msgs, receipts, strict=True)}


async def ack(c: Classic, host: str, receipt: str) -> RemotingCommand:
    extra = ExtraInfo.parse(receipt)
    h = AckMessageRequestHeader("PG", TOPIC, 0, receipt, extra.queue_offset)
    return await call(c, host, RequestCode.ACK_MESSAGE, h)


async def change_invisible(c: Classic, host: str, receipt: str, invisible_ms: int) -> str:
    """CHANGE_INVISIBLE_TIME; the new receipt, as the client builds it."""
    extra = ExtraInfo.parse(receipt)
    h = ChangeInvisibleTimeRequestHeader("PG", TOPIC, 0, receipt, extra.queue_offset, invisible_ms)
    resp = await call(c, host, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, h)
    assert resp.code == RC.SUCCESS, resp.remark
    got = from_ext(ChangeInvisibleTimeResponseHeader, resp.ext_fields)
    return ExtraInfo.of(
        extra.queue_offset, got.popTime, got.invisibleTime, got.reviveQid, TOPIC, "broker-a",
        0, extra.queue_offset,
    ).build()  # fmt: skip


def bodies_in(b: Broker, topic: str) -> list[bytes]:
    view = b.store.view
    _first, entries = view.read_queue_entries(topic, 0, 0, 64)
    out = []
    for phy, _size, _tag in entries:
        msg = view.look_message_by_offset(phy)
        assert msg is not None
        out.append(msg.body)
    return out


def revived(*masters: Broker) -> list[bytes]:
    return sorted(body for b in masters for body in bodies_in(b, RETRY))


async def test_pop_ack_and_change_invisible_on_the_acting_slave_cancel_on_one_pinned_master(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """With M dead, S serves a POP (the group's offset moves on S), an ACK, and a
    CHANGE_INVISIBLE_TIME followed by an ACK of the new receipt; every record went to one master
    of another group; after the invisible times only the message never acked is revived, once,
    into that master's retry topic (read back from S)."""
    async with classic(
        tmp_path, SEED + 91, sim_disk=True, supportActingMaster=True, notifyMinBrokerIdChanged=True
    ) as c:
        _m, s, b, x = await three_groups(c, 3)
        c.crash(M)
        await until(s.roles.acting_master, timeout=30)
        got = await pop(c, S)
        assert sorted(got) == [b"a-0", b"a-1", b"a-2"]
        assert s.tables.offsets.query("PG", TOPIC, 0) == 3  # moved on the acting slave
        popped = trio.current_time()
        assert (await ack(c, S, got[b"a-0"])).code == RC.SUCCESS
        later = await change_invisible(c, S, got[b"a-1"], 60_000)
        assert (await ack(c, S, later)).code == RC.SUCCESS
        escaper = s.failover.pop_escape
        assert escaper is not None
        # CK, ACK, new CK + old ACK, ACK: five records, one master
        assert len(escaper.written) == 1 and sum(escaper.written.values()) == 5
        await until(lambda: revived(b, x) == [b"a-2"], timeout=60)
        assert trio.current_time() - popped >= 30  # not before its invisible time
        await trio.sleep(90)  # past a-1's new invisible time; more revive rounds
        assert revived(b, x) == [b"a-2"]  # a-0 and a-1 acked: never revived; a-2 once


async def test_an_unacked_pop_on_the_acting_slave_is_revived_once_when_its_master_is_away(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The pinned master is unreachable when the consumer acks: the ACK is kept and written once
    it is back (retried, never skipped), so that message is not revived; the other one is,
    exactly once."""
    async with classic(
        tmp_path, SEED + 92, sim_disk=True, supportActingMaster=True, notifyMinBrokerIdChanged=True
    ) as c:
        _m, s, b, x = await three_groups(c, 2)
        c.crash(M)
        await until(s.roles.acting_master, timeout=30)
        got = await pop(c, S)
        assert sorted(got) == [b"a-0", b"a-1"]
        escaper = s.failover.pop_escape
        assert escaper is not None
        (pinned,) = escaper.written
        host = {"broker-b": B, "broker-c": X}[pinned]
        c.net.partition([S], [host])
        acked: list[int] = []

        async def ack_a0() -> None:
            acked.append((await ack(c, S, got[b"a-0"])).code)

        async with trio.open_nursery() as n:
            n.start_soon(ack_a0)
            await trio.sleep(5)
            assert acked == []  # held, tried again (the records wait for their master)
            c.net.heal()
        assert acked == [RC.SUCCESS]
        await trio.sleep(90)
        assert revived(b, x) == [b"a-1"]


async def test_the_master_returns_mid_way_nothing_lost_reconsumption_counted(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """M dies, S serves a POP of three messages (a-0 acked there), M returns through pre-online
    (it takes the group's offset S moved: nothing popped on S is served again by M). Then a-1 is
    acked at S (a client whose route still names S: S forwards it to the pinned master, it
    cancels) and a-2 at M (its route names M now): M does not know the pin, that ACK cannot
    cancel the CK on the pinned master, so a-2 is delivered once more (counted: at-least-once);
    nothing is lost."""
    async with classic(
        tmp_path, SEED + 93, sim_disk=True, supportActingMaster=True, notifyMinBrokerIdChanged=True
    ) as c:
        _m, s, b, x = await three_groups(c, 3)
        # kill -9, not a power cut: an ASYNC_FLUSH master that loses its unflushed tail comes
        # back shorter and its slave cuts the same tail (classic replication, docs/acting-master)
        c.crash(M, power_cut=False)
        await until(s.roles.acting_master, timeout=30)
        delivered: list[bytes] = []
        got = await pop(c, S)
        delivered += got
        assert sorted(got) == [b"a-0", b"a-1", b"a-2"]
        assert (await ack(c, S, got[b"a-0"])).code == RC.SUCCESS
        m2 = await c.start(M, BrokerRole.ASYNC_MASTER, 0, **ACTING)
        await until(lambda: m2.roles.role_known, timeout=30)
        await until(lambda: not s.roles.acting_master(), timeout=30)
        assert m2.tables.offsets.query("PG", TOPIC, 0) == 3  # no offset backwards
        assert (await c.send(M, b"a-3")).code == RC.SUCCESS
        got2 = await pop(c, M)
        delivered += got2
        assert list(got2) == [b"a-3"]  # a-0 .. a-2 are not served again by M
        assert (await ack(c, S, got[b"a-1"])).code == RC.SUCCESS  # a stale route: S forwards
        await ack(c, M, got[b"a-2"])  # on M: the CK lives on the pinned master
        assert (await ack(c, M, got2[b"a-3"])).code == RC.SUCCESS
        await trio.sleep(90)
        delivered += revived(b, x)
        # lost: none; re-consumed: a-2 once (acked where its CK was not)
        assert sorted(set(delivered)) == [b"a-0", b"a-1", b"a-2", b"a-3"]
        assert sorted(delivered) == [b"a-0", b"a-1", b"a-2", b"a-2", b"a-3"]


async def test_a_batch_ack_on_the_acting_slave_reaches_the_pinned_master(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """BATCH_ACK_MESSAGE on the acting slave (two of three messages of one CK): its bAck record
    goes to the CK's pinned master, so only the third message is revived, once."""
    async with classic(
        tmp_path, SEED + 94, sim_disk=True, supportActingMaster=True, notifyMinBrokerIdChanged=True
    ) as c:
        _m, s, b, x = await three_groups(c, 3)
        c.crash(M)
        await until(s.roles.acting_master, timeout=30)
        got = await pop(c, S)
        assert sorted(got) == [b"a-0", b"a-1", b"a-2"]
        info = ExtraInfo.parse(got[b"a-0"])
        batch = BatchAck(
            "PG", TOPIC, info.retry, info.ck_queue_offset, 0, info.revive_qid, info.pop_time,
            info.invisible_time, (0, 2),
        )  # fmt: skip
        body = BatchAckMessageRequestBody("broker-a", (batch,))
        assert c.client is not None
        cmd = RemotingCommand(RequestCode.BATCH_ACK_MESSAGE, body=body.to_json())
        resp = await c.client.invoke(f"{S}:10911", cmd, 10)
        assert resp.code == RC.SUCCESS, resp.remark
        escaper = s.failover.pop_escape
        assert escaper is not None
        assert len(escaper.written) == 1 and sum(escaper.written.values()) == 2  # CK, bAck
        await until(lambda: revived(b, x) == [b"a-1"], timeout=60)
        await trio.sleep(60)
        assert revived(b, x) == [b"a-1"]


async def test_a_gone_acting_group_does_not_stall_the_pinned_masters_own_revives(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The pinned master cannot read back an escaped CK's messages once the whole acting group is
    gone; that CK waits (tried every round, never dropped), while the master's own CK in the
    same revive queue, due later, is still revived once."""
    async with classic(
        tmp_path, SEED + 95, sim_disk=True, supportActingMaster=True, notifyMinBrokerIdChanged=True
    ) as c:
        _m, s, b, x = await three_groups(c, 1)
        c.crash(M)
        await until(s.roles.acting_master, timeout=30)
        assert sorted(await pop(c, S)) == [b"a-0"]  # revive queue 0: the slave's first CK
        escaper = s.failover.pop_escape
        assert escaper is not None
        (pinned,) = escaper.written
        host, master = {"broker-b": (B, b), "broker-c": (X, x)}[pinned]
        own = PopMessageRequestHeader(
            consumerGroup="PG", topic=TOPIC, queueId=0, maxMsgNums=32, invisibleTime=40_000,
            pollTime=0, bornTime=now_ms(), initMode=0,
        )  # fmt: skip
        resp = await call(c, host, RequestCode.POP_MESSAGE, own)  # queue 0: its first CK too
        assert [m.body for m in iter_stored(resp.body)] == [b"other-group"]
        c.crash(S)  # broker-a is gone: a-0 cannot be read back
        await until(lambda: bodies_in(master, RETRY) == [b"other-group"], timeout=90)
        await trio.sleep(30)
        assert bodies_in(master, RETRY) == [b"other-group"]
        pending = master.pop.revive.cores
        assert pending is not None and pending[0].pending_count == 1  # a-0's CK still waits
