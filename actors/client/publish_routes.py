"""The producer's publish routes (upstream DefaultMQProducerImpl.topicPublishInfoTable,
tryToFindTopicPublishInfo and MQFaultStrategy): the writable queues of every topic it sent to,
kept fresh by the route listener, and the broker sets it avoids after a failed send.

A topic's first send fetches its route (many first sends share one fetch); an unknown topic
sends with the queues of the auto-create key topic (createTopicKey), which the route poll
replaces once the NameServer knows it. A broker set whose send failed is avoided for
notAvailableDuration, or until the route names another master address (`FaultTracker`).
"""

from __future__ import annotations

import random

import structlog

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.config import ProducerConfig
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.queue_select import FaultTracker, TopicPublishInfo
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import MessageQueue, TopicRouteData

log = structlog.get_logger("producer")  # the producer's lines: same logger, same ``actor``


class PublishRoutes:
    """TopicPublishInfo per topic and the broker sets to avoid, for one producer."""

    def __init__(
        self, client: MQClientInstance, config: ProducerConfig, rng: random.Random
    ) -> None:
        self.client = client
        self.config = config
        self.table: dict[str, TopicPublishInfo] = {}
        self.faults = FaultTracker()
        self._rng = rng
        self._lock = aio.Lock()

    def on_route(self, topic: str, route: TopicRouteData) -> None:
        old = self.table.get(topic)
        if old is not None:
            info = TopicPublishInfo.from_route(topic, route, start_index=old.index)
            if info.ok():
                self.table[topic] = info

    async def get(self, topic: str) -> TopicPublishInfo:
        """Writable queues of the topic (upstream tryToFindTopicPublishInfo)."""
        info = self.table.get(topic)
        if info is not None and info.ok():
            return info
        async with self._lock:  # many first sends of a topic share one route fetch
            info = self.table.get(topic)
            if info is not None and info.ok():
                return info
            info = await self._fetch(topic)
            self.table[topic] = info
            return info

    async def _fetch(self, topic: str) -> TopicPublishInfo:
        self.client.watch_topic(topic)
        route = await self.client.update_route(topic)
        start = self._rng.randrange(1 << 16)
        if route is not None:
            info = TopicPublishInfo.from_route(topic, route, start_index=start)
            if info.ok():
                return info
        # unknown topic: send with the auto-create key topic's queues; the broker creates
        # the topic, and the route poll replaces this info once the name server knows it
        default = self.client.routes.get(self.config.createTopicKey)
        if default is None:
            default = await self.client.update_route(self.config.createTopicKey)
        if default is not None:
            info = TopicPublishInfo.from_default_route(
                topic, default, self.config.defaultTopicQueueNums, start_index=start
            )
            if info.ok():
                return info
        raise MQClientError(
            f"no route info for topic {topic} (and no auto-create route "
            f"{self.config.createTopicKey}) from name server {self.client.config.namesrvAddr}"
        )

    def available(self, broker_name: str) -> bool:
        faults = self.faults
        if not faults:  # nothing isolated: the usual case costs no clock read
            return True
        return faults.is_available(
            broker_name, aio.current_time(), self.client.find_master_addr(broker_name)
        )

    def note_failure(
        self, topic: str, mq: MessageQueue, addr: str | None, exc: Exception, attempt: int
    ) -> None:
        """Avoid the broker set for notAvailableDuration, or until its master address changes
        (upstream's isolation after a failure, made aware of master switches)."""
        self.faults.mark_unavailable(
            mq.brokerName, aio.current_time(), self.config.notAvailableDuration / 1000, addr
        )
        events.emit(
            log,
            events.SendFailed(topic=topic, addr=addr, attempt=attempt, error=str(exc)),
            broker=mq.brokerName,
        )
