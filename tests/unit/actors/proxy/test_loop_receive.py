"""ReceiveMessage answered on the gRPC loop (`LoopReceive`, loop_receive.py), against a fake
broker on loopback: a receive the loop may not take goes to Trio (None) with nothing written;
once Trio allowed its (group, topic), the POP's header is the Trio path's, the answer is the
Trio path's builder's output byte for byte, an empty long poll asks for the route, a refusal
has its mapped code; a POP parked at a master the route moved away from goes to Trio
(`TO_TRIO`), one that outlives its deadline is an error, a lost connection goes to Trio."""

from __future__ import annotations

import asyncio
from typing import Any

from google.protobuf.duration_pb2 import Duration

from rocketrio.actors.client.simple_consumer import popped_messages
from rocketrio.actors.proxy.grpc_bridge import TO_TRIO
from rocketrio.actors.proxy.loop_receive import pop_ext, receive_answers
from rocketrio.actors.proxy.loop_remoting import LoopCalls, RouteView
from rocketrio.actors.proxy.mapping import code_of_remoting
from rocketrio.actors.proxy.send import SendPath
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.message import encode_properties
from rocketrio.protocol.message_build import build_stored_message
from rocketrio.protocol.pop_extra_info import INIT_MODE_MAX
from rocketrio.protocol.pop_headers import PopMessageRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext
from tests.harness.loop_broker import BROKER, TOPIC, FakeBroker, connected, route

NOW = 1_700_000_000_000
HOST = (b"\x7f\x00\x00\x01", 10911)


def pop_body() -> bytes:
    return b"".join(
        build_stored_message(
            topic=TOPIC, queue_id=2, body=b"body%d" % i, flag=0,
            properties=encode_properties({"UNIQ_KEY": f"U{i}", "TAGS": "a", "KEYS": "k1 k2"}),
            sys_flag=0, born_timestamp=NOW - 5, born_host=HOST, store_timestamp=NOW - 4,
            store_host=HOST, queue_offset=40 + i, physical_offset=4096 + 100 * i,
        )
        for i in range(3)
    )  # fmt: skip


POP_EXT = {
    "popTime": str(NOW), "invisibleTime": "20000", "reviveQid": "1", "restNum": "0",
    "startOffsetInfo": "0 2 40", "msgOffsetInfo": "0 2 40,41,42",
}  # fmt: skip


class PopBroker(FakeBroker):
    """Answers POP_MESSAGE with three messages, or ``pop_code`` when it is set."""

    def __init__(self) -> None:
        super().__init__()
        self.pop_code: int | None = None

    def _answer(self, cmd: RemotingCommand) -> RemotingCommand:
        if cmd.code != RequestCode.POP_MESSAGE:
            return super()._answer(cmd)
        if self.pop_code is not None:
            return cmd.make_response(self.pop_code, "refused")
        resp = cmd.make_response(ResponseCode.SUCCESS, None, dict(POP_EXT))
        resp.body = pop_body()
        return resp


def calls() -> tuple[LoopCalls, list[str]]:
    sends = SendPath(None, "", 4 << 20, lambda: NOW)  # type: ignore[arg-type]
    refreshed: list[str] = []

    def error_answer(method: str, e: BaseException) -> Any:
        return ("error", method, getattr(e, "code", None), type(e).__name__)

    c = LoopCalls(sends, error_answer, frozenset, refreshed.append)
    c.receives.timeout_s = 0.3
    c.receives.stuck_after_s = 0.05
    return c, refreshed


