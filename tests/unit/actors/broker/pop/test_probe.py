"""The POP probes' core (`PopProbe`, pop/probe.py) with fake tables and a fake queue reader:
the checks in upstream's order with its codes; NOTIFICATION's look (the group's pop offset or
the queue's min, the pop retry topics, an ordered request's blocked queue) and its hold on
MockClock (answered True on an arrival, False at bornTime + pollTime, False when the hold
service is full); PEEK_MESSAGE's reads (nothing committed, the retry topic first on a draw that
is a multiple of 5, a read again from the store's next offset); the hold service's count of held
POPs per polling key (POLLING_INFO)."""

from __future__ import annotations

import random
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from rocketrio.actors.broker.dispatch.long_poll import Held
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.pop.attempt import PopConfig
from rocketrio.actors.broker.pop.hold import PopLongPollingService
from rocketrio.actors.broker.pop.probe import Peeked, PopProbe
from rocketrio.protocol.bodies import PERM_READ, PERM_WRITE
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.pop_extra_info import pop_retry_topic_v1, pop_retry_topic_v2
from rocketrio.protocol.pop_probe_headers import (
    NotificationRequestHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
)
from rocketrio.storage.message_store import GetMessageStatus, GetResult

T, G = "T", "G"
RETRY1, RETRY2 = pop_retry_topic_v1(T, G), pop_retry_topic_v2(T, G)
RW = PERM_READ | PERM_WRITE


@attrs.define
class Topic:
    readQueueNums: int
    perm: int = RW


@attrs.define
class Group:
    consumeEnable: bool = True


class Tables:
    """Topics, groups and offsets at once (each probe reads one table of each)."""

    def __init__(self) -> None:
        self.topics: dict[str, Topic] = {T: Topic(2)}
        self.groups: dict[str, Group] = {G: Group()}
        self.committed: dict[tuple[str, str, int], int] = {}

    def select(self, topic: str) -> Topic | None:
        return self.topics.get(topic)

    def find_group(self, group: str) -> Group | None:
        return self.groups.get(group)

    def query(self, group: str, topic: str, queue_id: int) -> int:
        return self.committed.get((group, topic, queue_id), -1)


class Store:
    """Queues as (min, max) offsets; a read returns one record per offset."""

    def __init__(self) -> None:
        self.ranges: dict[tuple[str, int], tuple[int, int]] = {}
        self.reads: list[tuple[str, int, int, int]] = []
        self.too_small: set[tuple[str, int]] = set()

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        return self.ranges.get((topic, queue_id), (0, 0))[0]

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        return self.ranges.get((topic, queue_id), (0, 0))[1]

    def pop_queue_ids(self, topic: str, read_queue_nums: int) -> range:
        return range(read_queue_nums)

    def valid_queue(self, topic: str, queue_id: int, read_queue_nums: int) -> bool:
        return 0 <= queue_id < read_queue_nums

    async def read_messages(
        self, topic: str, queue_id: int, offset: int, max_count: int, max_bytes: int
    ) -> GetResult:
        self.reads.append((topic, queue_id, offset, max_count))
        lo, hi = self.ranges.get((topic, queue_id), (0, 0))
        if (topic, queue_id) in self.too_small:
            self.too_small.discard((topic, queue_id))
            return GetResult(GetMessageStatus.OFFSET_TOO_SMALL, lo, lo, hi)
        got = [
            f"{topic}/{queue_id}/{o}".encode() for o in range(offset, min(hi, offset + max_count))
        ]
        status = GetMessageStatus.FOUND if got else GetMessageStatus.NO_MESSAGE_IN_QUEUE
        return GetResult(status, offset + len(got), lo, hi, got, len(got))


class Order:
    def __init__(self) -> None:
        self.blocked_queues: set[int] = set()

    def blocked(
        self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible: int
    ) -> bool:
        return queue_id in self.blocked_queues


