"""The metadata journal's shell (actors/broker/tables/meta_journal.py) on a real MessageStore on
the simulated disk: what a master journals and in which order, when an admin answer may say
"done", and what a new master's replay makes of its tables, including journal records above its
confirmOffset (in the log, in no ConsumeQueue yet)."""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.store.messages import PutCallback
from rocketrio.actors.broker.store.view import ReadGate, StoreView
from rocketrio.actors.broker.tables import meta_log
from rocketrio.actors.broker.tables.meta_journal import MetaJournal
from rocketrio.actors.broker.tables.meta_log import (
    META_QUEUE,
    META_TOPIC,
    MetaChange,
    TopicGone,
    TopicSet,
)
from rocketrio.actors.broker.tables.tables import GroupTable, TopicTable
from rocketrio.protocol.bodies import (
    SubscriptionGroupConfig,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig
from tests.harness.sim_disk import SimFileSystem

CFG = StoreConfig(mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=20 * 64)
HOST = (b"\x0a\x00\x00\x01", 10911)


class FakeWriter:
    """The store actor's inbox as the journal sees it: puts in order, answered later."""

    def __init__(self) -> None:
        self.puts: list[tuple[list[MessageToStore], PutCallback]] = []
        self.full = False

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        if self.full:
            raise trio.WouldBlock
        self.puts.append((messages, on_done))


def tables(fs: SimFileSystem) -> tuple[TopicTable, GroupTable]:
    config = BrokerConfig(storePathRootDir="/store", defaultTopicQueueNums=8)
    topics = TopicTable(config, lambda: 1000, fs=fs)
    topics.load(TopicConfigSerializeWrapper())  # the system topics (TBW102 ...)
    return topics, GroupTable(config, lambda: 1000, fs=fs)


def journal(writer: Any, master: bool = True) -> MetaJournal:
    return MetaJournal(writer, lambda: master, lambda: 1000, log=_Log())


class _Log:
    def __getattr__(self, _name: str) -> Any:
        return lambda *a, **k: None


def test_a_master_journals_every_table_change_in_order_a_slave_none() -> None:
    fs = SimFileSystem(random.Random(1))
    topics, groups = tables(fs)
    w = FakeWriter()
    topics.journal = groups.journal = journal(w).record
    topics.update(TopicConfig("T", 4, 4))
    topics.create_in_send("Auto", "TBW102", 4)  # auto-created by a send: journaled too
    groups.update(SubscriptionGroupConfig("G"))
    groups.find_group("AutoG")  # auto-created by a pull: re-creates itself, not journaled
    topics.delete("T")
    groups.delete("G")
    got = [meta_log.decode(m[0].body) for m, _ in w.puts]
    assert [type(c).__name__ for c in got] == [
        "TopicSet", "TopicSet", "GroupSet", "TopicGone", "GroupGone",
    ]  # fmt: skip
    assert all(m[0].topic == META_TOPIC and m[0].queue_id == META_QUEUE for m, _ in w.puts)
    slave = FakeWriter()
    topics.journal = journal(slave, master=False).record
    topics.update(TopicConfig("U", 2, 2))
    assert slave.puts == []


@pytest.mark.parametrize(
    ("status", "failed"),
    [
        (PutStatus.PUT_OK, None),
        (PutStatus.SLAVE_NOT_AVAILABLE, None),  # no replica to wait for
        (PutStatus.FLUSH_SLAVE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT"),
        (PutStatus.SERVICE_NOT_AVAILABLE, "SERVICE_NOT_AVAILABLE"),
    ],
)
async def test_settled_waits_for_every_record_and_names_a_failure(
    status: PutStatus, failed: str | None
) -> None:
    w = FakeWriter()
    j = journal(w)
    j.record(TopicSet(TopicConfig("T", 4, 4)))
    j.record(TopicGone("U"))
    answers: list[str | None] = []
    async with trio.open_nursery() as n:

        async def wait() -> None:
            answers.append(await j.settled())

        n.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == []  # nothing answered yet
        w.puts[0][1]([], PutStatus.PUT_OK, None)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == []  # one still open
        w.puts[1][1]([], status, None)
    assert answers == [failed]
    assert await j.settled() is None  # reported once


async def test_a_record_that_cannot_keep_its_place_is_a_failure_not_a_reorder() -> None:
    w = FakeWriter()
    w.full = True
    j = journal(w)
    j.record(TopicSet(TopicConfig("T", 4, 4)))
    assert w.puts == [] and await j.settled() == "not written: WouldBlock"


def _store(fs: SimFileSystem) -> MessageStore:
    s = MessageStore(
        "/store/a", CFG, store_host=HOST, fs=fs, replicated=True,
        epoch_file_path="/store/a/epochFileCheckpoint",
    )  # fmt: skip
    s.open()
    s.begin_epoch(1)
    return s


def _put_change(s: MessageStore, change: MetaChange) -> None:
    s.put_messages([MessageToStore(META_TOPIC, META_QUEUE, meta_log.encode(change))], 1)


def test_replay_applies_records_above_confirm_and_adopts_only_the_unknown() -> None:
    """A promoted slave's log tail is often above its confirmOffset: the journal records there
    (the topic's creation, right before its first message) must count."""
    fs = SimFileSystem(random.Random(2))
    s = _store(fs)
    _put_change(s, TopicSet(TopicConfig("Gone", 2, 2)))
    s.put_messages([MessageToStore("Gone", 1, b"g")], 1)
    s.put_messages([MessageToStore("Old", 2, b"o")], 1)  # no journal record (cleaned, older)
    _put_change(s, TopicGone("Gone"))
    s.advance_confirm(s.get_commitlog_max_offset())  # all of this is dispatched
    _put_change(s, TopicSet(TopicConfig("T", 4, 4)))  # above confirm: in no ConsumeQueue yet
    s.put_messages([MessageToStore("T", 0, b"first")], 1)
    s.begin_epoch(2)  # promoted: counts the records above confirm into the queues
    assert s.get_max_offset(META_TOPIC, META_QUEUE) == 2
    topics, groups = tables(fs)
    topics.update(TopicConfig("Gone", 2, 2))  # a stale copy from SlaveSynchronize
    view = StoreView(s, ReadGate())
    state = journal(FakeWriter()).replay(view, topics, groups, s.queues_with_records())
    assert topics.select("T") == TopicConfig("T", 4, 4)  # as created, not adopted with 1 or 8
    assert topics.select("Gone") is None and state.deleted_topics() == {"Gone"}
    assert topics.select("Old") == TopicConfig("Old", 3, 3)  # exactly the queues it holds
    assert topics.select(META_TOPIC) is None
    s.close()


def test_replay_does_not_journal_again() -> None:
    fs = SimFileSystem(random.Random(3))
    s = _store(fs)
    _put_change(s, TopicSet(TopicConfig("T", 4, 4)))
    s.advance_confirm(s.get_commitlog_max_offset())
    topics, groups = tables(fs)
    w = FakeWriter()
    j = journal(w)
    topics.journal = groups.journal = j.record
    j.replay(StoreView(s, ReadGate()), topics, groups, s.queues_with_records())
    assert topics.select("T") == TopicConfig("T", 4, 4) and w.puts == []
    topics.update(TopicConfig("T", 8, 8))  # an operator's change after the replay is journaled
    assert len(w.puts) == 1
    s.close()
