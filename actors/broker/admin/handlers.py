"""The remoting side of the admin and query calls: topic and group configs, the broker config,
queue offsets and store times, and message look-ups (by offset id, by key or UNIQ_KEY).

The topic-config codes (UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER, GET_TOPIC_CONFIG,
GET_ALL_TOPIC_CONFIG) are the static-topic package's (static_topic/admin.py): it knows the
mappings, which travel with the topic configs.
"""

from __future__ import annotations

from typing import assert_never

from rocketrio.actors.broker.admin.processor import AdminProcessor, QueriedMessages
from rocketrio.actors.broker.dispatch.answers import (
    answer_done,
    answer_json,
    answer_offset,
    answer_record,
    answer_store_time,
    answer_text,
    on_body_awaited,
    on_ext,
    on_ext_awaited,
    on_no_args,
    refused,
)
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.bodies import SubscriptionGroupConfig
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    DeleteSubscriptionGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    SearchOffsetRequestHeader,
    UpdateGroupForbiddenRequestHeader,
    ViewMessageRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext

UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


def admin_handlers(admin: AdminProcessor) -> Handlers:
    """The request codes the admin package serves."""
    a, rc = admin, RequestCode

    async def query_message(ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(QueryMessageRequestHeader, cmd.ext_fields)
        by_uniq_key = cmd.ext_fields.get(UNIQUE_KEY_QUERY, "").lower() == "true"
        outcome = a.query_message(h, by_uniq_key=by_uniq_key)
        match outcome:
            case Refusal():
                return refused(cmd, outcome)
            case QueriedMessages():
                return _queried(cmd, h, outcome)
            case _:
                assert_never(outcome)

    return {
        rc.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: on_body_awaited(
            SubscriptionGroupConfig, a.update_group, answer_done
        ),
        rc.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: on_no_args(a.all_groups, answer_json),
        rc.GET_SUBSCRIPTIONGROUP_CONFIG: on_ext(
            GetSubscriptionGroupConfigRequestHeader, a.group_config, answer_json
        ),
        rc.UPDATE_AND_GET_GROUP_FORBIDDEN: on_ext_awaited(
            UpdateGroupForbiddenRequestHeader, a.group_forbidden, answer_json
        ),
        rc.DELETE_SUBSCRIPTIONGROUP: on_ext_awaited(
            DeleteSubscriptionGroupRequestHeader, a.delete_group, answer_done
        ),
        rc.GET_BROKER_CONFIG: on_no_args(a.broker_config, answer_text),
        rc.GET_MAX_OFFSET: on_ext(GetMaxOffsetRequestHeader, a.max_offset, answer_offset),
        rc.GET_MIN_OFFSET: on_ext(GetMinOffsetRequestHeader, a.min_offset, answer_offset),
        rc.SEARCH_OFFSET_BY_TIMESTAMP: on_ext(
            SearchOffsetRequestHeader, a.search_offset, answer_offset
        ),
        rc.GET_EARLIEST_MSG_STORETIME: on_ext(
            GetEarliestMsgStoretimeRequestHeader, a.earliest_store_time, answer_store_time
        ),
        rc.VIEW_MESSAGE_BY_ID: on_ext(ViewMessageRequestHeader, a.view_message, answer_record),
        rc.QUERY_MESSAGE: query_message,
    }


def _queried(
    cmd: RemotingCommand, h: QueryMessageRequestHeader, outcome: QueriedMessages
) -> RemotingCommand:
    header = to_ext(
        QueryMessageResponseHeader(
            indexLastUpdateTimestamp=outcome.index_last_update_timestamp,
            indexLastUpdatePhyoffset=outcome.index_last_update_phy_offset,
        )
    )
    if not outcome.records:
        return cmd.make_response(
            ResponseCode.QUERY_NOT_FOUND,
            f"can not find message of topic {h.topic} with key {h.key}, "
            "maybe time range not correct",
            header,
        )
    return cmd.make_response(
        ResponseCode.SUCCESS, ext_fields=header, body=b"".join(outcome.records)
    )
