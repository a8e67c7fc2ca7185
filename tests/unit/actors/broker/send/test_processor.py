"""The send processor alone (actors/broker/send/processor.py) against real tables and an
in-memory store writer: refusals, stored outcomes, UNIQ_KEY stamping, back-pressure, retries to
the DLQ and send-back. No sockets, no Broker, no RemotingCommand in or out.
"""

from __future__ import annotations

from pathlib import Path

from rocketrio.actors.broker.dispatch.outcomes import (
    SENT_BACK,
    PutFailed,
    PutStatus,
    Refusal,
    SendStored,
)
from rocketrio.actors.broker.send.completions import DirectAnswer
from rocketrio.actors.broker.send.processor import BlockedSend
from rocketrio.protocol.bodies import (
    PERM_READ,
    TopicConfig,
)
from rocketrio.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    SendMessageRequestHeader,
)
from rocketrio.protocol.message import PROPERTY_CLUSTER, UNIQ_KEY, decode_properties
from rocketrio.storage.message_store import (
    MessageToStore,
    PutResult,
)
from tests.harness.processors import (
    HOST,
    NOW_MS,
    RC,
    ClosedGate,
    Sender,
)

# --------------------------------------------------------------------------- send


async def test_send_refuses_a_missing_topic_without_auto_create(tmp_path: Path) -> None:
    s = Sender(tmp_path, autoCreateTopicEnable=False)
    refusal = await s.send("Nowhere")
    assert isinstance(refusal, Refusal) and refusal.code == RC.TOPIC_NOT_EXIST
    assert (
        "topic[Nowhere] not exist" in refusal.remark
        and "autoCreateTopicEnable=false" in refusal.remark
    )
    assert s.writer.puts == [] and s.topics.select("Nowhere") is None


async def test_send_refuses_a_queue_out_of_range(tmp_path: Path) -> None:
    s = Sender(tmp_path)
    s.topics.update(TopicConfig("Orders", 4, 4))
    refusal = await s.send(queue_id=9)
    assert refusal == Refusal(
        RC.SYSTEM_ERROR,
        "request queueId[9] is illegal, topic Orders has 4 queues (writeQueueNums=4) "
        "Producer: 10.0.0.9:1",
    )
    assert s.writer.puts == []


async def test_the_queue_bound_is_the_larger_of_the_write_and_read_queue_counts(
    tmp_path: Path,
) -> None:
    s = Sender(tmp_path)
    s.topics.update(TopicConfig("Orders", 6, 2))  # 6 read queues, 2 write queues
    assert await s.send(queue_id=5) is None  # below max(2, 6): taken, as upstream takes it
    refusal = await s.send(queue_id=6)
    assert refusal == Refusal(
        RC.SYSTEM_ERROR,
        "request queueId[6] is illegal, topic Orders has 6 queues (writeQueueNums=2) "
        "Producer: 10.0.0.9:1",
    )
    s.topics.update(TopicConfig("Orders", 2, 5))  # more write queues than read queues
    assert await s.send(queue_id=4) is None
    refusal = await s.send(queue_id=5)
    assert isinstance(refusal, Refusal) and "has 5 queues" in refusal.remark


async def test_send_refuses_forbidden_writes(tmp_path: Path) -> None:
    s = Sender(tmp_path)
    s.topics.update(TopicConfig("ReadOnly", 4, 4, PERM_READ))
    refusal = await s.send("ReadOnly")
    assert isinstance(refusal, Refusal) and refusal.code == RC.NO_PERMISSION
    assert "perm=R--" in refusal.remark
    refusal = await s.send("SCHEDULE_TOPIC_XXXX")
    assert isinstance(refusal, Refusal) and refusal.code == RC.NO_PERMISSION
    read_only_broker = Sender(tmp_path / "b", brokerPermission=PERM_READ)
    refusal = await read_only_broker.send()
    assert isinstance(refusal, Refusal) and refusal.code == RC.NO_PERMISSION
    assert "sending message is forbidden" in refusal.remark


