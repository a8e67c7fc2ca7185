"""Slave acting master (RIP-32, SPEC A1-A3, N3, N4) on the simulated network, MockClock.

Two classic groups on one NameServer with supportActingMaster: broker-a (master M, slave S) and
broker-b (master B). M dies: S acts as master within the stated bound, the route shows it as id 0
without the write bit, and the delay/timer messages M had stored fall due on S and are written
to B (escape), none early, none lost, even when B is away when they fall due. M returns: S stops.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerRole
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.simple_consumer import receipts_of
from rocketrio.actors.client.transaction_producer import (
    TransactionProducer,
)
from rocketrio.protocol.bodies import (
    PERM_WRITE,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    TopicRouteData,
)
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import (
    ExchangeHAInfoResponseHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeaderV2,
    UpdateConsumerOffsetRequestHeader,
)
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.message_format import encode_properties
from rocketrio.protocol.pop_extra_info import pop_retry_topic
from rocketrio.protocol.pop_headers import (
    AckMessageRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext, to_json
from tests.harness.classic_ha import CLIENT, NS, TOPIC, Classic, M, S, classic, until
from tests.harness.clock import EPOCH_MS
from tests.harness.transactions import CommitByBody

B = "10.3.0.4"
ACTING: dict[str, Any] = {"enableSlaveActingMaster": True, "enableRemoteEscape": True}
# brokerNotActiveTimeoutMillis (10 s) + scanNotActiveBrokerInterval (5 s) + one member-group poll
# (syncBrokerMemberGroupPeriod 1 s, jittered up to 1.2 s): the broker's side of the bound; a
# client adds its route refresh (pollNameServerInterval, 30 s) before it sends S lock calls
ACTING_BOUND_S = 10 + 5 + 1.2


# the scenarios' seed: the simulated network's and the disks' draws; replay or soak with
# ACTING_SEED=N pytest tests/actor/broker/test_acting_master.py
SEED = int(os.environ.get("ACTING_SEED", "0"))


def classic_sim(tmp: Path, seed: int, **ns_kw: Any) -> Any:
    """The two groups on the simulated network and disks; a crash is a power cut."""
    return classic(tmp, seed, sim_disk=True, **ns_kw)


def now_ms() -> int:
    return EPOCH_MS + int(trio.current_time() * 1000)


async def send(c: Classic, host: str, body: bytes, props: dict[str, str]) -> RemotingCommand:
    assert c.client is not None
    header = SendMessageRequestHeaderV2(
        a="PG", b=TOPIC, c="TBW102", d=1, e=0, f=0, g=now_ms(), h=0,
        i=encode_properties(props), j=0, k=False, m=False,
    )  # fmt: skip
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=to_ext(header), body=body)
    return await c.client.invoke(f"{host}:10911", cmd, 10)


async def master_only_calls_answered(c: Classic, host: str) -> None:
    """The calls a client sends only to brokerId 0: offsets and earliest store time (the locks
    are the strict-lock test's); answered by the acting slave from the log it replicated."""
    assert c.client is not None
    calls = [
        (RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(TOPIC, 0), "offset", 1),
        (RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(TOPIC, 0), "offset", 0),
        (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, SearchOffsetRequestHeader(TOPIC, 0, 0),
         "offset", 0),
        (RequestCode.GET_EARLIEST_MSG_STORETIME, GetEarliestMsgStoretimeRequestHeader(TOPIC, 0),
         "timestamp", None),
    ]  # fmt: skip
    for code, header, field, want in calls:
        cmd = RemotingCommand(code, ext_fields=to_ext(header))
        resp = await c.client.invoke(f"{host}:10911", cmd, 10)
        assert resp.code == RC.SUCCESS, (code, resp.remark)
        value = int(resp.ext_fields[field])
        assert value == want if want is not None else value >= EPOCH_MS


async def ha_info(c: Classic, host: str) -> ExchangeHAInfoResponseHeader:
    """EXCHANGE_BROKER_HA_INFO without masterHaAddress: a pull of the answering master's info."""
    assert c.client is not None
    cmd = RemotingCommand(RequestCode.EXCHANGE_BROKER_HA_INFO, ext_fields={})
    resp = await c.client.invoke(f"{host}:10911", cmd, 10)
    assert resp.code == RC.SUCCESS, resp.remark
    return from_ext(ExchangeHAInfoResponseHeader, resp.ext_fields)


async def route(c: Classic) -> TopicRouteData:
    assert c.client is not None
    cmd = RemotingCommand(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields=to_ext(GetRouteInfoRequestHeader(TOPIC))
    )
    resp = await c.client.invoke(f"{NS}:9876", cmd, 10)
    assert resp.code == RC.SUCCESS, resp.remark
    return from_json(TopicRouteData, resp.body)


async def bodies_on(c: Classic, host: str) -> list[bytes]:
    resp = await c.pull(host, 0)
    if resp.code != RC.SUCCESS:
        return []
    return [m.body for m in iter_stored(resp.body)]


async def two_groups(c: Classic, **kw: Any) -> tuple[Broker, Broker, Broker]:
    cfg = {**ACTING, **kw}
    m = await c.start(M, BrokerRole.ASYNC_MASTER, 0, **cfg)
    s = await c.start(S, BrokerRole.SLAVE, 1, **cfg)
    b = await c.start(B, BrokerRole.ASYNC_MASTER, 0, brokerName="broker-b", **cfg)
    assert (await send(c, B, b"b-first", {})).code == RC.SUCCESS  # topic C on both groups
    assert (await send(c, M, b"a-first", {})).code == RC.SUCCESS
    await until(lambda: s.roles.master_to_sync() == f"{M}:10911")
    # a classic master never follows anyone: no slave sync polls there; a slave's does
    assert (m.slave_sync.may_follow, s.slave_sync.may_follow) == (False, True)
    with trio.fail_after(10):  # both registered topic C
        while len((await route(c)).brokerDatas) < 2:
            await trio.sleep(0.1)
    m_end = m.store.message_store.get_commitlog_max_offset()  # S holds a-first (async copy)
    await until(lambda: s.store.message_store.get_commitlog_max_offset() == m_end)
    await until(lambda: s.tables.topics.select(TOPIC) is not None)  # slave sync copied C
    return m, s, b


@pytest.mark.parametrize(
    ("notify", "silent"),
    [(False, True), (True, False)],
    ids=["poll_compat_silent_death", "notify_crash"],
)
async def test_slave_acts_within_the_bound_and_stops_when_the_master_returns(
    tmp_path: Path, mock_clock: trio.testing.MockClock, notify: bool, silent: bool
) -> None:
    async with classic_sim(
        tmp_path, SEED + 71, supportActingMaster=True, notifyMinBrokerIdChanged=notify
    ) as c:
        _m, s, _b = await two_groups(c, compatibleWithOldNameSrv=not notify)
        assert not s.roles.acting_master() and not s.roles.special_services_on()
        # 906 pulled: id 0 names its HA listener, max offset and address; a slave nothing
        info = await ha_info(c, M)
        assert (info.masterHaAddress, info.masterAddress) == (f"{M}:10912", f"{M}:10911")
        assert info.masterFlushOffset is not None and info.masterFlushOffset > 0
        assert await ha_info(c, S) == ExchangeHAInfoResponseHeader()
        died = trio.current_time()
        if silent:  # no reset: only the missing heartbeats tell (brokerNotActiveTimeoutMillis)
            c.net.isolate(M, [NS, S, B, CLIENT])
            await trio.sleep(9.5)
            assert not s.roles.acting_master()  # a slow master is not a dead one
        else:  # the NameServer sees the connection close and notifies at once
            c.crash(M)
        await until(s.roles.acting_master, timeout=60)
        assert trio.current_time() - died <= ACTING_BOUND_S
        assert s.roles.special_services_on() and not s.roles.serving_as_master()
        assert s.roles.master_to_sync() is None  # nothing to copy from a dead master
        # upstream's route shape: the smallest live id as 0, the write bit cleared
        r = await route(c)
        [bd] = [bd for bd in r.brokerDatas if bd.brokerName == "broker-a"]
        assert bd.brokerAddrs == {0: f"{S}:10911"}
        [qd] = [q for q in r.queueDatas if q.brokerName == "broker-a"]
        assert not qd.perm & PERM_WRITE
        await master_only_calls_answered(c, S)
        # the master returns: the slave stops acting and follows it again
        if silent:
            c.crash(M)
            c.net.heal()
        await trio.sleep(1)
        await c.start(M, BrokerRole.ASYNC_MASTER, 0, **ACTING, compatibleWithOldNameSrv=not notify)
        await until(lambda: not s.roles.acting_master(), timeout=10)
        await until(lambda: s.roles.master_to_sync() == f"{M}:10911", timeout=30)


async def test_due_delay_and_timer_messages_escape_to_another_master_none_early_none_lost(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with classic_sim(tmp_path, SEED + 72, supportActingMaster=True) as c:
        m, s, _b = await two_groups(c)
        t0 = now_ms()
        # DELAY 5 = 1 min; a timer message due in 90 s
        assert (await send(c, M, b"delayed", {"DELAY": "5"})).code == RC.SUCCESS
        timer_at = t0 + 90_000
        timer = {"TIMER_DELIVER_MS": str(timer_at)}
        assert (await send(c, M, b"timer", timer)).code == RC.SUCCESS
        m_end = m.store.message_store.get_commitlog_max_offset()
        await until(lambda: s.store.message_store.get_commitlog_max_offset() == m_end)
        c.crash(M)
        await until(s.roles.acting_master, timeout=60)
        # nothing early: the delayed message is not on B before its minute
        while now_ms() < t0 + 60_000 - 500:
            assert b"delayed" not in await bodies_on(c, B)
            await trio.sleep(1)
        await until_body(c, B, b"delayed", 5)
        assert now_ms() >= t0 + 60_000
        # B goes away before the timer message falls due: S keeps it and tries again
        c.crash(B, power_cut=False)  # kill -9: B keeps its files
        await trio.sleep(max(0.0, (timer_at - now_ms()) / 1000) + 5)
        await c.start(B, BrokerRole.ASYNC_MASTER, 0, brokerName="broker-b", **ACTING)
        await until_body(c, B, b"timer", 60)
        assert now_ms() >= timer_at
        got = await bodies_on(c, B)
        # once each (the at-least-once contract allows more only across a crash of S itself)
        assert got.count(b"delayed") == 1 and got.count(b"timer") == 1
        assert s.schedule.delivered == 2


async def until_body(c: Classic, host: str, body: bytes, timeout: float) -> None:
    with trio.fail_after(timeout):
        while body not in await bodies_on(c, host):
            await trio.sleep(0.2)


async def test_pending_transactions_of_a_dead_master_are_checked_through_escape(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with classic_sim(
        tmp_path, SEED + 73, supportActingMaster=True, notifyMinBrokerIdChanged=True
    ) as c:
        kw = {"transactionCheckInterval": 2000}
        m, s, _b = await two_groups(c, **kw)
        producer = TransactionProducer(
            "TPG", f"{NS}:9876", CommitByBody(), transport=c.net.transport("10.3.0.20"),
            client_config=ClientConfig(clientIP="10.3.0.20", instanceName="tp"),
        )  # fmt: skip
        async with producer:
            on_a: list[bytes] = []
            for i in range(6):
                body = b"commit-%d" % i if i % 2 == 0 else b"rollback-%d" % i
                sent = await producer.send_message_in_transaction(Message(TOPIC, body))
                if sent.message_queue.brokerName == "broker-a":
                    on_a.append(body)
            assert len(on_a) >= 2  # halves left unresolved on the master that dies
            m_end = m.store.message_store.get_commitlog_max_offset()
            await until(lambda: s.store.message_store.get_commitlog_max_offset() == m_end)
            c.crash(M)
            await until(s.roles.acting_master, timeout=30)
            # B is away for the first escape rounds: the halves wait on S, none is skipped
            c.crash(B, power_cut=False)  # kill -9: B keeps its files
            await trio.sleep(20)
            assert s.transactions.half_offset == 0
            await c.start(B, BrokerRole.ASYNC_MASTER, 0, brokerName="broker-b", **ACTING, **kw)
            await trio.sleep(60)  # escape round, B's transactionTimeOut (6 s) and check
        got = await bodies_on(c, B) + await bodies_on(c, S)
        for i in range(6):
            body = b"commit-%d" % i if i % 2 == 0 else b"rollback-%d" % i
            assert got.count(body) == (1 if i % 2 == 0 else 0), (body, got)
        assert s.transactions.half_offset > 0


def bodies_in(b: Broker, topic: str) -> list[bytes]:
    view = b.store.view
    _first, entries = view.read_queue_entries(topic, 0, 0, 64)
    out = []
    for phy, _size, _tag in entries:
        msg = view.look_message_by_offset(phy)
        assert msg is not None
        out.append(msg.body)
    return out


async def test_a_message_popped_from_the_dead_master_is_revived_once_through_escape(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Two messages popped from the master, which dies: the one its consumer acks to the acting
    slave (applied in memory there: the slave cannot write it) is never revived; the other is
    revived once, after its invisible time, into the retry topic on broker-b (escape)."""
    async with classic_sim(
        tmp_path, SEED + 74, supportActingMaster=True, notifyMinBrokerIdChanged=True
    ) as c:
        m, s, b = await two_groups(c)
        assert c.client is not None
        assert (await send(c, M, b"a-second", {})).code == RC.SUCCESS
        header = PopMessageRequestHeader(
            consumerGroup="PG1", topic=TOPIC, queueId=0, maxMsgNums=32, invisibleTime=30_000,
            pollTime=0, bornTime=now_ms(), initMode=0,
        )  # fmt: skip
        cmd = RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=to_ext(header))
        resp = await c.client.invoke(f"{M}:10911", cmd, 10)
        assert resp.code == RC.SUCCESS, resp.remark
        msgs = list(iter_stored(resp.body))
        assert [x.body for x in msgs] == [b"a-first", b"a-second"]
        ph = from_ext(PopMessageResponseHeader, resp.ext_fields)
        handles = receipts_of(ph, msgs, "broker-a")
        receipts = dict(zip([x.body for x in msgs], handles, strict=True))
        popped = trio.current_time()
        m_end = m.store.message_store.get_commitlog_max_offset()  # the CK included
        await until(lambda: s.store.message_store.get_commitlog_max_offset() == m_end)
        c.crash(M)
        await until(s.roles.acting_master, timeout=30)
        # a new POP on the acting slave is served too (its CK escapes to B:
        # test_acting_master_pop.py), beside the revive of the dead master's CKs
        pop2 = PopMessageRequestHeader(
            consumerGroup="PG2", topic=TOPIC, queueId=0, maxMsgNums=32, invisibleTime=30_000,
            pollTime=0, bornTime=now_ms(), initMode=0,
        )  # fmt: skip
        cmd2 = RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=to_ext(pop2))
        resp2 = await c.client.invoke(f"{S}:10911", cmd2, 10)
        assert resp2.code == RC.SUCCESS and list(iter_stored(resp2.body)), resp2.remark
        await trio.sleep(2)  # a revive round read the replicated CK
        ack = AckMessageRequestHeader("PG1", TOPIC, 0, receipts[b"a-second"], 1)
        cmd3 = RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=to_ext(ack))
        acked = await c.client.invoke(f"{S}:10911", cmd3, 10)
        assert acked.code == RC.SUCCESS, acked.remark
        retry = pop_retry_topic(TOPIC, "PG1", False)
        await until(lambda: b"a-first" in bodies_in(b, retry), timeout=60)
        assert trio.current_time() - popped >= 30  # not before its invisible time
        await trio.sleep(60)  # more revive rounds: still once
        assert bodies_in(b, retry) == [b"a-first"]  # a-second acked: never revived


async def lock(c: Classic, host: str, client_id: str) -> list[MessageQueue]:
    assert c.client is not None
    body = LockBatchRequestBody("OG", client_id, False, [MessageQueue(TOPIC, "broker-a", 0)])
    cmd = RemotingCommand(RequestCode.LOCK_BATCH_MQ, body=to_json(body))
    resp = await c.client.invoke(f"{host}:10911", cmd, 10)
    assert resp.code == RC.SUCCESS, resp.remark
    return from_json(LockBatchResponseBody, resp.body).lockOKMQSet


@pytest.mark.parametrize("strict", [False, True], ids=["default_locks", "lockInStrictMode"])
async def test_one_queue_one_holder_across_the_switch_only_with_strict_locks(
    tmp_path: Path, mock_clock: trio.testing.MockClock, strict: bool
) -> None:
    """An orderly consumer c1 locks broker-a's queue on the acting slave; the master returns
    and c2 (routed to it) locks the same queue there while c1's lock still lives. Default locks:
    both hold it (the order violation RIP-32 describes). Strict locks with totalReplicas=2:
    c1 cannot lock while the group has one member alive, and leaves no partial lock behind, so
    c2 gets the queue on the returned master and c1 then cannot."""
    kw: dict[str, Any] = {"lockInStrictMode": strict, "totalReplicas": 2}
    async with classic_sim(
        tmp_path, SEED + 75, supportActingMaster=True, notifyMinBrokerIdChanged=True
    ) as c:
        _m, s, _b = await two_groups(c, **kw)
        c.crash(M)
        await until(s.roles.acting_master, timeout=30)
        c1 = await lock(c, S, "c1")
        assert bool(c1) is not strict
        if strict:  # the partial lock was released, not leaked
            assert "OG" not in s.clients.locks.table
        await c.start(M, BrokerRole.ASYNC_MASTER, 0, **ACTING, **kw)
        await until(lambda: not s.roles.acting_master(), timeout=10)
        m2 = c.brokers[M]
        await until(lambda: len(m2.roles.group_members()) == 2, timeout=10)
        c2 = await lock(c, M, "c2")
        assert c2 == [MessageQueue(TOPIC, "broker-a", 0)]
        again = await lock(c, M, "c1") if strict else await lock(c, S, "c1")
        holders = {cid for cid, got in (("c1", again), ("c2", c2)) if got}
        assert holders == ({"c2"} if strict else {"c1", "c2"})


async def commit(c: Classic, host: str, group: str, offset: int) -> None:
    assert c.client is not None
    h = UpdateConsumerOffsetRequestHeader(group, TOPIC, 0, offset)
    cmd = RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=to_ext(h))
    assert (await c.client.invoke(f"{host}:10911", cmd, 10)).code == RC.SUCCESS


async def test_a_returning_master_goes_online_only_with_the_slaves_newer_offsets(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """No consumer offset of any group moves backwards on either broker across the master's
    outage and return: the master takes the slave's per-queue maxima before it registers (and
    keeps its own where it was ahead), the slave copies nothing from it meanwhile, and commits
    that reach the slave after the master is back still reach the master."""
    async with classic_sim(tmp_path, SEED + 76, supportActingMaster=True) as c:
        m, s, _b = await two_groups(c, flushConsumerOffsetInterval=1000)
        await commit(c, M, "CG", 1)
        await commit(c, M, "AHEAD", 1)
        await until(lambda: s.tables.offsets.query("AHEAD", TOPIC, 0) == 1)
        assert (await send(c, M, b"due-during-outage", {"DELAY": "3"})).code == RC.SUCCESS
        m_end = m.store.message_store.get_commitlog_max_offset()
        await until(lambda: s.store.message_store.get_commitlog_max_offset() == m_end)
        c.net.partition([M], [S])  # slave sync stops: the master gets ahead on AHEAD
        await commit(c, M, "AHEAD", 5)
        await trio.sleep(2)  # consumerOffset.json written (flushConsumerOffsetInterval 1 s)
        assert m.tables.offsets.query("AHEAD", TOPIC, 0) == 5
        assert s.tables.offsets.query("AHEAD", TOPIC, 0) == 1
        backwards: list[str] = []
        seen: dict[tuple[str, str], int] = {}

        async def watch() -> None:
            while True:
                for host in (M, S):
                    b = c.brokers[host]
                    for g in ("CG", "AHEAD", "delay level 3"):
                        if g == "delay level 3":
                            now = b.tables.delay_offsets.table.level_offset(3)
                        else:
                            now = b.tables.offsets.query(g, TOPIC, 0)
                        if now < seen.get((host, g), -1):
                            backwards.append(f"{host} {g} {seen[(host, g)]} -> {now}")
                        seen[(host, g)] = max(now, seen.get((host, g), -1))
                await trio.sleep(0.05)

        async with trio.open_nursery() as n:
            c.crash(M)
            c.net.heal()
            await until(s.roles.acting_master, timeout=30)
            n.start_soon(watch)
            await commit(c, S, "CG", 7)  # consumers routed to the acting slave
            await until(lambda: s.tables.delay_offsets.table.level_offset(3) == 1, timeout=20)
            m2 = await c.start(M, BrokerRole.ASYNC_MASTER, 0, **ACTING)
            assert not m2.roles.role_known  # isolated: not registered yet
            await until(lambda: m2.roles.role_known, timeout=30)
            # online only with the slave's offset, and its own where it was ahead
            assert m2.tables.offsets.query("CG", TOPIC, 0) == 7
            assert m2.tables.offsets.query("AHEAD", TOPIC, 0) == 5
            assert m2.tables.delay_offsets.table.level_offset(3) == 1  # not delivered twice
            await until(lambda: s.roles.master_to_sync() == f"{M}:10911", timeout=30)
            await commit(c, S, "CG", 9)  # a client whose route still names the slave
            await trio.sleep(15)  # slave sync rounds; the master's reverse sync
            assert m2.tables.offsets.query("CG", TOPIC, 0) == 9
            assert s.tables.offsets.query("AHEAD", TOPIC, 0) == 5
            n.cancel_scope.cancel()
        assert backwards == []


async def test_a_controller_mode_broker_without_a_controller_stays_out_of_the_route(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Controller mode and acting master are alternatives (README): a controller-mode broker
    that reaches no controller has no role, so it neither registers nor serves as master, nor
    acts as one, even with enableSlaveActingMaster; its group is absent from the route."""
    async with classic_sim(tmp_path, SEED + 77, supportActingMaster=True) as c:
        b = await c.start(
            B, BrokerRole.SLAVE, 1, brokerName="broker-b", enableControllerMode=True,
            controllerAddr="10.3.0.50:9878", **ACTING,
        )  # fmt: skip
        await c.start(M, BrokerRole.ASYNC_MASTER, 0, **ACTING)
        assert (await send(c, M, b"a", {})).code == RC.SUCCESS
        await trio.sleep(60)
        assert not b.roles.role_known and not b.roles.serving_as_master()
        assert not b.roles.acting_master() and not b.roles.special_services_on()
        assert [bd.brokerName for bd in (await route(c)).brokerDatas] == ["broker-a"]
        assert (await send(c, B, b"b", {})).code != RC.SUCCESS


async def test_without_an_escape_path_due_messages_wait_for_the_master(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """enableRemoteEscape off (and no container): the acting slave cannot hand a due delayed
    message on; it keeps it (its store refuses the re-put, nothing moves) and the returning
    master delivers it once, from the offsets pre-online took."""
    kw: dict[str, Any] = {"enableRemoteEscape": False}
    async with classic_sim(tmp_path, SEED + 78, supportActingMaster=True) as c:
        m, s, _b = await two_groups(c, **kw)
        assert (await send(c, M, b"waits", {"DELAY": "2"})).code == RC.SUCCESS  # 5 s
        m_end = m.store.message_store.get_commitlog_max_offset()
        await until(lambda: s.store.message_store.get_commitlog_max_offset() == m_end)
        # kill -9: M keeps its log (a power cut of an ASYNC_FLUSH master may lose its tail, and
        # its slave then cuts the same tail: classic replication, not this feature)
        c.crash(M, power_cut=False)
        await until(s.roles.acting_master, timeout=30)
        await trio.sleep(20)  # due on the acting slave, with nowhere to go
        assert s.schedule.delivered == 0 and s.tables.delay_offsets.table.level_offset(2) == 0
        assert b"waits" not in await bodies_on(c, B)
        m2 = await c.start(M, BrokerRole.ASYNC_MASTER, 0, **{**ACTING, **kw})
        await until(lambda: b"waits" in bodies_in(m2, TOPIC), timeout=60)
        await trio.sleep(10)
        assert bodies_in(m2, TOPIC).count(b"waits") == 1


S2 = "10.3.0.5"


async def test_a_returning_slave_acts_only_after_taking_the_acting_slaves_offsets(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Slave pre-online (SPEC A4, slave side): S (id 1) restarts while its master is dead and
    S2 (id 2) acts (its escape to broker-b moves the delay offset). S stays off the route and
    does not act until it has merged S2's newer consumer and delay offsets; then it acts
    (smallest live id) with them, S2 stops, and a commit that still reaches S2 (a client's stale
    route) reaches S. No offset on S moves backwards; the delayed message is not re-delivered."""
    async with classic_sim(tmp_path, SEED + 91, supportActingMaster=True) as c:
        cfg = {**ACTING, "flushConsumerOffsetInterval": 1000}
        m, s, b = await two_groups(c, **cfg)
        s2 = await c.start(S2, BrokerRole.SLAVE, 2, **cfg)
        await until(lambda: s2.roles.master_to_sync() == f"{M}:10911")
        await commit(c, M, "CG", 1)
        assert (await send(c, M, b"due-during-outage", {"DELAY": "3"})).code == RC.SUCCESS
        m_end = m.store.message_store.get_commitlog_max_offset()
        for slave in (s, s2):
            await until(lambda b=slave: b.store.message_store.get_commitlog_max_offset() == m_end)
        await until(lambda: s.tables.offsets.query("CG", TOPIC, 0) == 1, timeout=15)
        await trio.sleep(2)  # S's consumerOffset.json holds CG 1
        c.crash(S, power_cut=False)
        c.crash(M)
        await until(s2.roles.acting_master, timeout=30)
        await commit(c, S2, "CG", 7)  # consumers routed to the acting slave
        await until(lambda: s2.tables.delay_offsets.table.level_offset(3) == 1, timeout=20)
        violations: list[str] = []

        async def watch(b: Broker) -> None:
            last = -1
            while True:
                now = b.tables.offsets.query("CG", TOPIC, 0)
                if now < last:
                    violations.append(f"CG moved back {last} -> {now}")
                last = max(last, now)
                level = b.tables.delay_offsets.table.level_offset(3)
                if b.roles.acting_master() and (now < 7 or level < 1):
                    violations.append(f"acting with CG {now}, delay level 3 at {level}")
                if not b.roles.role_known:
                    if b.roles.acting_master() or b.roles.special_services_on():
                        violations.append("acting while in pre-online")
                    addrs = [bd.brokerAddrs for bd in (await route(c)).brokerDatas]
                    if any(f"{S}:10911" in a.values() for a in addrs):
                        violations.append("routed while in pre-online")
                await trio.sleep(0.05)

        async with trio.open_nursery() as n:
            s_back = await c.start(S, BrokerRole.SLAVE, 1, **cfg)
            n.start_soon(watch, s_back)
            assert not s_back.roles.role_known  # isolated: not registered yet
            await until(s_back.roles.acting_master, timeout=30)
            assert s_back.tables.offsets.query("CG", TOPIC, 0) == 7
            assert s_back.tables.delay_offsets.table.level_offset(3) == 1  # not delivered twice
            await until(lambda: not s2.roles.acting_master(), timeout=10)
            await commit(c, S2, "CG", 9)  # a client whose route still names S2
            await trio.sleep(12)  # the reverse sync's rounds
            assert s_back.tables.offsets.query("CG", TOPIC, 0) == 9
            assert bodies_in(b, TOPIC).count(b"due-during-outage") == 1
            n.cancel_scope.cancel()
        assert violations == []


async def test_a_returning_slave_with_its_master_alive_goes_online_after_the_ha_handshake(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Slave pre-online with the master alive: S restarts cut off from M (it reaches the
    NameServer only); it stays unregistered while it cannot complete the HA handshake, and goes
    online once the link is back and the handshake done."""
    async with classic_sim(tmp_path, SEED + 92, supportActingMaster=True) as c:
        await c.start(M, BrokerRole.ASYNC_MASTER, 0, **ACTING)
        s = await c.start(S, BrokerRole.SLAVE, 1, **ACTING)
        await until(lambda: s.roles.master_to_sync() == f"{M}:10911")
        c.crash(S, power_cut=False)
        c.net.partition([M], [S])
        await trio.sleep(1)  # the old process is gone (its store lock released)
        s_back = await c.start(S, BrokerRole.SLAVE, 1, **ACTING)
        await trio.sleep(20)
        assert not s_back.roles.role_known and not s_back.roles.acting_master()
        assert s_back.roles.master_to_sync() is None
        c.net.heal()
        await until(lambda: s_back.roles.role_known, timeout=30)
        view = s_back.roles.ha.slave_view() if s_back.roles.ha is not None else None
        assert view is not None and view.connected and view.master_confirm_offset >= 0
        await until(lambda: s_back.roles.master_to_sync() == f"{M}:10911", timeout=10)
