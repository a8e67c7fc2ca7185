"""A real broker serves ACK_MESSAGE by its direct path (pop/direct_ack.py) on SimNetwork +
MockClock: the path is installed (no ACL gate, answers not timed), the SimpleConsumer's ACKs go
through it, are answered SUCCESS and their messages are never delivered again, while the
unacknowledged one comes back after its invisible time."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.simple_consumer import SimpleConsumer
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.compiled import speedups
from tests.harness.broker import harness

TOPIC, GROUP = "PopD", "PopDG"


async def receive_all(c: SimpleConsumer) -> list[Any]:
    out: list[Any] = []
    while got := await c.receive(32, 10.0, await_duration=0):
        out.extend(got)
    return out


async def test_a_consumers_acks_take_the_direct_path(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        assert h.broker is not None
        direct = h.broker.server.side.direct
        # (and SEND_MESSAGE_V2's where the send header is compiled: send/direct.py)
        sends = set() if speedups is None else {RequestCode.SEND_MESSAGE_V2}
        assert direct is not None and set(direct) == {RequestCode.ACK_MESSAGE, *sends}
        served: list[int] = []
        inner = direct[RequestCode.ACK_MESSAGE]

        def counted(conn: Any, req: Any) -> Any:
            served.append(req[1])
            return inner(conn, req)

        direct[RequestCode.ACK_MESSAGE] = counted  # before the consumer connects
        for i in range(4):
            assert (await h.send(TOPIC, f"d{i}".encode())).code == ResponseCode.SUCCESS
        c = SimpleConsumer(
            GROUP,
            h.namesrv_addr,
            transport=h.net.transport("10.0.0.9"),
            client_config=ClientConfig(clientIP="10.0.0.9", instanceName="pop"),
            await_duration=0.0,
        )
        async with c:
            c.subscribe(TOPIC, "*")
            await trio.sleep(0.5)
            got = await receive_all(c)
            assert sorted(m.body for m in got) == [b"d0", b"d1", b"d2", b"d3"]
            keep = [m for m in got if m.body == b"d3"]
            for m in got:
                if m.body != b"d3":
                    await c.ack(m)  # raises unless answered SUCCESS
            assert len(served) == 3
            await trio.sleep(15)
            again = await receive_all(c)
            assert [m.body for m in again] == [m.body for m in keep]
