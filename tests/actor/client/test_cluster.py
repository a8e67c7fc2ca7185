"""Python producer and consumers against a real NameServer and Brokers (SimNetwork, MockClock):
clustering split, member leave, retry and DLQ, broadcasting, ordered sends, broker failover,
batches, auto-created topics, tag filters, lite pull consumer."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.client.admin import wait_for_route
from rocketrio.actors.client.async_send import SendFuture
from rocketrio.actors.client.config import ProducerConfig
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.message import ConsumeStatus, Message, SendStatus
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.pull_consumer import LitePullConsumer
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.actors.client.queue_select import SelectMessageQueueByHash, java_hash_code
from rocketrio.actors.kernel.remoting import RemotingError, RemotingTimeout
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt
from tests.harness.blocking import inline_blocking
from tests.harness.clients import (
    NS_HOST,
    Collector,
    balanced,
    cluster,
    consumer,
    create_topic,
    send_all,
    wait_for,
)


async def test_two_members_consume_each_message_exactly_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "T", queues=4)
        l1, l2 = Collector(), Collector()
        m1, m2 = consumer(c, "g", l1), consumer(c, "g", l2)
        async with m1, m2:
            await wait_for(lambda: balanced([m1, m2], "T", 8))
            bodies = [f"m{i}".encode() for i in range(400)]
            async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
                results = await send_all(p, "T", bodies)
            assert {r.send_status for r in results} == {SendStatus.SEND_OK}
            assert {r.message_queue.brokerName for r in results} == {"broker-a", "broker-b"}
            await wait_for(lambda: len(l1.msgs) + len(l2.msgs) >= 400)
            await trio.sleep(5)  # time for a duplicate to show up, if there were one
        got = l1.bodies() + l2.bodies()
        assert sorted(got) == sorted(bodies)
        assert l1.msgs and l2.msgs
        # each member only got messages of its own queues
        own1 = {(m.topic, m.queue_id) for m in l1.msgs}
        own2 = {(m.topic, m.queue_id) for m in l2.msgs}
        assert len({m.queue_offset for m in l1.msgs}) > 1
        assert own1 and own2


async def test_member_leaves_and_the_other_takes_over_without_loss(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=4)
        l1, l2 = Collector(), Collector()
        m1, m2 = consumer(c, "g", l1), consumer(c, "g", l2)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m1:
            async with m2:
                await wait_for(lambda: balanced([m1, m2], "T", 4))
                first = [f"a{i}".encode() for i in range(100)]
                await send_all(p, "T", first)
                await wait_for(lambda: len(l1.msgs) + len(l2.msgs) >= 100)
            left_at = trio.current_time()
            # the broker pushes NOTIFY_CONSUMER_IDS_CHANGED: no waiting for the 20 s rebalance
            await wait_for(lambda: len([q for q in m1.assigned_queues() if q.topic == "T"]) == 4)
            assert trio.current_time() - left_at < 5
            second = [f"b{i}".encode() for i in range(100)]
            await send_all(p, "T", second)
            await wait_for(lambda: len(l1.msgs) + len(l2.msgs) >= 200)
            await trio.sleep(5)
        assert sorted(l1.bodies() + l2.bodies()) == sorted(first + second)
        assert set(second) <= set(l1.bodies())


async def test_reconsume_later_goes_through_retry_topic_then_dlq(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        listener = Collector(fail=frozenset({b"bad"}))
        m = consumer(c, "g", listener, max_reconsume_times=2)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m:
            await wait_for(lambda: len(m.assigned_queues()) >= 2)
            bad = await p.send(Message("T", b"bad", tags="t", keys="k-bad"))
            await p.send(Message("T", b"good", tags="t"))
            await wait_for(lambda: listener.bodies().count(b"bad") >= 3, timeout=600)
            await trio.sleep(120)  # a fourth delivery would come through the retry topic
            async with c.admin() as admin:
                dlq = await wait_for_route(admin, "%DLQ%g")
                stats = await admin.topic_status("%DLQ%g")
        assert listener.bodies().count(b"good") == 1
        deliveries = [x for x in listener.msgs if x.body == b"bad"]
        assert len(deliveries) == 3  # the original and max_reconsume_times retries
        assert [x.reconsume_times for x in deliveries] == [0, 1, 2]
        assert {x.msg_id for x in deliveries} == {bad.msg_id}
        assert all(x.topic == "T" for x in deliveries)  # retry topic reset to the original
        assert sum(o.maxOffset - o.minOffset for o in stats) == 1
        assert dlq.queueDatas


async def test_a_new_group_pulls_its_retry_topic_right_after_its_first_heartbeat(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The first heartbeat creates %RETRY%<group>; the route appears a moment later. The
    consumer finds it within a route poll (1 s), not at the next 20 s rebalance, so the first
    retry is consumed at its delay level, not 20 s late (the fresh-clone CI flake of
    system/test_delayed_retry_process.py)."""
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        # the broker's registration reaches the NameServer after the client's first route
        # query (a real broker sends its whole topic table; that takes a moment)
        c.net.set_delay("10.0.1.1", NS_HOST, 0.3)
        m = consumer(c, "fresh_group", Collector())
        started = trio.current_time()
        async with m:
            await wait_for(
                lambda: any(q.topic == "%RETRY%fresh_group" for q in m.assigned_queues())
            )
            took = trio.current_time() - started
        # one degraded-route poll (1 s) plus the rebalance's round trips
        assert took < 1.5, took


