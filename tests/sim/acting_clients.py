"""Clients of the acting-master scenarios (test_acting_scenarios.py), on the simulated network:
raw requests a broker answers (sends with properties, POP, ACK, queue locks, offset commits)
and the route as the NameServer builds it. Each returns the broker's answer, or None/False
when the request failed (the scenarios retry). The transaction listener is
tests/harness/transactions.py's."""

from __future__ import annotations

import trio

from rocketrio.actors.client.simple_consumer import receipts_of
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.protocol.bodies import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    TopicRouteData,
)
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import (
    GetRouteInfoRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeaderV2,
    UpdateConsumerOffsetRequestHeader,
)
from rocketrio.protocol.message import MessageExt, iter_stored
from rocketrio.protocol.message_format import encode_properties
from rocketrio.protocol.pop_headers import (
    AckMessageRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext, to_json
from tests.harness.clock import now_ms
from tests.sim.cluster_clients import TOPIC

TIMEOUT_S = 3.0


async def _invoke(
    client: RemotingClient, addr: str, cmd: RemotingCommand
) -> RemotingCommand | None:
    try:
        return await client.invoke(addr, cmd, TIMEOUT_S)
    except RemotingError:
        return None


async def send_with(
    client: RemotingClient, addr: str, body: bytes, props: dict[str, str], queue_id: int = 0
) -> bool:
    """SEND_MESSAGE_V2 of ``body`` with ``props`` (DELAY, TIMER_DELIVER_MS ...); True: stored."""
    header = SendMessageRequestHeaderV2(
        a="SimActingPG", b=TOPIC, c="TBW102", d=1, e=queue_id, f=0, g=now_ms(), h=0,
        i=encode_properties(props), j=0, k=False, m=False,
    )  # fmt: skip
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=to_ext(header), body=body)
    resp = await _invoke(client, addr, cmd)
    return resp is not None and resp.code == RC.SUCCESS


async def route(client: RemotingClient, ns_addr: str) -> TopicRouteData | None:
    cmd = RemotingCommand(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields=to_ext(GetRouteInfoRequestHeader(TOPIC))
    )
    resp = await _invoke(client, ns_addr, cmd)
    if resp is None or resp.code != RC.SUCCESS:
        return None
    return from_json(TopicRouteData, resp.body)


async def pop(
    client: RemotingClient, addr: str, group: str, queue_id: int, n: int, invisible_ms: int
) -> list[tuple[MessageExt, str]] | None:
    """POP_MESSAGE of up to ``n`` messages of one queue: (message, receipt handle) each."""
    header = PopMessageRequestHeader(
        consumerGroup=group, topic=TOPIC, queueId=queue_id, maxMsgNums=n,
        invisibleTime=invisible_ms, pollTime=0, bornTime=now_ms(), initMode=0,
    )  # fmt: skip
    resp = await _invoke(
        client, addr, RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=to_ext(header))
    )
    if resp is None or resp.code != RC.SUCCESS:
        return None
    msgs = list(iter_stored(resp.body))
    handles = receipts_of(from_ext(PopMessageResponseHeader, resp.ext_fields), msgs, "broker-a")
    return list(zip(msgs, handles, strict=True))


async def ack(
    client: RemotingClient, addr: str, group: str, queue_id: int, handle: str, offset: int
) -> bool:
    header = AckMessageRequestHeader(group, TOPIC, queue_id, handle, offset)
    resp = await _invoke(
        client, addr, RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=to_ext(header))
    )
    return resp is not None and resp.code == RC.SUCCESS


async def lock(
    client: RemotingClient, addr: str, group: str, client_id: str, mq: MessageQueue
) -> list[MessageQueue] | None:
    body = LockBatchRequestBody(group, client_id, False, [mq])
    resp = await _invoke(
        client, addr, RemotingCommand(RequestCode.LOCK_BATCH_MQ, body=to_json(body))
    )
    if resp is None or resp.code != RC.SUCCESS:
        return None
    return from_json(LockBatchResponseBody, resp.body).lockOKMQSet


async def commit(client: RemotingClient, addr: str, group: str, queue_id: int, offset: int) -> bool:
    h = UpdateConsumerOffsetRequestHeader(group, TOPIC, queue_id, offset)
    resp = await _invoke(
        client, addr, RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=to_ext(h))
    )
    return resp is not None and resp.code == RC.SUCCESS


async def query_offset(client: RemotingClient, addr: str, group: str, queue_id: int) -> int | None:
    """The group's committed offset of a queue there: 0 when it has none, None on failure."""
    h = QueryConsumerOffsetRequestHeader(group, TOPIC, queue_id)
    cmd = RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, ext_fields=to_ext(h))
    resp = await _invoke(client, addr, cmd)
    if resp is None:
        return None
    if resp.code == RC.SUCCESS:
        return int(resp.ext_fields["offset"])
    return 0 if resp.code == RC.QUERY_NOT_FOUND else None


class RoutedTarget:
    """Where a client sends a broker set's master-only calls: id 0 of the set in the topic route
    it fetched last from the NameServer, refreshed every ``poll_s`` (a client's
    pollNameServerInterval), so it lags the NameServer by up to that."""

    def __init__(self, client: RemotingClient, ns_addr: str, set_name: str, poll_s: float) -> None:
        self.client, self.ns_addr, self.set_name, self.poll_s = client, ns_addr, set_name, poll_s
        self.addr: str | None = None
        self._fetched = -1e9

    async def id0(self) -> str | None:
        if trio.current_time() - self._fetched >= self.poll_s:
            r = await route(self.client, self.ns_addr)
            if r is not None:
                self._fetched = trio.current_time()
                addrs = [bd.brokerAddrs for bd in r.brokerDatas if bd.brokerName == self.set_name]
                self.addr = addrs[0].get(0) if addrs else None
        return self.addr
