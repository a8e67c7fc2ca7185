"""AckMessage with many entries (SPEC P2): the proxy acknowledges them in one BATCH_ACK_MESSAGE
to the broker, yet every entry keeps its own status (a bad handle among good ones is refused
alone), and what was acknowledged is never delivered again while the rest is."""

from __future__ import annotations

from typing import Any

import trio
from google.protobuf.duration_pb2 import Duration

from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from tests.actor.proxy.test_rpcs import GROUP, TOPIC, fill, proxied
from tests.harness.broker import harness


def receive_req(batch: int, invisible_s: int) -> Any:
    return spb.ReceiveMessageRequest(
        group=pb.Resource(name=GROUP),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC)),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=batch,
        invisible_duration=Duration(seconds=invisible_s),
        long_polling_timeout=Duration(seconds=1),
    )


def messages(stream: list[Any]) -> list[Any]:
    return [r.message for r in stream if r.WhichOneof("content") == "message"]


async def test_many_entries_one_batch_each_entry_its_own_status(tmp_path: Any) -> None:
    async with harness(tmp_path) as h, proxied(h) as rpc:
        await fill(h, 4)
        got = messages(await rpc("ReceiveMessage", receive_req(4, 20)))
        assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2", b"m3"]
        keep = next(m for m in got if m.body == b"m2")  # not acknowledged: comes back
        entries = [
            spb.AckMessageEntry(
                message_id=m.system_properties.message_id,
                receipt_handle=m.system_properties.receipt_handle,
            )
            for m in got
            if m is not keep
        ]
        entries.insert(1, spb.AckMessageEntry(message_id="bad", receipt_handle="not-a-handle"))
        r = await rpc(
            "AckMessage",
            spb.AckMessageRequest(
                group=pb.Resource(name=GROUP), topic=pb.Resource(name=TOPIC), entries=entries
            ),
        )
        codes = [e.status.code for e in r.entries]
        assert codes == [pb.OK, pb.INVALID_RECEIPT_HANDLE, pb.OK, pb.OK], r
        assert [e.message_id for e in r.entries] == [e.message_id for e in entries]
        assert r.status.code == pb.MULTIPLE_RESULTS
        # once the invisible time is over, only the unacknowledged one is delivered again
        await trio.sleep(25)
        again: list[Any] = []
        for _ in range(10):
            again += messages(await rpc("ReceiveMessage", receive_req(4, 20)))
            if again:
                break
            await trio.sleep(5)
        assert [m.body for m in again] == [b"m2"]
