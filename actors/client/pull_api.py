"""Pulling one queue (upstream PullAPIWrapper): which replica to pull from, the PULL_MESSAGE
header, what a FOUND answer hands to consumption, and what a failed pull means.

- `pull_broker`: the brokerId the last answer suggested (suggestWhichBrokerId) if the route has
  it, else the master, else a slave (a classic master that died: consumers read from its slave
  meanwhile); a static topic's logic queue from a replica only when suggested (the replica
  serves it from its synced mapping and sends the consumer back when it has none).
- `pull_header`: SUSPEND | SUBSCRIPTION, plus COMMIT_OFFSET with the offset to commit.
- `found_messages` (upstream processPullResult): decoded, a logic queue's records renamed to it,
  retried messages back under their original topic, then the client-side tag check.
- `broker_gone` / `pull_retry_delay`: a failure saying the broker is gone is retried after
  0.1 s, doubling up to upstream's 3 s, while the route is refreshed; others pause 3 s.

`QueueState` is one owned queue's pull position; `ConsumerCore` (consumer_core.py) runs the
pull loops and the rebalance that own these states.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.api import PullResult
from rocketrio.actors.client.config import MASTER_ID, RETRY_GROUP_TOPIC_PREFIX, retry_topic
from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.process_queue import ProcessQueue
from rocketrio.actors.client.subscription import filter_by_tags
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.protocol.bodies import MessageQueue, SubscriptionData
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import (
    PULL_FLAG_COMMIT_OFFSET,
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
    PullMessageRequestHeader,
)
from rocketrio.protocol.message import RETRY_TOPIC, MessageDecodeError, MessageExt
from rocketrio.protocol.serde import HeaderError
from rocketrio.protocol.static_topic import is_logic_broker_name

PULL_DELAY_WHEN_EXCEPTION_S = 3.0  # upstream PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION
PULL_DELAY_WHEN_FLOW_CONTROL_S = 0.05  # upstream PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
# the first retry after the broker went away (the route is being refreshed meanwhile)
PULL_DELAY_WHEN_BROKER_GONE_S = 0.1
CALL_ERRORS = (RemotingError, MQClientError, HeaderError, MessageDecodeError)
# answers of a broker that is stopping or is no longer master
# NOT_LEADER_FOR_QUEUE: a static topic's logic queue moved to another broker (remapping)
_BROKER_GONE_CODES = frozenset(
    {
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NOT_LEADER_FOR_QUEUE,
    }
)


class NoBrokerAddress(MQClientError):
    """The route names no address of the queue's broker set."""


def broker_gone(exc: Exception) -> bool:
    """The failure says the broker is not there any more (its route is probably stale)."""
    if isinstance(exc, MQBrokerError):
        return exc.code in _BROKER_GONE_CODES
    return isinstance(exc, RemotingError | NoBrokerAddress)


def pull_retry_delay(failures: int) -> float:
    """Pause after the ``failures``-th broker-gone failure in a row: 0.1 s, doubling, <= 3 s."""
    return min(
        PULL_DELAY_WHEN_BROKER_GONE_S * 2 ** max(failures - 1, 0), PULL_DELAY_WHEN_EXCEPTION_S
    )


def reset_retry_topic(msgs: list[MessageExt], group_retry_topic: str) -> None:
    """Messages pulled from the retry topic show their original topic (upstream
    resetRetryAndNamespace)."""
    for m in msgs:
        if m.topic == group_retry_topic:  # topic first: properties decode lazily
            original = m.properties.get(RETRY_TOPIC)
            if original:
                m.topic = original


@attrs.define(eq=False)
class QueueState:
    """One owned queue: its pull position and the messages handed out but not yet done."""

    mq: MessageQueue
    sub: SubscriptionData
    next_offset: int
    pq: ProcessQueue = attrs.field(factory=ProcessQueue)
    cancel: aio.CancelScope = attrs.field(factory=aio.CancelScope)
    broker_id: int = 0  # the replica the broker suggested pulling from
    # the address of the pull in flight (None between pulls), and the scope `_on_route`
    # cancels to abandon it when the route moves the queue
    pull_addr: str | None = None
    pull_scope: aio.CancelScope | None = None
    pull_failures: int = 0  # broker-gone failures in a row
    pull_started: float = 0.0  # trio time the pull in flight was sent (its RT, for stats)


class PullSettings(Protocol):
    """The consumer config keys a pull header reads."""

    pullBatchSize: int
    brokerSuspendMaxTimeMillis: int


def pull_broker(client: MQClientInstance, st: QueueState) -> tuple[str, int]:
    """(address, brokerId) to pull ``st``'s queue from; `NoBrokerAddress` when there is none."""
    found = client.find_broker_in_subscribe(client.broker_name_of(st.mq), st.broker_id)
    if found is None:
        raise NoBrokerAddress(f"no address for broker {st.mq.brokerName}")
    addr, broker_id = found
    if broker_id != MASTER_ID and is_logic_broker_name(st.mq.brokerName) and not st.broker_id:
        # not suggested (the master is gone): a replica serves a logic queue from its synced
        # mapping, but the consumer waits for the leader's master rather than guess
        raise NoBrokerAddress(f"no master leads logic queue {st.mq}")
    return addr, broker_id


def pull_header(
    st: QueueState, group: str, settings: PullSettings, commit_offset: int
) -> PullMessageRequestHeader:
    """PULL_MESSAGE for the queue's next offset: suspended (long polling) with the
    subscription, and with ``commit_offset`` when it is > 0 (COMMIT_OFFSET: the broker stores
    it, which only a master does)."""
    flag = PULL_FLAG_SUSPEND | PULL_FLAG_SUBSCRIPTION
    if commit_offset > 0:
        flag |= PULL_FLAG_COMMIT_OFFSET
    return PullMessageRequestHeader(
        consumerGroup=group,
        topic=st.mq.topic,
        queueId=st.mq.queueId,
        queueOffset=st.next_offset,
        maxMsgNums=settings.pullBatchSize,
        sysFlag=flag,
        commitOffset=max(commit_offset, 0),
        suspendTimeoutMillis=settings.brokerSuspendMaxTimeMillis,
        subVersion=st.sub.subVersion,
        subscription=st.sub.subString,
        expressionType=st.sub.expressionType,
        # a logic queue names its mock broker (upstream does for every queue): a broker
        # without the mapping then refuses instead of serving its physical queue of that id
        bname=st.mq.brokerName if is_logic_broker_name(st.mq.brokerName) else None,
    )


def found_messages(st: QueueState, res: PullResult, group: str) -> list[MessageExt]:
    """The messages of a FOUND answer that consumption gets (upstream processPullResult)."""
    msgs = res.messages()
    if res.offset_delta is not None:  # a logic queue: records name it (upstream)
        for m in msgs:
            m.queue_id = st.mq.queueId
    if st.mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # no other queue holds retries
        reset_retry_topic(msgs, retry_topic(group))
    return filter_by_tags(msgs, st.sub)
