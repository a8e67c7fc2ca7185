"""A static topic across a controller-mode failover (real controller, NameServer and a
replicated broker set on the simulated network under MockClock): the slave syncs the master's
topicQueueMapping.json, so once the master dies the promoted slave leads the same logic queues;
sends and pulls on them continue with continuous logic offsets, nothing acknowledged is lost,
and the group's committed logic offset is still there."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from rocketrio.actors.broker.pull import processor as pull_processor
from rocketrio.actors.broker.tables.json_table import config_path
from rocketrio.actors.broker.tables.topic_queue_mapping import MAPPING_FILE
from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.api import PullStatus
from rocketrio.actors.client.static_topic_admin import update_static_topic
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    OffsetResponseHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketrio.protocol.serde import from_ext
from tests.harness.clock import now_ms
from tests.harness.replication import CLUSTER, Node, awaits_true, cluster, pair, wait_until
from tests.harness.static_topic import leaders, pull_header

T = "ST"
QUEUES = 4
ADMIN_HOST = "10.0.9.7"
LOGIC = "__syslo__global__"


async def send(admin: MQAdmin, node: Node, gid: int, body: bytes) -> tuple[int, int]:
    header = SendMessageRequestHeader(
        producerGroup="pg", topic=T, defaultTopic="TBW102", defaultTopicQueueNums=4,
        queueId=gid, sysFlag=0, bornTimestamp=0, flag=0, properties="",
    )  # fmt: skip
    resp = await admin.api.call(
        node.b.addr, RequestCode.SEND_MESSAGE, header, body, ok=tuple(range(1000))
    )
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    h = from_ext(SendMessageResponseHeader, resp.ext_fields)
    return h.queueId, h.queueOffset


async def read_all(admin: MQAdmin, node: Node, gid: int) -> list[tuple[int, bytes]]:
    offset, got = 0, []
    for _ in range(50):
        res = await admin.api.pull(node.b.addr, pull_header(gid, offset), 5)
        if res.status is PullStatus.FOUND:
            got += [(m.queue_offset, m.body) for m in res.messages()]
        elif res.status is PullStatus.NO_NEW_MSG:
            return got
        else:
            raise AssertionError(f"pull {gid}@{offset}: {res.status}")
        offset = res.next_begin_offset
    raise AssertionError("the logic queue never ended")


async def committed(admin: MQAdmin, node: Node, gid: int) -> int:
    resp = await admin.api.call(
        node.b.addr,
        RequestCode.QUERY_CONSUMER_OFFSET,
        QueryConsumerOffsetRequestHeader("cg", T, gid),
        ok=tuple(range(1000)),
    )
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return from_ext(OffsetResponseHeader, resp.ext_fields).offset


def mapping_file(node: Node) -> dict[str, object]:
    data: dict[str, object] = json.loads(Path(config_path(node.root, MAPPING_FILE)).read_text())
    return data


async def test_a_promoted_slave_leads_the_static_topics_logic_queues(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 61) as c:
        a, b = await pair(c)
        await trio.sleep(11)  # past the controller's listening window after its election
        async with MQAdmin(c.namesrv_addr, c.net.transport(ADMIN_HOST)) as admin:
            await update_static_topic(admin, T, QUEUES, clusters=CLUSTER, now_ms=now_ms)
            assert sorted(a.b.tables.mappings.table[T].leader_id_map()) == [0, 1, 2, 3]
            acked: dict[int, list[tuple[int, bytes]]] = {g: [] for g in range(QUEUES)}
            for i in range(10):
                for g in range(QUEUES):
                    body = f"before-{g}-{i}".encode()
                    qid, off = await send(admin, a, g, body)
                    assert qid == g
                    acked[g].append((off, body))
            r = await admin.api.call(
                a.b.addr,
                RequestCode.UPDATE_CONSUMER_OFFSET,
                UpdateConsumerOffsetRequestHeader("cg", T, 1, 7),
                ok=tuple(range(1000)),
            )
            assert r.code == ResponseCode.SUCCESS
            # the slave's sync copies the mapping file and the logic offset
            await wait_until(
                lambda: awaits_true(
                    T in b.b.tables.mappings.table
                    and b.b.tables.offsets.table.get(f"{T}@cg", {}).get(1) == 7
                ),
                "the slave synced the mapping and the offset",
            )
            on_b = mapping_file(b)["topicQueueMappingInfoMap"]
            assert isinstance(on_b, dict) and on_b[T]["bname"] == "broker-a"
            assert on_b == mapping_file(a)["topicQueueMappingInfoMap"]

            await a.crash()
            await wait_until(lambda: awaits_true(b.rm.serving_as_master()), "B promoted")

            async def routed_to_b() -> bool:
                route = await wait_for_route(admin, T)
                masters = {d.brokerName: d.brokerAddrs.get(0) for d in route.brokerDatas}
                return leaders(route) == dict.fromkeys(range(QUEUES), "broker-a") and masters == {
                    "broker-a": b.b.addr
                }

            await wait_until(routed_to_b, "the route leads the logic queues to B")
            for i in range(10):
                for g in range(QUEUES):
                    body = f"after-{g}-{i}".encode()
                    qid, off = await send(admin, b, g, body)
                    assert qid == g
                    acked[g].append((off, body))
            for g in range(QUEUES):
                # logic offsets continue where the dead master stopped, nothing is lost
                assert [o for o, _ in acked[g]] == list(range(20))
                assert await read_all(admin, b, g) == acked[g]
            assert await committed(admin, b, 1) == 7


async def test_the_slave_serves_logic_queues_and_a_broker_without_the_mapping_sends_back(
    tmp_path: Path, mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads from slaves (issue 30 item 3): a consumer sent to the slave (slaveReadEnable's
    suggestion) reads the logic queues there, with the same logic offsets and OffsetDelta as
    on the master; a logic pull to a broker that has no mapping of the topic (a slave before
    its sync) is answered PULL_RETRY_IMMEDIATELY with the master suggested, never with the
    physical queue numbered like the logic one."""
    async with cluster(tmp_path, 61) as c:
        # slaveReadEnable on a machine with 100 bytes of memory: 1% of it, so a consumer one
        # message behind is sent to the slave (broker id 2)
        monkeypatch.setattr(pull_processor, "_physical_memory", lambda: 100)
        slow = {
            "slaveReadEnable": True,
            "accessMessageInMemoryMaxRatio": 1,
            "whichBrokerWhenConsumeSlowly": 2,
        }
        a, b = await pair(c, **slow)
        await trio.sleep(11)
        async with MQAdmin(c.namesrv_addr, c.net.transport(ADMIN_HOST)) as admin:
            pulled = await admin.api.call(
                b.b.addr,
                RequestCode.PULL_MESSAGE,
                attrs.evolve(pull_header(1, 0), topic="NotYetSynced", bname=LOGIC),
                ok=tuple(range(1000)),
            )
            assert pulled.code == ResponseCode.PULL_RETRY_IMMEDIATELY, pulled.remark
            assert from_ext(PullMessageResponseHeader, pulled.ext_fields).suggestWhichBrokerId == 0
            await update_static_topic(admin, T, QUEUES, clusters=CLUSTER, now_ms=now_ms)
            acked: dict[int, list[tuple[int, bytes]]] = {g: [] for g in range(QUEUES)}
            for i in range(6):
                for g in range(QUEUES):
                    body = f"m-{g}-{i}".encode()
                    acked[g].append(((await send(admin, a, g, body))[1], body))
            await wait_until(
                lambda: awaits_true(T in b.b.tables.mappings.table),
                "the slave synced the mapping",
            )

            async def slave_has_all() -> bool:
                return all([await read_all(admin, b, g) == acked[g] for g in range(QUEUES)])

            # the master suggests the slave for a logic queue read far behind (its own generation)
            first = await admin.api.call(
                a.b.addr,
                RequestCode.PULL_MESSAGE,
                attrs.evolve(pull_header(0, 0), maxMsgNums=1),
                ok=tuple(range(1000)),
            )
            assert first.code == ResponseCode.SUCCESS
            assert from_ext(PullMessageResponseHeader, first.ext_fields).suggestWhichBrokerId == 2
            await wait_until(slave_has_all, "the slave serves every logic queue in full")
            for g in range(QUEUES):
                assert await read_all(admin, a, g) == acked[g]