async def test_send_refused_by_the_write_gate(tmp_path: Path) -> None:
    s = Sender(tmp_path)
    s.gate = ClosedGate()
    s.processor = s.make()
    assert await s.send() == ClosedGate().write_refusal()
    assert s.writer.puts == []


async def test_send_stores_and_delivers_the_outcome(tmp_path: Path) -> None:
    s = Sender(tmp_path)
    assert await s.send(properties=f"TAGS\x01a\x02{UNIQ_KEY}\x01U1\x02") is None
    assert s.topics.select("Orders") is not None  # auto-created from TBW102
    [(messages, on_done)] = s.writer.puts
    [m] = messages
    props = decode_properties(m.properties)  # type: ignore[arg-type]
    assert (m.topic, m.queue_id, m.body, m.born_host) == ("Orders", 1, b"hello", HOST)
    assert props == {"TAGS": "a", UNIQ_KEY: "U1", PROPERTY_CLUSTER: "DefaultCluster"}
    assert s.outcomes == []  # nothing until the store answers
    on_done([PutResult(4096, 200, 17, "0A000009...", NOW_MS)], PutStatus.FLUSH_DISK_TIMEOUT, "slow")
    assert s.outcomes == [
        SendStored(PutStatus.FLUSH_DISK_TIMEOUT, "slow", "0A000009...", 1, 17, "U1")
    ]
    on_done([], PutStatus.MESSAGE_ILLEGAL, "too big")
    assert s.outcomes[-1] == PutFailed(PutStatus.MESSAGE_ILLEGAL, "too big")
    # what a replica wait behind the store actor may answer: the processor needs no change
    result = PutResult(4096, 200, 17, "0A000009...", NOW_MS)
    on_done([result], PutStatus.FLUSH_SLAVE_TIMEOUT, None)
    assert s.outcomes[-1] == SendStored(
        PutStatus.FLUSH_SLAVE_TIMEOUT, None, "0A000009...", 1, 17, "U1"
    )
    on_done([result], PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, None)
    assert s.outcomes[-1] == PutFailed(PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, None)


async def test_send_stamps_a_uniq_key_when_the_client_did_not(tmp_path: Path) -> None:
    s = Sender(tmp_path)
    assert await s.send() is None
    [([m], _)] = s.writer.puts
    assert decode_properties(m.properties)[UNIQ_KEY] == "FRESHUNIQ"  # type: ignore[arg-type]


async def test_send_waits_for_room_and_refuses_when_the_store_stopped(tmp_path: Path) -> None:
    s = Sender(tmp_path)
    s.writer.full = True
    assert await s.send() is None
    assert s.writer.awaited == 1 and len(s.writer.puts) == 1
    s.writer.full, s.writer.stopped = False, True
    assert await s.send() == Refusal(RC.SERVICE_NOT_AVAILABLE, "the message store is stopped")


async def test_send_nowait_hands_back_a_blocked_send_only_when_the_inbox_is_full(
    tmp_path: Path,
) -> None:
    s = Sender(tmp_path)
    header = SendMessageRequestHeader("pg", "Orders", "TBW102", 4, 1, 0, NOW_MS, 0)
    assert s.processor.send_nowait(header, b"x", HOST, "p", s.outcomes.append) is None
    assert s.writer.awaited == 0 and len(s.writer.puts) == 1  # no coroutine, no wait
    s.writer.full = True
    blocked = s.processor.send_nowait(header, b"y", HOST, "p", s.outcomes.append)
    assert isinstance(blocked, BlockedSend) and len(s.writer.puts) == 1  # nothing lost, not put
    assert await s.processor.put_blocked(blocked) is None
    assert s.writer.awaited == 1 and s.writer.puts[-1][0] == blocked.msgs


