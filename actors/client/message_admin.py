"""Single messages for the admin tools: find a queue, pull from an offset, track consumers.

`MessageAdmin` wraps an `MQAdmin` with what mqadmin's message commands (queryMsgByUniqueKey,
queryMsgByOffset, printMsg, consumeMessage, sendMessage and the MessageTrack of a found
message) need. Reads are pulls as upstream's DefaultMQPullConsumer does them: group
``TOOLS_CONSUMER`` unless told otherwise, the subscription in the request (no heartbeat, no
long polling, no committed offset). `select_queue` is the pure lookup of a queue in a topic's
route, so an unknown broker name or an out-of-range queue id is one clear NotFound before any
broker is asked.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.client.admin import MAX_TIMESTAMP, MQAdmin
from rocketrio.actors.client.api import PullResult, PullStatus
from rocketrio.actors.client.errors import MQBrokerError, NotFound
from rocketrio.actors.client.message_track import (
    CONSUME_PASSIVELY,
    LookupFailure,
    MessageTrack,
    TrackedMessage,
    decide_track,
)
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.protocol.bodies import (
    ClusterInfo,
    ConsumerConnection,
    ConsumeStats,
    MessageQueue,
    TopicRouteData,
)
from rocketrio.protocol.headers import PULL_FLAG_SUBSCRIPTION, PullMessageRequestHeader
from rocketrio.protocol.message import MessageExt

# upstream MixAll.TOOLS_CONSUMER_GROUP: the group mqadmin's pull-based commands read as
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
PULL_BATCH = 32  # messages per pull of printMsg (upstream's figure)
EXPRESSION_TAG = "TAG"


@attrs.frozen
class QueueTarget:
    """One queue of a topic and the broker address to read it from (its master if it has one)."""

    mq: MessageQueue
    addr: str


def select_queue(
    route: TopicRouteData, topic: str, broker_name: str, queue_id: int, *, write: bool = False
) -> QueueTarget:
    """The queue ``broker_name``/``queue_id`` of ``topic``: NotFound naming the brokers of the
    route, or the valid queue ids, when there is no such queue (read queues, or write queues
    with ``write``)."""
    qd = next((q for q in route.queueDatas if q.brokerName == broker_name), None)
    if qd is None:
        known = ", ".join(sorted(q.brokerName for q in route.queueDatas)) or "none"
        raise NotFound(f"broker {broker_name} does not serve topic {topic} (brokers: {known})")
    count = qd.writeQueueNums if write else qd.readQueueNums
    if not 0 <= queue_id < count:
        kind = "write" if write else "read"
        valid = f"0..{count - 1}" if count else "none"
        raise NotFound(
            f"queue id {queue_id} is out of range: topic {topic} has {count} {kind} queue(s) "
            f"on broker {broker_name} (ids {valid})"
        )
    bd = next((b for b in route.brokerDatas if b.brokerName == broker_name), None)
    addr = bd.select_broker_addr() if bd is not None else None
    if addr is None:
        raise NotFound(f"broker {broker_name} of topic {topic} has no address in the route")
    return QueueTarget(MessageQueue(topic, broker_name, queue_id), addr)


def all_queues(route: TopicRouteData, topic: str) -> list[QueueTarget]:
    """Every read queue of the topic with an address, by broker name and queue id."""
    out = []
    for qd in sorted(route.queueDatas, key=lambda q: q.brokerName):
        for qid in range(qd.readQueueNums):
            try:
                out.append(select_queue(route, topic, qd.brokerName, qid))
            except NotFound:
                break  # a broker set without an address: nothing of it can be read
    return out


def broker_name_of_host(info: ClusterInfo, store_host: str) -> tuple[str, str] | None:
    """(broker name, address to ask) of the broker set a message's store host belongs to."""
    for name, bd in sorted(info.brokerAddrTable.items()):
        if store_host in bd.brokerAddrs.values():
            addr = bd.select_broker_addr()
            return (name, addr) if addr is not None else None
    return None


