"""The ordered-POP core (actors/broker/pop/order.py, upstream ConsumerOrderInfoManager): blocks,
commits, delivery counts, attempt ids, invisible-time changes, cleaning, consumerOrderInfo.json's
shape and the orderCountInfo text; and, with hypothesis, a queue popped, acked, changed and
left to expire in any order: no message is handed out while an earlier batch has an
unacknowledged, still invisible message, a batch always starts at the first message not yet
acknowledged, and a consumer that then acks what it gets receives every message in order."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.pop.order import (
    CLEAN_AFTER_MS,
    ILLEGAL,
    NO_COMMIT,
    ConsumerOrderInfoManager,
    ConsumerOrderInfoWrapper,
)
from rocketrio.protocol.pop_extra_info import (
    order_count_entry,
    order_count_of,
    parse_order_count_info,
)
from rocketrio.protocol.serde import from_json, to_json

T, G, Q = "T", "G", 0


def popped(m: ConsumerOrderInfoManager, offsets: list[int], at: int, inv: int = 1000, a=None):  # type: ignore[no-untyped-def]
    return m.update(a, T, G, Q, at, inv, offsets, at)


def test_blocks_until_every_message_is_acked_then_commits_the_first_unacked() -> None:
    m = ConsumerOrderInfoManager()
    assert not m.check_block(None, T, G, Q, 1000, 0)
    popped(m, [5, 6, 7], at=100)
    assert m.check_block(None, T, G, Q, 1000, 100)
    assert m.commit_and_next(T, G, Q, 6, 100, committed=5) == 5  # 5 still in flight
    assert m.check_block(None, T, G, Q, 1000, 500)
    assert m.commit_and_next(T, G, Q, 5, 100, committed=5) == 7
    assert m.commit_and_next(T, G, Q, 7, 100, committed=7) == 8
    assert not m.check_block(None, T, G, Q, 1000, 500)
    assert m.blocked_until(T, G, Q, 500) is None


def test_block_ends_with_the_invisible_time_of_the_last_unacked_message() -> None:
    m = ConsumerOrderInfoManager()
    popped(m, [0, 1], at=1000, inv=2000)
    assert m.check_block(None, T, G, Q, 2000, 2999)
    assert not m.check_block(None, T, G, Q, 2000, 3000)
    assert m.update_next_visible_time(T, G, Q, 1, 1000, 9000)
    assert m.blocked_until(T, G, Q, 3000) == 9000
    assert m.check_block(None, T, G, Q, 2000, 8999)
    m.commit_and_next(T, G, Q, 1, 1000, committed=0)  # the extended one acked: 0 expired
    assert not m.check_block(None, T, G, Q, 2000, 3000)
    # a receipt of another pop time changes nothing
    assert not m.update_next_visible_time(T, G, Q, 0, 999, 99_999)


def test_stale_and_foreign_acks() -> None:
    m = ConsumerOrderInfoManager()
    popped(m, [3, 4], at=10)
    assert m.commit_and_next(T, G, Q, 4, 9, committed=3) == NO_COMMIT  # older pop time
    assert m.commit_and_next(T, G, Q, 9, 10, committed=3) == ILLEGAL  # not in the batch
    assert m.check_block(None, T, G, Q, 1000, 11)
    # without order info only the committed offset's own ACK moves it (never past others)
    empty = ConsumerOrderInfoManager()
    assert empty.commit_and_next(T, G, Q, 3, 10, committed=3) == 4
    assert empty.commit_and_next(T, G, Q, 5, 10, committed=3) == NO_COMMIT


def test_delivery_counts_and_attempt_ids() -> None:
    m = ConsumerOrderInfoManager()
    first = popped(m, [0, 1, 2], at=0, a="a1")
    assert first.by_offset == {} and first.min_count == 0
    # the same attempt (a retried receive) is let through and not counted again
    assert not m.check_block("a1", T, G, Q, 1000, 1)
    assert m.check_block("a2", T, G, Q, 1000, 1)
    assert popped(m, [0, 1, 2], at=1, a="a1").by_offset == {}
    again = popped(m, [0, 1, 2], at=2000, a="a2")
    assert again.by_offset == {0: 1, 1: 1, 2: 1} and again.min_count == 1
    m.commit_and_next(T, G, Q, 0, 2000, committed=0)
    third = popped(m, [1, 2, 3], at=4000, a="a3")
    assert third.by_offset == {1: 2, 2: 2} and third.min_count == 0  # 3 is new


def test_order_count_info_text_is_upstreams() -> None:
    text = order_count_entry("T", 2, {7: 1, 5: 2}, 0)
    assert text == "0 qo2%5 2;0 qo2%7 1;0 2 0"
    retry = order_count_entry("%RETRY%G_T", 0, {}, 3)
    assert retry == "1 0 3"
    counts = parse_order_count_info(text + ";" + retry)
    assert order_count_of(counts, "T", 2, 5) == 2
    assert order_count_of(counts, "T", 2, 6) == 0  # its queue's least count
    assert order_count_of(counts, "%RETRY%G_T", 0, 9) == 3


def test_file_shape_is_upstreams_and_round_trips() -> None:
    m = ConsumerOrderInfoManager()
    popped(m, [10, 12, 15], at=1000, inv=30_000, a="x")
    popped(m, [10, 12, 15], at=40_000, inv=30_000, a="y")
    m.commit_and_next(T, G, Q, 10, 40_000, committed=10)
    m.update_next_visible_time(T, G, Q, 12, 40_000, 99_000)
    snap = m.snapshot_for_persist()
    assert snap is not None and m.snapshot_for_persist() is None  # nothing changed since
    doc = json.loads(to_json(snap))
    assert doc == {
        "table": {
            "T@G": {
                "0": {
                    "popTime": 40_000,
                    "i": 30_000,
                    "o": [10, 2, 5],
                    "ot": {"12": 99_000},
                    "oc": {"10": 1, "12": 1, "15": 1},
                    "l": 40_000,
                    "cm": 1,
                    "a": "y",
                }
            }
        }
    }
    # upstream's fastjson writes number keys unquoted; both read back
    fastjson_text = to_json(snap).decode().replace('"0":', "0:").replace('"12":', "12:")
    for text in (to_json(snap), fastjson_text):
        other = ConsumerOrderInfoManager()
        other.load(from_json(ConsumerOrderInfoWrapper, text))
        assert other.table == m.table
        assert other.check_block(None, T, G, Q, 30_000, 98_999)
        assert other.commit_and_next(T, G, Q, 12, 40_000, committed=12) == 15


def test_clean_drops_deleted_topics_groups_queues_and_idle_queues() -> None:
    m = ConsumerOrderInfoManager()
    for topic, group, qid in (("T", "G", 0), ("T", "G", 5), ("Gone", "G", 0), ("T", "Old", 0)):
        m.update(None, topic, group, qid, 0, 1000, [0], 0)
    m.update(None, "T", "G", 1, 0, 1000, [0], CLEAN_AFTER_MS)
    dropped = m.clean(lambda t: 4 if t == "T" else None, lambda g: g == "G", CLEAN_AFTER_MS + 1)
    assert dropped == 4
    assert list(m.table) == ["T@G"] and list(m.table["T@G"]) == [1]


# ---------------------------------------------------------------------------- hypothesis

Op = tuple[str, int]
ops = st.lists(
    st.tuples(st.sampled_from(["pop", "ack", "change", "sleep", "retry"]), st.integers(0, 9)),
    max_size=60,
)


class QueueModel:
    """A broker's ordered pops of one queue of ``n`` messages, as pop_processor does them."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.m = ConsumerOrderInfoManager()
        self.committed = 0
        self.now = 0
        self.acked_ever: set[int] = set()
        self.handed: list[tuple[int, list[int]]] = []  # (pop time, offsets)
        self.attempt = 0

    def pop(self, k: int, attempt: str | None = None) -> list[int]:
        if self.m.check_block(attempt, T, G, Q, 1000, self.now):
            return []
        offsets = list(range(self.committed, min(self.n, self.committed + k)))
        if not offsets:
            return []
        prev = self.m.get(T, G, Q)
        if prev is not None and prev.attempt_id != attempt:
            # the previous batch: every unacked message's invisible time is over
            assert all(self.now >= prev.visible_at(i) for i in prev.unacked())
        # a batch starts at the first message never acknowledged
        assert all(o in self.acked_ever for o in range(offsets[0]))
        self.m.update(attempt, T, G, Q, self.now, 1000, offsets, self.now)
        self.handed.append((self.now, offsets))
        return offsets

    def ack(self, pop_time: int, offset: int) -> None:
        if offset < self.committed:
            return
        nxt = self.m.commit_and_next(T, G, Q, offset, pop_time, self.committed)
        if nxt >= 0:
            assert nxt >= self.committed
            # the offset never passes a message that was not acknowledged
            assert all(o in self.acked_ever | {offset} for o in range(self.committed, nxt))
            self.committed = nxt
        info = self.m.get(T, G, Q)
        if info is not None and info.pop_time == pop_time and offset in info.offsets:
            self.acked_ever.add(offset)


