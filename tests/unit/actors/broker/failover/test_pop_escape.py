"""The pinned master's read-back of an escaped CK's messages (failover/pop_escape.py
`ForeignReader`): the one message asked for, "gone" only when the other group says so, and
"try again" (QueueReadUnavailable) when it could not be asked or answered something else
(upstream reads an RPC error as "not found", #8460)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from rocketrio.actors.broker.failover.pop_escape import ForeignReader
from rocketrio.actors.broker.store.queue_reader import QueueReadUnavailable
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import PullMessageRequestHeader
from rocketrio.protocol.message_build import build_stored_message
from rocketrio.protocol.remoting import RemotingCommand

HOST = (bytes([10, 0, 0, 1]), 10911)


def record(queue_offset: int, body: bytes) -> bytes:
    return build_stored_message(
        topic="C", queue_id=0, body=body, flag=0, properties="", sys_flag=0, born_timestamp=1,
        born_host=HOST, store_timestamp=2, store_host=HOST, queue_offset=queue_offset,
    )  # fmt: skip


def reader(answer: RemotingCommand | str, asked: list[Any]) -> ForeignReader:
    async def call(bname: str, topic: str, code: int, header: Any) -> RemotingCommand | str:
        asked.append((bname, topic, code, header))
        return answer

    return ForeignReader("DefaultCluster", call)


def read(r: ForeignReader, offset: int) -> list[bytes]:
    async def go() -> list[bytes]:
        return await r.read("broker-a", "C", 0, offset, 1024)

    return trio.run(go)


def test_the_message_at_that_offset_from_the_groups_routed_id_0() -> None:
    asked: list[Any] = []
    answer = RemotingCommand(ResponseCode.SUCCESS, body=record(5, b"m5") + record(6, b"m6"))
    assert read(reader(answer, asked), 5) == [record(5, b"m5")]
    ((bname, topic, code, header),) = asked
    assert (bname, topic, code) == ("broker-a", "DefaultCluster", RequestCode.PULL_MESSAGE)
    assert isinstance(header, PullMessageRequestHeader)
    assert (header.topic, header.queueId, header.queueOffset, header.maxMsgNums) == ("C", 0, 5, 1)


def test_another_offset_is_no_answer_and_not_found_is_gone() -> None:
    answer = RemotingCommand(ResponseCode.SUCCESS, body=record(9, b"m9"))
    assert read(reader(answer, []), 5) == []
    for code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED):
        assert read(reader(RemotingCommand(code), []), 5) == []


def test_a_call_that_failed_or_an_odd_answer_is_tried_again() -> None:
    with pytest.raises(QueueReadUnavailable, match="no address"):
        read(reader("no address of broker broker-a", []), 5)
    for code in (ResponseCode.SYSTEM_ERROR, ResponseCode.PULL_RETRY_IMMEDIATELY):
        with pytest.raises(QueueReadUnavailable):
            read(reader(RemotingCommand(code, remark="busy"), []), 5)
