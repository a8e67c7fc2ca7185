"""Sends and acks answered on the gRPC loop (`LoopCalls`, loop_remoting.py), against a fake
broker on loopback (asyncio, the sans-io frame codec): a call it cannot do at once goes to Trio
(None), and nothing was written; once the route is published and the connection open, a send
gets the broker's offset and the message's id, an ack the broker's verdict, both in the shapes
the Trio path gives; the frames of one loop turn reach the broker in one write; a broker that
does not answer fails the call at the send timeout, one that closes the connection at once, and
the next calls go to Trio while a new connection opens."""

from __future__ import annotations

import asyncio
from typing import Any

from rocketrio.actors.client.simple_consumer import ack_command
from rocketrio.actors.proxy.ack_nowait import ack_ext
from rocketrio.actors.proxy.loop_remoting import LoopCalls
from rocketrio.actors.proxy.mapping import PROXY_PRODUCER_GROUP, TargetQueue
from rocketrio.actors.proxy.receipt import decode_receipt, encode_receipt
from rocketrio.actors.proxy.send import SendPath, send_ext
from rocketrio.actors.proxy.service import ProxyService
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.headers import SendMessageRequestHeaderV2
from rocketrio.protocol.message import TRANSACTION_PREPARED_TYPE, encode_properties
from rocketrio.protocol.pop_checkpoint import BatchAckMessageRequestBody
from rocketrio.protocol.pop_extra_info import POP_ORDER_REVIVE_QUEUE, ExtraInfo
from rocketrio.protocol.serde import to_ext
from tests.harness.loop_broker import BROKER, TOPIC, FakeBroker, connected, route, send_req


def calls(renewing: frozenset[str] = frozenset()) -> LoopCalls:
    sends = SendPath(None, "", 4 << 20, lambda: 1_700_000_000_000)  # type: ignore[arg-type]
    sends.timeout_s = 0.3

    def error_answer(method: str, e: BaseException) -> Any:
        return ("error", method, str(e))

    return LoopCalls(sends, error_answer, lambda: renewing)


def ack_req(group: str = "G", handle: str | None = None) -> Any:
    extra = ExtraInfo(5, 1_700_000_000_000, 30_000, 0, "0", BROKER, 2, 5).build()
    handle = handle if handle is not None else encode_receipt(extra, 5, 1234)
    entry = spb.AckMessageEntry(message_id="M5", receipt_handle=handle)
    return spb.AckMessageRequest(
        group=pb.Resource(name=group), topic=pb.Resource(name=TOPIC), entries=[entry]
    )


def handle_of(offset: int, ck: int = 4, broker: str = BROKER, revive_qid: int = 0) -> str:
    """The handle of the message at ``offset`` popped with the checkpoint starting at ``ck``."""
    extra = ExtraInfo(ck, 1_700_000_000_000, 30_000, revive_qid, "0", broker, 2, offset)
    return encode_receipt(extra.build(), offset, 1000 + offset)


def acks_req(*handles: str) -> Any:
    entries = [
        spb.AckMessageEntry(message_id=f"M{i}", receipt_handle=h) for i, h in enumerate(handles)
    ]
    return spb.AckMessageRequest(
        group=pb.Resource(name="G"), topic=pb.Resource(name=TOPIC), entries=entries
    )


