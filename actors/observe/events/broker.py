"""Events of the broker outside its store, roles and HA: shutdown steps, topics, registration
with the NameServers, consumer groups and offsets, config files, held pulls, the DLQ, and the
POP, transaction, schedule (delay and timer) and static-topic features.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import Json, LogEvent, event


@event("config_loaded_from_backup", "warning")
@attrs.frozen(kw_only=True)
class ConfigLoadedFromBackup(LogEvent):
    """Config loaded from backup."""

    file: Json


@event("consumer_group_changed")
@attrs.frozen(kw_only=True)
class ConsumerGroupChanged(LogEvent):
    """Consumer group changed."""

    group: str
    members: list[str]


@event("sql92_subscription_refused", "warning")
@attrs.frozen(kw_only=True)
class Sql92SubscriptionRefused(LogEvent):
    """A client's SQL92 subscription was refused at CHECK_CLIENT_CONFIG (upstream: "filter
    message, but failed to compile expression"): the property filter is off or the expression
    does not compile; ``error`` is the remark the client got."""

    client_id: str
    group: str
    topic: str
    expression: str
    error: str


@event("filter_data_cleaned")
@attrs.frozen(kw_only=True)
class FilterDataCleaned(LogEvent):
    """SQL92 filters whose group had no live consumer for filterDataCleanTimeSpan were dropped
    with their compiled selectors (upstream ConsumerFilterManager.clean); ``left``: how many
    filters stay registered."""

    dropped: int
    left: int


@event("group_offset_cloned")
@attrs.frozen(kw_only=True)
class GroupOffsetCloned(LogEvent):
    """Group offset cloned."""

    src_group: Json
    dest_group: Json
    topics: list[str]


@event("register_broker_failed", "warning")
@attrs.frozen(kw_only=True)
class RegisterBrokerFailed(LogEvent):
    """A broker could not register with a NameServer (logged once until it succeeds again)."""

    namesrv: str
    error: str


@event("broker_heartbeat_failed", "warning")
@attrs.frozen(kw_only=True)
class BrokerHeartbeatFailed(LogEvent):
    """A broker's heartbeat to a NameServer failed (logged once until it succeeds again)."""

    namesrv: str
    error: str


@event("held_pull_failed", "error")
@attrs.frozen(kw_only=True)
class HeldPullFailed(LogEvent):
    """Held pull failed."""

    topic: str


@event("config_persist_failed", "error")
@attrs.frozen(kw_only=True)
class ConfigPersistFailed(LogEvent):
    """A broker config file (topics, groups, consumer offsets, day counters ...) could not be
    written because the disk is full; the previous file is intact and the write is retried."""

    path: str
    error: str


@event("message_to_dlq")
@attrs.frozen(kw_only=True)
class MessageToDlq(LogEvent):
    """Message to dlq."""

    group: str
    msg_id: str
    reconsume_times: int
    topic: str | None = None
    dlq_msg_id: str | None = None


@event("offset_reset")
@attrs.frozen(kw_only=True)
class OffsetReset(LogEvent):
    """A group's offsets were reset (``offsets``: "broker:queue" -> offset) and its members told."""

    group: str
    topic: str
    timestamp: int
    force: bool
    offsets: dict[str, int]
    member_count: int


@event("pull_hold_refused", "warning")
@attrs.frozen(kw_only=True)
class PullHoldRefused(LogEvent):
    """Pull hold refused: over a held-pull bound."""

    topic: str
    queue_id: int
    group: str
    why: Json
    suppressed: int


@event("registered_to_namesrv")
@attrs.frozen(kw_only=True)
class RegisteredToNamesrv(LogEvent):
    """Registered to namesrv."""

    namesrv: str


@event("shutdown_step_failed", "error")
@attrs.frozen(kw_only=True)
class ShutdownStepFailed(LogEvent):
    """Shutdown step failed."""

    step: str


@event("shutdown_step_timeout", "warning")
@attrs.frozen(kw_only=True)
class ShutdownStepTimeout(LogEvent):
    """Shutdown step timeout."""

    step: str


@event("topic_adopted_from_queues", "warning")
@attrs.frozen(kw_only=True)
class TopicAdoptedFromQueues(LogEvent):
    """A new master found records of a topic that neither its table nor its metadata journal
    knows (its journal records were cleaned, or written before the journal): it serves exactly
    the queues its log holds."""

    topic: str
    queue_count: int


