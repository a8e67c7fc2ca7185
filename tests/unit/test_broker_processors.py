"""The broker's processors alone: no sockets, no Broker, no RemotingCommand in or out.

The send processor runs against real tables and an in-memory store writer; the pull processor
against real tables and a real MessageStore behind a StoreView. The adapter's mappings (PutStatus
-> response code, PullStatus -> response code, Refusal -> response) are checked on their own,
and its gates on the adapter of a Broker that was built but never started (no sockets).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.broker.clients.client_manager import ClientChannelInfo, ConsumerManager
from rocketrio.actors.broker.dispatch.adapter import (
    PULL_CODES,
    PUT_STATUS_CODES,
    pull_response,
    send_back_response,
    send_response,
)
from rocketrio.actors.broker.dispatch.outcomes import (
    SENT_BACK,
    Pulled,
    PullOutcome,
    PullStatus,
    PutFailed,
    PutStatus,
    Refusal,
    SendStored,
)
from rocketrio.actors.broker.pull.hold import HoldLimits, PullRequestHoldService
from rocketrio.actors.broker.pull.processor import PullConfig, PullMessageProcessor, pull_status
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.store.view import ReadGate, StoreView
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.kernel.transport import SimNetwork
from rocketrio.protocol.bodies import (
    PERM_READ,
    TopicConfig,
)
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.headers import (
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from rocketrio.protocol.message import PROPERTY_CLUSTER, UNIQ_KEY, decode_properties
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.storage.message_store import (
    GetMessageStatus,
    GetResult,
    MessageToStore,
    PutResult,
)
from tests.harness.processors import (
    HOST,
    NOW_MS,
    RC,
    ClosedGate,
    Sender,
    broker_config,
    inline,
    open_store,
    tables,
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


class Reply:
    def __init__(self, owner: str = "conn-1") -> None:
        self.outcomes: list[PullOutcome] = []
        self.gone = False
        self.owner = owner

    def deliver(self, outcome: PullOutcome) -> None:
        self.outcomes.append(outcome)


class Puller:
    def __init__(
        self,
        tmp_path: Path,
        run_blocking: Callable[[Callable[[], Any]], Any] = inline,
        **config: Any,
    ) -> None:
        self.config = broker_config(tmp_path, **config)
        self.topics, self.groups, self.offsets = tables(self.config)
        self.topics.update(TopicConfig("T", 2, 2))
        self.store = open_store(tmp_path)
        self.gate = ReadGate(run_blocking)
        self.consumers = ConsumerManager()
        self.hold = PullRequestHoldService()
        self.stats = BrokerStats()
        self.processor = PullMessageProcessor(
            PullConfig.of(self.config),
            topics=self.topics,
            groups=self.groups,
            consumers=self.consumers,
            offsets=self.offsets,
            store=StoreView(self.store, self.gate, off_loop_read_bytes=64 * 1024),
            hold=self.hold,
            stats=self.stats,
        )

    def put(self, n: int, tags: str = "a", queue_id: int = 0) -> None:
        self.store.put_messages(
            [
                MessageToStore("T", queue_id, b"m%d" % i, properties={"TAGS": tags})
                for i in range(n)
            ],
            NOW_MS,
        )

    async def pull(
        self,
        offset: int,
        *,
        topic: str = "T",
        expr: str = "*",
        flags: int = 0,
        owner: str = "conn-1",
        **h: Any,
    ) -> tuple[PullOutcome | None, Reply]:
        header = PullMessageRequestHeader(
            consumerGroup="CG",
            topic=topic,
            queueId=0,
            queueOffset=offset,
            maxMsgNums=32,
            sysFlag=PULL_FLAG_SUBSCRIPTION | flags,
            commitOffset=0,
            subVersion=0,
            subscription=expr,
            **({"suspendTimeoutMillis": 15_000} | h),
        )
        reply = Reply(owner)
        return await self.processor.pull(header, reply), reply


def status_of(outcome: PullOutcome | None) -> PullStatus:
    assert isinstance(outcome, Pulled), outcome
    return outcome.status


async def test_pull_maps_store_statuses_to_outcomes(tmp_path: Path) -> None:
    p = Puller(tmp_path)
    assert status_of((await p.pull(0))[0]) is PullStatus.NO_NEW_MSG  # no queue yet
    assert status_of((await p.pull(5))[0]) is PullStatus.OFFSET_ILLEGAL
    p.put(3)
    found, _ = await p.pull(0)
    assert isinstance(found, Pulled) and found.status is PullStatus.FOUND
    assert found.result.message_count == 3 and found.result.next_begin_offset == 3
    # statistics: the found read counts its messages, the two reads before were misses
    assert p.stats.items.get_total() == 3
    assert (p.stats.store.get_found, p.stats.store.get_miss) == (1, 2)
    assert status_of((await p.pull(3))[0]) is PullStatus.NO_NEW_MSG  # OFFSET_OVERFLOW_ONE
    assert status_of((await p.pull(9))[0]) is PullStatus.OFFSET_ILLEGAL  # OVERFLOW_BADLY
    assert status_of((await p.pull(0, expr="b"))[0]) is PullStatus.NO_MATCHED_MSG


@pytest.mark.parametrize(
    ("status", "offset", "expected"),
    [
        (GetMessageStatus.FOUND, 3, PullStatus.FOUND),
        (GetMessageStatus.NO_MATCHED_MESSAGE, 3, PullStatus.NO_MATCHED_MSG),
        (GetMessageStatus.MESSAGE_WAS_REMOVING, 3, PullStatus.NO_MATCHED_MSG),
        (GetMessageStatus.OFFSET_FOUND_NULL, 3, PullStatus.NO_NEW_MSG),
        (GetMessageStatus.OFFSET_OVERFLOW_ONE, 3, PullStatus.NO_NEW_MSG),
        (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 3, PullStatus.OFFSET_ILLEGAL),
        (GetMessageStatus.OFFSET_TOO_SMALL, 3, PullStatus.OFFSET_ILLEGAL),
        (GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, PullStatus.NO_NEW_MSG),
        (GetMessageStatus.NO_MESSAGE_IN_QUEUE, 3, PullStatus.OFFSET_ILLEGAL),
        (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, PullStatus.NO_NEW_MSG),
        (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 3, PullStatus.OFFSET_ILLEGAL),
    ],
)
def test_pull_status_of_every_store_status(
    status: GetMessageStatus, offset: int, expected: PullStatus
) -> None:
    assert pull_status(status, offset) is expected


async def test_pull_refusals(tmp_path: Path) -> None:
    p = Puller(tmp_path)
    refusal, _ = await p.pull(0, topic="Nope")
    assert refusal == Refusal(RC.TOPIC_NOT_EXIST, "topic[Nope] not exist, apply first please!")
    header = PullMessageRequestHeader("CG", "T", 0, 0, 32, 0, 0, 15_000, 0)  # no SUBSCRIPTION
    refusal = await p.processor.pull(header, Reply())
    assert isinstance(refusal, Refusal) and refusal.code == RC.SUBSCRIPTION_NOT_EXIST
    p.consumers.register(
        "CG", ClientChannelInfo("c", "id", "JAVA", 1, 0), "PUSH", "CLUSTERING", "LAST", []
    )
    refusal = await p.processor.pull(header, Reply())
    assert isinstance(refusal, Refusal) and "does not subscribe to T" in refusal.remark


async def test_a_held_pull_is_answered_when_a_message_arrives(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    p = Puller(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(p.hold.run)
        outcome, reply = await p.pull(0, flags=PULL_FLAG_SUSPEND)
        assert outcome is None and p.hold.count == 1
        await trio.sleep(1)
        assert reply.outcomes == []
        p.put(2)
        p.hold.notify_message_arriving("T", 0, 2)
        await trio.testing.wait_all_tasks_blocked()
        [answer] = reply.outcomes
        assert isinstance(answer, Pulled) and answer.status is PullStatus.FOUND
        assert answer.result.message_count == 2 and p.hold.count == 0
        # an idle held pull gets its last attempt at the deadline
        outcome, idle = await p.pull(2, flags=PULL_FLAG_SUSPEND)
        assert outcome is None
        await trio.sleep(16)
        assert [status_of(o) for o in idle.outcomes] == [PullStatus.NO_NEW_MSG]
        nursery.cancel_scope.cancel()


async def test_held_pulls_are_bounded_per_connection_and_in_all(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    p = Puller(tmp_path)
    p.hold.limits = HoldLimits(per_owner=2, total=3)
    async with trio.open_nursery() as nursery:
        await nursery.start(p.hold.run)
        held = [await p.pull(0, flags=PULL_FLAG_SUSPEND, owner="a") for _ in range(2)]
        assert [outcome for outcome, _ in held] == [None, None]
        refused, _ = await p.pull(0, flags=PULL_FLAG_SUSPEND, owner="a")
        assert isinstance(refused, Refusal) and refused.code == RC.SYSTEM_BUSY
        assert "maxHeldPullsPerConnection=2" in refused.remark
        assert (await p.pull(0, flags=PULL_FLAG_SUSPEND, owner="b"))[0] is None
        refused, _ = await p.pull(0, flags=PULL_FLAG_SUSPEND, owner="c")
        assert isinstance(refused, Refusal) and "maxHeldPulls=3" in refused.remark
        assert p.hold.count == 3
        # answered pulls give their places back, per connection and in all
        p.put(1)
        p.hold.notify_message_arriving("T", 0, 1)
        await trio.testing.wait_all_tasks_blocked()
        assert p.hold.count == 0
        assert all(len(reply.outcomes) == 1 for _, reply in held)
        again = [await p.pull(1, flags=PULL_FLAG_SUSPEND, owner="a") for _ in range(2)]
        assert [outcome for outcome, _ in again] == [None, None]
        nursery.cancel_scope.cancel()


async def test_a_pull_is_held_no_longer_than_the_broker_allows(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    p = Puller(tmp_path, pullSuspendMaxTimeMillis=5_000)
    async with trio.open_nursery() as nursery:
        await nursery.start(p.hold.run)
        start = trio.current_time()
        outcome, reply = await p.pull(0, flags=PULL_FLAG_SUSPEND, suspendTimeoutMillis=10**12)
        assert outcome is None
        with trio.move_on_after(60):
            while not reply.outcomes:
                await trio.sleep(0.1)
        assert reply.outcomes, "still held a minute later"
        assert status_of(reply.outcomes[0]) is PullStatus.NO_NEW_MSG
        assert 5.0 <= trio.current_time() - start <= 5.1
        nursery.cancel_scope.cancel()


class LateReads:
    """Off-loop reads that read at once but return only when released (a slow thread)."""

    def __init__(self) -> None:
        self.pending: list[trio.Event] = []

    async def __call__(self, fn: Callable[[], Any]) -> Any:
        result = fn()
        done = trio.Event()
        self.pending.append(done)
        await done.wait()
        return result

    async def release_all(self) -> None:
        await trio.testing.wait_all_tasks_blocked()
        while self.pending:
            self.pending.pop(0).set()
            await trio.testing.wait_all_tasks_blocked()


async def test_an_arrival_during_a_held_pulls_off_loop_read_is_not_missed(tmp_path: Path) -> None:
    reads = LateReads()
    p = Puller(tmp_path, reads, maxTransferBytesOnMessageInMemory=1024 * 1024)  # all off-loop
    async with trio.open_nursery() as nursery:
        await nursery.start(p.hold.run)
        pulled: list[tuple[PullOutcome | None, Reply]] = []

        async def pull_b() -> None:
            pulled.append(await p.pull(0, expr="b", flags=PULL_FLAG_SUSPEND))

        nursery.start_soon(pull_b)
        await reads.release_all()
        [(outcome, reply)] = pulled
        assert outcome is None and p.hold.count == 1
        p.put(1, tags="a")  # filtered out
        p.hold.notify_message_arriving("T", 0, 1)
        await trio.testing.wait_all_tasks_blocked()
        assert len(reads.pending) == 1  # the held pull's re-run read only saw the "a"
        p.put(1, tags="b")  # arrives while that read is still on its way back
        p.hold.notify_message_arriving("T", 0, 2)
        await reads.release_all()
        # answered now, without waiting for the held pull's deadline (the clock did not move)
        assert p.hold.count == 0
        [answer] = reply.outcomes
        assert isinstance(answer, Pulled) and answer.status is PullStatus.FOUND
        assert answer.result.message_count == 1 and answer.result.next_begin_offset == 2
        nursery.cancel_scope.cancel()


async def test_only_big_pulls_read_off_the_loop(tmp_path: Path) -> None:
    p = Puller(tmp_path, maxTransferBytesOnMessageInMemory=1024 * 1024)
    p.put(3)
    small, _ = await p.pull(0, maxMsgBytes=64 * 1024)
    assert status_of(small) is PullStatus.FOUND and p.gate.off_loop_reads == 0
    big, _ = await p.pull(0)  # may read up to 1 MiB: over the 64 KiB threshold
    assert isinstance(big, Pulled) and big.result.message_count == 3
    assert p.gate.off_loop_reads == 1


# --------------------------------------------------------------------------- adapter mappings

CMD = RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=42)


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (PutStatus.PUT_OK, RC.SUCCESS),
        (PutStatus.FLUSH_DISK_TIMEOUT, RC.FLUSH_DISK_TIMEOUT),
        (PutStatus.FLUSH_SLAVE_TIMEOUT, RC.FLUSH_SLAVE_TIMEOUT),
        (PutStatus.SLAVE_NOT_AVAILABLE, RC.SLAVE_NOT_AVAILABLE),
        (PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, RC.SYSTEM_ERROR),
        (PutStatus.SERVICE_NOT_AVAILABLE, RC.SERVICE_NOT_AVAILABLE),
        (PutStatus.MESSAGE_ILLEGAL, RC.MESSAGE_ILLEGAL),
        (PutStatus.OS_PAGE_CACHE_BUSY, RC.SYSTEM_ERROR),
        (PutStatus.UNKNOWN_ERROR, RC.SYSTEM_ERROR),
    ],
)
def test_every_put_status_maps_to_upstreams_response_code(status: PutStatus, code: int) -> None:
    if status.stored:
        resp = send_response(CMD, SendStored(status, None, "OFFSETID", 3, 17, "UNIQ"))
        assert resp.ext_fields == {
            "msgId": "OFFSETID",
            "queueId": "3",
            "queueOffset": "17",
            "transactionId": "UNIQ",
        }
    else:
        resp = send_response(CMD, PutFailed(status, None))
        assert resp.ext_fields == {} and resp.remark
    assert (resp.code, resp.opaque, resp.is_response) == (code, 42, True)


def test_put_status_table_is_complete_and_remarks_follow_upstream() -> None:
    assert set(PUT_STATUS_CODES) == set(PutStatus)
    assert {s for s in PutStatus if s.stored} == {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
    failed = send_response(CMD, PutFailed(PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, None))
    assert failed.remark == "in-sync replicas not enough"
    detailed = send_response(CMD, PutFailed(PutStatus.MESSAGE_ILLEGAL, "the message is illegal: x"))
    assert detailed.remark == "the message is illegal: x"  # the store's own remark wins
    back = send_back_response(CMD, PutFailed(PutStatus.MESSAGE_ILLEGAL, "bad"))
    assert (back.code, back.remark) == (RC.SYSTEM_ERROR, "bad")


def test_pull_outcomes_map_to_pull_codes() -> None:
    assert set(PULL_CODES) == set(PullStatus)
    result = GetResult(GetMessageStatus.FOUND, 5, 0, 9, [b"r1", b"r2"], 2)
    resp = pull_response(CMD, Pulled(PullStatus.FOUND, result))
    assert (resp.code, resp.remark, resp.body) == (RC.SUCCESS, "FOUND", b"r1r2")
    assert resp.ext_fields == {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": "5",
        "minOffset": "0",
        "maxOffset": "9",
    }
    moved = GetResult(GetMessageStatus.OFFSET_TOO_SMALL, 4, 4, 9)
    resp = pull_response(CMD, Pulled(PullStatus.OFFSET_ILLEGAL, moved))
    assert (resp.code, resp.remark, resp.body) == (RC.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL", b"")
    resp = pull_response(CMD, Refusal(RC.TOPIC_NOT_EXIST, "no topic"))
    assert (resp.code, resp.remark) == (RC.TOPIC_NOT_EXIST, "no topic")


class _Conn:
    """Just enough of a Connection for the adapter: attrs, remote, closed, send_nowait."""

    def __init__(self) -> None:
        self.attrs: dict[str, Any] = {}
        self.remote = "10.0.0.9:5555"
        self.closed = False
        self.sent: list[RemotingCommand] = []

    def send_nowait(self, cmd: RemotingCommand) -> None:
        self.sent.append(cmd)


async def test_adapter_gates_unknown_codes_and_a_stopping_broker(tmp_path: Path) -> None:
    broker = Broker(broker_config(tmp_path), SimNetwork().transport("10.0.0.2"))  # not started
    adapter, conn = broker.adapter, _Conn()

    async def call(code: int, **ext: str) -> RemotingCommand | None:
        cmd = RemotingCommand(code, opaque=7, ext_fields=ext)
        return await adapter.process(RequestContext(conn, cmd))  # type: ignore[arg-type]

    unknown = await call(9999)
    assert unknown is not None and unknown.code == RC.REQUEST_CODE_NOT_SUPPORTED
    assert unknown.remark == "request type 9999 (9999) not supported by broker broker-a"
    adapter.stop_taking_requests()
    busy = await call(RequestCode.SEND_MESSAGE_V2)
    assert busy is not None and (busy.code, busy.remark) == (
        RC.SYSTEM_BUSY,
        "broker broker-a is shutting down",
    )
    # a leaving client may still save its progress
    saved = await call(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        consumerGroup="CG",
        topic="T",
        queueId="0",
        commitOffset="12",
    )
    assert saved is not None and saved.code == RC.SUCCESS
    assert broker.offsets.query("CG", "T", 0) == 12
