"""An ACK's offset check read from the store's live table of consume queues (`PlainQueues`,
pop/ack.py) never goes stale: a Hypothesis state machine runs a real `ConsumeQueueStore`
through puts (a queue made, a queue restarted elsewhere), truncations, retention clean-ups,
topic deletions, a destroy, a close and reload, and a reload of the topic and static-topic
tables, and after every step holds the table kept at the start to `queue_range`, and
`PopAckProcessor.ack_parsed` to the refusals `queue_range` implies (a queue the topic lacks, an
unknown topic, an offset outside [min, max]; a static topic judged by its logic range)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Coroutine
from typing import Any

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.pop.ack import PopAckProcessor
from rocketrio.actors.broker.pop.attempt import PopConfig
from rocketrio.actors.broker.store.queue_reader import PlainQueues
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.pop_extra_info import NORMAL_TOPIC
from rocketrio.storage.consume_queue import ENTRY
from rocketrio.storage.consume_queue_store import ConsumeQueueStore
from rocketrio.storage.fs import OS_FS

TOPICS = ("A", "B")  # plain topics, 2 read queues each
STATIC = "S"  # a static topic: its logic queues' range is the mapping's, not its own queue's
LOGIC = (3, 5)  # the static topic's logic range (what `queue_range` says for it)
QUEUE_IDS = (0, 1, 2)  # 2: a queue no topic has
KEYS = [(t, q) for t in (*TOPICS, STATIC, "gone") for q in QUEUE_IDS]
SIZE = 10  # each entry's record size in the CommitLog


@attrs.define
class Topic:
    readQueueNums: int  # upstream's name, as TopicConfig has it


class Table:
    """A table whose ``table`` a reload replaces whole (topics.json, the static mappings)."""

    def __init__(self, table: dict[str, Any]) -> None:
        self.table = table

    def select(self, topic: str) -> Any:
        return self.table.get(topic)


class Reader:
    """The POP path's `QueueReader` as the ACK reads it, over a real `ConsumeQueueStore`."""

    def __init__(self, cqs: ConsumeQueueStore, statics: Table) -> None:
        self.cqs = cqs
        self.statics = statics

    def plain_queues(self) -> PlainQueues:
        return PlainQueues(self.statics, self.cqs.live_queues())

    def queue_range(self, topic: str, queue_id: int, read_queue_nums: int) -> Any:
        if not 0 <= queue_id < read_queue_nums:
            return None
        if topic in self.statics.table:
            return LOGIC
        return self.cqs.queue_range(topic, queue_id)


class Writer:
    def put_nowait(self, messages: Any, on_done: Any) -> None:
        pass


class OffsetCheck(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="ack-range-")
        # 4 entries a file, so clean-ups delete files and a queue may start above 0
        self.cqs = ConsumeQueueStore(self.root, 4 * 20, fs=OS_FS)
        self.kept = self.cqs.live_queues()  # kept as the ACK keeps it, never asked again
        self.topics = Table({t: Topic(2) for t in (*TOPICS, STATIC)})
        self.statics = Table({STATIC: object()})
        self.reader = Reader(self.cqs, self.statics)
        self.acks = PopAckProcessor(
            PopConfig("b", "C", 6, "127.0.0.1", revive_queue_num=2),
            topics=self.topics,  # type: ignore[arg-type]
            order=None,  # type: ignore[arg-type]
            store=self.reader,  # type: ignore[arg-type]
            writer=Writer(),  # type: ignore[arg-type]
            now_ms=lambda: 1,
            store_host=(b"\x7f\0\0\1", 10911),
            next_revive_qid=lambda: 0,
        )
        self.phy = 0  # the CommitLog's end: every entry points below it

    def teardown(self) -> None:
        self.cqs.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(key=st.sampled_from(KEYS), n=st.integers(1, 6), restart=st.integers(0, 12))
    def put(self, key: tuple[str, int], n: int, restart: int) -> None:
        """A put's entries; ``restart`` > 0 starts the queue there when it is empty or was
        cut (a re-dispatch into a fresh queue)."""
        cq = self.cqs.get(key)
        first = cq.max_offset if cq is not None else 0
        if restart and (cq is None or cq.max_offset == cq.min_offset):
            first = restart
        entries = b"".join(ENTRY.pack(self.phy + i * SIZE, SIZE, 0) for i in range(n))
        self.cqs.append(key, entries, first)
        self.phy += n * SIZE

    @rule(back=st.integers(0, 8))
    def truncate(self, back: int) -> None:
        self.cqs.truncate_by_phy(max(0, self.phy - back * SIZE))

    @rule(back=st.integers(0, 8), lo=st.integers(0, 30))
    def truncate_and_correct(self, back: int, lo: int) -> None:
        self.cqs.truncate_and_correct(max(0, self.phy - back * SIZE), min(lo * SIZE, self.phy))

    @rule(lo=st.integers(0, 40))
    def clean(self, lo: int) -> None:
        self.cqs.delete_files_below_phy(min(lo * SIZE, self.phy))

    @rule(topic=st.sampled_from((*TOPICS, "gone")))
    def delete_topic(self, topic: str) -> None:
        self.cqs.delete_topic(topic)

    @rule()
    def destroy_all(self) -> None:
        self.cqs.destroy_all()

    @rule()
    def close_and_load(self) -> None:
        self.cqs.flush()
        self.cqs.close()
        self.cqs.load()

    @rule(topic=st.sampled_from(TOPICS), read=st.integers(0, 3), static=st.booleans())
    def reload_tables(self, topic: str, read: int, static: bool) -> None:
        """topics.json and the static mappings read again: new dicts, not the kept ones."""
        self.topics.table = {**self.topics.table, topic: Topic(read)}
        statics = {STATIC: object()}
        if static:
            statics[topic] = object()
        self.statics.table = statics

    @invariant()
    def the_kept_table_is_the_live_one(self) -> None:
        for key in KEYS:
            cq = self.kept.get(key)
            kept = (0, 0) if cq is None else (cq.min_offset, cq.max_offset)
            assert kept == self.cqs.queue_range(*key), key

    @invariant()
    def an_ack_is_judged_by_queue_range(self) -> None:
        for topic, qid in KEYS:
            tc = self.topics.table.get(topic)
            found = None if tc is None else self.reader.queue_range(topic, qid, tc.readQueueNums)
            lo, hi = found if found is not None else (0, 0)
            for offset in sorted({0, lo - 1, lo, hi, hi + 1, hi + 7}):
                if offset < 0:
                    continue
                taken = self.ack(topic, qid, offset)
                assert taken == (found is not None and lo <= offset <= hi), (topic, qid, offset)

    def ack(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether ``ack_parsed`` took the ACK (queued or put), not refused it."""
        r = self.acks.ack_parsed(
            "G", topic, queue_id, "x", offset, 0, 1, 1, NORMAL_TOPIC, "b", lambda _o: None
        )
        if isinstance(r, Coroutine):
            r.close()  # the record's put alone (no batcher running): taken
        if isinstance(r, Refusal):
            assert r.code in (
                ResponseCode.TOPIC_NOT_EXIST,
                ResponseCode.MESSAGE_ILLEGAL,
                ResponseCode.NO_MESSAGE,
            ), r
            return False
        return True


OffsetCheck.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
test_the_offset_check_never_goes_stale = OffsetCheck.TestCase
