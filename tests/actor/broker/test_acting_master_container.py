"""In-process escape (RIP-32 A3 with the broker container, L1), on the simulated network and
disks under the MockClock.

A container on host X holds broker-b's master and broker-a's slave (upstream's crossed layout);
broker-a's master runs alone on its host. With enableRemoteEscape off, the acting slave can only
hand a due delayed message to broker-b's master through the container: it lands in that
master's store once, not before it is due, and never in the dead group. The POP records of the
acting slave go the same way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.broker.container.config import BrokerContainerConfig
from rocketrio.actors.broker.container.container import BrokerContainer, BrokerMember, MemberBroker
from rocketrio.actors.broker.container.registry import BrokerIdentity
from rocketrio.actors.client.simple_consumer import receipts_of
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import SendMessageRequestHeaderV2
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.message_format import encode_properties
from rocketrio.protocol.pop_extra_info import pop_retry_topic
from rocketrio.protocol.pop_headers import (
    AckMessageRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from tests.harness.blocking import inline_blocking
from tests.harness.classic_ha import TOPIC, Classic, M, classic, until
from tests.harness.clock import EPOCH_MS
from tests.harness.sim_disk import SimFileSystem

X = "10.3.0.7"  # the container's host
B_PORT, S_PORT, CONTAINER_PORT = 10921, 10931, 10951
SEED = int(os.environ.get("ACTING_SEED", "0"))
ACTING: dict[str, Any] = {"enableSlaveActingMaster": True, "enableRemoteEscape": False}


def now_ms() -> int:
    return EPOCH_MS + int(trio.current_time() * 1000)


def member_conf(root: Path, name: str, bid: int, port: int) -> str:
    values = {
        "brokerName": name, "brokerId": bid, "brokerRole": "SLAVE" if bid else "ASYNC_MASTER",
        "brokerIP1": X, "listenPort": port, "storePathRootDir": str(root / "x" / f"{name}-{bid}"),
        "mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 100 * 20,
        **ACTING,
    }  # fmt: skip
    path = root / f"{name}-{bid}.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return str(path)


async def send(c: Classic, addr: str, body: bytes, props: dict[str, str]) -> int:
    assert c.client is not None
    header = SendMessageRequestHeaderV2(
        a="PG", b=TOPIC, c="TBW102", d=1, e=0, f=0, g=now_ms(), h=0,
        i=encode_properties(props), j=0, k=False, m=False,
    )  # fmt: skip
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=to_ext(header), body=body)
    return (await c.client.invoke(addr, cmd, 10)).code


def bodies_in(b: Broker, topic: str) -> list[bytes]:
    view = b.store.view
    _first, entries = view.read_queue_entries(topic, 0, 0, 64)
    return [m.body for phy, _s, _t in entries if (m := view.look_message_by_offset(phy))]


async def test_the_acting_slave_escapes_in_process_to_its_containers_other_master(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with classic(tmp_path, SEED + 81, sim_disk=True, supportActingMaster=True) as c:
        disk = SimFileSystem()

        def make(config: BrokerConfig) -> MemberBroker:
            broker = Broker(
                config, c.net.transport(X), now_ms=now_ms, run_blocking=inline_blocking, fs=disk
            )
            return BrokerMember(broker)

        m = await c.start(M, BrokerRole.ASYNC_MASTER, 0, **ACTING)
        paths = [
            member_conf(tmp_path, "broker-b", 0, B_PORT),
            member_conf(tmp_path, "broker-a", 1, S_PORT),
        ]
        config = BrokerContainerConfig(
            brokerContainerIP=X, listenPort=CONTAINER_PORT, namesrvAddr=c.ns,
            brokerConfigPaths=":".join(paths),
        )  # fmt: skip
        container = BrokerContainer(config, c.net.transport(X), make, now_ms=now_ms)
        await c.nursery.start(container.run)
        slot_b = container.running(BrokerIdentity("DefaultCluster", "broker-b", 0))
        slot_s = container.running(BrokerIdentity("DefaultCluster", "broker-a", 1))
        assert isinstance(slot_b, BrokerMember) and isinstance(slot_s, BrokerMember)
        b, s = slot_b.broker, slot_s.broker
        assert await send(c, f"{X}:{B_PORT}", b"b-first", {}) == RC.SUCCESS  # C on broker-b
        t0 = now_ms()
        assert await send(c, f"{M}:10911", b"delayed", {"DELAY": "4"}) == RC.SUCCESS  # 30 s
        await until(lambda: s.roles.master_to_sync() == f"{M}:10911")
        m_end = m.store.message_store.get_commitlog_max_offset()
        await until(lambda: s.store.message_store.get_commitlog_max_offset() == m_end)
        c.crash(M)
        await until(s.roles.acting_master, timeout=30)
        while now_ms() < t0 + 30_000 - 500:
            assert b"delayed" not in bodies_in(b, TOPIC)
            await trio.sleep(1)
        await until(lambda: b"delayed" in bodies_in(b, TOPIC), timeout=10)
        await trio.sleep(10)
        assert bodies_in(b, TOPIC).count(b"delayed") == 1
        assert b.escape_target.written == 1 and s.schedule.delivered == 1
        assert b"delayed" not in bodies_in(s, TOPIC)  # never into the dead group's log


async def test_pop_on_the_acting_slave_keeps_its_records_in_process_on_the_containers_master(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """POP on the acting slave inside the container (remote escape off): its CK and ACK go
    in-process to broker-b's master (the container's only master of another group), which
    revives the unacked message once (read back from the slave) and never the acked one."""
    async with classic(tmp_path, SEED + 82, sim_disk=True, supportActingMaster=True) as c:
        disk = SimFileSystem()

        def make(config: BrokerConfig) -> MemberBroker:
            broker = Broker(
                config, c.net.transport(X), now_ms=now_ms, run_blocking=inline_blocking, fs=disk
            )
            return BrokerMember(broker)

        m = await c.start(M, BrokerRole.ASYNC_MASTER, 0, **ACTING)
        paths = [
            member_conf(tmp_path, "broker-b", 0, B_PORT),
            member_conf(tmp_path, "broker-a", 1, S_PORT),
        ]
        config = BrokerContainerConfig(
            brokerContainerIP=X, listenPort=CONTAINER_PORT, namesrvAddr=c.ns,
            brokerConfigPaths=":".join(paths),
        )  # fmt: skip
        container = BrokerContainer(config, c.net.transport(X), make, now_ms=now_ms)
        await c.nursery.start(container.run)
        slot_b = container.running(BrokerIdentity("DefaultCluster", "broker-b", 0))
        slot_s = container.running(BrokerIdentity("DefaultCluster", "broker-a", 1))
        assert isinstance(slot_b, BrokerMember) and isinstance(slot_s, BrokerMember)
        b, s = slot_b.broker, slot_s.broker
        assert await send(c, f"{X}:{B_PORT}", b"b-first", {}) == RC.SUCCESS
        for body in (b"a-0", b"a-1"):
            assert await send(c, f"{M}:10911", body, {}) == RC.SUCCESS
        await until(lambda: s.roles.master_to_sync() == f"{M}:10911")
        m_end = m.store.message_store.get_commitlog_max_offset()
        await until(lambda: s.store.message_store.get_commitlog_max_offset() == m_end)
        await until(lambda: s.tables.topics.select(TOPIC) is not None)
        c.crash(M)
        await until(s.roles.acting_master, timeout=30)
        assert c.client is not None
        h = PopMessageRequestHeader(
            consumerGroup="PG", topic=TOPIC, queueId=0, maxMsgNums=32, invisibleTime=30_000,
            pollTime=0, bornTime=now_ms(), initMode=0,
        )  # fmt: skip
        cmd = RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=to_ext(h))
        resp = await c.client.invoke(f"{X}:{S_PORT}", cmd, 10)
        assert resp.code == RC.SUCCESS, resp.remark
        msgs = list(iter_stored(resp.body))
        assert [x.body for x in msgs] == [b"a-0", b"a-1"]
        receipts = receipts_of(
            from_ext(PopMessageResponseHeader, resp.ext_fields), msgs, "broker-a"
        )
        ack = AckMessageRequestHeader("PG", TOPIC, 0, receipts[0], msgs[0].queue_offset)
        cmd = RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=to_ext(ack))
        assert (await c.client.invoke(f"{X}:{S_PORT}", cmd, 10)).code == RC.SUCCESS
        assert b.escape_target.written == 2  # the CK and the ACK, in-process
        retry = pop_retry_topic(TOPIC, "PG", False)
        await until(lambda: bodies_in(b, retry) == [b"a-1"], timeout=60)
        await trio.sleep(60)
        assert bodies_in(b, retry) == [b"a-1"]