def test_sends_and_acks_on_the_loop_answer_as_the_trio_path() -> None:
    async def main() -> None:
        broker = FakeBroker()
        async with await broker.start():
            c = calls(renewing=frozenset({"Renewing"}))
            assert c.start("SendMessage", send_req(0)) is None  # no route published yet
            await connected(c, broker)
            assert broker.requests == []  # nothing was written for the calls sent to Trio
            answers = await asyncio.gather(*(c.start("SendMessage", send_req(i)) for i in range(5)))
            assert [a.status.code for a in answers] == [pb.OK] * 5
            assert [a.entries[0].message_id for a in answers] == [f"LOOP{i}" for i in range(5)]
            assert sorted(a.entries[0].offset for a in answers) == [0, 1, 2, 3, 4]
            assert broker.reads == [5]  # one loop turn's frames in one write
            ok = await c.start("AckMessage", ack_req())
            assert ok.status.code == pb.OK and ok.entries[0].message_id == "M5"
            ack = broker.requests[-1]
            assert ack.code == RequestCode.ACK_MESSAGE
            assert ack.ext_fields["consumerGroup"] == "G" and ack.ext_fields["offset"] == "5"
            broker.ack_code = ResponseCode.NO_MESSAGE
            refused = await c.start("AckMessage", ack_req())
            assert refused.entries[0].status.code != pb.OK
            assert "no" in refused.entries[0].status.message
            # to Trio: a group under auto renewal, a bad handle, another call
            assert c.start("AckMessage", ack_req(group="Renewing")) is None
            assert c.start("AckMessage", ack_req(handle="not-a-handle")) is None
            assert c.start("QueryRoute", spb.QueryRouteRequest()) is None
            assert len(broker.requests) == 7

    asyncio.run(main())


def test_an_ack_of_many_entries_is_one_batch_on_the_loop_and_each_entry_alone_when_refused() -> (
    None
):
    """Several entries of one broker set, all unordered pops in their checkpoints' ranges: one
    BATCH_ACK_MESSAGE (a bit per entry in its checkpoint's BatchAck, as the Trio path's
    ``SimpleConsumer.ack_batch`` writes it), every entry OK; a refused batch: one ACK_MESSAGE
    per entry, each entry its own status, MULTIPLE_RESULTS overall. Any other mix is Trio's,
    with nothing written."""

    async def main() -> None:
        broker = FakeBroker()
        async with await broker.start():
            c = calls()
            await connected(c, broker)
            ok = await c.start(
                "AckMessage", acks_req(handle_of(6), handle_of(4), handle_of(9, ck=8))
            )
            assert ok.status.code == pb.OK
            assert [(e.message_id, e.status.code) for e in ok.entries] == [
                ("M0", pb.OK), ("M1", pb.OK), ("M2", pb.OK)
            ]  # fmt: skip
            assert [r.code for r in broker.requests] == [RequestCode.BATCH_ACK_MESSAGE]
            body = BatchAckMessageRequestBody.from_json(broker.requests[0].body)
            assert body.broker_name == BROKER
            assert {(a.start_offset, tuple(a.ack_offsets())) for a in body.acks} == {
                (4, (4, 6)), (8, (9,))
            }  # fmt: skip
            assert {a.consumer_group for a in body.acks} == {"G"}
            broker.batch_code = ResponseCode.SYSTEM_ERROR
            broker.ack_codes = {"6": ResponseCode.NO_MESSAGE}
            mixed = await c.start("AckMessage", acks_req(handle_of(5), handle_of(6), handle_of(7)))
            codes = [e.status.code for e in mixed.entries]
            assert codes[0] == codes[2] == pb.OK and codes[1] != pb.OK
            assert "no" in mixed.entries[1].status.message
            assert mixed.status.code == pb.MULTIPLE_RESULTS
            sent = [(r.code, r.ext_fields.get("offset")) for r in broker.requests[1:]]
            assert sent == [(RequestCode.BATCH_ACK_MESSAGE, None)] + [
                (RequestCode.ACK_MESSAGE, str(o)) for o in (5, 6, 7)
            ]
            broker.ack_codes = {}
            broker.ack_code = ResponseCode.NO_MESSAGE  # every entry refused alike: its status
            alike = await c.start("AckMessage", acks_req(handle_of(5), handle_of(7)))
            assert alike.status.code == alike.entries[0].status.code != pb.OK
            written = len(broker.requests)
            # to Trio: two broker sets, an ordered pop's entry, one before its checkpoint, a
            # bad handle among good ones, no entry at all
            for req in (
                acks_req(handle_of(5), handle_of(6, broker="broker-b")),
                acks_req(handle_of(5), handle_of(6, revive_qid=POP_ORDER_REVIVE_QUEUE)),
                acks_req(handle_of(5), handle_of(3)),
                acks_req(handle_of(5), "not-a-handle"),
                acks_req(),
            ):
                assert c.start("AckMessage", req) is None
            assert len(broker.requests) == written

    asyncio.run(main())


