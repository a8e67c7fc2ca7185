"""POP consumption on SimNetwork + MockClock: SimpleConsumer receive / ack / change invisible
duration against a real broker; revive after the invisible time (not before), acked messages
never again, batch ack, two consumers of one group, restart with messages in flight, long
polling, the revive topic's records on disk, POP in-flight counts for admin."""

from __future__ import annotations

import json
from typing import Any

import pytest
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerRole, FlushDiskType
from rocketrio.actors.broker.pop.revive import ReviveCore
from rocketrio.actors.broker.pop.revive_log import AckRecord, CkRecord, OtherRecord, read_record
from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.pop_admin import pop_progress
from rocketrio.actors.client.simple_consumer import ReceivedMessage, SimpleConsumer
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.pop_checkpoint import BatchAck, BatchAckMessageRequestBody
from rocketrio.protocol.pop_extra_info import (
    REVIVE_GROUP,
    ExtraInfo,
)
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.broker import BrokerHarness, harness
from tests.harness.clock import now_ms
from tests.harness.pop import REVIVE, receive_all, revive_records, simple_consumer

TOPIC = "PopT"
GROUP = "PopG"


def simple(h: BrokerHarness, group: str = GROUP, expr: str = "*") -> Any:
    return simple_consumer(h, group, TOPIC, expr)


async def send_n(h: BrokerHarness, n: int, prefix: str = "m", **kw: Any) -> None:
    for i in range(n):
        r = await h.send(TOPIC, f"{prefix}{i}".encode(), **kw)
        assert r.code == ResponseCode.SUCCESS


def bodies(msgs: list[ReceivedMessage]) -> list[bytes]:
    return sorted(m.body for m in msgs)


# --------------------------------------------------------------------------------- basics