class MessageAdmin:
    """The message calls of the admin tools over one `MQAdmin` (its remoting and name servers)."""

    def __init__(self, admin: MQAdmin) -> None:
        self.admin = admin

    async def queue(
        self, topic: str, broker_name: str, queue_id: int, *, write: bool = False
    ) -> QueueTarget:
        return select_queue(
            await self.admin.topic_route(topic), topic, broker_name, queue_id, write=write
        )

    async def queues(self, topic: str) -> list[QueueTarget]:
        return all_queues(await self.admin.topic_route(topic), topic)

    async def offset_range(self, q: QueueTarget) -> tuple[int, int]:
        """(min offset, max offset) of the queue; max is one past the last message."""
        api = self.admin.api
        return await api.get_min_offset(q.addr, q.mq), await api.get_max_offset(q.addr, q.mq)

    async def search_offset(self, q: QueueTarget, timestamp_ms: int) -> int:
        return await self.admin.api.search_offset(q.addr, q.mq, timestamp_ms)

    async def pull(
        self,
        q: QueueTarget,
        offset: int,
        max_nums: int,
        *,
        expression: str = "*",
        group: str = TOOLS_CONSUMER_GROUP,
    ) -> PullResult:
        """One pull of up to ``max_nums`` messages from ``offset``, nothing held or committed."""
        header = PullMessageRequestHeader(
            consumerGroup=group,
            topic=q.mq.topic,
            queueId=q.mq.queueId,
            queueOffset=offset,
            maxMsgNums=max_nums,
            sysFlag=PULL_FLAG_SUBSCRIPTION,
            commitOffset=0,
            suspendTimeoutMillis=0,
            subVersion=0,
            subscription=expression,
            expressionType=EXPRESSION_TAG,
        )
        return await self.admin.api.pull(q.addr, header, self.admin.api.timeout_s)

    async def message_at(self, q: QueueTarget, offset: int) -> MessageExt:
        """The message at ``offset`` of the queue (a pull of one, as mqadmin's
        queryMsgByOffset); NotFound naming the queue's offsets when there is none there."""
        if offset >= 0:
            result = await self.pull(q, offset, 1)
            found = [m for m in result.messages() if m.queue_offset == offset]
            if result.status is PullStatus.FOUND and found:
                return found[0]
            low, high = result.min_offset, result.max_offset
        else:
            low, high = await self.offset_range(q)
        mq = q.mq
        held = f"offsets {low}..{high - 1}" if high > low else "no message"
        raise NotFound(
            f"no message at offset {offset} of topic {mq.topic} queue {mq.queueId} on broker "
            f"{mq.brokerName}: the queue holds {held}"
        )

    async def locate(self, msg: MessageExt) -> tuple[str, str] | None:
        """(broker name, address) of the broker set that stored ``msg``."""
        return broker_name_of_host(await self.admin.cluster_info(), msg.store_host)

    async def track(
        self, msg: MessageExt, where: tuple[str, str] | None = None
    ) -> list[MessageTrack]:
        """For every group consuming the message's topic, whether it consumed the message
        (upstream messageTrackDetail), asking the broker set that holds the message."""
        where = where or await self.locate(msg)
        if where is None:
            return []
        broker_name, addr = where
        target = TrackedMessage(
            MessageQueue(msg.topic, broker_name, msg.queue_id), msg.queue_offset, msg.tags
        )
        tracks = []
        for group in await self.admin.query_topic_consume_by_who(msg.topic):
            conn = await self._connection(group, addr)
            stats: ConsumeStats | LookupFailure | None = None
            if isinstance(conn, ConsumerConnection) and conn.consumeType == CONSUME_PASSIVELY:
                stats = await self._stats(addr, group, msg.topic)
            tracks.append(decide_track(group, target, conn, stats))
        return tracks

    async def _connection(self, group: str, addr: str) -> ConsumerConnection | LookupFailure:
        try:
            return await self.admin.consumer_connection(group, addr)
        except MQBrokerError as e:
            return LookupFailure(e.code, f"CODE:{e.code} DESC:{e.remark}")
        except RemotingError as e:
            return LookupFailure(None, str(e))

    async def _stats(self, addr: str, group: str, topic: str) -> ConsumeStats | LookupFailure:
        try:
            return await self.admin.consume_stats(addr, group, topic)
        except MQBrokerError as e:
            return LookupFailure(e.code, f"CODE:{e.code} DESC:{e.remark}")
        except RemotingError as e:
            return LookupFailure(None, str(e))

    async def by_unique_key(self, topic: str, key: str) -> list[MessageExt]:
        """Every stored copy of the message whose client id (UNIQ_KEY) is ``key``, oldest
        first (a retried send can store one message twice; mqadmin asks for up to 32)."""
        found = await self.admin._query(topic, key, 32, 0, MAX_TIMESTAMP, unique=True)
        return [m for m in found if m.msg_id == key]