async def test_broadcasting_gives_everything_to_each_member(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=4)
        listeners = [Collector(), Collector()]
        members = [
            consumer(
                c,
                "bg",
                lst,
                message_model="BROADCASTING",
                consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                offset_store_path=str(tmp_path / f"member{i}" / "offsets.json"),
                run_blocking=inline_blocking,
            )
            for i, lst in enumerate(listeners)
        ]
        bodies = [f"m{i}".encode() for i in range(60)]
        async with members[0], members[1]:
            await wait_for(lambda: all(len(m.assigned_queues()) == 4 for m in members))
            async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
                await send_all(p, "T", bodies)
            await wait_for(lambda: all(len(lst.msgs) >= 60 for lst in listeners))
        for lst in listeners:
            assert sorted(lst.bodies()) == sorted(bodies)
        saved = json.loads((tmp_path / "member0" / "offsets.json").read_text())
        assert sum(e["offset"] for e in saved["offsetTable"]) == 60


async def test_ordered_sends_by_hash_land_in_one_queue_in_order(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=8)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            results = [
                await p.send(Message("T", f"o{i}".encode()), SelectMessageQueueByHash, "order-42")
                for i in range(30)
            ]
        queues = {r.message_queue for r in results}
        assert len(queues) == 1
        offsets = [r.queue_offset for r in results]
        assert offsets == sorted(offsets) == list(range(offsets[0], offsets[0] + 30))
        (mq,) = queues
        assert mq.queueId == abs(java_hash_code("order-42")) % 8
        pc = LitePullConsumer(
            "og", c.ns_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **c.kwargs()
        )
        pc.assign([mq])
        got: list[bytes] = []
        async with pc:
            while len(got) < 30:
                got.extend(m.body for m in await pc.poll(timeout=10))
        assert got == [f"o{i}".encode() for i in range(30)]


async def test_producer_retries_on_another_broker_when_one_is_down(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "T", queues=2)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            before = [await p.send(Message("T", b"x")) for _ in range(8)]
            assert {r.message_queue.brokerName for r in before} == {"broker-a", "broker-b"}
            # round robin: the first send after the crash goes to broker-a (it fails there
            # before the route refresh asked for by the closed connection drops broker-a)
            last = MessageQueue("T", "broker-b", 1)
            while (await p.send(Message("T", b"x"))).message_queue != last:
                pass
            c.crash_broker("broker-a")
            after = [await p.send(Message("T", f"y{i}".encode())) for i in range(20)]
            assert {r.message_queue.brokerName for r in after} == {"broker-b"}
            assert p.faults.is_available("broker-a", trio.current_time()) is False


