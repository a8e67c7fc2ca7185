"""The orderly push consumer against a real NameServer and Broker (SimNetwork, MockClock).

An order-sensitive workload: messages "<key>:<seq>" sent per key in sequence, hashed to a
queue by key (SelectMessageQueueByHash). One `OrderChecker` is shared by every member of the
group: it records, per queue, how many listener calls run at once (never more than one, across
members too) and, per key, the sequence numbers in consumption order (strictly 0, 1, 2 ...
when members join and leave gracefully; after a crash a key may rewind to a committed offset
and then re-run contiguously, at-least-once)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from rocketrio.actors.client.admin import wait_for_route
from rocketrio.actors.client.config_admin import update_broker_config
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from rocketrio.actors.client.orderly_consumer import OrderlyPushConsumer
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.queue_select import SelectMessageQueueByHash
from rocketrio.protocol.message import MessageExt
from rocketrio.protocol.running_info import PROP_CONSUME_ORDERLY
from tests.harness.clients import Cluster, cluster, create_topic, wait_for

SUCCESS = ConsumeOrderlyStatus.SUCCESS
SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
Listener = Callable[[list[MessageExt], ConsumeOrderlyContext], Awaitable[ConsumeOrderlyStatus]]


@attrs.define
class Seen:
    at: float
    member: str
    queue: int
    key: str
    seq: int
    reconsume_times: int


@attrs.define
class OrderChecker:
    inflight: dict[int, int] = attrs.field(factory=lambda: defaultdict(int))
    max_inflight: int = 0
    seen: list[Seen] = attrs.field(factory=list)
    # (key, seq) -> answers to give before SUCCESS, e.g. [SUSPEND, SUSPEND]
    script: dict[tuple[str, int], list[ConsumeOrderlyStatus]] = attrs.field(factory=dict)
    hold: dict[tuple[str, int], trio.Event] = attrs.field(factory=dict)
    work_s: float = 0.01

    def listener(self, member: str) -> Listener:
        async def consume(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> Any:
            q = ctx.message_queue.queueId
            self.inflight[q] += 1
            self.max_inflight = max(self.max_inflight, self.inflight[q])
            try:
                status = SUCCESS
                for m in msgs:
                    key, seq = m.body.decode().split(":")
                    now = trio.current_time()
                    self.seen.append(Seen(now, member, q, key, int(seq), m.reconsume_times))
                    gate = self.hold.get((key, int(seq)))
                    if gate is not None:
                        await gate.wait()
                    answers = self.script.get((key, int(seq)))
                    if answers:
                        status = answers.pop(0)
                await trio.sleep(self.work_s)  # a listener that takes time: overlaps would show
                return status
            finally:
                self.inflight[q] -= 1

        return consume

    def seqs(self, key: str) -> list[int]:
        return [s.seq for s in self.seen if s.key == key]

    def count(self) -> int:
        return len({(s.key, s.seq) for s in self.seen})


def assert_key_order(seqs: list[int], total: int, *, allow_rewind: bool) -> None:
    """0, 1, 2 ... total-1; with ``allow_rewind`` a key may go back (a re-delivery from the
    committed offset) but then continues one by one: never a skip, never a swap."""
    assert seqs and seqs[0] == 0, seqs
    for a, b in pairwise(seqs):
        assert b == a + 1 or (allow_rewind and b <= a), f"{a} then {b} in {seqs}"
    assert set(seqs) == set(range(total)), seqs


def orderly(
    c: Cluster, group: str, listener: Listener, host: str | None = None, **kw: Any
) -> OrderlyPushConsumer:
    m = OrderlyPushConsumer(group, c.ns_addr, **c.kwargs(host), **kw)
    m.subscribe("T", "*")
    m.register_listener(listener)
    return m


def owned(m: OrderlyPushConsumer) -> set[int]:
    return {mq.queueId for mq in m.assigned_queues() if mq.topic == "T"}


async def produce(p: Producer, keys: list[str], total: int, pause_s: float = 0.1) -> None:
    for seq in range(total):
        for key in keys:
            await p.send(Message("T", f"{key}:{seq}".encode()), SelectMessageQueueByHash, key)
        await trio.sleep(pause_s)


KEYS = [f"order-{i}" for i in range(8)]


async def test_members_join_and_leave_without_overlap_or_reordering(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    total = 120
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=4)
        checker = OrderChecker()
        m1 = orderly(c, "og", checker.listener("m1"))
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m1:
            await wait_for(lambda: owned(m1) == {0, 1, 2, 3})
            async with trio.open_nursery() as n:
                n.start_soon(produce, p, KEYS, total)
                await trio.sleep(2)
                m2 = orderly(c, "og", checker.listener("m2"))
                async with m2:
                    await wait_for(lambda: len(owned(m1)) == len(owned(m2)) == 2)
                    assert owned(m1).isdisjoint(owned(m2))
                    await trio.sleep(4)
                # m2 left (shutdown: last batch, commit, unlock): m1 takes everything again
                await wait_for(lambda: owned(m1) == {0, 1, 2, 3})
                m3 = orderly(c, "og", checker.listener("m3"))
                async with m3:
                    await wait_for(lambda: len(owned(m3)) == 2)
                    await trio.sleep(3)
            await wait_for(lambda: checker.count() == total * len(KEYS))
            await trio.sleep(3)  # a duplicate would show up now
    assert checker.max_inflight == 1
    for key in KEYS:
        assert_key_order(checker.seqs(key), total, allow_rewind=False)
    assert {s.member for s in checker.seen} == {"m1", "m2", "m3"}
    assert len(checker.seen) == total * len(KEYS)  # graceful hand-over: no duplicates


async def test_crashed_member_queues_wait_for_the_broker_lock_expiry(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    total = 60
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=4)
        checker = OrderChecker()
        m1 = orderly(c, "og", checker.listener("m1"))
        m2_host = c.client_host()
        m2 = orderly(c, "og", checker.listener("m2"), host=m2_host)
        crash = trio.CancelScope()
        m2_queues: set[int] = set()
        last_renewal = 0.0

        async def run_m2() -> None:
            with crash:
                async with m2:
                    await trio.sleep_forever()

        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m1:
            async with trio.open_nursery() as n:
                n.start_soon(run_m2)
                await wait_for(lambda: len(owned(m1)) == len(owned(m2)) == 2)
                n.start_soon(produce, p, KEYS, total, 0.5)
                await trio.sleep(25)  # past a renewal round
                m2_queues = owned(m2)
                last_renewal = max(st.pq.last_lock_at_s for st in m2.queues.values())  # type: ignore[attr-defined]
                crashed_at = trio.current_time()
                crash.cancel()  # like kill -9: no commit, no unlock
                c.net.crash(m2_host)
            await wait_for(lambda: checker.count() == total * len(KEYS), timeout=300)
    assert checker.max_inflight == 1
    for key in KEYS:
        assert_key_order(checker.seqs(key), total, allow_rewind=True)
    taken = [s for s in checker.seen if s.member == "m1" and s.queue in m2_queues]
    after = [s.at for s in taken if s.at > crashed_at]
    # m1 owns the crashed member's queues at once, but consumes them only once the broker
    # lets the lock go: rebalanceLockMaxLiveTime (60 s) after m2's last renewal
    assert after and min(after) >= last_renewal + 60
    assert min(after) < last_renewal + 60 + 5


async def test_a_shorter_broker_lock_expiry_set_live_frees_a_crashed_members_queues_sooner(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        async with c.admin() as admin:
            remark = await update_broker_config(
                admin, c.addr("broker-a"), {"rebalanceLockMaxLiveTime": "10000"}
            )
        assert remark is None or remark.startswith("applied to the running broker")
        checker = OrderChecker()
        m1 = orderly(c, "og", checker.listener("m1"))
        m2_host = c.client_host()
        m2 = orderly(c, "og", checker.listener("m2"), host=m2_host)
        crash = trio.CancelScope()

        async def run_m2() -> None:
            with crash:
                async with m2:
                    await trio.sleep_forever()

        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m1:
            async with trio.open_nursery() as n:
                n.start_soon(run_m2)
                await wait_for(lambda: len(owned(m1)) == len(owned(m2)) == 1)
                await trio.sleep(1.5)  # the first renewal round
                last = max(st.pq.last_lock_at_s for st in m2.queues.values())  # type: ignore[attr-defined]
                crash.cancel()
                c.net.crash(m2_host)
            await wait_for(lambda: owned(m1) == {0, 1})
            await produce(p, KEYS, 5, 0.0)
            await wait_for(lambda: checker.count() == 5 * len(KEYS))
        assert max(s.at for s in checker.seen) < last + 10 + 5  # not the default 60 s


async def test_suspend_puts_the_batch_back_and_retries_it_before_anything_newer(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        checker = OrderChecker(script={("k", 3): [SUSPEND, SUSPEND]})
        m = orderly(c, "og", checker.listener("m"))
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m:
            await wait_for(lambda: len(owned(m)) == 2)
            await produce(p, ["k"], 8, 0.0)
            await wait_for(lambda: checker.count() == 8)
            await trio.sleep(3)
    assert checker.seqs("k") == [0, 1, 2, 3, 3, 3, 4, 5, 6, 7]
    tries = [s for s in checker.seen if s.seq == 3]
    assert [s.reconsume_times for s in tries] == [0, 1, 2]
    # suspendCurrentQueueTimeMillis (1 s) between the tries
    assert all(b.at - a.at >= 1.0 for a, b in pairwise(tries))


async def test_max_reconsume_times_sends_the_message_to_the_dlq_and_moves_on(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        checker = OrderChecker(script={("k", 2): [SUSPEND] * 100})
        m = orderly(c, "og", checker.listener("m"), max_reconsume_times=2)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m:
            await wait_for(lambda: len(owned(m)) == 2)
            await produce(p, ["k"], 5, 0.0)
            await wait_for(lambda: checker.count() == 5)
            await trio.sleep(10)
            async with c.admin() as admin:
                await wait_for_route(admin, "%DLQ%og")
                stats = await admin.topic_status("%DLQ%og")
    assert checker.seqs("k") == [0, 1, 2, 2, 2, 3, 4]
    assert [s.reconsume_times for s in checker.seen if s.seq == 2] == [0, 1, 2]
    assert sum(o.maxOffset - o.minOffset for o in stats) == 1


async def test_a_lock_not_renewed_for_30s_stops_consumption_until_it_is_granted_again(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=1)
        release = trio.Event()
        checker = OrderChecker(hold={("k", 1): release})
        host = c.client_host()
        m = orderly(c, "og", checker.listener("m"), host=host)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m:
            await wait_for(lambda: len(owned(m)) == 1)
            await produce(p, ["k"], 10, 0.0)
            st = next(st for mq, st in m.queues.items() if mq.topic == "T")
            await wait_for(lambda: st.pq.msg_count == 9)  # 1..9 pulled, 1 in the listener
            # the client can no longer reach the broker: no renewal succeeds from now on
            c.net.isolate(host, [c.hosts["broker-a"], "10.0.0.1"])
            cut_at = trio.current_time()
            await trio.sleep(35)
            release.set()  # batch 1 ends; the lock expired on the client meanwhile
            await trio.sleep(30)
            assert checker.seqs("k") == [0, 1]
            assert trio.current_time() - cut_at > 60
            c.net.heal()
            await wait_for(lambda: checker.count() == 10)
    assert checker.seqs("k") == list(range(10))
    assert checker.max_inflight == 1


async def test_a_queue_changes_hands_only_after_the_old_owners_batch_and_commit(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Slow batches (3 s) and a slow link from the old owner to the broker (0.7 s each way):
    the newcomer asks for the lock every second, so it would get it inside the old owner's
    batch, or between its unlock and its offset commit, if the hand-over allowed either."""
    total = 6
    keys = [f"order-{i}" for i in range(4)]
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        checker = OrderChecker(work_s=3.0)
        m1_host = c.client_host()
        m1 = orderly(c, "og", checker.listener("m1"), host=m1_host)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m1:
            await wait_for(lambda: owned(m1) == {0, 1})
            await produce(p, keys, total, 0.0)
            await trio.sleep(4)  # m1 is inside a batch of each queue
            c.net.set_delay(m1_host, c.hosts["broker-a"], 0.7)
            m2 = orderly(c, "og", checker.listener("m2"))
            async with m2:
                await wait_for(lambda: len(owned(m2)) == 1, timeout=300)
                await wait_for(lambda: checker.count() == total * len(keys), timeout=600)
                await trio.sleep(5)
    assert checker.max_inflight == 1
    for key in keys:
        assert_key_order(checker.seqs(key), total, allow_rewind=False)
    assert {s.member for s in checker.seen} == {"m1", "m2"}
    assert len(checker.seen) == total * len(keys)  # nothing consumed twice


