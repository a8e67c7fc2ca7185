"""Auto renewal of invisible time through the proxy (ProxyService and its AutoRenewer against a
real broker, SimNetwork + MockClock): a message received with ``auto_renew`` stays invisible far
beyond its invisible time while its client is online, is acked with the client's original
handle and never comes back; when the client goes away (Telemetry closed, or terminated), renewal
stops and the message is delivered again within seconds; after renewMaxTimeMillis it goes back
with the retry backoff; a restarted proxy (no renewal state) acks the original handle, and the
message comes back after its latest invisible time: at least once, never lost."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing
from google.protobuf.duration_pb2 import Duration

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.proxy.grpc_bridge import Call
from rocketrio.actors.proxy.renew import AutoRenewer, Renewal, RenewConfig, Tracked
from rocketrio.actors.proxy.service import ProxyConfig, ProxyService
from rocketrio.actors.proxy.telemetry import TelemetryRegistry
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from tests.harness.broker import BrokerHarness, harness
from tests.harness.clock import EPOCH_MS, now_ms

TOPIC = "RenewT"
GROUP = "RenewG"
PUSH = "push-client"  # receives with auto_renew
PEEK = "peek-client"  # a second consumer of the group: sees what is visible


def call(method: str, request: Any, client_id: str) -> Call:
    return Call(method, request, {"x-mq-client-id": client_id}, "test", None, None)  # type: ignore[arg-type]


class Proxy:
    def __init__(self, service: ProxyService) -> None:
        self.service = service

    def online(self, client_id: str) -> None:
        settings = pb.Settings(client_type=pb.PUSH_CONSUMER)
        self.service.registry.update(client_id, lambda _cmd: True, settings)

    async def receive(self, client_id: str, auto_renew: bool, invisible_s: int = 5) -> list[Any]:
        req = spb.ReceiveMessageRequest(
            group=pb.Resource(name=GROUP),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC)),
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
            batch_size=16,
            invisible_duration=Duration(seconds=invisible_s),
            long_polling_timeout=Duration(seconds=0),
            auto_renew=auto_renew,
        )
        out = await self.service.handle(call("ReceiveMessage", req, client_id))
        return [r.message for r in out if r.HasField("message")]

    async def ack(self, client_id: str, m: Any) -> int:
        req = spb.AckMessageRequest(
            group=pb.Resource(name=GROUP),
            topic=pb.Resource(name=TOPIC),
            entries=[
                spb.AckMessageEntry(
                    message_id=m.system_properties.message_id,
                    receipt_handle=m.system_properties.receipt_handle,
                )
            ],
        )
        r = await self.service.handle(call("AckMessage", req, client_id))
        return int(r.status.code)


@asynccontextmanager
async def proxy(h: BrokerHarness, renew: RenewConfig | None = None) -> AsyncIterator[Proxy]:
    config = ClientConfig(clientIP="10.0.0.61", instanceName="proxy")
    async with (
        MQClientInstance(
            h.namesrv_addr, transport=h.net.transport("10.0.0.61"), config=config
        ) as client,
        trio.open_nursery() as nursery,
    ):
        pc = ProxyConfig(h.namesrv_addr, host="127.0.0.1", renew=renew or RenewConfig())
        service = ProxyService(pc, client, TelemetryRegistry(), now_ms)
        nursery.start_soon(service.renewer.run)
        try:
            yield Proxy(service)
        finally:
            nursery.cancel_scope.cancel()


async def send(h: BrokerHarness, body: bytes) -> None:
    r = await h.send(TOPIC, body)
    assert r.code == ResponseCode.SUCCESS


async def visible_within(p: Proxy, seconds: float) -> list[bytes]:
    """What the group's peeking client gets within ``seconds`` (polled every second)."""
    got: list[bytes] = []
    with trio.move_on_after(seconds):
        while not got:
            got = [m.body for m in await p.receive(PEEK, auto_renew=False, invisible_s=300)]
            await trio.sleep(1)
    return got


