"""CONSUME_MESSAGE_DIRECTLY (309) on the broker: pass a stored message to one consumer client.

upstream AdminBrokerProcessor.consumeMessageDirectly: the admin names the group, the client id
and the message's offset id; the broker adds its brokerName and, when it has them, the topic's
topicSysFlag and the group's groupSysFlag to the header, puts the stored record at that
CommitLog offset in the body, and calls the client over its own connection as for 307
(`consumer_calls.call_consumer`: not online, too old, timeout and a broken connection answered
with upstream's codes and remarks). The client's ConsumeMessageDirectlyResult is the answer.
An offset id that is not one, or names no record in this store, is SYSTEM_ERROR at once (upstream
would fail inside the call).
"""

from __future__ import annotations

from collections.abc import Callable

from rocketrio.actors.broker.clients.client_manager import ConsumerManager
from rocketrio.actors.broker.clients.consumer_calls import Broker2Client, call_consumer
from rocketrio.actors.broker.dispatch.table import Handler
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.tables import GroupTable, TopicTable
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.consume_directly import ConsumeMessageDirectlyResultRequestHeader
from rocketrio.protocol.message import MessageDecodeError, parse_offset_msg_id
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext


def consume_directly_handlers(
    broker_name: Callable[[], str],
    *,
    consumers: ConsumerManager,
    b2c: Broker2Client,
    topics: TopicTable,
    groups: GroupTable,
    store: StoreView,
) -> dict[int, Handler]:
    async def consume_directly(ctx: RequestContext) -> RemotingCommand | None:
        cmd = ctx.cmd
        h = from_ext(ConsumeMessageDirectlyResultRequestHeader, cmd.ext_fields)
        ext = {**cmd.ext_fields, "brokerName": broker_name()}
        if h.topic and (tc := topics.select(h.topic)) is not None:
            ext["topicSysFlag"] = str(tc.topicSysFlag)
        if h.consumerGroup and (gc := groups.table.get(h.consumerGroup)) is not None:
            ext["groupSysFlag"] = str(gc.groupSysFlag)
        try:
            offset = parse_offset_msg_id(h.msgId or "")[2]
        except MessageDecodeError as e:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, str(e))
        record = store.read_record(offset) if store.look_message_by_offset(offset) else None
        if record is None:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        request = RemotingCommand(cmd.code, ext_fields=ext, body=record)
        return call_consumer(
            ctx, consumers, b2c, h.consumerGroup, h.clientId or "", request=request
        )

    return {RequestCode.CONSUME_MESSAGE_DIRECTLY: consume_directly}
