"""POP progress of a consumer group (`rocketrio admin popProgress`): per queue the consume
progress (GET_CONSUME_STATS: broker offset, the pop offset, lag) together with the messages
popped and not yet acknowledged (GET_POP_INFLIGHT, rocketrio's own request answered by each
master's revive service from the CK / ACK records it has read).

A POP group's consumer offset moves past messages as soon as they are popped (upstream's
rule), so consumerProgress alone shows no lag for messages still in flight; this view adds them.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.client.admin import MQAdmin, QueueProgress
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.headers import GetConsumeStatsRequestHeader
from rocketrio.protocol.pop_headers import PopInflightBody
from rocketrio.protocol.serde import from_json


@attrs.define
class PopQueueProgress:
    topic: str
    brokerName: str
    queueId: int
    brokerOffset: int
    consumerOffset: int
    lag: int
    inflight: int


@attrs.define
class PopProgress:
    group: str
    queues: list[PopQueueProgress]
    total_lag: int
    total_inflight: int
    # brokers whose revive service is not running (not master): their counts are unknown
    revive_not_running: list[str]


async def pop_inflight(admin: MQAdmin, addr: str, group: str, topic: str | None) -> PopInflightBody:
    resp = await admin.api.call(
        addr, RequestCode.GET_POP_INFLIGHT, GetConsumeStatsRequestHeader(group, topic)
    )
    return from_json(PopInflightBody, resp.body)


async def pop_progress(admin: MQAdmin, group: str, topic: str | None = None) -> PopProgress:
    progress = await admin.consumer_progress(group, topic)
    addrs = await admin._group_broker_addrs(group, topic)
    inflight: dict[tuple[str, str, int], int] = {}
    idle: list[str] = []
    for addr in addrs:
        body = await pop_inflight(admin, addr, group, topic)
        if not body.reviveRunning:
            idle.append(body.brokerName)
        for item in body.items:
            inflight[(item.topic, body.brokerName, item.queueId)] = item.inflight
    queues = [_queue(o, inflight) for o in progress.offsets]
    known = {(q.topic, q.brokerName, q.queueId) for q in queues}
    for (t, b, q), n in sorted(inflight.items()):
        if (t, b, q) not in known:  # e.g. a pop retry topic not in the consume stats
            queues.append(PopQueueProgress(t, b, q, 0, 0, 0, n))
    return PopProgress(
        group,
        queues,
        sum(q.lag for q in queues),
        sum(q.inflight for q in queues),
        idle,
    )


def _queue(o: QueueProgress, inflight: dict[tuple[str, str, int], int]) -> PopQueueProgress:
    n = inflight.get((o.topic, o.brokerName, o.queueId), 0)
    return PopQueueProgress(
        o.topic, o.brokerName, o.queueId, o.brokerOffset, o.consumerOffset, o.lag, n
    )
