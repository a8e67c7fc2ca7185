"""Static topics in use (S3/S4, N5; SimNetwork, MockClock): routes with logic queues, sends to
and pulls from logic queues across a remapping, logic consumer offsets."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.client.admin import wait_for_route
from rocketrio.actors.client.api import PullStatus
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.message import Message, SendStatus
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.static_topic_admin import (
    remapping_static_topic,
)
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    CloneGroupOffsetRequestHeader,
    GetConsumeStatsRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketrio.protocol.pop_headers import PopMessageRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.running_info import QueryConsumeTimeSpanRequestHeader
from rocketrio.protocol.serde import from_ext, to_ext
from tests.harness.clients import cluster
from tests.harness.clock import now_ms
from tests.harness.static_topic import (
    T,
    leaders,
    offset_call,
    offset_of,
    pull_header,
    raw_send,
    route_until,
    static_topic,
)

LQ = "__syslo__global__"


async def test_the_route_carries_each_brokers_mapping_info(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        route = await route_until(admin, lambda r: len(leaders(r)) == 8)
        assert route.topicQueueMappingByBroker is not None
        infos = route.topicQueueMappingByBroker
        assert sorted(infos) == ["broker-a", "broker-b"]
        assert all(i.totalQueues == 8 and i.bname == n for n, i in infos.items())
        assert sorted(leaders(route).values()).count("broker-a") == 4
        # the mapping's physical ids: each broker's 4 queues
        assert all(sorted(i.currIdMap.values()) == [0, 1, 2, 3] for i in infos.values())

        await c.start_broker("broker-c", "10.0.1.3")
        await remapping_static_topic(admin, T, brokers="broker-a,broker-b,broker-c", now_ms=now_ms)
        route = await route_until(
            admin, lambda r: "broker-c" in set(leaders(r).values()) and len(leaders(r)) == 8
        )
        assert sorted(leaders(route).values()).count("broker-c") == 3


async def test_sends_go_to_logic_queues_with_logic_offsets(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        route = await route_until(admin, lambda r: len(leaders(r)) == 8)
        lead = leaders(route)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            results = [await p.send(Message(T, f"m{i}".encode())) for i in range(40)]
            assert {r.message_queue.brokerName for r in results} == {LQ}
            per_queue: dict[int, list[int]] = {}
            for r in results:
                per_queue.setdefault(r.message_queue.queueId, []).append(r.queue_offset)
            assert sorted(per_queue) == list(range(8))
            assert all(offs == list(range(len(offs))) for offs in per_queue.values())
            # the physical queues hold them all
            physical = {(q.brokerName, q.queueId): q.maxOffset for q in await admin.topic_status(T)}
            assert sum(physical.values()) == 40

            # a raw send to a broker that does not lead the logic queue: NOT_LEADER_FOR_QUEUE
            other = {"broker-a": "broker-b", "broker-b": "broker-a"}
            resp = await raw_send(admin, c.addr(other[lead[0]]), 0)
            assert resp.code == ResponseCode.NOT_LEADER_FOR_QUEUE

            # remap: the old leaders refuse, the new leader answers logic offsets past the block
            await c.start_broker("broker-c", "10.0.1.3")
            with structlog.testing.capture_logs() as logs:
                await remapping_static_topic(
                    admin, T, brokers="broker-a,broker-b,broker-c", now_ms=now_ms
                )
            route = await route_until(
                admin, lambda r: "broker-c" in set(leaders(r).values()) and len(leaders(r)) == 8
            )
            moved = sorted(g for g, b in leaders(route).items() if b == "broker-c")
            assert len(moved) == 3
            # each old leader stored what it had accepted before answering the admin
            released = [e for e in logs if e["event"] == "static_topic_leadership_released"]
            assert sorted(q for e in released for q in e["released_queues"]) == moved
            assert {e["broker"] for e in released} == {lead[g] for g in moved}
            assert all(e["commitlog_offset"] > 0 for e in released)
            resp = await raw_send(admin, c.addr(lead[moved[0]]), moved[0])
            assert resp.code == ResponseCode.NOT_LEADER_FOR_QUEUE
            assert "refresh the topic's route" in (resp.remark or "")
            resp = await raw_send(admin, c.addr("broker-c"), moved[0])
            assert resp.code == ResponseCode.SUCCESS
            h = from_ext(SendMessageResponseHeader, resp.ext_fields)
            assert (h.queueId, h.queueOffset) == (moved[0], 10000)

            # the producer, with its old route, still gets every message in
            more = [await p.send(Message(T, f"n{i}".encode())) for i in range(40)]
            assert all(r.send_status is SendStatus.SEND_OK for r in more)
            for r in more:
                if r.message_queue.queueId in moved:
                    assert r.queue_offset >= 10000


async def test_a_send_to_a_hole_fails_cleanly(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        route = await route_until(admin, lambda r: len(leaders(r)) == 8)
        on_b = sorted(g for g, b in leaders(route).items() if b == "broker-b")
        c.crash_broker("broker-b")
        await route_until(admin, lambda r: set(leaders(r).values()) == {"broker-a"})
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            info = await p.publish_info(T)
            # still 8 logic queues: broker-b's are holes
            assert info.queues == [MessageQueue(T, LQ, i) for i in range(8)]
            assert p.client.broker_name_of(MessageQueue(T, LQ, on_b[0])) == "__syslo__none__"
            with pytest.raises(MQClientError):
                await p.send(Message(T, b"x"), lambda mqs, _m, _a: mqs[on_b[0]])
            # unkeyed sends go to the queues that have a leader
            r = await p.send(Message(T, b"y"))
            assert r.send_status is SendStatus.SEND_OK


async def test_pull_and_offsets_across_a_remapping(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        route = await route_until(admin, lambda r: len(leaders(r)) == 8)
        lead = leaders(route)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            sent = [await p.send(Message(T, f"m{i}".encode())) for i in range(40)]
            before = {}
            for r in sent:
                before[r.message_queue.queueId] = before.get(r.message_queue.queueId, 0) + 1
            # a consumer committed logic offsets on each queue's (old) leader
            await c.start_broker("broker-c", "10.0.1.3")
            for g, b in lead.items():
                r = await offset_call(
                    admin,
                    c.addr(b),
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    UpdateConsumerOffsetRequestHeader("cg", T, g, 2),
                )
                assert r.code == ResponseCode.SUCCESS
            await remapping_static_topic(
                admin, T, brokers="broker-a,broker-b,broker-c", now_ms=now_ms
            )
            route = await route_until(
                admin, lambda r: "broker-c" in set(leaders(r).values()) and len(leaders(r)) == 8
            )
            gid = min(g for g, b in leaders(route).items() if b == "broker-c")
            old = c.addr(lead[gid])
            new = c.addr("broker-c")
            more = []
            for i in range(40):
                more.append(await p.send(Message(T, f"n{i}".encode())))
        after = sum(1 for r in more if r.message_queue.queueId == gid)
        assert after > 0

        # the old leader refuses the logic queue now
        resp = await admin.api.remoting.invoke(
            old,
            RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=to_ext(pull_header(gid, 0))),
            5,
        )
        assert resp.code == ResponseCode.NOT_LEADER_FOR_QUEUE

        # Double-Check-Read: the new leader finds the offset the old leader stored
        q = QueryConsumerOffsetRequestHeader("cg", T, gid)
        assert offset_of(await offset_call(admin, new, RequestCode.QUERY_CONSUMER_OFFSET, q)) == 2
        # min from the oldest generation (on the old broker), max from the newest
        assert (
            offset_of(
                await offset_call(
                    admin, new, RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(T, gid)
                )
            )
            == 0
        )
        assert (
            offset_of(
                await offset_call(
                    admin, new, RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(T, gid)
                )
            )
            == 10000 + after
        )
        # a time before everything: the first offset; after everything: the max
        assert (
            offset_of(
                await offset_call(
                    admin,
                    new,
                    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                    SearchOffsetRequestHeader(T, gid, 0),
                )
            )
            == 0
        )
        assert (
            offset_of(
                await offset_call(
                    admin,
                    new,
                    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                    SearchOffsetRequestHeader(T, gid, now_ms() + 10**9),
                )
            )
            == 10000 + after
        )

        # pull the whole logic queue from the new leader: the old generation remotely
        offset, bodies, offsets = 0, [], []
        for _ in range(20):
            res = await admin.api.pull(new, pull_header(gid, offset, commit=offset), 5)
            if res.status is PullStatus.FOUND:
                for m in res.messages():
                    offsets.append(m.queue_offset)
                    bodies.append(m.body)
            elif res.status is PullStatus.NO_NEW_MSG:
                break
            assert res.next_begin_offset >= offset
            offset = res.next_begin_offset
        assert offsets == list(range(before[gid])) + list(range(10000, 10000 + after))
        assert all(b.startswith(b"m") for b in bodies[: before[gid]])
        assert all(b.startswith(b"n") for b in bodies[before[gid] :])
        # the pulls' commit offsets were stored as logic values on the leader
        assert (
            offset_of(await offset_call(admin, new, RequestCode.QUERY_CONSUMER_OFFSET, q)) >= 10000
        )


async def test_offset_calls_on_a_static_topic_answer_in_logic_queues(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """resetOffset, cloneGroupOffset, consumerProgress, the consume time span and POP on a
    static topic (issue 30 items 1-2): served, never refused, and every queue they name or write
    is a logic queue the broker leads (never a physical queue id); other topics as before."""
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        route = await route_until(admin, lambda r: len(leaders(r)) == 8)
        led = {g for g, b in leaders(route).items() if b == "broker-a"}
        await admin.update_topic("Plain", cluster="DefaultCluster", read_queues=2, write_queues=2)
        await wait_for_route(admin, "Plain")
        addr = c.addr("broker-a")
        calls = [
            (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ResetOffsetRequestHeader(T, "g", 0, True)),
            (RequestCode.CLONE_GROUP_OFFSET, CloneGroupOffsetRequestHeader("g", "h", T, False)),
            (RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader("g", T)),
            (RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader("g", topicList=f"x;{T}")),
            (RequestCode.QUERY_CONSUME_TIME_SPAN, QueryConsumeTimeSpanRequestHeader(T, "g")),
            (
                RequestCode.POP_MESSAGE,
                PopMessageRequestHeader("g", T, -1, 1, 30_000, 0, now_ms(), 0),
            ),
        ]
        for code, header in calls:
            resp = await admin.api.call(addr, code, header, ok=tuple(range(1000)))
            assert resp.code != ResponseCode.INVALID_PARAMETER, (code, resp.remark)
            assert "static topic" not in (resp.remark or ""), resp.remark
            if resp.body and code != RequestCode.POP_MESSAGE:
                text = resp.body.decode()
                assert '"brokerName":"broker-a"' not in text, (code, text)
            plain = attrs.evolve(header, topic="Plain")  # type: ignore[misc]
            if isinstance(header, GetConsumeStatsRequestHeader) and header.topicList:
                plain = attrs.evolve(header, topicList="Plain")
            resp = await admin.api.call(addr, code, plain, ok=tuple(range(1000)))
            assert "static topic" not in (resp.remark or ""), (code, resp.remark)
        # the reset (forced, to the beginning) wrote logic offsets of the logic queues led here
        written = c.brokers["broker-a"].tables.offsets.table.get(f"{T}@g", {})
        assert set(written) == led and set(written.values()) == {0}
        assert not c.brokers["broker-b"].tables.offsets.table.get(f"{T}@g")