async def test_batches_are_split_at_max_message_size_and_keep_their_order(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=1)
        cfg = ProducerConfig(producerGroup="pg", maxMessageSize=4000)
        async with Producer("pg", c.ns_addr, config=cfg, **c.kwargs()) as p:
            msgs = [Message("T", bytes([65 + i % 26]) * 300, keys=f"k{i}") for i in range(40)]
            results = await p.send_batch(msgs)
            one = await p.send_batch([Message("T", b"solo")])
        assert len(results) > 1
        ids = [i for r in results for i in r.msg_id.split(",")]
        assert len(set(ids)) == 40
        first = [r.queue_offset for r in results]
        assert first == sorted(first) and first[0] == 0
        assert one[0].queue_offset == 40
        pc = LitePullConsumer(
            "bg", c.ns_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **c.kwargs()
        )
        pc.assign([MessageQueue("T", "broker-a", 0)])
        got: list[MessageExt] = []
        async with pc:
            while len(got) < 41:
                got.extend(await pc.poll(timeout=10))
        assert [m.body for m in got] == [m.body for m in msgs] + [b"solo"]
        assert [m.msg_id for m in got[:40]] == ids
        assert got[7].keys == ["k7"]


async def test_unknown_topic_is_created_through_the_default_topic_route(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c, Producer("pg", c.ns_addr, **c.kwargs()) as p:
        r = await p.send(Message("Fresh", b"hello"))
        assert r.send_status is SendStatus.SEND_OK
        async with c.admin() as admin:
            route = await wait_for_route(admin, "Fresh")
        assert route.queueDatas[0].writeQueueNums == 4  # defaultTopicQueueNums
        await p.send_oneway(Message("Fresh", b"one way"))
        await trio.sleep(1)
        async with c.admin() as admin:
            status = await admin.topic_status("Fresh")
        assert sum(o.maxOffset for o in status) == 2


async def test_new_group_starts_at_zero_on_a_fresh_queue_and_filters_tags(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            for i in range(10):
                await p.send(Message("T", f"{i}".encode(), tags="a" if i % 2 else "b"))
        # CONSUME_FROM_LAST_OFFSET, yet the broker answers 0 for a queue whose min offset is 0
        listener = Collector()
        m = consumer(c, "late", listener, expr="a")
        async with m:
            await wait_for(lambda: len(listener.msgs) >= 5)
            await trio.sleep(6)  # one persistConsumerOffsetInterval
            async with c.admin() as admin:
                progress = await admin.consumer_progress("late", "T")
        assert sorted(listener.bodies()) == [b"1", b"3", b"5", b"7", b"9"]
        assert {x.tags for x in listener.msgs} == {"a"}
        # filtered-out messages count as done: nothing is left to consume
        assert progress.total_lag == 0
        assert progress.clients == [m.client.client_id]


async def test_lite_pull_subscribe_commit_and_seek(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            await send_all(p, "T", [f"m{i}".encode() for i in range(40)])
        pc = LitePullConsumer(
            "lg",
            c.ns_addr,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            auto_commit=False,
            **c.kwargs(),
        )
        pc.subscribe("T")
        got: list[MessageExt] = []
        async with pc:
            while len(got) < 40:
                got.extend(await pc.poll(timeout=10))
            assert await pc.poll(timeout=1) == []
            mq0 = MessageQueue("T", "broker-a", 0)
            # nothing committed yet: the broker answers 0 for a queue whose min offset is 0
            assert await pc.committed(mq0) == 0
            await pc.commit()
            in_q0 = sum(1 for m in got if m.queue_id == 0)
            assert in_q0 == 20  # round robin over the two queues
            assert await pc.committed(mq0) == in_q0
            await pc.seek(mq0, 15)
            again: list[MessageExt] = []
            while len(again) < 5:
                again.extend(await pc.poll(timeout=10))
            with pytest.raises(MQClientError, match="outside"):
                await pc.seek(mq0, 99)
        assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(40))
        assert [(m.queue_id, m.queue_offset) for m in again] == [(0, o) for o in range(15, 20)]
        # a new consumer of the group resumes at the committed offset (the seek was not committed)
        pc2 = LitePullConsumer("lg", c.ns_addr, **c.kwargs())
        pc2.subscribe("T")
        async with pc2:
            assert await pc2.poll(timeout=3) == []


async def test_async_sends_fail_over_and_time_out(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "T", queues=2)
        host = c.client_host()
        done: list[SendFuture] = []
        async with Producer("pg", c.ns_addr, **c.kwargs(host)) as p:
            warm = await send_all(p, "T", [b"w"] * 8)  # connections to both brokers
            assert {r.message_queue.brokerName for r in warm} == {"broker-a", "broker-b"}
            c.crash_broker("broker-a")
            futs = [
                await p.send_async(Message("T", f"f{i}".encode()), done.append) for i in range(50)
            ]
            results = [await f.wait() for f in futs]
            assert {r.message_queue.brokerName for r in results} == {"broker-b"}
            assert len(done) == 50 and all(f.done for f in done)

            # broker-b unreachable too: bytes are held, answers never come
            c.net.partition([host], [c.hosts["broker-b"]])
            t0 = trio.current_time()
            fut = await p.send_async(Message("T", b"late"))
            with pytest.raises(RemotingTimeout):
                await fut.wait()
            assert 3.0 <= trio.current_time() - t0 < 3.5  # sendMsgTimeout bounds all attempts
            c.net.heal()


async def test_failed_send_back_is_consumed_again_locally_without_skipping(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=1)
        seen: list[tuple[bytes, float]] = []
        attempts = 0

        def listener(msgs: list[MessageExt]) -> ConsumeStatus:
            nonlocal attempts
            for x in msgs:
                seen.append((x.body, trio.current_time()))
            if msgs[0].body == b"bad":
                attempts += 1
                if attempts < 3:
                    return ConsumeStatus.RECONSUME_LATER
            return ConsumeStatus.CONSUME_SUCCESS

        m = PushConsumer("g", c.ns_addr, **c.kwargs())
        m.subscribe("T")
        m.register_listener(listener)

        async def refuse(*_a: object, **_k: object) -> None:
            raise RemotingError("send-back refused (test)")

        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m:
            m.client.api.send_message_back = refuse  # type: ignore[method-assign]
            await wait_for(lambda: len(m.assigned_queues()) == 2)
            await p.send(Message("T", b"bad"))
            for i in range(5):
                await p.send(Message("T", f"ok{i}".encode()))
            await wait_for(lambda: len([b for b, _ in seen if b.startswith(b"ok")]) == 5)
            mq = MessageQueue("T", "broker-a", 0)
            assert m.offset_store is not None
            assert m.offset_store.table.read(mq) == 0  # "bad" (offset 0) is still pending
            await wait_for(lambda: attempts == 3)
            await trio.sleep(0.5)
            assert m.offset_store.table.read(mq) == 6
        times = [t for b, t in seen if b == b"bad"]
        assert len(times) == 3
        assert all(
            t2 - t1 > 5.0 - 1e-6 for t1, t2 in itertools.pairwise(times)
        )  # local retry delay


async def test_one_client_instance_shared_by_producer_and_consumers(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        kw = c.kwargs()
        shared_client = MQClientInstance(
            c.ns_addr, transport=kw["transport"], config=kw["client_config"]
        )
        async with shared_client as shared:
            listener = Collector()
            first = PushConsumer("g", c.ns_addr, client=shared)
            first.subscribe("T")
            first.register_listener(listener)
            twin = PushConsumer("g", c.ns_addr, client=shared)
            twin.subscribe("T")
            twin.register_listener(Collector())
            async with first, Producer("pg", c.ns_addr, client=shared) as p:
                with pytest.raises(MQClientError, match="already registered"):
                    await twin.start()
                await p.send(Message("T", b"after the twin"))
                await wait_for(lambda: listener.bodies() == [b"after the twin"])
                assert shared.consumers == {"g": first}
                assert shared.producer_groups == {"pg"}
            assert shared.consumers == {} and shared.producer_groups == set()


@pytest.mark.parametrize(
    "kind", ["async", "returns_awaitable", "sync_raises_once", "sync_empties_the_list"]
)
async def test_every_listener_kind_consumes_once_and_commits(
    tmp_path: Path, mock_clock: trio.testing.MockClock, kind: str
) -> None:
    """A plain function is called in the pull loop, a coroutine function by the workers; an
    awaitable result or a failure of a plain function is finished by a worker."""
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        got: list[MessageExt] = []
        raised = False

        def record(msgs: list[MessageExt]) -> ConsumeStatus:
            nonlocal raised
            got.extend(msgs)
            if kind == "sync_raises_once" and not raised and any(x.body == b"m3" for x in msgs):
                raised = True
                raise RuntimeError("listener failed (test)")
            if kind == "sync_empties_the_list":
                msgs.clear()  # the list is the listener's to keep or change
            return ConsumeStatus.CONSUME_SUCCESS

        async def later(msgs: list[MessageExt]) -> ConsumeStatus:
            await trio.sleep(0.01)
            return record(msgs)

        m = PushConsumer("g", c.ns_addr, consume_batch_size=4, **c.kwargs())
        m.subscribe("T")
        if kind == "async":
            m.register_listener(later)
        elif kind == "returns_awaitable":
            m.register_listener(lambda msgs: later(msgs))
        else:
            m.register_listener(record)
        assert m._inline is (kind != "async")
        bodies = [f"m{i}".encode() for i in range(40)]
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m:
            await wait_for(lambda: len(m.assigned_queues()) >= 2)
            await send_all(p, "T", bodies)
            await wait_for(lambda: {x.body for x in got} == set(bodies))
            await trio.sleep(30)  # a retried message comes back through the retry topic
            assert m.offset_store is not None
            committed = sum(
                m.offset_store.table.read(mq) for mq in m.assigned_queues() if mq.topic == "T"
            )
        assert committed == 40
        redelivered = [x for x in got if x.reconsume_times > 0]
        if kind == "sync_raises_once":
            # the whole failed batch went back through the retry topic, shown as topic T
            assert redelivered and {x.topic for x in redelivered} == {"T"}
            assert b"m3" in {x.body for x in redelivered}
            assert len(got) == 40 + len(redelivered)
        else:
            assert sorted(x.body for x in got) == sorted(bodies)


@pytest.mark.parametrize("kind", ["producer", "push_consumer"])
async def test_a_client_cancelled_from_outside_shuts_down_cleanly(
    tmp_path: Path, mock_clock: trio.testing.MockClock, kind: str
) -> None:
    """Cancelling the task that uses a client (a timeout around it, a supervisor stopping it)
    exits the client's own MQClientInstance too: before, its nursery's exit raised the
    cancellation and the client below it was never exited, which corrupts Trio's nursery stack
    (RuntimeError "Nursery stack corrupted"; found by the cluster simulation, seed 1)."""
    async with cluster(tmp_path) as c:
        client: Producer | PushConsumer
        if kind == "producer":
            client = Producer("PG", c.ns_addr, **c.kwargs())
        else:
            client = consumer(c, "CG", Collector())
        with trio.move_on_after(1) as scope:
            async with client:
                await trio.sleep_forever()
        assert scope.cancelled_caught
