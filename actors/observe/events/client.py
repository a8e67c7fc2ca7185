"""Events of the clients (actors/client/): producers (send, transactions), push, orderly and
broadcast consumers (pull, rebalance, offsets, queue locks) and their MQClientInstance.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import Json, LogEvent, event


@event("broadcast_consume_dropped", "warning")
@attrs.frozen(kw_only=True)
class BroadcastConsumeDropped(LogEvent):
    """Broadcast consume dropped."""

    group: str
    count: int


@event("broker_connection_closed")
@attrs.frozen(kw_only=True)
class BrokerConnectionClosed(LogEvent):
    """Broker connection closed."""

    topics: list[str]


@event("consume_bad_status", "warning")
@attrs.frozen(kw_only=True)
class ConsumeBadStatus(LogEvent):
    """Consume bad status."""

    group: str
    status: Json


@event("consumed_directly")
@attrs.frozen(kw_only=True)
class ConsumedDirectly(LogEvent):
    """A message consumed directly at an admin's request (CONSUME_MESSAGE_DIRECTLY, 309):
    the listener's verdict as upstream's CMResult name (empty for an unknown status)."""

    group: str
    msg_id: str
    result: str
    spent_ms: int


@event("consume_failed", "warning")
@attrs.frozen(kw_only=True)
class ConsumeFailed(LogEvent):
    """Consume failed."""

    group: str
    error: str


@event("consumer_ids_changed")
@attrs.frozen(kw_only=True)
class ConsumerIdsChanged(LogEvent):
    """Consumer ids changed."""

    group: str


@event("get_consumer_ids_failed", "warning")
@attrs.frozen(kw_only=True)
class GetConsumerIdsFailed(LogEvent):
    """Get consumer ids failed."""

    group: str
    error: str


@event("heartbeat_failed", "warning")
@attrs.frozen(kw_only=True)
class HeartbeatFailed(LogEvent):
    """Heartbeat failed."""

    error: str


@event("offset_reset_applied")
@attrs.frozen(kw_only=True)
class OffsetResetApplied(LogEvent):
    """A consumer restarted its queues at reset offsets (``offsets``: "broker:queue" -> offset)."""

    group: str
    offsets: dict[str, int]


@event("orderly_lock_failed", "warning")
@attrs.frozen(kw_only=True)
class OrderlyLockFailed(LogEvent):
    """An orderly consumer could not ask a broker for its queue locks (LOCK_BATCH_MQ or
    UNLOCK_BATCH_MQ); the locks it holds expire unless a later call renews them."""

    group: str
    queues: list[str]
    error: str


@event("orderly_lock_lost", "warning")
@attrs.frozen(kw_only=True)
class OrderlyLockLost(LogEvent):
    """The broker no longer grants an orderly consumer these queues (another client holds
    them): their consumption stops until the lock is granted again."""

    group: str
    queues: list[str]


@event("orderly_queue_unlocked")
@attrs.frozen(kw_only=True)
class OrderlyQueueUnlocked(LogEvent):
    """An orderly consumer gave a queue up after a rebalance: its last batch finished, its
    offset was committed, then UNLOCK_BATCH_MQ."""

    group: str
    mq: str
    offset: int


@event("persist_offset_failed", "warning")
@attrs.frozen(kw_only=True)
class PersistOffsetFailed(LogEvent):
    """Persist offset failed."""

    group: str
    mq: str
    error: str


@event("pull_failed", "warning")
@attrs.frozen(kw_only=True)
class PullFailed(LogEvent):
    """Pull failed."""

    group: str
    mq: str
    error: str


@event("pop_moved", "warning")
@attrs.frozen(kw_only=True)
class PopMoved(LogEvent):
    """A SimpleConsumer's POP (or ack, change-invisible) was parked at a master that stopped
    answering, and the route named another master of its broker set: given up and, for a POP,
    sent to the new master at once (simple_consumer.py)."""

    group: str
    topic: str
    old: str
    error: str


@event("pull_moved")
@attrs.frozen(kw_only=True)
class PullMoved(LogEvent):
    """Pull moved."""

    group: str
    mq: str
    old: str
    new: str


@event("pull_offset_illegal", "warning")
@attrs.frozen(kw_only=True)
class PullOffsetIllegal(LogEvent):
    """Pull offset illegal."""

    group: str
    mq: str
    offset: int
    next_offset: Json


@event("query_consumer_offset_failed", "warning")
@attrs.frozen(kw_only=True)
class QueryConsumerOffsetFailed(LogEvent):
    """Query consumer offset failed."""

    group: str
    mq: str
    error: str


@event("rebalance")
@attrs.frozen(kw_only=True)
class Rebalance(LogEvent):
    """Rebalance."""

    group: str
    topic: str
    queues: list[str]


@event("rebalance_failed", "warning")
@attrs.frozen(kw_only=True)
class RebalanceFailed(LogEvent):
    """Rebalance failed."""

    group: str
    topic: str
    error: str


@event("rebalance_no_route", "warning")
@attrs.frozen(kw_only=True)
class RebalanceNoRoute(LogEvent):
    """Rebalance no route."""

    group: str
    topic: str


@event("reset_offset_bad_request", "warning")
@attrs.frozen(kw_only=True)
class ResetOffsetBadRequest(LogEvent):
    """Reset offset bad request."""

    error: str


@event("reset_offset_no_consumer")
@attrs.frozen(kw_only=True)
class ResetOffsetNoConsumer(LogEvent):
    """Reset offset no consumer."""

    group: str
    topic: str


@event("route_update_failed", "warning")
@attrs.frozen(kw_only=True)
class RouteUpdateFailed(LogEvent):
    """Route update failed."""

    topic: str
    error: str


@event("send_back_failed", "warning")
@attrs.frozen(kw_only=True)
class SendBackFailed(LogEvent):
    """Send back failed."""

    group: str
    error: str


@event("send_callback_failed", "error")
@attrs.frozen(kw_only=True)
class SendCallbackFailed(LogEvent):
    """Send callback failed."""


@event("send_failed", "warning")
@attrs.frozen(kw_only=True)
class SendFailed(LogEvent):
    """Send failed."""

    topic: str
    addr: str | None
    attempt: int
    error: str


@event("start_offset_failed", "warning")
@attrs.frozen(kw_only=True)
class StartOffsetFailed(LogEvent):
    """Start offset failed."""

    group: str
    mq: str
    error: str


@event("unregister_client_failed", "warning")
@attrs.frozen(kw_only=True)
class UnregisterClientFailed(LogEvent):
    """Unregister client failed."""

    error: str


@event("transaction_check_dropped", "warning")
@attrs.frozen(kw_only=True)
class TransactionCheckDropped(LogEvent):
    """A transaction producer's check queue was full: a broker's CHECK_TRANSACTION_STATE was
    not answered (the broker asks again next round)."""

    group: str
    msg_id: str


@event("transaction_listener_failed", "warning")
@attrs.frozen(kw_only=True)
class TransactionListenerFailed(LogEvent):
    """execute_local_transaction or check_local_transaction raised; the state is UNKNOW (the
    broker checks again later), as upstream."""

    group: str
    msg_id: str
    phase: str
    error: str


@event("transaction_end_failed", "warning")
@attrs.frozen(kw_only=True)
class TransactionEndFailed(LogEvent):
    """A producer could not send END_TRANSACTION to the broker; the broker's check will ask
    for the state instead."""

    group: str
    msg_id: str
    error: str


@event("reply_unmatched", "warning")
@attrs.frozen(kw_only=True)
class ReplyUnmatched(LogEvent):
    """A pushed reply (PUSH_REPLY_MESSAGE_TO_CLIENT) matched no waiting request: it came after
    the request's timeout, or for another client (request_reply.py)."""

    correlation_id: str


@event("reply_push_bad", "warning")
@attrs.frozen(kw_only=True)
class ReplyPushBad(LogEvent):
    """A PUSH_REPLY_MESSAGE_TO_CLIENT that could not be read (bad header or body); the broker
    is answered SYSTEM_ERROR."""

    error: str
