"""What the Trio path tells the gRPC loop (`ProxyService.loop_receivable`, loop_receive.py)
against a real broker on SimNetwork + MockClock: after a receive that was one unordered POP
of the broker set the request names, the loop may take the (group, topic)'s receives for the
group config cache's time; never a FIFO group's (ordered POPs with attempt ids), an auto-renew
receive's (the renewer tracks its handles), a SQL filter's, or one that names no broker set."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from rocketrio.actors.proxy.group_config import TTL_S
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from tests.actor.proxy.test_fifo import TOPIC, FakeCall, admin, proxy, receive_req
from tests.harness.broker import harness


async def test_trio_allows_the_loop_unordered_pops_of_a_named_set_only(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, proxy(h) as svc:
        await admin(h, "updateTopic", "-c", "DefaultCluster", "-t", TOPIC, "-r", "2", "-w", "2")
        await admin(h, "updateSubGroup", "-c", "DefaultCluster", "-g", "FifoG", "-o", "true")
        await admin(h, "updateSubGroup", "-c", "DefaultCluster", "-g", "PlainG")
        for i in range(4):
            assert (await h.send(TOPIC, f"m{i}".encode(), queue_id=1)).code == ResponseCode.SUCCESS
        allowed: list[tuple[str, str, int]] = []
        svc.loop_receivable = lambda g, t, until: allowed.append((g, t, until))

        async def receive(req: Any) -> list[int]:
            out = await svc.handle(FakeCall("ReceiveMessage", req))
            return [r.status.code for r in out if r.HasField("status")]

        assert await receive(receive_req("FifoG", attempt="a1")) == [pb.OK]
        sql = receive_req("PlainG")
        sql.filter_expression.type, sql.filter_expression.expression = pb.SQL, "TRUE"
        unnamed = receive_req("PlainG")
        unnamed.message_queue.ClearField("broker")
        renewing = receive_req("PlainG")
        renewing.auto_renew = True
        for req in (sql, unnamed, renewing):
            await receive(req)
        assert allowed == []  # FIFO, SQL, no broker set, auto renewal: Trio's own
        before = svc.now_ms()
        await receive(receive_req("PlainG"))
        [(group, topic, until)] = allowed
        assert (group, topic) == ("PlainG", TOPIC)
        assert before + TTL_S * 1000 <= until <= svc.now_ms() + TTL_S * 1000
