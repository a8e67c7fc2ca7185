"""PULL_MESSAGE (11): read a queue, long-poll when it is empty (upstream PullMessageProcessor).

Checks, in upstream's order: broker readable, subscription group (auto-created) and
consumeEnable, topic exists and readable, queueId in range, then the subscription: parsed from
the request when sysFlag has SUBSCRIPTION, otherwise the group's heartbeat subscription
(SUBSCRIPTION_NOT_EXIST / SUBSCRIPTION_NOT_LATEST like upstream). The store answers with whole
stored records; the response body is their concatenation and the remark the store status
(FOUND, OFFSET_OVERFLOW_ONE ...). Status mapping: FOUND -> SUCCESS; NO_MATCHED_MESSAGE and
MESSAGE_WAS_REMOVING -> PULL_RETRY_IMMEDIATELY; OFFSET_OVERFLOW_ONE and an empty queue pulled
at 0 -> PULL_NOT_FOUND; OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL and an empty queue pulled
beyond 0 -> PULL_OFFSET_MOVED.

PULL_NOT_FOUND with the SUSPEND flag parks the request in the PullRequestHoldService for
suspendTimeoutMillis (shortPollingTimeMills when longPollingEnable=false) and returns None;
it is answered when a message arrives on the queue or at the deadline. The commit offset
(sysFlag COMMIT_OFFSET) is stored once, on the first execution, like upstream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from rocketrio.actors.broker.filter import (
    SubscriptionParseError,
    build_subscription,
    tag_codes_of,
)
from rocketrio.actors.broker.pull_hold import HeldPull
from rocketrio.actors.broker.topic_config import check_group_name
from rocketrio.actors.remoting import RequestContext
from rocketrio.protocol.bodies import PERM_READ, SubscriptionData
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import (
    PULL_FLAG_COMMIT_OFFSET,
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from rocketrio.storage.message_store import GetMessageStatus, GetResult

if TYPE_CHECKING:
    from rocketrio.actors.broker.broker import Broker

_S = GetMessageStatus
_CODE_BY_STATUS = {
    _S.FOUND: ResponseCode.SUCCESS,
    _S.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    _S.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    _S.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    _S.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    _S.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    _S.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}
_EMPTY_QUEUE = (_S.NO_MESSAGE_IN_QUEUE, _S.NO_MATCHED_LOGIC_QUEUE)


def pull_code(status: GetMessageStatus, request_offset: int) -> int:
    if status in _EMPTY_QUEUE:
        return ResponseCode.PULL_OFFSET_MOVED if request_offset else ResponseCode.PULL_NOT_FOUND
    return _CODE_BY_STATUS[status]


class PullMessageProcessor:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config

    async def process_pull(self, ctx: RequestContext) -> RemotingCommand | None:
        cmd, b = ctx.cmd, self.broker
        h = from_ext(PullMessageRequestHeader, cmd.ext_fields)
        sub_or_err = self._check(cmd, h)
        if isinstance(sub_or_err, RemotingCommand):
            return sub_or_err
        tag_codes = tag_codes_of(sub_or_err)
        result = self._get(h, h.queueOffset, tag_codes)
        code = pull_code(result.status, h.queueOffset)
        if h.sysFlag & PULL_FLAG_COMMIT_OFFSET and h.commitOffset >= 0:
            b.offsets.commit(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        if code == ResponseCode.PULL_NOT_FOUND and h.sysFlag & PULL_FLAG_SUSPEND:
            if not b.shutting_down:
                timeout_ms = h.suspendTimeoutMillis
                if not self.config.longPollingEnable:
                    timeout_ms = self.config.shortPollingTimeMills
                deadline = trio.current_time() + max(0, timeout_ms) / 1000
                b.pull_hold.suspend(HeldPull(ctx, h, tag_codes, h.queueOffset, deadline))
                return None
        return self._respond(cmd, result, code)

    def _check(
        self, cmd: RemotingCommand, h: PullMessageRequestHeader
    ) -> SubscriptionData | RemotingCommand:
        """Everything before the read; the subscription to filter with, or an error answer."""
        b, mk = self.broker, cmd.make_response
        if not self.config.brokerPermission & PERM_READ:
            return mk(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.brokerIP1}] pulling message is forbidden",
            )
        bad = check_group_name(h.consumerGroup)
        if bad:
            return mk(ResponseCode.INVALID_PARAMETER, bad)
        sgc = b.find_group(h.consumerGroup)
        if sgc is None:
            return mk(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{h.consumerGroup}] does not exist "
                "(autoCreateSubscriptionGroup=false): create it first",
            )
        if not sgc.consumeEnable:
            return mk(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {h.consumerGroup}"
            )
        tc = b.topics.select(h.topic)
        if tc is None:
            return mk(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!"
            )
        if not tc.perm & PERM_READ:
            return mk(
                ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden"
            )
        if not 0 <= h.queueId < tc.readQueueNums:
            return mk(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{h.queueId}] is illegal, topic:[{h.topic}] "
                f"topicConfig.readQueueNums:[{tc.readQueueNums}]",
            )
        if h.sysFlag & PULL_FLAG_SUBSCRIPTION:
            try:
                return build_subscription(h.topic, h.subscription, h.expressionType, h.subVersion)
            except SubscriptionParseError as e:
                return mk(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(e))
        group = b.consumers.get(h.consumerGroup)
        if group is None:
            return mk(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's group info not exist: group {h.consumerGroup} has sent no "
                "heartbeat to this broker (send HEART_BEAT first or set the SUBSCRIPTION flag)",
            )
        if not sgc.consumeBroadcastEnable and group.message_model == "BROADCASTING":
            return mk(
                ResponseCode.NO_PERMISSION,
                f"the consumer group[{h.consumerGroup}] can not consume by broadcast way",
            )
        sub = group.find_subscription(h.topic)
        if sub is None:
            return mk(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist: group {h.consumerGroup} does not "
                f"subscribe to {h.topic}",
            )
        if sub.subVersion < h.subVersion:
            return mk(
                ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
            )
        return sub

    def _get(
        self, h: PullMessageRequestHeader, offset: int, tag_codes: set[int] | None
    ) -> GetResult:
        c = self.config
        max_count = max(1, min(h.maxMsgNums, c.maxTransferCountOnMessageInMemory))
        max_bytes = c.maxTransferBytesOnMessageInMemory
        if h.maxMsgBytes is not None and h.maxMsgBytes > 0:
            max_bytes = min(max_bytes, h.maxMsgBytes)
        return self.broker.store.get_messages(
            h.topic, h.queueId, offset, max_count, max_bytes, tag_codes
        )

    def _respond(self, cmd: RemotingCommand, result: GetResult, code: int) -> RemotingCommand:
        header = PullMessageResponseHeader(
            suggestWhichBrokerId=0,
            nextBeginOffset=result.next_begin_offset,
            minOffset=result.min_offset,
            maxOffset=result.max_offset,
        )
        body = b""
        if code == ResponseCode.SUCCESS:
            body = b"".join(result.buffers)
            self.broker.stats.on_get(result.message_count, len(body))
        return cmd.make_response(code, result.status.value, to_ext(header), body)

    def execute_held(self, held: HeldPull, final: bool) -> RemotingCommand | None:
        """Re-run a held pull (PullRequestHoldService callback); None keeps it held."""
        h = held.header
        result = self._get(h, held.offset, held.tag_codes)
        code = pull_code(result.status, held.offset)
        if not final and code != ResponseCode.SUCCESS:
            if result.status == _S.NO_MATCHED_MESSAGE:
                # only messages the filter rejects arrived: skip them and keep waiting
                held.offset = result.next_begin_offset
            return None
        return self._respond(held.ctx.cmd, result, code)