@settings(max_examples=300, deadline=None)
@given(ops, st.integers(1, 12))
def test_any_interleaving_keeps_queue_order_and_delivers_everything(ops: list[Op], n: int) -> None:
    q = QueueModel(n)
    for op, x in ops:
        if op == "pop":
            q.pop(1 + x % 4, attempt=f"a{len(q.handed)}")
        elif op == "retry" and q.handed:
            q.pop(1 + x % 4, attempt=f"a{len(q.handed) - 1}")  # the last attempt again
        elif op == "ack" and q.handed:
            pop_time, offsets = q.handed[x % len(q.handed)]
            q.ack(pop_time, offsets[x % len(offsets)])
        elif op == "change" and q.handed:
            pop_time, offsets = q.handed[-1]
            q.m.update_next_visible_time(T, G, Q, offsets[0], pop_time, q.now + 100 * x)
        elif op == "sleep":
            q.now += 250 * x
    # liveness: a consumer that acks what it gets, in order, receives the rest in order
    q.now += 100_000
    start = q.committed
    drained: list[int] = []
    for _ in range(n + 2):
        got = q.pop(3, attempt=f"drain{q.now}")
        for offset in got:
            q.ack(q.now, offset)
        drained += got
        q.now += 1
    assert q.committed == n
    assert drained == list(range(start, n))
