"""A fake broker on loopback for the gRPC loop's remoting (actors/proxy/loop_remoting.py):
asyncio streams and the sans-io frame codec; the route and the first send that open the loop's
connection to it."""

from __future__ import annotations

import asyncio
from typing import Any

from rocketrio.actors.proxy.loop_remoting import LoopCalls, RouteView
from rocketrio.protocol.bodies import BrokerData, QueueData, TopicRouteData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.remoting import FrameDecoder, RemotingCommand, encode_command

TOPIC = "LoopT"
BROKER = "broker-a"


class FakeBroker:
    """Answers SEND_MESSAGE_V2 with the next queue offset, ACK_MESSAGE with ``ack_code`` (or
    ``ack_codes`` of its offset) and BATCH_ACK_MESSAGE with ``batch_code``; ``silent`` answers
    nothing; ``reads`` counts the frames each read brought."""

    def __init__(self) -> None:
        self.silent = False
        self.ack_code = ResponseCode.SUCCESS
        self.ack_codes: dict[str, int] = {}  # an ACK_MESSAGE's offset -> its answer's code
        self.batch_code = ResponseCode.SUCCESS
        self.requests: list[RemotingCommand] = []
        self.reads: list[int] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.addr = ""

    async def start(self) -> asyncio.Server:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.addr = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return server

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        decoder = FrameDecoder()
        while data := await reader.read(1 << 20):
            decoder.feed(data)
            frames = 0
            while (cmd := decoder.next_command()) is not None:
                frames += 1
                self.requests.append(cmd)
                if not self.silent:
                    writer.write(encode_command(self._answer(cmd)))
            self.reads.append(frames)

    def _answer(self, cmd: RemotingCommand) -> RemotingCommand:
        if cmd.code == RequestCode.SEND_MESSAGE_V2:
            n = sum(r.code == RequestCode.SEND_MESSAGE_V2 for r in self.requests) - 1
            ext = {"msgId": f"7F00000100002A9F{n:016X}", "queueId": "0", "queueOffset": str(n)}
            return cmd.make_response(ResponseCode.SUCCESS, None, ext)
        code = self.ack_code
        if cmd.code == RequestCode.BATCH_ACK_MESSAGE:
            code = self.batch_code
        elif cmd.code == RequestCode.ACK_MESSAGE:
            code = self.ack_codes.get(cmd.ext_fields.get("offset", ""), code)
        return cmd.make_response(code, "no" if code else None)


def route(addr: str) -> RouteView:
    r = TopicRouteData(
        queueDatas=[QueueData(BROKER, 4, 4, 6)],
        brokerDatas=[BrokerData("DefaultCluster", BROKER, {0: addr})],
    )
    return RouteView(r, {BROKER: addr})


def send_req(i: int) -> Any:
    m = pb.Message(
        topic=pb.Resource(name=TOPIC),
        system_properties=pb.SystemProperties(message_id=f"LOOP{i}"),
        body=b"x",
    )
    return spb.SendMessageRequest(messages=[m])


async def connected(c: LoopCalls, broker: FakeBroker) -> None:
    """Publish the route; the first send opens the connection (and goes to Trio)."""
    c.publish(TOPIC, route(broker.addr))
    assert c.start("SendMessage", send_req(-1)) is None
    for _ in range(200):
        await asyncio.sleep(0.01)
        if c.remoting is not None and c.remoting.connection(broker.addr) is not None:
            return
    raise AssertionError("no connection")