def test_unanswered_and_lost_requests_fail_and_the_next_go_to_trio_until_reconnected() -> None:
    async def main() -> None:
        broker = FakeBroker()
        async with await broker.start():
            c = calls()
            await connected(c, broker)
            broker.silent = True
            late = await c.start("SendMessage", send_req(1))
            assert late[0] == "error" and "timed out" in late[2]
            pending = c.start("SendMessage", send_req(2))
            assert pending is not None
            task = asyncio.ensure_future(pending)
            await asyncio.sleep(0.05)
            broker.writers[-1].close()  # the broker drops the connection
            lost = await task
            assert lost[0] == "error" and ("lost" in lost[2] or "closed" in lost[2]), lost
            assert c.start("SendMessage", send_req(3)) is None  # reconnecting: Trio's
            broker.silent = False
            for _ in range(200):
                await asyncio.sleep(0.01)
                again = c.start("SendMessage", send_req(4))
                if again is not None:
                    assert (await again).status.code == pb.OK
                    return
            raise AssertionError("no new connection")

    asyncio.run(main())


def test_written_out_headers_are_the_typed_headers_ext_fields() -> None:
    """`send_ext` and `ack_ext` (the loop path's headers, written out) give what ``to_ext`` of
    the typed headers gives: the wire is unchanged."""
    props = {"UNIQ_KEY": "M1", "TAGS": "t"}
    for half in (False, True):
        target = TargetQueue(BROKER, 3)
        typed = SendMessageRequestHeaderV2(
            a=PROXY_PRODUCER_GROUP, b=TOPIC, c="TBW102", d=4, e=3,
            f=TRANSACTION_PREPARED_TYPE if half else 0, g=1_700_000_000_123, h=0,
            i=encode_properties(props), j=0, k=False, m=False, n=BROKER,
        )  # fmt: skip
        assert send_ext(TOPIC, target, half, 1_700_000_000_123, props) == to_ext(typed)
    received = ProxyService.received.__get__(object())  # pure: no state of the service
    extra = ExtraInfo(5, 1_700_000_000_000, 30_000, 0, "0", BROKER, 2, 5).build()
    for handle in (encode_receipt(extra, 5, 1234), extra):  # with / without commit log offset
        expected = ack_command("G", received(TOPIC, handle)).ext_fields
        assert ack_ext("G", TOPIC, decode_receipt(handle)) == expected


def test_an_ack_at_a_hung_master_asks_for_the_route_and_is_given_up_at_a_new_master() -> None:
    """A master that does not answer (hung): the ack asks for its topic's route once late
    (``stuck_after_s``), and the route naming another master gives it up at once, long before
    its deadline; the same master published again changes nothing."""

    async def main() -> None:
        broker = FakeBroker()
        async with await broker.start():
            refreshed: list[str] = []
            c = calls()
            c.refresh = refreshed.append
            c.sends.timeout_s = 5.0
            c.stuck_after_s = 0.05
            await connected(c, broker)
            broker.silent = True
            pending = c.start("AckMessage", ack_req())
            assert pending is not None
            task = asyncio.ensure_future(pending)
            await asyncio.sleep(0.2)
            assert refreshed and set(refreshed) == {TOPIC}  # asked, again every POLL_S
            c.publish(TOPIC, route(broker.addr))  # the same master: nothing given up
            await asyncio.sleep(0.05)
            assert not task.done()
            t0 = asyncio.get_running_loop().time()
            c.publish(TOPIC, route("127.0.0.1:1"))  # a new master
            gone = await task
            assert asyncio.get_running_loop().time() - t0 < 1.0
            assert gone[0] == "error" and "given up" in gone[2], gone
            answered = len(refreshed)
            await asyncio.sleep(0.2)  # two POLL_S
            assert len(refreshed) == answered  # the answered ack asks no more

    asyncio.run(main())
