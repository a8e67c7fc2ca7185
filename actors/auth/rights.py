"""Which rights a remoting request needs: request code -> [(resource, actions)], as upstream's
DefaultAuthorizationContextBuilder derives them (its explicit cases, then the @RocketMQAction /
@RocketMQResource annotations of the request headers), for the codes rocketrio serves.

A right is satisfied by a policy entry matching its resource and any one of its actions. A
request with no rights listed here (routes, heartbeats of producers, whole-table reads such as
GET_ALL_TOPIC_CONFIG) needs authentication only, as upstream.

Departures, all stricter than upstream, for calls upstream leaves unannotated:
LITE_PULL_MESSAGE needs what PULL_MESSAGE needs (upstream maps its header's annotation to 11
only, so 361 went unchecked), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP needs Create or Update on the
group of its body,
GET_BROKER_CONFIG needs Get on the cluster (the config names the init user), and
UPDATE_BROKER_CONFIG needs Update on the cluster.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from rocketrio.actors.auth.model import Action, AuthDataError, Resource, is_retry_topic
from rocketrio.protocol.bodies import HeartbeatData, LockBatchRequestBody, SubscriptionGroupConfig
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.pop_checkpoint import BatchAckMessageRequestBody, PopRecordError
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_json


@attrs.frozen
class Right:
    resource: Resource
    actions: tuple[Action, ...]

    def describe(self) -> str:
        return f"{' or '.join(a.value for a in self.actions)} on {self.resource.key}"


PUB = (Action.PUB,)
SUB = (Action.SUB,)
GET = (Action.GET,)
SUB_GET = (Action.SUB, Action.GET)
SUB_UPDATE = (Action.SUB, Action.UPDATE)
UPDATE = (Action.UPDATE,)

Rule = Callable[[RemotingCommand, str], list[Right]]


def _field(cmd: RemotingCommand, name: str) -> str:
    v = cmd.ext_fields.get(name)
    if v is None or not v.strip():
        raise AuthDataError(f"request has no {name} to authorize")
    return v


def _topic_or_retry_group(
    cmd: RemotingCommand, topic_key: str, group_key: str | None, actions: tuple[Action, ...]
) -> list[Right]:
    """A send: Pub on the topic, or Sub on the group when the topic is a retry topic."""
    topic = _field(cmd, topic_key)
    if is_retry_topic(topic):
        group = cmd.ext_fields.get(group_key) if group_key else None
        return [Right(Resource.group(group if group and group.strip() else topic), SUB)]
    return [Right(Resource.topic(topic), actions)]


def _topic_unless_retry(cmd: RemotingCommand, actions: tuple[Action, ...]) -> list[Right]:
    topic = cmd.ext_fields.get("topic")
    if topic is None or is_retry_topic(topic):
        return []
    return [Right(Resource.topic(topic), actions)]


def _send_v1(cmd: RemotingCommand, _c: str) -> list[Right]:
    return _topic_or_retry_group(cmd, "topic", "group", PUB)


def _send_v2(cmd: RemotingCommand, _c: str) -> list[Right]:
    return _topic_or_retry_group(cmd, "b", "a", PUB)


def _pull(cmd: RemotingCommand, _c: str) -> list[Right]:
    group = Right(Resource.group(_field(cmd, "consumerGroup")), SUB)
    return [*_topic_unless_retry(cmd, SUB), group]


def _offset(actions: tuple[Action, ...]) -> Rule:
    def rule(cmd: RemotingCommand, _c: str) -> list[Right]:
        group = Right(Resource.group(_field(cmd, "consumerGroup")), actions)
        return [*_topic_unless_retry(cmd, actions), group]

    return rule


def _heartbeat(cmd: RemotingCommand, _c: str) -> list[Right]:
    data = from_json(HeartbeatData, cmd.body)
    out: list[Right] = []
    for consumer in data.consumerDataSet:
        out.append(Right(Resource.group(consumer.groupName), SUB))
        for sub in consumer.subscriptionDataSet:
            if not is_retry_topic(sub.topic):
                out.append(Right(Resource.topic(sub.topic), SUB))
    return out


def _lock(cmd: RemotingCommand, _c: str) -> list[Right]:
    body = from_json(LockBatchRequestBody, cmd.body)
    out = [Right(Resource.group(body.consumerGroup), SUB)]
    for mq in body.mqSet:
        if not is_retry_topic(mq.topic):
            out.append(Right(Resource.topic(mq.topic), SUB))
    return out


def _unregister(cmd: RemotingCommand, _c: str) -> list[Right]:
    group = cmd.ext_fields.get("consumerGroup")
    return [Right(Resource.group(group), SUB)] if group and group.strip() else []


def _one(kind: str, key: str, actions: tuple[Action, ...], *, optional: bool = False) -> Rule:
    """A header field naming one topic or group (a retry topic names its group)."""

    def rule(cmd: RemotingCommand, _c: str) -> list[Right]:
        if optional and not (cmd.ext_fields.get(key) or "").strip():
            return []
        name = _field(cmd, key)
        if kind == "topic" and not is_retry_topic(name):
            return [Right(Resource.topic(name), actions)]
        return [Right(Resource.group(name), actions)]

    return rule


def _consume_stats(cmd: RemotingCommand, c: str) -> list[Right]:
    return [
        *_one("group", "consumerGroup", GET)(cmd, c),
        *_one("topic", "topic", GET, optional=True)(cmd, c),
    ]


def _reset_offset(cmd: RemotingCommand, c: str) -> list[Right]:
    """INVOKE_BROKER_TO_RESET_OFFSET: Update on the group and the topic (upstream's
    ResetOffsetRequestHeader annotations)."""
    return [*_one("group", "group", UPDATE)(cmd, c), *_one("topic", "topic", UPDATE)(cmd, c)]


def _consume_directly(cmd: RemotingCommand, c: str) -> list[Right]:
    """CONSUME_MESSAGE_DIRECTLY: Sub on the group and on the topic when named (upstream's
    ConsumeMessageDirectlyResultRequestHeader annotations)."""
    return [*_one("group", "consumerGroup", SUB)(cmd, c), *_topic_unless_retry(cmd, SUB)]


def _clone_offset(cmd: RemotingCommand, c: str) -> list[Right]:
    """CLONE_GROUP_OFFSET: Update on the destination group and the topic when named."""
    return [
        *_one("group", "destGroup", UPDATE)(cmd, c),
        *_one("topic", "topic", UPDATE, optional=True)(cmd, c),
    ]


def _group_body(cmd: RemotingCommand, _c: str) -> list[Right]:
    body = from_json(SubscriptionGroupConfig, cmd.body)
    return [Right(Resource.group(body.groupName), (Action.CREATE, Action.UPDATE))]


def _cluster(actions: tuple[Action, ...]) -> Rule:
    def rule(_cmd: RemotingCommand, cluster: str) -> list[Right]:
        return [Right(Resource.cluster(cluster), actions)]

    return rule


def _pop(cmd: RemotingCommand, c: str) -> list[Right]:
    """POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME: Sub on the group and the topic
    (upstream's header annotations)."""
    return [*_one("group", "consumerGroup", SUB)(cmd, c), *_one("topic", "topic", SUB)(cmd, c)]


def _group_topic(actions: tuple[Action, ...]) -> Rule:
    """NOTIFICATION (Sub), POLLING_INFO (Get): the group and the topic of the header."""

    def rule(cmd: RemotingCommand, c: str) -> list[Right]:
        return [
            *_one("group", "consumerGroup", actions)(cmd, c),
            *_one("topic", "topic", actions)(cmd, c),
        ]

    return rule


def _peek(cmd: RemotingCommand, c: str) -> list[Right]:
    """PEEK_MESSAGE: Sub on the topic and the group (its header names the topic first)."""
    return [*_one("topic", "topic", SUB)(cmd, c), *_one("group", "consumerGroup", SUB)(cmd, c)]


def _batch_ack(cmd: RemotingCommand, _c: str) -> list[Right]:
    """BATCH_ACK_MESSAGE: Sub on every group and topic its body acknowledges."""
    try:
        body = BatchAckMessageRequestBody.from_json(cmd.body or b"")
    except PopRecordError as e:
        raise AuthDataError(f"cannot tell the resources of the request: {e}") from None
    out: list[Right] = []
    for ack in body.acks:
        for right in (
            Right(Resource.group(ack.consumer_group), SUB),
            *([] if is_retry_topic(ack.topic) else [Right(Resource.topic(ack.topic), SUB)]),
        ):
            if right not in out:
                out.append(right)
    return out


RC = RequestCode
RULES: dict[int, Rule] = {
    RC.SEND_MESSAGE: _send_v1,
    RC.SEND_MESSAGE_V2: _send_v2,
    RC.SEND_BATCH_MESSAGE: _send_v2,
    RC.END_TRANSACTION: _one("topic", "topic", PUB, optional=True),
    RC.CONSUMER_SEND_MSG_BACK: _one("group", "group", SUB),
    RC.PULL_MESSAGE: _pull,
    RC.LITE_PULL_MESSAGE: _pull,
    RC.QUERY_MESSAGE: _one("topic", "topic", SUB_GET),
    RC.HEART_BEAT: _heartbeat,
    RC.UNREGISTER_CLIENT: _unregister,
    RC.GET_CONSUMER_LIST_BY_GROUP: _one("group", "consumerGroup", SUB_GET),
    RC.QUERY_CONSUMER_OFFSET: _offset(SUB_GET),
    RC.UPDATE_CONSUMER_OFFSET: _offset(SUB_UPDATE),
    RC.LOCK_BATCH_MQ: _lock,
    RC.UNLOCK_BATCH_MQ: _lock,
    RC.UPDATE_AND_CREATE_TOPIC: _one("topic", "topic", (Action.CREATE,)),
    RC.DELETE_TOPIC_IN_BROKER: _one("topic", "topic", (Action.DELETE,)),
    RC.GET_TOPIC_CONFIG: _one("topic", "topic", GET),
    RC.GET_TOPIC_STATS_INFO: _one("topic", "topic", GET),
    RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: _group_body,
    RC.GET_SUBSCRIPTIONGROUP_CONFIG: _one("group", "group", GET),
    RC.DELETE_SUBSCRIPTIONGROUP: _one("group", "groupName", (Action.DELETE,)),
    RC.GET_CONSUME_STATS: _consume_stats,
    RC.INVOKE_BROKER_TO_RESET_OFFSET: _reset_offset,
    RC.CLONE_GROUP_OFFSET: _clone_offset,
    RC.GET_CONSUMER_CONNECTION_LIST: _one("group", "consumerGroup", GET),
    RC.GET_MAX_OFFSET: _one("topic", "topic", GET),
    RC.GET_MIN_OFFSET: _one("topic", "topic", GET),
    RC.SEARCH_OFFSET_BY_TIMESTAMP: _one("topic", "topic", GET),
    RC.GET_EARLIEST_MSG_STORETIME: _one("topic", "topic", GET),
    RC.VIEW_MESSAGE_BY_ID: _one("topic", "topic", GET, optional=True),
    RC.GET_BROKER_CONFIG: _cluster(GET),
    RC.UPDATE_BROKER_CONFIG: _cluster(UPDATE),
    RC.DELETE_EXPIRED_COMMITLOG: _cluster(UPDATE),
    RC.NOTIFY_BROKER_ROLE_CHANGED: _cluster(UPDATE),
    RC.AUTH_CREATE_USER: _cluster(UPDATE),
    RC.AUTH_UPDATE_USER: _cluster(UPDATE),
    RC.AUTH_DELETE_USER: _cluster(UPDATE),
    RC.AUTH_GET_USER: _cluster(GET),
    RC.AUTH_LIST_USER: _cluster(GET),
    RC.AUTH_CREATE_ACL: _cluster(UPDATE),
    RC.AUTH_UPDATE_ACL: _cluster(UPDATE),
    RC.AUTH_DELETE_ACL: _cluster(UPDATE),
    RC.AUTH_GET_ACL: _cluster(GET),
    RC.AUTH_LIST_ACL: _cluster(GET),
    RC.POP_MESSAGE: _pop,
    RC.ACK_MESSAGE: _pop,
    RC.CHANGE_MESSAGE_INVISIBLETIME: _pop,
    RC.BATCH_ACK_MESSAGE: _batch_ack,
    RC.GET_POP_INFLIGHT: _consume_stats,
    RC.PEEK_MESSAGE: _peek,
    RC.NOTIFICATION: _group_topic(SUB),
    RC.POLLING_INFO: _group_topic(GET),
    RC.CONSUME_MESSAGE_DIRECTLY: _consume_directly,
    RC.GET_ALL_PRODUCER_INFO: _cluster(GET),
}


def rights_of(cmd: RemotingCommand, cluster: str) -> list[Right]:
    """The rights ``cmd`` needs on a broker of ``cluster``; AuthDataError if it cannot be told
    (a missing field or an unreadable body: upstream refuses those too)."""
    rule = RULES.get(cmd.code)
    if rule is None:
        return []
    try:
        return rule(cmd, cluster)
    except HeaderError as e:
        raise AuthDataError(f"cannot tell the resources of the request: {e}") from None
