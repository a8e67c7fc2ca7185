"""An ACK_MESSAGE is judged by its queue's offset range as the store has it at that moment, on a
real broker (SimNetwork + MockClock): after the ConsumeQueue is cut below an acknowledged offset
(what a truncation does to a slave's store on a role change) that ACK is answered NO_MESSAGE,
after its topic is deleted TOPIC_NOT_EXIST, and once the topic is created again (its queues
empty) NO_MESSAGE again, the same codes and remark the ACK path always gave; an ACK inside
the range is answered SUCCESS and its record is in the revive topic."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import CreateTopicRequestHeader, DeleteTopicRequestHeader
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.pop_extra_info import revive_topic
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext
from tests.harness.broker import BrokerHarness, harness
from tests.harness.clock import now_ms

TOPIC, GROUP = "PopRangeT", "PopRangeG"


async def pop(h: BrokerHarness) -> tuple[dict[str, str], list[Any]]:
    ext = {
        "consumerGroup": GROUP,
        "topic": TOPIC,
        "queueId": "0",
        "maxMsgNums": "32",
        "invisibleTime": "60000",
        "pollTime": "0",
        "bornTime": str(now_ms()),
        "initMode": "0",
    }
    resp = await h.invoke(RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=ext))
    assert resp.code == ResponseCode.SUCCESS
    return resp.ext_fields, list(iter_stored(resp.body))


def ack_cmd(popped: dict[str, str], offset: int) -> RemotingCommand:
    # ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId offset
    receipt = f"0 {popped['popTime']} 60000 {popped['reviveQid']} 0 {BROKER} 0 {offset}"
    ext = {
        "consumerGroup": GROUP,
        "topic": TOPIC,
        "queueId": "0",
        "extraInfo": receipt,
        "offset": str(offset),
    }
    return RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=ext)


BROKER = "broker-a"


def acked_offsets(h: BrokerHarness) -> list[int]:
    """The offsets of every ACK record of the revive topic, read from the store files."""
    assert h.broker is not None
    store = h.broker.store.message_store
    out: list[int] = []
    for q in range(8):
        res = store.get_messages(revive_topic("DefaultCluster"), q, 0, 10_000, 1 << 24)
        for buf in res.buffers:
            for m in iter_stored(buf):
                body = json.loads(m.body)
                if m.tags in ("ack", "bAck"):
                    out.extend(body.get("aol") or [body["ao"]])
    return sorted(out)


async def test_an_ack_is_judged_by_the_range_its_queue_has_now(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        assert h.broker is not None and h.broker.config.brokerName == BROKER
        for i in range(6):
            r = await h.send(TOPIC, f"m{i}".encode(), queue_id=0)
            assert r.code == ResponseCode.SUCCESS
        popped, msgs = await pop(h)
        assert [m.queue_offset for m in msgs] == list(range(6))
        assert (await h.invoke(ack_cmd(popped, 5))).code == ResponseCode.SUCCESS
        assert (await h.invoke(ack_cmd(popped, 7))).code == ResponseCode.NO_MESSAGE  # [min, max]

        # the CommitLog and its ConsumeQueue cut at message 3: offsets 3.. are gone
        h.broker.store.message_store.truncate_to(msgs[3].commitlog_offset)
        assert h.broker.store.message_store.get_max_offset(TOPIC, 0) == 3
        cut = await h.invoke(ack_cmd(popped, 4))
        assert cut.code == ResponseCode.NO_MESSAGE
        assert cut.remark == (
            f"offset is illegal, key:{TOPIC}@0, offset:4, minOffset:0, maxOffset:3"
        )
        assert (await h.invoke(ack_cmd(popped, 2))).code == ResponseCode.SUCCESS

        delete = RemotingCommand(
            RequestCode.DELETE_TOPIC_IN_BROKER,
            ext_fields=to_ext(DeleteTopicRequestHeader(TOPIC)),
        )
        assert (await h.invoke(delete)).code == ResponseCode.SUCCESS
        gone = await h.invoke(ack_cmd(popped, 1))
        assert gone.code == ResponseCode.TOPIC_NOT_EXIST

        await h.send("Other", b"x")  # a turn of the store in between
        header = CreateTopicRequestHeader(TOPIC, "TBW102", 4, 4, 6, "SINGLE_TAG")
        create = RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=to_ext(header))
        assert (await h.invoke(create)).code == ResponseCode.SUCCESS
        empty = await h.invoke(ack_cmd(popped, 1))  # the new queue is empty: [0, 0]
        assert empty.code == ResponseCode.NO_MESSAGE
        assert acked_offsets(h) == [2]  # 5's record was after the cut, so cut with it