async def test_retry_send_past_max_reconsume_goes_to_the_dlq(tmp_path: Path) -> None:
    s = Sender(tmp_path)
    assert await s.send("%RETRY%G", queue_id=0, reconsumeTimes=3, maxReconsumeTimes=2) is None
    [([m], _)] = s.writer.puts
    assert (m.topic, m.queue_id) == ("%DLQ%G", 0)
    assert s.topics.select("%DLQ%G") is not None


async def test_batch_to_a_retry_topic_is_illegal(tmp_path: Path) -> None:
    s = Sender(tmp_path)
    header = SendMessageRequestHeader("pg", "%RETRY%G", "TBW102", 4, 0, 0, 7, 0, batch=True)
    refusal = await s.processor.send_batch(header, b"x", HOST, "p", s.outcomes.append)
    assert isinstance(refusal, Refusal) and refusal.code == RC.MESSAGE_ILLEGAL
    assert s.writer.batches == []


async def test_send_back_rereads_the_message_and_writes_the_retry_topic(tmp_path: Path) -> None:
    s = Sender(tmp_path)
    [stored] = s.store.put_messages(
        [MessageToStore("Orders", 0, b"body", properties={UNIQ_KEY: "U7"}, born_host=HOST)], NOW_MS
    )
    done: list[object] = []
    h = ConsumerSendMsgBackRequestHeader(
        offset=stored.commitlog_offset, group="G", delayLevel=0, originMsgId="U7",
        originTopic="Orders",
    )  # fmt: skip
    assert await s.processor.send_back(h, done.append) is None
    [([m], on_done)] = s.writer.puts
    # it waits at level 3 + reconsumeTimes (upstream), then the schedule service re-puts it
    assert (m.topic, m.queue_id, m.body, m.reconsume_times) == (
        "SCHEDULE_TOPIC_XXXX",
        2,
        b"body",
        1,
    )
    assert m.properties["REAL_TOPIC"] == "%RETRY%G" and m.properties["DELAY"] == "3"
    assert m.properties["REAL_QID"] == "0" and m.properties["UNIQ_KEY"] == "U7"
    on_done([PutResult(9, 9, 0, "X", NOW_MS)], PutStatus.PUT_OK, None)
    assert done == [SENT_BACK] and s.stats.send_back_total == 1
    wrong = ConsumerSendMsgBackRequestHeader(stored.commitlog_offset + 1, "G", 0)
    refusal = await s.processor.send_back(wrong, done.append)
    assert isinstance(refusal, Refusal) and refusal.code == RC.SYSTEM_ERROR
    assert "look message by offset failed" in refusal.remark


# --------------------------------------------------------------------------- pull


# --------------------------------------------------------------------------- adapter mappings


async def test_a_direct_answer_is_the_put_callback_itself(tmp_path: Path) -> None:
    """A `DirectAnswer` (the remoting send's answer) reaches the store as it is, told the queue
    the answer names and the UNIQ_KEY; a plain `OnSent` is wrapped as before."""
    got: list[tuple[int, str, PutStatus]] = []

    class Direct(DirectAnswer):
        __slots__ = ()

        def __call__(self, results: list[PutResult], status: PutStatus, remark: str | None) -> None:
            got.append((self.queue_id, self.uniq, status))

    s = Sender(tmp_path)
    header = SendMessageRequestHeader(
        "pg", "Orders", "TBW102", 4, 3, 0, NOW_MS, 0, f"{UNIQ_KEY}\x01U7\x02"
    )
    answer = Direct()
    assert s.processor.send_nowait(header, b"x", HOST, "p", answer) is None
    [(_, on_done)] = s.writer.puts
    assert on_done is answer and (answer.queue_id, answer.uniq) == (3, "U7")
    on_done([PutResult(0, 100, 5, "ID", NOW_MS)], PutStatus.PUT_OK, None)
    assert got == [(3, "U7", PutStatus.PUT_OK)]
    assert s.processor.send_nowait(header, b"x", HOST, "p", s.outcomes.append) is None
    assert s.writer.puts[-1][1] is not s.outcomes.append  # an OnSent: wrapped (PendingSend)
