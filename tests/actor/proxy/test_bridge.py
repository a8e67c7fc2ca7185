"""The grpcio <-> Trio bridge with a real gRPC client on loopback: long polls hold no thread,
a full call queue answers TOO_MANY_REQUESTS, a call the client abandons cancels its Trio task,
a handler's crash fails only its call."""

from __future__ import annotations

import threading
from typing import Any

import grpc
import trio

from rocketrio.actors.proxy.grpc_bridge import TO_TRIO, Call, GrpcBridge, serve_calls
from rocketrio.actors.proxy.service import error_response, overflow_response
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.grpc_v2 import service_pb2_grpc as sgrpc

RECEIVE = spb.ReceiveMessageRequest(group=pb.Resource(name="G"))
ROUTE = spb.QueryRouteRequest(topic=pb.Resource(name="T"))


class Polls:
    """A handler whose ReceiveMessage waits for ``release`` (a long poll)."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.waiting = 0
        self.all_waiting = trio.Event()
        self.want = 0
        self.cancelled = trio.Event()

    async def __call__(self, call: Call) -> Any:
        if call.method == "QueryRoute":
            if call.request.topic.name == "boom":
                raise RuntimeError("handler bug")
            return error_response("QueryRoute", pb.OK, call.metadata.get("x-mq-client-id", ""))
        self.waiting += 1
        if self.waiting == self.want:
            self.all_waiting.set()
        try:
            await self.release.wait()
        except trio.Cancelled:
            self.cancelled.set()
            raise
        return error_response("ReceiveMessage", pb.MESSAGE_NOT_FOUND, "none")


def stub_for(port: int) -> tuple[grpc.Channel, sgrpc.MessagingServiceStub]:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    return channel, sgrpc.MessagingServiceStub(channel)


async def test_long_polls_hold_no_thread_and_all_complete() -> None:
    polls = Polls()
    polls.want = 48
    async with (
        GrpcBridge("127.0.0.1", 0, overflow_response) as bridge,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(serve_calls, bridge.calls, polls)
        channel, stub = stub_for(bridge.port)
        threads_before = threading.active_count()
        calls = [stub.ReceiveMessage(RECEIVE, timeout=60) for _ in range(polls.want)]
        with trio.fail_after(30):
            await polls.all_waiting.wait()
        # 48 long polls in flight: the server added no thread for them
        assert threading.active_count() <= threads_before + 2
        polls.release.set()

        def drain() -> list[int]:
            return [[r.status.code for r in c][-1] for c in calls]

        codes = await trio.to_thread.run_sync(drain)
        assert codes == [pb.MESSAGE_NOT_FOUND] * polls.want
        channel.close()
        nursery.cancel_scope.cancel()


async def test_full_call_queue_answers_too_many_requests() -> None:
    polls = Polls()
    polls.want = 1
    async with (
        GrpcBridge("127.0.0.1", 0, overflow_response, queue_size=1) as bridge,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(serve_calls, bridge.calls, polls, 1)
        channel, stub = stub_for(bridge.port)
        first = stub.ReceiveMessage(RECEIVE, timeout=60)  # takes the one task slot
        with trio.fail_after(30):
            await polls.all_waiting.wait()
        second = stub.ReceiveMessage(RECEIVE, timeout=60)  # waits in the queue of one
        with trio.fail_after(30):
            while bridge.calls.statistics().current_buffer_used < 1:
                await trio.sleep(0.01)
        third = await trio.to_thread.run_sync(lambda: list(stub.ReceiveMessage(RECEIVE)))
        assert [r.status.code for r in third] == [pb.TOO_MANY_REQUESTS]
        polls.release.set()

        def drain() -> list[int]:
            return [[r.status.code for r in c][-1] for c in (first, second)]

        assert await trio.to_thread.run_sync(drain) == [pb.MESSAGE_NOT_FOUND] * 2
        channel.close()
        nursery.cancel_scope.cancel()


async def test_abandoned_call_cancels_its_trio_task_and_others_go_on() -> None:
    polls = Polls()
    polls.want = 1
    async with (
        GrpcBridge("127.0.0.1", 0, overflow_response) as bridge,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(serve_calls, bridge.calls, polls)
        channel, stub = stub_for(bridge.port)
        call = stub.ReceiveMessage(RECEIVE, timeout=60)
        with trio.fail_after(30):
            await polls.all_waiting.wait()
        call.cancel()
        with trio.fail_after(30):
            await polls.cancelled.wait()

        def route(topic: str) -> Any:
            req = spb.QueryRouteRequest(topic=pb.Resource(name=topic))
            return stub.QueryRoute(req, metadata=(("x-mq-client-id", "c-1"),), timeout=30)

        with_id = await trio.to_thread.run_sync(route, "T")
        assert with_id.status.code == pb.OK and with_id.status.message == "c-1"
        try:
            await trio.to_thread.run_sync(route, "boom")
            raise AssertionError("a crashed handler must fail its call")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNKNOWN
        assert (await trio.to_thread.run_sync(route, "T")).status.code == pb.OK
        channel.close()
        nursery.cancel_scope.cancel()


class GivesBack:
    """An ``on_loop`` that takes every ReceiveMessage on the gRPC loop and then gives it back
    (`TO_TRIO`, a POP given up at a master that moved), and takes nothing else."""

    def __init__(self) -> None:
        self.taken = 0

    def start(self, method: str, request: Any) -> Any:
        if method != "ReceiveMessage":
            return None
        self.taken += 1

        async def answer() -> Any:
            return TO_TRIO

        return answer()

    def close(self) -> None:
        pass


async def test_a_call_the_loop_gives_back_is_answered_by_trio() -> None:
    polls = Polls()
    polls.release.set()
    async with (
        GrpcBridge("127.0.0.1", 0, overflow_response) as bridge,
        trio.open_nursery() as nursery,
    ):
        bridge.on_loop = loop = GivesBack()
        nursery.start_soon(serve_calls, bridge.calls, polls)
        channel, stub = stub_for(bridge.port)
        got = await trio.to_thread.run_sync(lambda: list(stub.ReceiveMessage(RECEIVE, timeout=30)))
        assert [r.status.code for r in got] == [pb.MESSAGE_NOT_FOUND]  # Trio's handler's
        assert loop.taken == 1 and polls.waiting == 1
        channel.close()
        nursery.cancel_scope.cancel()