async def test_unacked_reappear_after_invisible_time_not_before_acked_never(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, simple(h) as c:
        await send_n(h, 6)
        await trio.sleep(0.5)  # pop between two revive rounds (they run every reviveInterval)
        got = await receive_all(c, invisible=20.0)
        assert bodies(got) == [f"m{i}".encode() for i in range(6)]
        popped_at = trio.current_time()
        # receipts are upstream's 8-field extraInfo naming this broker
        for m in got:
            info = ExtraInfo.parse(m.receipt_handle)
            assert info.broker_name == "broker-a" and info.invisible_time == 20_000
            assert info.queue_offset == m.queue_offset and info.retry == "0"
        acked = [m for m in got if m.body in (b"m0", b"m2", b"m4")]
        for m in acked:
            await c.ack(m)
        # nothing is visible before the invisible time ends: watched closely in its last second
        revive_at = min(ExtraInfo.parse(m.receipt_handle).revive_time for m in got)
        await trio.sleep((revive_at - 1000 - now_ms()) / 1000)
        while now_ms() < revive_at - 20:
            assert await receive_all(c) == [], now_ms() - revive_at
            await trio.sleep(0.02)
        await trio.sleep(1.5)  # the revive task runs at the revive time (+ a scan)
        again = await receive_all(c)
        assert bodies(again) == [b"m1", b"m3", b"m5"]
        assert all(m.delivery_attempt == 2 for m in again)
        assert all(m.topic == TOPIC and m.message.topic == TOPIC for m in again)
        assert trio.current_time() - popped_at < 22
        # a revived message carries a retry receipt; acking it ends it for good
        assert {ExtraInfo.parse(m.receipt_handle).retry for m in again} == {"1"}
        for m in again:
            await c.ack(m)
        await trio.sleep(120)
        assert await receive_all(c) == []
        # the CKs and ACKs are in the revive topic, with brokerName in each
        records = revive_records(h)
        tags = [t for t, _ in records]
        assert tags.count("ck") >= 2 and tags.count("ack") == 6
        assert all(body["bn"] == "broker-a" for _, body in records)


async def test_change_invisible_duration_extends_and_shortens(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, simple(h) as c:
        await send_n(h, 2)
        got = sorted(await receive_all(c, invisible=10.0), key=lambda m: m.body)
        old_receipts = [m.receipt_handle for m in got]
        await c.change_invisible_duration(got[0], 60.0)  # longer
        await c.change_invisible_duration(got[1], 2.0)  # shorter
        assert [m.receipt_handle for m in got] != old_receipts
        await trio.sleep(4.0)
        shortened = await receive_all(c)
        assert bodies(shortened) == [b"m1"]  # the shortened one only
        await c.ack(shortened[0])
        await trio.sleep(10.0)
        assert await receive_all(c) == []  # m0 is still invisible after its first 10 s
        await trio.sleep(50.0)
        back = await receive_all(c)
        assert bodies(back) == [b"m0"]
        # the new receipt of an extended message acks it
        for m in back:
            await c.ack(m)


async def test_ack_with_changed_receipt_stops_revival(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, simple(h) as c:
        await send_n(h, 1)
        [m] = await receive_all(c, invisible=5.0)
        await c.change_invisible_duration(m, 5.0)
        await c.ack(m)  # with the new receipt
        await trio.sleep(30)
        assert await receive_all(c) == []


async def test_ack_just_before_the_invisible_time_ends_is_not_revived(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, simple(h) as c:
        await send_n(h, 1)
        [m] = await receive_all(c, invisible=10.0)
        revive_at = ExtraInfo.parse(m.receipt_handle).revive_time
        await trio.sleep((revive_at - now_ms() - 5) / 1000)  # 5 ms before
        await c.ack(m)
        await trio.sleep(30)
        assert await receive_all(c) == []


async def test_the_revive_rounds_are_fed_what_the_broker_wrote_as_a_read_back_would_be(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """The CK and ACK records the broker's POP and ACK paths stored (a pop's CKs, single ACKs
    merged per turn, a batch ack, a changed invisible time's CK and ACK) reach the revive rounds
    without being read back (revive_feed.py), and each revive queue's state is the one reading
    the revive topic from the start gives; what the broker did not write is read as before."""
    async with harness(tmp_path) as h, simple(h) as c:
        await send_n(h, 12)
        await trio.sleep(1.5)  # a revive round: the cores exist, later records are written ahead
        got = await receive_all(c, invisible=60.0)
        assert len(got) == 12
        for m in got[:4]:
            await c.ack(m)
        await c.ack_batch(got[4:8])
        await c.change_invisible_duration(got[8], 90.0)
        assert h.broker is not None
        revive = h.broker.pop.revive
        fed_before = sum(core.fed_written for core in revive.cores or ())
        # a record no POP path wrote: put straight into a revive queue (read from the store)
        stray = await h.send(REVIVE, b"{}", queue_id=0, tags="ck")
        assert stray.code == ResponseCode.SUCCESS
        await trio.sleep(1.5)
        cores = revive.cores
        assert cores is not None
        assert sum(core.fed_written for core in cores) - fed_before >= 5  # CKs, ACKs, change
        store = h.broker.store.message_store
        for core in cores:
            again = ReviveCore(core.queue_id, 0)
            res = store.get_messages(REVIVE, core.queue_id, 0, 10_000, 1 << 24)
            for buf in res.buffers:
                for msg in iter_stored(buf):
                    match read_record(msg):
                        case CkRecord(ck=ck, offset=offset):
                            again.on_ck(ck, offset)
                        case AckRecord(ack=ack):
                            again.on_ack(ack)
                        case OtherRecord():
                            pass
            again.advance_read(res.next_begin_offset)
            assert again.read_offset == core.read_offset
            assert again.due(now_ms() + 10**9) == core.due(now_ms() + 10**9)
            assert again.revive_offset() == core.revive_offset()
        # pending: the three never acknowledged, and got[8] (under its new CK)
        pending = {
            (r.ck.queue_id, o) for c2 in cores for r in c2.due(now_ms() + 10**9) for o in r.offsets
        }
        assert pending == {(m.queue_id, m.queue_offset) for m in got[8:]}


async def test_batch_ack(tmp_path: Any, mock_clock: trio.testing.MockClock) -> None:
    async with harness(tmp_path) as h, simple(h) as c:
        await send_n(h, 8, queue_id=1)
        got = await receive_all(c, invisible=10.0)
        assert len(got) == 8
        info = ExtraInfo.parse(got[0].receipt_handle)
        keep = {b"m3", b"m6"}
        bits = tuple(m.queue_offset - info.ck_queue_offset for m in got if m.body not in keep)
        body = BatchAckMessageRequestBody(
            "broker-a",
            (
                BatchAck(
                    GROUP,
                    TOPIC,
                    info.retry,
                    info.ck_queue_offset,
                    info.queue_id,
                    info.revive_qid,
                    info.pop_time,
                    info.invisible_time,
                    bits,
                ),
            ),
        )
        cmd = RemotingCommand(RequestCode.BATCH_ACK_MESSAGE, body=body.to_json())
        resp = await h.invoke(cmd)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert [t for t, _ in revive_records(h)].count("bAck") == 1
        await trio.sleep(15)
        assert bodies(await receive_all(c)) == sorted(keep)


async def test_two_consumers_share_without_duplicates(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, simple(h) as c1, simple(h) as c2:
        await send_n(h, 200)
        seen: list[bytes] = []

        async def consume(c: SimpleConsumer) -> None:
            idle = 0
            while idle < 3:
                got = await c.receive(8, 30.0, await_duration=0)
                if not got:
                    idle += 1
                    await trio.sleep(0.01)
                    continue
                idle = 0
                for m in got:
                    seen.append(m.body)
                    await c.ack(m)

        async with trio.open_nursery() as n:
            n.start_soon(consume, c1)
            n.start_soon(consume, c2)
        assert sorted(seen) == sorted(f"m{i}".encode() for i in range(200))
        await trio.sleep(60)
        assert await receive_all(c1) == [] and await receive_all(c2) == []


async def test_long_polling_answered_when_a_message_arrives(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, simple(h) as c:
        await send_n(h, 1)  # creates the topic
        [first] = await receive_all(c)
        await c.ack(first)
        got: list[ReceivedMessage] = []
        answered_at: list[float] = []

        async def wait_for_one() -> None:
            got.extend(await c.receive(4, 30.0, await_duration=15.0))
            answered_at.append(trio.current_time())

        async with trio.open_nursery() as n:
            n.start_soon(wait_for_one)
            await trio.sleep(5.0)
            sent_at = trio.current_time()
            await send_n(h, 1, prefix="late")
        assert bodies(got) == [b"late0"]
        assert answered_at[0] - sent_at < 0.5  # not at the 15 s deadline
        # and with nothing arriving the pop ends at its pollTime with nothing
        start = trio.current_time()
        assert await c.receive(4, 30.0, await_duration=3.0) == []
        assert 3.0 <= trio.current_time() - start < 4.0


async def test_tag_filter(tmp_path: Any, mock_clock: trio.testing.MockClock) -> None:
    async with harness(tmp_path) as h, simple(h, expr="a") as c:
        await send_n(h, 3, prefix="a", tags="a")
        await send_n(h, 3, prefix="b", tags="b")
        got = await receive_all(c)
        assert bodies(got) == [b"a0", b"a1", b"a2"]


# ------------------------------------------------------------------------------- restart


async def test_restart_with_messages_in_flight(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        async with simple(h) as c:
            await send_n(h, 6)
            got = await receive_all(c, invisible=30.0)
            assert len(got) == 6
            for m in got:
                if m.body in (b"m0", b"m1", b"m2"):
                    await c.ack(m)
            await trio.sleep(5)  # revive rounds read the CK and ACKs and commit their offset
        await h.stop_broker()
        await h.start_broker()
        async with simple(h) as c:
            assert await receive_all(c) == []  # still invisible after the restart
            await trio.sleep(35)
            back = await receive_all(c)
            assert bodies(back) == [b"m3", b"m4", b"m5"]
            for m in back:
                await c.ack(m)
            await trio.sleep(60)
            assert await receive_all(c) == []
        # the revive offset reached the disk (consumerOffset.json) past the handled CKs
        await h.stop_broker()
        path = tmp_path / "store" / "config" / "consumerOffset.json"
        table = json.loads(path.read_text())["offsetTable"]
        assert any(k.startswith(f"{REVIVE}@{REVIVE_GROUP}") for k in table)


async def test_crash_with_messages_in_flight_unacked_come_back(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """kill -9 with messages in flight: the CKs and ACKs are in the (SYNC_FLUSH) CommitLog, so
    once the pop offset has been persisted (every flushConsumerOffsetInterval) exactly the
    un-acked messages come back."""
    async with harness(tmp_path, flushDiskType=FlushDiskType.SYNC_FLUSH) as h:
        async with simple(h) as c:
            await send_n(h, 4)
            got = await receive_all(c, invisible=30.0)
            for m in got:
                if m.body in (b"m0", b"m1"):
                    await c.ack(m)
            await trio.sleep(6)  # consumerOffset.json written (flushConsumerOffsetInterval)
        await h.crash_broker()
        await h.start_broker(flushDiskType=FlushDiskType.SYNC_FLUSH)
        async with simple(h) as c:
            await trio.sleep(40)
            back = await receive_all(c)
            assert bodies(back) == [b"m2", b"m3"]


# ------------------------------------------------------------------------------- admin


async def test_pop_inflight_and_revive_topic_status(
    tmp_path: Any, mock_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    async with harness(tmp_path) as h, simple(h) as c:
        await send_n(h, 5, queue_id=2)
        got = await receive_all(c, invisible=60.0)
        await c.ack(got[0])
        await trio.sleep(1.5)  # one revive scan
        async with MQAdmin(h.namesrv_addr, h.net.transport("10.0.0.250")) as admin:
            prog = await pop_progress(admin, GROUP, TOPIC)
            [q2] = [q for q in prog.queues if q.queueId == 2]
            # the pop offset moved past the popped messages: no lag, 4 still in flight
            assert (q2.brokerOffset, q2.consumerOffset, q2.lag, q2.inflight) == (5, 5, 0, 4)
            assert prog.total_inflight == 4 and prog.revive_not_running == []
            # the in-flight count falls as messages are acknowledged
            for m in got[1:3]:
                await c.ack(m)
            await trio.sleep(1.5)
            assert (await pop_progress(admin, GROUP, TOPIC)).total_inflight == 2
            # the CLI view: rocketrio admin popProgress
            capsys.readouterr()
            with structlog.testing.capture_logs():
                argv = ["admin", "popProgress", "-n", h.namesrv_addr, "-g", GROUP, "--json"]
                code = await main_async(argv, Wiring(h.net.transport("10.0.0.251")))
            out = json.loads(capsys.readouterr().out)
            assert code == 0 and out["total_inflight"] == 2, out
            with structlog.testing.capture_logs():
                code = await main_async(argv[:-1], Wiring(h.net.transport("10.0.0.252")))
            text, err = capsys.readouterr()
            assert code == 0, err
            assert "inflight" in text and "total inflight: 2" in text, text
            # topicStatus on the revive topic: its 8 queues hold the CK and the 3 ACKs
            status = await admin.topic_status(REVIVE)
            assert len(status) == 8
            assert sum(s.maxOffset for s in status) == 4


async def test_client_ack_batch_across_queues_and_retry(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, simple(h) as c:
        await send_n(h, 12)  # spread over the 4 queues
        got = await receive_all(c, invisible=5.0)
        assert len(got) == 12
        await c.ack_batch([m for m in got if m.body != b"m7"])
        await trio.sleep(8)
        again = await receive_all(c, invisible=5.0)
        assert bodies(again) == [b"m7"]  # from the pop retry topic, receipt retry mark 1
        await c.ack_batch(again)
        await trio.sleep(30)
        assert await receive_all(c) == []


async def test_revive_runs_only_on_the_master(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """A slave keeps no revive state and revives nothing (secondary messages are the
    master's job); GET_POP_INFLIGHT says so."""
    async with harness(tmp_path, brokerRole=BrokerRole.SLAVE, brokerId=1) as h:
        await trio.sleep(5)
        assert h.broker is not None
        assert h.broker.pop.revive.cores is None and h.broker.pop.revive.rounds == 0
        assert h.broker.pop.revive.inflight(GROUP) is None
        resp = await h.invoke(
            RemotingCommand(RequestCode.GET_POP_INFLIGHT, ext_fields={"consumerGroup": GROUP})
        )
        assert resp.code == ResponseCode.SUCCESS
        assert json.loads(resp.body)["reviveRunning"] is False


async def test_dlq_after_max_reconsume_times(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, simple(h) as c:
        await send_n(h, 1, prefix="fresh")
        await send_n(h, 1, prefix="tired", reconsume_times=16)  # retryMaxTimes reached
        got = await receive_all(c, invisible=5.0)
        assert bodies(got) == [b"fresh0", b"tired0"]
        await trio.sleep(8)
        assert bodies(await receive_all(c, invisible=600.0)) == [b"fresh0"]
        assert h.broker is not None
        dlq = h.broker.store.message_store.get_messages(f"%DLQ%{GROUP}", 0, 0, 10, 1 << 20)
        [dead] = [m for b in dlq.buffers for m in iter_stored(b)]
        assert dead.body == b"tired0" and dead.reconsume_times == 17
        assert dead.properties["DLQ_ORIGIN_TOPIC"] == TOPIC


async def test_raw_pop_response_as_upstream(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await send_n(h, 3, queue_id=1)

        def pop_cmd(**kw: Any) -> RemotingCommand:
            ext = {
                "consumerGroup": GROUP,
                "topic": TOPIC,
                "queueId": "1",
                "maxMsgNums": "32",
                "invisibleTime": "10000",
                "pollTime": "0",
                "bornTime": str(now_ms()),
                "initMode": "0",
                **kw,
            }
            return RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=ext)

        resp = await h.invoke(pop_cmd())
        assert resp.code == ResponseCode.SUCCESS and resp.remark == "FOUND"
        ext = resp.ext_fields
        assert ext["invisibleTime"] == "10000" and int(ext["popTime"]) == now_ms()
        assert 0 <= int(ext["reviveQid"]) < 8 and ext["restNum"] == "0"
        assert ext["startOffsetInfo"] == "0 1 0" and ext["msgOffsetInfo"] == "0 1 0,1,2"
        assert [m.body for m in iter_stored(resp.body)] == [b"m0", b"m1", b"m2"]
        empty = await h.invoke(pop_cmd())
        assert empty.code == ResponseCode.POLLING_TIMEOUT
        assert empty.remark == "NO_MESSAGE_IN_QUEUE"
        ordered = await h.invoke(pop_cmd(order="true"))  # served (test_pop_order.py)
        assert ordered.code == ResponseCode.POLLING_TIMEOUT
        assert ordered.ext_fields["reviveQid"] == "999"
        too_many = await h.invoke(pop_cmd(maxMsgNums="33"))
        assert too_many.code == ResponseCode.SYSTEM_ERROR
        bad = RemotingCommand(
            RequestCode.ACK_MESSAGE,
            ext_fields={
                "consumerGroup": GROUP,
                "topic": TOPIC,
                "queueId": "1",
                "extraInfo": "not a receipt",
                "offset": "0",
            },
        )
        assert (await h.invoke(bad)).code == ResponseCode.INVALID_PARAMETER
        beyond = RemotingCommand(
            RequestCode.ACK_MESSAGE,
            ext_fields={
                "consumerGroup": GROUP,
                "topic": TOPIC,
                "queueId": "1",
                "extraInfo": f"0 {now_ms()} 10000 0 0 broker-a 1 9",
                "offset": "9",
            },
        )
        assert (await h.invoke(beyond)).code == ResponseCode.NO_MESSAGE