async def test_a_queue_locked_by_another_client_is_neither_pulled_nor_consumed(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=1)
        checker = OrderChecker()
        host = c.client_host()
        m = orderly(c, "og", checker.listener("m"), host=host)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m, c.admin() as admin:
            await wait_for(lambda: owned(m) == {0})
            await produce(p, ["k"], 5, 0.0)
            await wait_for(lambda: checker.count() == 5)
            (mq,) = [q for q in m.queues if q.topic == "T"]
            # m is cut off for longer than the broker keeps its lock; another client takes it
            c.net.isolate(host, [c.hosts["broker-a"], "10.0.0.1"])
            await trio.sleep(65)
            addr = c.addr("broker-a")
            assert await admin.api.lock_batch_mq(addr, "og", "intruder@x", [mq]) == [mq]
            c.net.heal()
            for seq in range(5, 10):
                await p.send(Message("T", f"k:{seq}".encode()), SelectMessageQueueByHash, "k")
            await trio.sleep(25)  # a renewal round: the broker refuses m the lock
            st = m.queues[mq]
            assert st.pq.msg_count == 0  # not even pulled
            assert checker.seqs("k") == list(range(5))
            info = m.consumer_running_info()
            assert info.properties[PROP_CONSUME_ORDERLY] == "true"
            assert info.mqTable[mq].locked is False
            await admin.api.unlock_batch_mq(addr, "og", "intruder@x", [mq])
            await wait_for(lambda: checker.count() == 10, timeout=120)
            assert m.consumer_running_info().mqTable[mq].locked is True
    assert checker.seqs("k") == list(range(10))