@event("meta_journal_failed", "warning")
@attrs.frozen(kw_only=True)
class MetaJournalFailed(LogEvent):
    """A topic or group change was not written to the metadata journal (full store inbox,
    store stopped, refused put), or a journal record could not be read on replay."""

    change: str
    error: str


@event("meta_journal_replayed")
@attrs.frozen(kw_only=True)
class MetaJournalReplayed(LogEvent):
    """A broker taking the master role applied its metadata journal to its tables: how many
    topics (of them deleted) and groups the journal names."""

    journal_topics: int
    journal_deleted_topics: int
    journal_groups: int


@event("topic_deleted")
@attrs.frozen(kw_only=True)
class TopicDeleted(LogEvent):
    """Topic deleted."""

    topic: str
    cluster: str | None = None


@event("topic_updated")
@attrs.frozen(kw_only=True)
class TopicUpdated(LogEvent):
    """Topic updated."""

    topic: str
    read_queues: int
    write_queues: int
    perm: int


@event("unregister_broker_failed", "warning")
@attrs.frozen(kw_only=True)
class UnregisterBrokerFailed(LogEvent):
    """Unregister broker failed."""

    namesrv: str
    error: str


@event("pop_revived")
@attrs.frozen(kw_only=True)
class PopRevived(LogEvent):
    """A POP checkpoint's invisible time ended with messages unacknowledged: they were put to
    the pop retry topic (or the DLQ) for the group to receive again."""

    topic: str
    group: str
    queue_id: int
    revived_count: int
    to_topic: str


@event("pop_revive_record_skipped", "warning")
@attrs.frozen(kw_only=True)
class PopReviveRecordSkipped(LogEvent):
    """A message of the revive topic that is not a readable CK or ACK was skipped."""

    topic: str
    queue_id: int
    queue_offset: int
    why: str


@event("transaction_check_discarded", "warning")
@attrs.frozen(kw_only=True)
class TransactionCheckDiscarded(LogEvent):
    """A half message was checked transactionCheckMax times (or is older than the CommitLog's
    fileReservedTime) without an answer: it is moved to TRANS_CHECK_MAX_TIME_TOPIC and never
    delivered. ``msg_id`` is its UNIQ_KEY."""

    topic: str
    group: str
    msg_id: str
    queue_offset: int
    check_times: int
    reason: str


@event("transaction_check_no_producer", "warning")
@attrs.frozen(kw_only=True)
class TransactionCheckNoProducer(LogEvent):
    """A half message was due for a check but no producer of its group is connected (upstream:
    "Check transaction failed, channel is null"); it is checked again next round."""

    group: str
    msg_id: str


@event("transaction_end_refused", "warning")
@attrs.frozen(kw_only=True)
class TransactionEndRefused(LogEvent):
    """An END_TRANSACTION was not applied (wrong group or offsets, unknown half, or a half that
    was already ended or discarded); ``remark`` says which."""

    group: str
    msg_id: str
    remark: str


@event("schedule_service_started")
@attrs.frozen(kw_only=True)
class ScheduleServiceStarted(LogEvent):
    """This broker became master: it re-puts due delay-level and timer messages from the
    offsets of delayOffset.json (level -> next ConsumeQueue index)."""

    offsets: dict[str, int]


@event("schedule_service_stopped")
@attrs.frozen(kw_only=True)
class ScheduleServiceStopped(LogEvent):
    """The broker is no longer master (or stops): no more re-puts from here."""

    offsets: dict[str, int]
    reason: str


@event("schedule_deliver_failed", "warning")
@attrs.frozen(kw_only=True)
class ScheduleDeliverFailed(LogEvent):
    """Due messages could not be re-put (the store refused); retried, offsets unchanged."""

    topic: str
    queue_id: int
    offset: int
    count: int
    error: str


@event("schedule_entry_missing", "warning")
@attrs.frozen(kw_only=True)
class ScheduleEntryMissing(LogEvent):
    """A scheduled ConsumeQueue entry whose record cannot be read (removed by retention or not
    a scheduled message): skipped."""

    topic: str
    queue_id: int
    offset: int
    commitlog_offset: int


@event("static_topic_mapping_updated")
@attrs.frozen(kw_only=True)
class StaticTopicMappingUpdated(LogEvent):
    """UPDATE_AND_CREATE_STATIC_TOPIC accepted: topicQueueMapping.json and topics.json are
    written; ``led_queues`` are the logic queues whose leader is this broker."""

    topic: str
    epoch: int
    total_queues: int
    led_queues: list[int]


