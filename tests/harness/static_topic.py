"""Static-topic helpers over a client-test cluster: create a static topic, wait for its route,
read the logic-queue leaders, build raw send/pull/offset requests.
"""

from __future__ import annotations

import trio
import trio.testing

from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.static_topic_admin import (
    update_static_topic,
)
from rocketrio.protocol.bodies import MessageQueue, TopicRouteData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    PULL_FLAG_COMMIT_OFFSET,
    PULL_FLAG_SUBSCRIPTION,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext
from tests.harness.clients import Cluster
from tests.harness.clock import now_ms

T = "ST"
LQ = "__syslo__global__"  # a global static topic's logic broker name
QUEUES = {MessageQueue(T, LQ, i) for i in range(8)}  # `static_topic`'s 8 logic queues


async def route_until(admin: MQAdmin, pred: object, timeout: float = 60.0) -> TopicRouteData:
    """The topic's route once ``pred(route)`` holds (brokers register asynchronously)."""
    with trio.fail_after(timeout):
        while True:
            route = await wait_for_route(admin, T)
            if pred(route):  # type: ignore[operator]
                return route
            await trio.sleep(0.5)


def leaders(route: TopicRouteData) -> dict[int, str]:
    """logic id -> the broker that registered it as led."""
    out: dict[int, str] = {}
    for name, info in sorted((route.topicQueueMappingByBroker or {}).items()):
        for gid in info.currIdMap:
            out[gid] = name
    return out


async def static_topic(c: Cluster, admin: MQAdmin, queues: int = 8) -> None:
    await update_static_topic(admin, T, queues, clusters="DefaultCluster", now_ms=now_ms)


def send_header(queue_id: int, topic: str = T) -> SendMessageRequestHeader:
    return SendMessageRequestHeader(
        producerGroup="raw",
        topic=topic,
        defaultTopic="TBW102",
        defaultTopicQueueNums=4,
        queueId=queue_id,
        sysFlag=0,
        bornTimestamp=0,
        flag=0,
        properties="",
    )


async def raw_send(admin: MQAdmin, addr: str, queue_id: int) -> RemotingCommand:
    return await admin.api.call(
        addr, RequestCode.SEND_MESSAGE, send_header(queue_id), b"raw", ok=tuple(range(1000))
    )


def pull_header(
    gid: int, offset: int, group: str = "cg", commit: int = -1
) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        consumerGroup=group,
        topic=T,
        queueId=gid,
        queueOffset=offset,
        maxMsgNums=32,
        sysFlag=PULL_FLAG_SUBSCRIPTION | (PULL_FLAG_COMMIT_OFFSET if commit >= 0 else 0),
        commitOffset=commit,
        suspendTimeoutMillis=0,
        subVersion=0,
        subscription="*",
        expressionType="TAG",
    )


async def offset_call(admin: MQAdmin, addr: str, code: int, header: object) -> RemotingCommand:
    return await admin.api.call(addr, code, header, ok=tuple(range(1000)))


def offset_of(resp: RemotingCommand) -> int:
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return from_ext(OffsetResponseHeader, resp.ext_fields).offset
