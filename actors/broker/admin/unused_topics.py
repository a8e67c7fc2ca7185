"""CLEAN_UNUSED_TOPIC (316; mqadmin cleanUnusedTopic): drop the ConsumeQueues of topics this
broker has no config for.

As upstream (DefaultMessageStore.cleanUnusedTopic): a topic with queues in the store that is not
in the topic table, not a system topic (TopicValidator.isSystemTopic: the system set and the
``rmq_sys_`` prefix) and not an LMQ (``%LMQ%``) loses its queues and queue offsets. No consumer
can read such a queue (a pull of a topic without config is TOPIC_NOT_EXIST); the CommitLog keeps
the records until retention. The check and the deletes run in one store call, after every put
queued before it and before any queued after, against the live topic table: a topic created
before the call is kept. Each delete is MessageStore.delete_topic's (flushed first, then the
directory removed and its parent fsynced): a kill -9 mid-clean-up leaves each topic either
whole or gone, and recovery does not bring a removed one back.

Unlike upstream, a broker that is not serving as master answers SYSTEM_ERROR and removes
nothing: a slave's topic table is a copy that may lag its master's, so a topic just created on
the master could lose its queues on the slave (and on a promoted slave, its messages).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import structlog

from rocketrio.actors.broker.dispatch.answers import answer_done
from rocketrio.actors.broker.dispatch.outcomes import DONE, Done, Refusal
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.storage.message_store import MessageStore

LMQ_PREFIX = "%LMQ%"
NOT_MASTER = (
    "cleanUnusedTopic runs only on a broker serving as master (a slave's topic table may lag "
    "its master's)"
)


def is_unused(topic: str, *, in_table: bool, is_system: bool) -> bool:
    """Whether upstream's cleanUnusedTopic drops this topic's queues."""
    return not in_table and not is_system and not topic.startswith(LMQ_PREFIX)


class TopicNames(Protocol):
    def select(self, topic: str) -> object | None: ...

    def is_system_topic(self, topic: str) -> bool: ...


class StoreCalls(Protocol):
    async def call(self, fn: Callable[[MessageStore], list[str]]) -> list[str]: ...


def clean_unused(store: MessageStore, topics: TopicNames) -> list[str]:
    """In the store actor: delete the unused topics' queues; the topics deleted."""
    gone = []
    for topic in sorted(store.queue_topics()):
        used = topics.select(topic) is not None
        if is_unused(topic, in_table=used, is_system=topics.is_system_topic(topic)):
            store.delete_topic(topic)
            gone.append(topic)
    return gone


async def clean_unused_topics(
    store: StoreCalls, topics: TopicNames, is_master: Callable[[], bool], log: Any
) -> Done | Refusal:
    if not is_master():
        return Refusal(ResponseCode.SYSTEM_ERROR, NOT_MASTER)
    gone = await store.call(lambda s: clean_unused(s, topics))
    if gone:
        events.emit(log, events.UnusedTopicQueuesDeleted(topics=gone))
    return DONE


def unused_topic_handlers(
    store: StoreCalls, topics: TopicNames, is_master: Callable[[], bool]
) -> Handlers:
    log = structlog.get_logger("broker").bind(actor="admin")

    async def handle(ctx: RequestContext) -> RemotingCommand:
        return answer_done(ctx.cmd, await clean_unused_topics(store, topics, is_master, log))

    return {RequestCode.CLEAN_UNUSED_TOPIC: handle}