class Draws(random.Random):
    """A random source whose ``randrange`` returns the given draws in turn."""

    def __init__(self, *draws: int) -> None:
        super().__init__(0)
        self.draws = list(draws)

    def randrange(self, *_: Any, **__: Any) -> int:  # type: ignore[override]
        return self.draws.pop(0) if self.draws else 1


@attrs.define
class Waiter:
    outcomes: list[Any] = attrs.field(factory=list)
    gone: bool = False
    owner: object = None

    def deliver(self, outcome: Any) -> None:
        self.outcomes.append(outcome)


def make(
    *draws: int, max_held: int = 10, v2: bool = False, permission: int = RW
) -> tuple[PopProbe, Tables, Store, Order]:
    tables, store, order = Tables(), Store(), Order()
    config = PopConfig("b", "c", permission, "1.2.3.4", enable_retry_topic_v2=v2)
    probe = PopProbe(
        config,
        topics=tables,  # type: ignore[arg-type]
        groups=tables,  # type: ignore[arg-type]
        offsets=tables,  # type: ignore[arg-type]
        store=store,  # type: ignore[arg-type]
        pops=PopLongPollingService(max_held),
        notifications=PopLongPollingService(max_held),
        order=order,  # type: ignore[arg-type]
        now_ms=lambda: 1_000_000 + int(trio.current_time() * 1000),
        rng=Draws(*draws),
    )
    return probe, tables, store, order


def note(queue_id: int = 0, poll: int = 0, **kw: Any) -> NotificationRequestHeader:
    return NotificationRequestHeader(G, T, queue_id, poll, kw.pop("born", None), **kw)


# ------------------------------------------------------------------ the checks


