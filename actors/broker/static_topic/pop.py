"""POP_MESSAGE on a static topic (RIP-21 for POP; upstream's PopMessageProcessor does not
translate logic queues, rocketrio's design: docs/static-topics.md).

A POP is served by the broker leading the logic queues: with queueId -1 it reads the logic
queues led here (`LogicQueueStore.pop_queue_ids`), a POP naming a logic queue led elsewhere is
answered NOT_LEADER_FOR_QUEUE. The POP path itself reads through `LogicQueueStore`
(logic_store.py), so offsets, checkpoints and receipts are logic values.

Before the plain POP runs, each logic queue it may read gets the group's offset by
Double-Check-Read when this broker has none yet (`StaticTopicOffsets.prime`): after a
remapping the new leader continues where the group was on the old leader instead of applying
initMode (which would skip or repeat the queue). A previous leader that cannot be asked makes
the POP answer SYSTEM_ERROR (the client asks again), never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketrio.actors.broker.dispatch.answers import refused
from rocketrio.actors.broker.dispatch.table import Handler
from rocketrio.actors.broker.static_topic.offsets import StaticTopicOffsets
from rocketrio.actors.broker.static_topic.pull import not_leader
from rocketrio.actors.broker.tables.topic_queue_mapping import (
    TopicQueueMappingManager,
    leader_items,
)
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.pop_headers import PopMessageRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext


def led_queues(mappings: TopicQueueMappingManager, topic: str) -> list[int]:
    detail = mappings.get(topic)
    if detail is None:
        return []
    return sorted(g for g in detail.hostedQueues if leader_items(detail, g) is not None)


def pop_handlers(
    mappings: TopicQueueMappingManager,
    offsets: StaticTopicOffsets,
    plain: Mapping[int, Handler],
) -> dict[int, Handler]:
    """POP_MESSAGE: a static topic's offsets primed first; every POP then to ``plain``."""
    if RequestCode.POP_MESSAGE not in plain:
        return {}
    plain_pop = plain[RequestCode.POP_MESSAGE]

    async def handle(ctx: RequestContext) -> RemotingCommand | None:
        topic = ctx.cmd.ext_fields.get("topic")
        detail = mappings.get(topic) if topic else None
        if detail is None or topic is None:
            return await plain_pop(ctx)
        h = from_ext(PopMessageRequestHeader, ctx.cmd.ext_fields)
        if h.queueId >= 0:
            if leader_items(detail, h.queueId) is None:
                return refused(ctx.cmd, not_leader(topic, h.queueId, detail.bname))
            ids = [h.queueId]
        else:
            ids = led_queues(mappings, topic)
        for gid in ids:
            refusal = await offsets.prime(h.consumerGroup, topic, gid)
            if refusal is not None:
                return refused(ctx.cmd, refusal)
        return await plain_pop(ctx)

    return {RequestCode.POP_MESSAGE: handle}
