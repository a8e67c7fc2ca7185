"""Sending to a logic queue (S4; pure): which requests the broker maps, refuses or lets by."""

from __future__ import annotations

from rocketrio.actors.broker.dispatch.outcomes import PutStatus, Refusal, SendStored
from rocketrio.actors.broker.static_topic.send import MappedSend, map_send
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingManager
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import SendMessageRequestHeader
from rocketrio.protocol.static_topic import LogicQueueMappingItem as Item
from rocketrio.protocol.static_topic import TopicQueueMappingDetail


def manager(bname: str, hosted: dict[int, list[Item]]) -> TopicQueueMappingManager:
    m = TopicQueueMappingManager(bname, lambda: 0)
    m.table["ST"] = TopicQueueMappingDetail(
        "ST", totalQueues=8, bname=bname, epoch=1, hostedQueues=hosted
    )
    return m


def header(queue_id: int, topic: str = "ST") -> SendMessageRequestHeader:
    return SendMessageRequestHeader("pg", topic, "TBW102", 4, queue_id, 0, 0, 0)


def test_a_send_to_a_led_logic_queue_goes_to_its_physical_queue() -> None:
    m = manager("c", {5: [Item(0, 1, "a", 0, 0, 37), Item(1, 2, "c", 10000)]})
    out = map_send(m, header(5))
    assert isinstance(out, MappedSend) and out.header.queueId == 2 and out.global_id == 5
    answers: list[object] = []
    out.answer(answers.append)(SendStored(PutStatus.PUT_OK, None, "id", 2, 3, "u"))
    stored = answers[0]
    assert isinstance(stored, SendStored) and (stored.queue_id, stored.queue_offset) == (5, 10003)


def test_the_old_leader_and_an_undecided_new_leader_refuse() -> None:
    old = manager("a", {5: [Item(0, 1, "a", 0, 0, 37), Item(1, 2, "c", 10000)]})
    out = map_send(old, header(5))
    assert isinstance(out, Refusal) and out.code == RC.NOT_LEADER_FOR_QUEUE
    # a remapping's first step: the new leader is written before its logic offset is decided
    new = manager("c", {5: [Item(0, 1, "a", 0), Item(1, 2, "c", -1)]})
    out = map_send(new, header(5))
    assert isinstance(out, Refusal) and out.code == RC.NOT_LEADER_FOR_QUEUE
    assert "being remapped" in out.remark


def test_other_topics_and_physical_requests_pass() -> None:
    m = manager("a", {0: [Item(0, 0, "a", 0)]})
    assert map_send(m, header(0, topic="Other")) is None
    assert map_send(m, header(0), physical=True) is None