def test_checks_in_upstreams_order_with_its_codes() -> None:
    probe, tables, _, _ = make(permission=PERM_WRITE)
    assert probe.check(note()) == Refusal(
        ResponseCode.NO_PERMISSION, "the broker[1.2.3.4] peeking message is forbidden"
    )
    probe, tables, _, _ = make()
    assert probe.check(note()) is None
    assert probe.check(PollingInfoRequestHeader(G, T, -1)) is None  # every queue
    bad = [
        (PollingInfoRequestHeader(G, "X", 0), ResponseCode.TOPIC_NOT_EXIST),
        (PollingInfoRequestHeader(G, T, 2), ResponseCode.SYSTEM_ERROR),
        (PollingInfoRequestHeader("H", T, 0), ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
    ]
    for h, code in bad:
        refusal = probe.check(h)
        assert refusal is not None and refusal.code == code, h
    tables.groups[G].consumeEnable = False
    assert probe.check(note()) == Refusal(
        ResponseCode.NO_PERMISSION, "subscription group no permission, G"
    )
    tables.topics[T].perm = PERM_WRITE  # the topic's perm is judged before the group
    assert probe.check(note()) == Refusal(
        ResponseCode.NO_PERMISSION, "the topic[T] peeking message is forbidden"
    )


# ------------------------------------------------------------------ NOTIFICATION's look


def test_has_message_from_the_pop_offset_or_the_queues_min() -> None:
    probe, tables, store, _ = make()
    store.ranges[(T, 0)] = (3, 5)
    assert probe.has_message(note(0))  # no offset: from the min, 2 left
    tables.committed[(G, T, 0)] = 5
    assert not probe.has_message(note(0))
    assert not probe.has_message(note(1))
    store.ranges[(T, 1)] = (0, 1)
    assert probe.has_message(note(-1))  # every queue


@pytest.mark.parametrize("draw", [0, 1])  # retry first (a multiple of 5), or after the topic
def test_has_message_in_the_pop_retry_topic(draw: int) -> None:
    probe, tables, store, _ = make(draw)
    tables.topics[RETRY1] = Topic(1)
    store.ranges[(RETRY1, 0)] = (0, 1)
    assert probe.has_message(note(0))
    probe, tables, store, _ = make(draw, v2=True)  # v2 names, and v1 still read
    tables.topics[RETRY2] = Topic(1)
    tables.topics[RETRY1] = Topic(1)
    store.ranges[(RETRY1, 0)] = (0, 1)
    assert probe.has_message(note(0))


def test_an_ordered_requests_blocked_queue_counts_as_empty() -> None:
    probe, _, store, order = make()
    store.ranges[(T, 0)] = (0, 3)
    order.blocked_queues.add(0)
    assert not probe.has_message(note(0, order=True))
    assert probe.has_message(note(0))  # not ordered: not judged by the order state


# ------------------------------------------------------------------ NOTIFICATION held


async def test_held_notification_answered_true_on_arrival(
    mock_clock: trio.testing.MockClock,
) -> None:
    probe, _, store, _ = make()
    service, w = probe.notifications, Waiter()
    async with trio.open_nursery() as n:
        await n.start(service.run)
        assert await probe.notification(note(0, 20_000), w) is None
        assert service.count == 1
        store.ranges[(T, 1)] = (0, 1)  # another queue: re-checked, still held
        service.notify_arrivals({(T, 1): 1})
        await trio.sleep(1)
        assert w.outcomes == [] and service.count == 1
        store.ranges[(T, 0)] = (0, 1)
        service.notify_arrivals({(T, 0): 1})
        await trio.sleep(0.001)
        assert w.outcomes == [True] and service.count == 0
        n.cancel_scope.cancel()


async def test_held_notification_woken_by_its_retry_topic(
    mock_clock: trio.testing.MockClock,
) -> None:
    probe, tables, store, _ = make()
    service, w = probe.notifications, Waiter()
    async with trio.open_nursery() as n:
        await n.start(service.run)
        assert await probe.notification(note(0, 20_000), w) is None
        tables.topics[RETRY1] = Topic(1)
        store.ranges[(RETRY1, 0)] = (0, 1)
        service.notify_arrivals({(RETRY1, 0): 1})
        await trio.sleep(0.001)
        assert w.outcomes == [True]
        n.cancel_scope.cancel()


async def test_held_notification_answered_false_at_born_plus_poll(
    mock_clock: trio.testing.MockClock,
) -> None:
    probe, _, _, _ = make()
    service, w = probe.notifications, Waiter()
    async with trio.open_nursery() as n:
        await n.start(service.run)
        born = probe.now_ms() - 2_000  # sent 2 s ago: 3 s of its 5 s left
        assert await probe.notification(note(0, 5_000, born=born), w) is None
        await trio.sleep(2.999)
        assert w.outcomes == []
        await trio.sleep(0.002)
        assert w.outcomes == [False] and service.count == 0
        n.cancel_scope.cancel()


async def test_notification_not_held(mock_clock: trio.testing.MockClock) -> None:
    probe, _, store, _ = make(max_held=1)
    w = Waiter()
    assert await probe.notification(note(0, 0), w) is False  # no pollTime
    born = probe.now_ms() - 5_000
    assert await probe.notification(note(0, 5_000, born=born), w) is False  # expired
    assert await probe.notification(note(0, 5_000), w) is None
    assert await probe.notification(note(0, 5_000), w) is False  # the service is full
    probe.notifications.stop_holding()
    probe.notifications.max_held = 10
    assert await probe.notification(note(0, 5_000), w) is False  # shutting down
    store.ranges[(T, 0)] = (0, 1)
    assert await probe.notification(note(0, 5_000), w) is True
    refused = await probe.notification(NotificationRequestHeader(G, "X", 0, 5_000), w)
    assert isinstance(refused, Refusal) and refused.code == ResponseCode.TOPIC_NOT_EXIST


# ------------------------------------------------------------------ PEEK_MESSAGE


async def test_peek_reads_and_commits_nothing() -> None:
    probe, tables, store, _ = make(1, 1)
    store.ranges[(T, 0)] = (2, 6)
    tables.committed[(G, T, 1)] = 0
    store.ranges[(T, 1)] = (0, 1)
    peeked = await probe.peek(PeekMessageRequestHeader(T, -1, 3, G))
    # from queue 1 (the random start) at its offset, then queue 0 from its min
    assert peeked == Peeked((b"T/1/0", b"T/0/2", b"T/0/3"), 5)
    assert tables.committed == {(G, T, 1): 0}
    again = await probe.peek(PeekMessageRequestHeader(T, 0, 32, G))
    assert isinstance(again, Peeked) and len(again.buffers) == 4 and again.rest == 4


async def test_peek_reads_the_retry_topic_first_on_a_multiple_of_5() -> None:
    probe, tables, store, _ = make(5)
    tables.topics[RETRY1] = Topic(1)
    store.ranges[(RETRY1, 0)] = (0, 2)
    store.ranges[(T, 0)] = (0, 2)
    peeked = await probe.peek(PeekMessageRequestHeader(T, 0, 3, G))
    assert isinstance(peeked, Peeked)
    assert peeked.buffers == (f"{RETRY1}/0/0".encode(), f"{RETRY1}/0/1".encode(), b"T/0/0")
    assert peeked.rest == 4
    probe, tables, store, _ = make(1)  # otherwise after the topic, when it gave too few
    tables.topics[RETRY1] = Topic(1)
    store.ranges[(RETRY1, 0)] = (0, 2)
    store.ranges[(T, 0)] = (0, 2)
    peeked = await probe.peek(PeekMessageRequestHeader(T, 0, 3, G))
    assert isinstance(peeked, Peeked)
    assert peeked.buffers == (b"T/0/0", b"T/0/1", f"{RETRY1}/0/0".encode())


async def test_peek_reads_again_from_the_next_offset_and_refuses_as_upstream() -> None:
    probe, tables, store, _ = make()
    store.ranges[(T, 0)] = (4, 6)
    tables.committed[(G, T, 0)] = 1  # behind the store's min
    store.too_small.add((T, 0))
    peeked = await probe.peek(PeekMessageRequestHeader(T, 0, 32, G))
    assert isinstance(peeked, Peeked) and peeked.buffers == (b"T/0/4", b"T/0/5")
    assert [r[2] for r in store.reads] == [1, 4] and tables.committed[(G, T, 0)] == 1
    assert await probe.peek(PeekMessageRequestHeader(T, 0, 0, G)) == Peeked((), 5)
    refused = await probe.peek(PeekMessageRequestHeader(T, 9, 32, G))
    assert isinstance(refused, Refusal) and refused.code == ResponseCode.SYSTEM_ERROR


# ------------------------------------------------------------------ POLLING_INFO


async def test_polling_info_counts_held_pops_per_key(mock_clock: trio.testing.MockClock) -> None:
    probe, _, _, _ = make(max_held=3)
    pops = probe.pops

    async def never(held: Held, final: bool) -> Any:
        return "timeout" if final else None

    def held(deadline: float) -> Held:
        return Held(Waiter(), None, T, (T,), deadline, never, lambda e: None)

    async with trio.open_nursery() as n:
        await n.start(pops.run)
        assert pops.suspend(held(1.0), (T, G, 0))
        assert pops.suspend(held(2.0), (T, G, 0))
        assert pops.suspend(held(2.0))  # not counted under any key
        assert not pops.suspend(held(2.0), (T, G, 0))  # full: not counted
        assert probe.polling_info(PollingInfoRequestHeader(G, T, 0)) == 2
        assert probe.polling_info(PollingInfoRequestHeader(G, T, 1)) == 0
        assert probe.polling_info(PollingInfoRequestHeader(G, T, -1)) == 0
        await trio.sleep(1.5)
        assert probe.polling_info(PollingInfoRequestHeader(G, T, 0)) == 1
        await trio.sleep(1)
        assert probe.polling_info(PollingInfoRequestHeader(G, T, 0)) == 0
        n.cancel_scope.cancel()
    refused = probe.polling_info(PollingInfoRequestHeader("H", T, 0))
    assert isinstance(refused, Refusal)
    assert refused.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