def receive_req(**kw: Any) -> Any:
    req = spb.ReceiveMessageRequest(
        group=pb.Resource(name="G"),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), broker=pb.Broker(name=BROKER)),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="a"),
        batch_size=16,
        invisible_duration=Duration(seconds=20),
        long_polling_timeout=Duration(seconds=0),
    )  # fmt: skip
    for k, v in kw.items():
        if k == "broker":
            req.message_queue.broker.name = v
        elif k == "sql":
            req.filter_expression.type = pb.SQL
        elif k == "invisible_ms":
            req.invisible_duration.CopyFrom(Duration(seconds=v // 1000, nanos=v % 1000 * 10**6))
        elif k == "poll_s":
            req.long_polling_timeout.seconds = v
        else:
            setattr(req, k, v)
    return req


def test_pop_ext_is_the_typed_headers_ext_fields() -> None:
    """The loop's POP header is what the Trio path's client writes for the same receive."""
    for expression in ("a || b", ""):
        typed = PopMessageRequestHeader(
            consumerGroup="G", topic=TOPIC, queueId=-1, maxMsgNums=16, invisibleTime=20_000,
            pollTime=5_000, bornTime=NOW, initMode=INIT_MODE_MAX, expType="TAG",
            exp=expression or "*", order=None, attemptId=None,
        )  # fmt: skip
        assert pop_ext("G", TOPIC, expression, 16, 20_000, 5_000, NOW) == to_ext(typed)


def test_receives_go_to_trio_until_allowed_then_are_answered_as_the_trio_path() -> None:
    async def main() -> None:
        broker = PopBroker()
        async with await broker.start():
            c, refreshed = calls()
            await connected(c, broker)
            assert c.start("ReceiveMessage", receive_req()) is None  # Trio has not allowed it
            c.receives.allow("G", TOPIC, NOW)  # allowed until now: expired
            assert c.start("ReceiveMessage", receive_req()) is None
            c.receives.allow("G", TOPIC, NOW + 5_000)
            for refused in (
                receive_req(auto_renew=True), receive_req(sql=True), receive_req(broker=""),
                receive_req(batch_size=0), receive_req(batch_size=33),
                receive_req(invisible_ms=0), receive_req(broker="another-set"),
            ):  # fmt: skip
                assert c.start("ReceiveMessage", refused) is None
            assert broker.requests == []  # nothing was written for what went to Trio
            answers = await c.start("ReceiveMessage", receive_req())
            pop = broker.requests[-1]
            assert pop.code == RequestCode.POP_MESSAGE
            assert pop.ext_fields == pop_ext("G", TOPIC, "a", 16, 20_000, 0, NOW)
            resp = RemotingCommand(ResponseCode.SUCCESS, ext_fields=dict(POP_EXT), body=pop_body())
            trio_path = receive_answers(
                popped_messages(resp, TOPIC, BROKER, False), TOPIC, 20_000, NOW
            )
            assert [a.SerializeToString() for a in answers] == [
                a.SerializeToString() for a in trio_path
            ]  # fmt: skip
            handles = [a.message.system_properties.receipt_handle for a in answers[1:-1]]
            assert handles == [
                f"40 {NOW} 20000 1 0 {BROKER} 2 {40 + i} {4096 + 100 * i}" for i in range(3)
            ]
            assert answers[-1].status.code == pb.OK and refreshed == []
            broker.pop_code = ResponseCode.POLLING_TIMEOUT
            empty = await c.start("ReceiveMessage", receive_req(poll_s=1))
            assert [a.WhichOneof("content") for a in empty] == ["delivery_timestamp", "status"]
            assert empty[-1].status.code == pb.MESSAGE_NOT_FOUND
            assert refreshed == [TOPIC]  # an empty long poll: the route is looked at
            broker.pop_code = ResponseCode.SUBSCRIPTION_NOT_EXIST
            refused = await c.start("ReceiveMessage", receive_req())
            assert refused[:3] == ("error", "ReceiveMessage", ResponseCode.SUBSCRIPTION_NOT_EXIST)
            assert code_of_remoting(refused[2]) != pb.OK

    asyncio.run(main())


def test_a_pop_at_a_hung_master_asks_for_the_route_and_goes_to_trio_when_it_moved() -> None:
    async def main() -> None:
        broker = PopBroker()
        async with await broker.start():
            c, refreshed = calls()
            c.receives.timeout_s = 5.0
            await connected(c, broker)
            c.receives.allow("G", TOPIC, NOW + 5_000)
            broker.silent = True
            pending = asyncio.ensure_future(c.start("ReceiveMessage", receive_req()))
            for _ in range(100):
                await asyncio.sleep(0.01)
                if refreshed:
                    break
            assert refreshed and set(refreshed) == {TOPIC}  # parked past its poll: asks
            assert not pending.done()
            moved = route("127.0.0.1:1")  # the route names another master of the set
            c.publish(TOPIC, RouteView(moved.route, {BROKER: "127.0.0.1:1"}))
            assert await asyncio.wait_for(pending, 2) is TO_TRIO

    asyncio.run(main())


def test_a_late_pop_is_an_error_and_a_lost_connection_goes_to_trio() -> None:
    async def main() -> None:
        broker = PopBroker()
        async with await broker.start():
            c, refreshed = calls()
            c.receives.stuck_after_s = 10.0
            await connected(c, broker)
            c.receives.allow("G", TOPIC, NOW + 5_000)
            broker.silent = True
            late = await c.start("ReceiveMessage", receive_req())
            assert late[0] == "error" and late[3] == "RemotingTimeout"
            pending = asyncio.ensure_future(c.start("ReceiveMessage", receive_req()))
            await asyncio.sleep(0.05)
            for w in broker.writers:
                w.close()
            assert await asyncio.wait_for(pending, 2) is TO_TRIO
            assert refreshed == [TOPIC]

    asyncio.run(main())