@event("static_topic_mapping_refused", "error")
@attrs.frozen(kw_only=True)
class StaticTopicMappingRefused(LogEvent):
    """A static-topic mapping was refused: it names another broker (copied from there), is
    older than the one held, or would change an existing generation. Nothing was changed."""

    topic: str
    mapping_bname: str
    reason: str


@event("static_topic_config_repaired", "warning")
@attrs.frozen(kw_only=True)
class StaticTopicConfigRepaired(LogEvent):
    """At start, a static topic's config was missing or short of the queues its mapping names
    (a crash between the mapping write and the topic write): restored from the mapping."""

    topic: str
    read_queues: int
    write_queues: int


@event("pop_order_ack_illegal", "warning")
@attrs.frozen(kw_only=True)
class PopOrderAckIllegal(LogEvent):
    """An ACK of an ordered POP receipt named an offset that is not in the queue's batch in
    flight: refused with MESSAGE_ILLEGAL, the group's offset unchanged."""

    topic: str
    group: str
    queue_id: int
    offset: int


@event("static_topic_remote_read_failed", "warning")
@attrs.frozen(kw_only=True)
class StaticTopicRemoteReadFailed(LogEvent):
    """A static topic's leader could not read an older generation on ``item_broker`` (no
    address, no answer): the request was answered SYSTEM_ERROR and the client retries."""

    topic: str
    queue_id: int
    item_broker: str
    call: str
    error: str


@event("static_topic_message_forwarded")
@attrs.frozen(kw_only=True)
class StaticTopicMessageForwarded(LogEvent):
    """A delayed message came due, or a transactional one was committed, on a broker that no
    longer leads its logic queue: it was sent to the leader ``to`` (static_topic/forward.py)."""

    topic: str
    queue_id: int
    to: str


@event("static_topic_leadership_released")
@attrs.frozen(kw_only=True)
class StaticTopicLeadershipReleased(LogEvent):
    """A mapping update took the leadership of ``released_queues`` (logic ids) from this
    broker: their sends are refused from now on, and every send accepted before is stored
    (the CommitLog ended at ``commitlog_offset``) before the admin is answered."""

    topic: str
    released_queues: list[int]
    commitlog_offset: int


@event("static_topic_mapping_synced")
@attrs.frozen(kw_only=True)
class StaticTopicMappingSynced(LogEvent):
    """A slave adopted its master's static-topic mappings (their DataVersion changed) and
    wrote them to its topicQueueMapping.json; ``refused`` of them named another broker set."""

    master: str
    topics: list[str]
    refused: int


@event("static_topic_mapping_cleaned")
@attrs.frozen(kw_only=True)
class StaticTopicMappingCleaned(LogEvent):
    """The clean-up (static_topic_clean.py) dropped a logic queue's old generations from this
    broker's topicQueueMapping.json: it keeps them from ``kept_from_gen`` on (None: the whole
    list went, this broker being more than one generation behind)."""

    topic: str
    queue_id: int
    kept_from_gen: int | None
    reason: str


@event("reply_push_failed", "warning")
@attrs.frozen(kw_only=True)
class ReplyPushFailed(LogEvent):
    """A reply (SEND_REPLY_MESSAGE) could not be pushed to its requester (reply/processor.py):
    no REPLY_TO_CLIENT, no producer connection of that client id, or the push failed; the
    responder is answered SYSTEM_ERROR with ``reason``."""

    topic: str
    reason: str


@event("assignment_none", "warning")
@attrs.frozen(kw_only=True)
class AssignmentNone(LogEvent):
    """QUERY_ASSIGNMENT had no valid answer (assign/allocation.py: no route, no consumers here,
    an unknown strategy, input a strategy refuses); the client keeps the queues it has."""

    topic: str
    group: str
    client_id: str
    reason: str


@event("message_request_mode_set")
@attrs.frozen(kw_only=True)
class MessageRequestModeSet(LogEvent):
    """SET_MESSAGE_REQUEST_MODE recorded (and persisted) a group's mode for a topic."""

    topic: str
    group: str
    mode: str
    pop_share_queue_num: int


@event("unused_topic_queues_deleted")
@attrs.frozen(kw_only=True)
class UnusedTopicQueuesDeleted(LogEvent):
    """CLEAN_UNUSED_TOPIC dropped the ConsumeQueues of topics without a config here
    (admin/unused_topics.py)."""

    topics: list[str]
