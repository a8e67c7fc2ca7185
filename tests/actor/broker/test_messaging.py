"""Broker messaging on SimNetwork + MockClock: send / batch / pull, tag filters, long polling,
SYNC_FLUSH group commit, retry and DLQ, query by key and by id."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import FlushDiskType
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    PULL_FLAG_SUBSCRIPTION,
    ConsumerSendMsgBackRequestHeader,
    QueryMessageRequestHeader,
    SendMessageRequestHeaderV2,
    ViewMessageRequestHeader,
)
from rocketrio.protocol.message import (
    BatchItem,
    decode_stored,
    encode_batch_body,
    encode_properties,
    iter_stored,
    parse_offset_msg_id,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext
from tests.harness.broker import harness, messages
from tests.harness.clock import EPOCH_MS

# --------------------------------------------------------------------------- send and pull


async def test_send_v1_v2_then_pull_back(tmp_path: Any, mock_clock: trio.testing.MockClock) -> None:
    async with harness(tmp_path) as h:
        r1 = await h.send("T", b"one", tags="a", keys="k1 k2", queue_id=1, code=10)
        r2 = await h.send("T", b"two", tags="b", queue_id=1, props={"UNIQ_KEY": "C0FFEE"})
        assert (r1.code, r2.code) == (ResponseCode.SUCCESS, ResponseCode.SUCCESS)
        assert [r1.ext_fields["queueOffset"], r2.ext_fields["queueOffset"]] == ["0", "1"]
        assert r2.ext_fields["transactionId"] == "C0FFEE"
        # msgId is the offset message id: store host + commitlog offset
        ip, port, offset = parse_offset_msg_id(r2.ext_fields["msgId"])
        assert (ip, port) == ("10.0.0.2", 10911) and offset > 0

        resp = await h.pull("T", 1, 0)
        assert resp.code == ResponseCode.SUCCESS and resp.remark == "FOUND"
        assert resp.ext_fields["nextBeginOffset"] == "2"
        assert resp.ext_fields["maxOffset"] == "2"
        msgs = messages(resp)
        assert [m.body for m in msgs] == [b"one", b"two"]
        assert [m.queue_offset for m in msgs] == [0, 1]
        assert msgs[0].keys == ["k1", "k2"] and msgs[0].tags == "a"
        # the broker stamps UNIQ_KEY when the client did not, and always CLUSTER
        assert msgs[0].properties["UNIQ_KEY"] == r1.ext_fields["transactionId"]
        assert msgs[1].properties["UNIQ_KEY"] == "C0FFEE"
        assert all(m.properties["CLUSTER"] == "DefaultCluster" for m in msgs)
        assert msgs[1].commitlog_offset == offset
        assert msgs[0].store_host == "10.0.0.2:10911"

        resp = await h.pull("T", 1, 2)
        assert resp.code == ResponseCode.PULL_NOT_FOUND and resp.remark == "OFFSET_OVERFLOW_ONE"
        resp = await h.pull("T", 1, 9)
        assert resp.code == ResponseCode.PULL_OFFSET_MOVED
        assert resp.remark == "OFFSET_OVERFLOW_BADLY"
        resp = await h.pull("T", 3, 5)  # an empty queue pulled beyond 0
        assert resp.code == ResponseCode.PULL_OFFSET_MOVED
        resp = await h.pull("T", 3, 0)
        assert resp.code == ResponseCode.PULL_NOT_FOUND


async def test_batch_send_gets_consecutive_offsets(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await h.send("B", b"first", queue_id=0)
        items = [
            BatchItem(0, f"m{i}".encode(), {"TAGS": "t", "UNIQ_KEY": f"U{i}"}) for i in range(5)
        ]
        header = SendMessageRequestHeaderV2(
            a="PG",
            b="B",
            c="TBW102",
            d=4,
            e=0,
            f=0,
            g=EPOCH_MS,
            h=0,
            i=encode_properties({"WAIT": "true"}),
            m=True,
        )
        resp = await h.invoke(
            RemotingCommand(
                RequestCode.SEND_BATCH_MESSAGE,
                ext_fields=to_ext(header),
                body=encode_batch_body(items),
            )
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert resp.ext_fields["queueOffset"] == "1"
        ids = resp.ext_fields["msgId"].split(",")
        assert len(ids) == 5
        offsets = [parse_offset_msg_id(i)[2] for i in ids]
        assert offsets == sorted(offsets)
        msgs = messages(await h.pull("B", 0, 0))
        assert [m.body for m in msgs] == [b"first"] + [f"m{i}".encode() for i in range(5)]
        assert [m.queue_offset for m in msgs] == list(range(6))
        assert [m.properties["UNIQ_KEY"] for m in msgs[1:]] == [f"U{i}" for i in range(5)]
        assert all(m.properties["WAIT"] == "true" for m in msgs[1:])
        # a garbled batch body is refused as a whole, nothing is stored
        bad = RemotingCommand(
            RequestCode.SEND_BATCH_MESSAGE, ext_fields=to_ext(header), body=b"\x00\x00\x00\x09xx"
        )
        resp = await h.invoke(bad)
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL
        assert (await h.pull("B", 0, 6)).code == ResponseCode.PULL_NOT_FOUND


async def test_tag_filter(tmp_path: Any, mock_clock: trio.testing.MockClock) -> None:
    async with harness(tmp_path) as h:
        for tag in ["a", "b", "c", "a", "b"]:
            await h.send("F", tag.encode(), tags=tag, queue_id=0)
        resp = await h.pull("F", 0, 0, sub="a || c")
        assert [m.body for m in messages(resp)] == [b"a", b"c", b"a"]
        assert resp.ext_fields["nextBeginOffset"] == "5"
        resp = await h.pull("F", 0, 4, sub="c")
        assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert resp.remark == "NO_MATCHED_MESSAGE" and resp.ext_fields["nextBeginOffset"] == "5"
        header = h.pull_header("F", 0, 0, sub="a > 1")
        header.expressionType = "SQL92"
        resp = await h.invoke(RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=to_ext(header)))
        # enablePropertyFilter is off by default: refused as upstream (tests/actor/broker/
        # test_sql92_filter.py has it on)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == "The broker does not support consumer to filter message by SQL92"


async def test_size_limit(tmp_path: Any, mock_clock: trio.testing.MockClock) -> None:
    async with harness(tmp_path, maxMessageSize=1024) as h:
        resp = await h.send("S", b"x" * 1025)
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL
        assert "1025" in (resp.remark or "") and "maxMessageSize" in (resp.remark or "")
        assert (await h.send("S", b"x" * 1024)).code == ResponseCode.SUCCESS


# --------------------------------------------------------------------------- long polling


async def test_long_poll_answered_when_message_arrives(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await h.send("L", b"old", queue_id=0)
        result: dict[str, Any] = {}

        async def poll() -> None:
            t0 = trio.current_time()
            result["resp"] = await h.pull("L", 0, 1, suspend_ms=15_000)
            result["waited"] = trio.current_time() - t0

        async with trio.open_nursery() as n:
            n.start_soon(poll)
            await trio.sleep(2)
            assert "resp" not in result
            assert h.broker is not None and h.broker.pull.hold.count == 1
            await h.send("L", b"new", queue_id=0)
        resp = result["resp"]
        assert resp.code == ResponseCode.SUCCESS
        assert [m.body for m in messages(resp)] == [b"new"]
        assert 2 <= result["waited"] < 2.1


async def test_long_poll_times_out_with_not_found(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await h.send("L", b"old", queue_id=0)
        t0 = trio.current_time()
        resp = await h.pull("L", 0, 1, suspend_ms=5_000)
        assert resp.code == ResponseCode.PULL_NOT_FOUND
        assert 5 <= trio.current_time() - t0 < 5.1
        # long polling off: the hold lasts shortPollingTimeMills instead
        await h.stop_broker()
        await h.start_broker(longPollingEnable=False, shortPollingTimeMills=700)
        t0 = trio.current_time()
        resp = await h.pull("L", 0, 1, suspend_ms=5_000)
        assert resp.code == ResponseCode.PULL_NOT_FOUND
        assert 0.7 <= trio.current_time() - t0 < 0.8


async def test_long_poll_ignores_messages_the_filter_rejects(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await h.send("LF", b"skip0", tags="other", queue_id=0)
        result: dict[str, Any] = {}

        async def poll() -> None:
            result["resp"] = await h.pull("LF", 0, 1, sub="wanted", suspend_ms=15_000)

        async with trio.open_nursery() as n:
            n.start_soon(poll)
            await trio.sleep(1)
            await h.send("LF", b"skip", tags="other", queue_id=0)
            await trio.sleep(1)
            assert "resp" not in result
            await h.send("LF", b"take", tags="wanted", queue_id=0)
        resp = result["resp"]
        assert resp.code == ResponseCode.SUCCESS
        assert [m.body for m in messages(resp)] == [b"take"]
        assert resp.ext_fields["nextBeginOffset"] == "3"


async def test_long_polls_do_not_block_other_requests_on_the_connection(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        async with trio.open_nursery() as n:
            for qid in range(4):
                n.start_soon(lambda q=qid: h.pull("NB", q, 0, suspend_ms=15_000))
            await trio.sleep(0.5)
            t0 = trio.current_time()
            assert (await h.send("NB", b"x", queue_id=3)).code == ResponseCode.SUCCESS
            assert trio.current_time() - t0 < 0.1
            n.cancel_scope.cancel()


# --------------------------------------------------------------------------- group commit


async def test_sync_flush_group_commit(tmp_path: Any, mock_clock: trio.testing.MockClock) -> None:
    async def slow_fsync(fn: Any) -> Any:
        result = fn()
        await trio.sleep(0.002)  # the fsync takes time; sends keep arriving meanwhile
        return result

    async with harness(tmp_path, start=False) as h:
        broker = await h.start_broker(
            run_blocking=slow_fsync, flushDiskType=FlushDiskType.SYNC_FLUSH
        )
        offsets: list[int] = []

        async def send(i: int) -> None:
            resp = await h.send("G", f"m{i}".encode(), queue_id=0)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            offsets.append(int(resp.ext_fields["queueOffset"]))

        before = broker.store.actor.flusher.sync_flush_count
        async with trio.open_nursery() as n:
            for i in range(300):
                n.start_soon(send, i)
                await trio.sleep(0.0001)  # sends keep arriving over ~15 fsync durations
        flushes = broker.store.actor.flusher.sync_flush_count - before
        assert sorted(offsets) == list(range(300))
        # one fsync per group of sends that arrived during the previous fsync
        assert 5 <= flushes <= 30, flushes
        # every acknowledged send was fsynced: the CommitLog is flushed up to its end
        assert (
            broker.store.message_store.flushed_offset
            == broker.store.message_store.get_commitlog_max_offset()
        )


# --------------------------------------------------------------------------- retry and DLQ


async def test_send_back_retries_then_dead_letter_queue(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    # short levels: a send-back waits at level 3 + reconsumeTimes (3 s, 4 s, 5 s) first
    async with harness(tmp_path, messageDelayLevel="1s 2s 3s 4s 5s 6s") as h:
        sent = await h.send("R", b"payload", tags="t", keys="K", queue_id=0)
        uniq = sent.ext_fields["transactionId"]
        msg = messages(await h.pull("R", 0, 0))[0]
        max_times = 3

        async def send_back(offset: int, delay_level: int = 0) -> RemotingCommand:
            header = ConsumerSendMsgBackRequestHeader(
                offset=offset,
                group="CG",
                delayLevel=delay_level,
                originMsgId=uniq,
                originTopic=None,
                maxReconsumeTimes=max_times,
            )
            cmd = RemotingCommand(RequestCode.CONSUMER_SEND_MSG_BACK, ext_fields=to_ext(header))
            return await h.invoke(cmd)

        offset = msg.commitlog_offset
        for attempt in range(1, max_times + 1):
            sent_back_ms = EPOCH_MS + int(trio.current_time() * 1000)
            assert (await send_back(offset)).code == ResponseCode.SUCCESS
            # not there yet: it waits in SCHEDULE_TOPIC_XXXX at level 3 + reconsumeTimes
            early = await h.pull("%RETRY%CG", 0, attempt - 1)
            assert early.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED)
            retry = messages(await h.pull("%RETRY%CG", 0, attempt - 1, suspend_ms=15_000))
            assert len(retry) == 1
            m = retry[0]
            delay_ms = (2 + attempt) * 1000
            assert sent_back_ms + delay_ms <= m.store_timestamp <= sent_back_ms + delay_ms + 100
            assert "DELAY" not in m.properties and "REAL_TOPIC" not in m.properties
            assert m.body == b"payload" and m.reconsume_times == attempt
            assert m.properties["RETRY_TOPIC"] == "R"
            assert m.properties["ORIGIN_MESSAGE_ID"] == msg.offset_msg_id
            assert m.properties["UNIQ_KEY"] == uniq
            offset = m.commitlog_offset
        # reconsumeTimes reached maxReconsumeTimes: the next send-back goes to the DLQ
        assert (await send_back(offset)).code == ResponseCode.SUCCESS
        assert (await h.pull("%RETRY%CG", 0, max_times)).code == ResponseCode.PULL_NOT_FOUND
        dlq = messages(await h.pull("%DLQ%CG", 0, 0))
        assert len(dlq) == 1 and dlq[0].body == b"payload"
        assert dlq[0].reconsume_times == max_times + 1
        assert dlq[0].properties["DLQ_ORIGIN_TOPIC"] == "R"
        # delayLevel < 0 sends straight to the DLQ
        assert (await send_back(msg.commitlog_offset, delay_level=-1)).code == ResponseCode.SUCCESS
        assert len(messages(await h.pull("%DLQ%CG", 0, 1))) == 1
        # a bogus offset is a clear error
        resp = await send_back(msg.commitlog_offset + 1)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "look message by offset" in resp.remark


async def test_producer_retry_send_beyond_max_goes_to_dlq(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        ok = await h.send("%RETRY%CG2", b"r1", reconsume_times=2, max_reconsume_times=2)
        assert ok.code == ResponseCode.SUCCESS
        dlq = await h.send("%RETRY%CG2", b"r2", reconsume_times=3, max_reconsume_times=2)
        assert dlq.code == ResponseCode.SUCCESS
        assert [m.body for m in messages(await h.pull("%DLQ%CG2", 0, 0))] == [b"r2"]


# --------------------------------------------------------------------------- queries


async def test_query_by_key_unique_key_and_id(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await h.send("Q", b"a", keys="order-1 shared", props={"UNIQ_KEY": "U-A"})
        resp_b = await h.send("Q", b"b", keys="order-2 shared", props={"UNIQ_KEY": "U-B"})

        async def query(key: str, unique: bool = False) -> RemotingCommand:
            header = QueryMessageRequestHeader("Q", key, 32, 0, EPOCH_MS * 2)
            ext = to_ext(header)
            if unique:
                ext["_UNIQUE_KEY_QUERY"] = "true"
            return await h.invoke(RemotingCommand(RequestCode.QUERY_MESSAGE, ext_fields=ext))

        assert [m.body for m in iter_stored((await query("order-2")).body)] == [b"b"]
        assert sorted(m.body for m in iter_stored((await query("shared")).body)) == [b"a", b"b"]
        assert [m.body for m in iter_stored((await query("U-A", unique=True)).body)] == [b"a"]
        miss = await query("nope")
        assert miss.code == ResponseCode.QUERY_NOT_FOUND

        offset = parse_offset_msg_id(resp_b.ext_fields["msgId"])[2]
        view = await h.invoke(
            RemotingCommand(
                RequestCode.VIEW_MESSAGE_BY_ID, ext_fields=to_ext(ViewMessageRequestHeader(offset))
            )
        )
        assert view.code == ResponseCode.SUCCESS
        msg, end = decode_stored(view.body)
        assert msg.body == b"b" and end == len(view.body)
        bad = await h.invoke(
            RemotingCommand(
                RequestCode.VIEW_MESSAGE_BY_ID,
                ext_fields=to_ext(ViewMessageRequestHeader(offset + 3)),
            )
        )
        assert bad.code == ResponseCode.SYSTEM_ERROR


async def test_pull_without_subscription_needs_heartbeat(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await h.send("NS", b"x", queue_id=0)
        resp = await h.pull("NS", 0, 0, sub=None, flags=0)
        assert resp.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        resp = await h.pull("NS", 0, 0, flags=PULL_FLAG_SUBSCRIPTION)
        assert resp.code == ResponseCode.SUCCESS
