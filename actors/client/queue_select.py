"""Which queue a message goes to (pure): publish info from a route, round robin that avoids a
failed broker, and the queue selectors for ordered sends.

`TopicPublishInfo.from_route` is upstream's topicRouteData2TopicPublishInfo: writable queues
of brokers that have a master, brokers in name order; a static topic's logic queues in id
order (RIP-21, `static_topic.logic_queue_endpoints`). ``select`` is upstream's
selectOneMessageQueue with the latency-fault idea reduced to one rule: a broker whose send
failed is avoided until ``FaultTracker`` says its isolation is over (its time is up, or the
route names another master address than the one that failed), and a retry never goes to the
broker that just failed if another one is available.

`SelectMessageQueueByHash` picks ``abs(javaHashCode(arg) % n)`` like upstream, so Java and
Python producers that share an ordering key agree on the queue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from rocketrio.actors.client.config import MASTER_ID
from rocketrio.protocol.bodies import PERM_READ, PERM_WRITE, MessageQueue, TopicRouteData
from rocketrio.protocol.message import tags_hash_code
from rocketrio.protocol.static_topic import logic_queue_endpoints

MessageQueueSelector = Callable[[Sequence[MessageQueue], Any, Any], MessageQueue]


class FaultTracker:
    """Broker sets to avoid until a point in (Trio) time, or until their master address is no
    longer the one that failed (a new master owes nothing to the old one's failure)."""

    def __init__(self) -> None:
        self._until: dict[str, tuple[float, str | None]] = {}

    def __bool__(self) -> bool:
        return bool(self._until)

    def mark_unavailable(
        self, broker_name: str, now: float, duration_s: float, addr: str | None = None
    ) -> None:
        if duration_s > 0:
            self._until[broker_name] = (now + duration_s, addr)

    def mark_available(self, broker_name: str) -> None:
        self._until.pop(broker_name, None)

    def is_available(self, broker_name: str, now: float, master_addr: str | None = None) -> bool:
        """``master_addr``: the set's master address in the current route, if known."""
        entry = self._until.get(broker_name)
        if entry is None:
            return True
        until, failed_addr = entry
        moved = master_addr is not None and failed_addr is not None and master_addr != failed_addr
        if now >= until or moved:
            del self._until[broker_name]
            return True
        return False


@attrs.define
class TopicPublishInfo:
    topic: str
    queues: list[MessageQueue]
    order_topic: bool = False
    have_route: bool = True
    index: int = 0

    @classmethod
    def from_route(
        cls, topic: str, route: TopicRouteData, *, start_index: int = 0
    ) -> TopicPublishInfo:
        queues: list[MessageQueue] = []
        if route.orderTopicConf:
            # "brokerName:queueNums;..." (upstream's order topic KV config)
            for item in route.orderTopicConf.split(";"):
                name, _, nums = item.partition(":")
                if name and nums.isdigit():
                    queues.extend(MessageQueue(topic, name, i) for i in range(int(nums)))
            return cls(topic, queues, order_topic=True, index=start_index)
        logic = logic_queue_endpoints(topic, route.topicQueueMappingByBroker)
        if logic:
            # a static topic: its logic queues, all of them (a hole fails at send time)
            return cls(topic, sorted(logic, key=lambda q: q.queueId), index=start_index)
        masters = {bd.brokerName for bd in route.brokerDatas if MASTER_ID in bd.brokerAddrs}
        for qd in sorted(route.queueDatas, key=lambda q: q.brokerName):
            if qd.perm & PERM_WRITE and qd.brokerName in masters:
                queues.extend(
                    MessageQueue(topic, qd.brokerName, i) for i in range(qd.writeQueueNums)
                )
        return cls(topic, queues, index=start_index)

    @classmethod
    def from_default_route(
        cls, topic: str, default_route: TopicRouteData, queue_nums: int, *, start_index: int = 0
    ) -> TopicPublishInfo:
        """Queues for a topic the name server does not know yet, from the auto-create key
        topic's route (the broker creates the topic on the first send)."""
        info = cls.from_route(topic, default_route, start_index=start_index)
        by_broker: dict[str, int] = {}
        kept: list[MessageQueue] = []
        for mq in info.queues:
            n = by_broker.get(mq.brokerName, 0)
            if n < queue_nums:
                kept.append(mq)
                by_broker[mq.brokerName] = n + 1
        info.queues = kept
        info.have_route = False
        return info

    def ok(self) -> bool:
        return bool(self.queues)

    def _next(self) -> MessageQueue:
        self.index += 1
        return self.queues[self.index % len(self.queues)]

    def select(
        self,
        last_failed_broker: str | None = None,
        available: Callable[[str], bool] | None = None,
    ) -> MessageQueue:
        """Round robin; skip brokers that are unavailable or just failed, when others exist."""
        if not self.queues:
            raise ValueError(f"topic {self.topic} has no writable queue")
        for _ in range(len(self.queues)):
            mq = self._next()
            if mq.brokerName == last_failed_broker:
                continue
            if available is None or available(mq.brokerName):
                return mq
        # every broker is unavailable: prefer one that did not just fail
        for _ in range(len(self.queues)):
            mq = self._next()
            if mq.brokerName != last_failed_broker:
                return mq
        return self._next()


def subscribe_queues(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """Readable queues of a topic (upstream topicRouteData2TopicSubscribeInfo); a static
    topic's are its logic queues."""
    logic = logic_queue_endpoints(topic, route.topicQueueMappingByBroker)
    if logic:
        return set(logic)
    return {
        MessageQueue(topic, qd.brokerName, i)
        for qd in route.queueDatas
        if qd.perm & PERM_READ
        for i in range(qd.readQueueNums)
    }


def java_hash_code(arg: Any) -> int:
    """``arg.hashCode()`` as Java computes it for String, Integer and Long."""
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(2**31) <= arg < 2**31:
            return arg
        v = arg & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    return tags_hash_code(arg if isinstance(arg, str) else str(arg))


def select_by_hash(mqs: Sequence[MessageQueue], _msg: Any, arg: Any) -> MessageQueue:
    """Upstream SelectMessageQueueByHash: the same ``arg`` always maps to the same queue."""
    return mqs[abs(java_hash_code(arg)) % len(mqs)]


SelectMessageQueueByHash: MessageQueueSelector = select_by_hash
