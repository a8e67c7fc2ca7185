"""A client's answer to GET_CONSUMER_STATUS_FROM_CLIENT (221), sent to it by a broker for
``mqadmin getConsumerStatus`` (upstream ClientRemotingProcessor.getConsumeStatus,
MQClientInstance.getConsumerStatus): the offsets its consumer of the group holds in memory for
the topic (every topic when the topic is blank), as ``messageQueueTable``.

As upstream, only a push consumer (orderly or not: consume type CONSUME_PASSIVELY) answers its
offsets; a lite pull consumer, a group this client does not run or a consumer not started yet
answer an empty table, always SUCCESS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.consumer_status import (
    GetConsumerStatusBody,
    GetConsumerStatusRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext

if TYPE_CHECKING:
    from rocketrio.actors.client.mq_client import MQClientInstance

PUSH = "CONSUME_PASSIVELY"


def offsets_of(consumer: Any, topic: str) -> dict[MessageQueue, int]:
    """A push consumer's in-memory offsets of ``topic`` (blank: all); {} for any other."""
    store = getattr(consumer, "offset_store", None)
    if consumer is None or consumer.consume_type != PUSH or store is None:
        return {}
    every = not topic.strip()
    return {mq: off for mq, off in store.table.items() if every or mq.topic == topic}


def answer(client: MQClientInstance, cmd: RemotingCommand) -> RemotingCommand:
    """GET_CONSUMER_STATUS_FROM_CLIENT of one of this client's consumer groups."""
    h = from_ext(GetConsumerStatusRequestHeader, cmd.ext_fields)
    body = GetConsumerStatusBody(offsets_of(client.consumers.get(h.group), h.topic))
    return cmd.make_response(ResponseCode.SUCCESS, body=fastjson.encode(body))