async def test_renewed_while_online_acked_with_original_handle_never_again(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, proxy(h) as p:
        p.online(PUSH)
        await send(h, b"long-job")
        [m] = await p.receive(PUSH, auto_renew=True)
        # upstream: an auto_renew receive is invisible for defaultInvisibleTimeMills (60 s)
        assert m.system_properties.invisible_duration.seconds == 60
        # ten minutes of processing: renewed all along, never visible to the group
        assert await visible_within(p, 600) == []
        assert len(p.service.renewer.schedule.tracked) == 1
        # the client acks with the handle it was given; the proxy acks the latest one
        assert await p.ack(PUSH, m) == pb.OK
        assert p.service.renewer.schedule.tracked == {}
        assert await visible_within(p, 600) == []


async def test_client_gone_renewal_stops_and_the_message_comes_back(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, proxy(h) as p:
        p.online(PUSH)
        await send(h, b"orphan")
        [_m] = await p.receive(PUSH, auto_renew=True)
        assert await visible_within(p, 120) == []  # past 60 s: renewed
        p.service.registry.forget(PUSH)  # its Telemetry stream closed
        # back within the scan period plus invisibleTimeMillisWhenClear, not after 60 s
        assert await visible_within(p, 10) == [b"orphan"]
        assert p.service.renewer.schedule.tracked == {}


async def test_terminated_client_renewal_stops(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, proxy(h) as p:
        p.online(PUSH)
        await send(h, b"bye")
        await p.receive(PUSH, auto_renew=True)
        req = spb.NotifyClientTerminationRequest(group=pb.Resource(name=GROUP))
        r = await p.service.handle(call("NotifyClientTermination", req, PUSH))
        assert r.status.code == pb.OK
        assert await visible_within(p, 10) == [b"bye"]


async def test_renewal_stops_after_the_max_span(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    renew = RenewConfig(max_ms=90_000)
    async with harness(tmp_path) as h, proxy(h, renew) as p:
        p.online(PUSH)
        await send(h, b"stuck")
        [_m] = await p.receive(PUSH, auto_renew=True)
        # renewed at ~50 s (by 1 min); at the scan that finds it due past 90 s it is handed
        # back with the group's retry backoff (10 s for a first delivery), where a renewal
        # would have hidden it for 3 more minutes
        assert await visible_within(p, 95) == []
        assert await visible_within(p, 45) == [b"stuck"]
        assert p.service.renewer.schedule.tracked == {}


async def test_after_a_proxy_restart_the_original_handle_acks_and_nothing_is_lost(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """A restarted proxy has no renewal state: the client's original handle names the first
    checkpoint, which a renewal replaced. The broker answers its ack OK, but the renewed
    checkpoint still stands: the message is delivered again after its latest invisible time
    (redelivery, never loss)."""
    async with harness(tmp_path) as h:
        async with proxy(h) as p:
            p.online(PUSH)
            await send(h, b"survivor")
            [m] = await p.receive(PUSH, auto_renew=True)
            await trio.sleep(120)  # renewed at least once: the broker's checkpoint is newer
            assert p.service.renewer.schedule.tracked
            latest = next(iter(p.service.renewer.schedule.tracked.values())).latest
            assert latest != m.system_properties.receipt_handle
        async with proxy(h) as restarted:
            restarted.online(PUSH)
            assert await restarted.ack(PUSH, m) == pb.OK
            # the renewal before the restart made it invisible for up to 3 more minutes
            assert await visible_within(restarted, 300) == [b"survivor"]


async def test_an_ack_during_a_renewal_waits_for_it_and_acks_the_new_handle(
    mock_clock: trio.testing.MockClock,
) -> None:
    gate = trio.Event()

    async def change(_r: Renewal) -> tuple[str, int]:
        await gate.wait()
        return "h1", EPOCH_MS + 120_000

    renewer = AutoRenewer(RenewConfig(), change, lambda _c: True, lambda: EPOCH_MS)
    renewer.track(Tracked("c", "G", "T", "h0", "h0", EPOCH_MS, EPOCH_MS + 5_000))
    released: list[str] = []

    async def ack() -> None:
        released.append(await renewer.release("G", "h0"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(renewer.renew_due)
        await trio.testing.wait_all_tasks_blocked()  # the renewal is in flight
        nursery.start_soon(ack)
        await trio.testing.wait_all_tasks_blocked()
        assert released == []  # waits for the renewal in flight
        gate.set()
    assert released == ["h1"]
    assert renewer.schedule.tracked == {}


async def test_auto_renew_disabled_uses_the_requested_invisible_time(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, proxy(h, RenewConfig(enabled=False)) as p:
        p.online(PUSH)
        await send(h, b"plain")
        [m] = await p.receive(PUSH, auto_renew=True, invisible_s=20)
        assert m.system_properties.invisible_duration.seconds == 20
        assert p.service.renewer.schedule.tracked == {}
        assert await visible_within(p, 30) == [b"plain"]


async def test_auto_renew_without_a_telemetry_stream_is_refused_before_popping(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, proxy(h) as p:
        await send(h, b"kept")
        req = spb.ReceiveMessageRequest(
            group=pb.Resource(name=GROUP),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC)),
            batch_size=1,
            long_polling_timeout=Duration(seconds=0),
            auto_renew=True,
        )
        [r] = await p.service.handle(call("ReceiveMessage", req, "never-connected"))
        assert r.status.code == pb.MESSAGE_NOT_FOUND
        assert await visible_within(p, 2) == [b"kept"]  # nothing was popped for it


async def test_a_proxy_full_of_renewals_refuses_before_popping(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """The messages under renewal are bounded (renewMaxTrackedMessages): a receive that could
    pass the bound is refused with TOO_MANY_REQUESTS and pops nothing, so nothing waits for
    an invisible time it never asked for; an ack makes room again."""
    async with harness(tmp_path) as h, proxy(h, RenewConfig(max_tracked=16)) as p:
        p.online(PUSH)
        for i in range(17):
            await send(h, b"m%d" % i)
        first = await p.receive(PUSH, auto_renew=True)
        assert len(first) == 16
        req = spb.ReceiveMessageRequest(
            group=pb.Resource(name=GROUP),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC)),
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
            batch_size=1,
            long_polling_timeout=Duration(seconds=0),
            auto_renew=True,
        )
        out = await p.service.handle(call("ReceiveMessage", req, PUSH))
        assert [r.status.code for r in out if r.HasField("status")] == [pb.TOO_MANY_REQUESTS]
        # nothing was popped: the 17th message is visible to the group at once
        rest = await visible_within(p, 2)
        assert len(rest) == 1 and rest[0] not in {m.body for m in first}
        assert await p.ack(PUSH, first[0]) == pb.OK
        assert p.service.renewer.schedule.has_room(1)
