"""INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, ``mqadmin getConsumerStatus``): the broker asks
the group's members, one after another, for their offsets of the topic
(GET_CONSUMER_STATUS_FROM_CLIENT, 221, over each member's own connection) and answers
``consumerTable``: client id -> offsets (upstream Broker2Client.getConsumeStatus).

`plan` is the pure part, in the members' join order: no member online is SYSTEM_ERROR "No Any
Consumer online in the consumer group: [G]"; a member older than V3_0_7_SNAPSHOT met before the
asked one is SYSTEM_ERROR "the client does not support this feature. version=<name>"; with
``clientAddr`` only that client id is asked. A member that does not answer (or answers other
than SUCCESS, or without a body) is left out, as upstream logs and skips it. The calls run as
tasks of the clients package's `Broker2Client` (bounded), so the admin's connection keeps
being served.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from rocketrio.actors.broker.clients.client_manager import ClientChannelInfo, ConsumerManager
from rocketrio.actors.broker.clients.consumer_calls import Broker2Client
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.kernel.remoting import Connection, RemotingError, RequestContext
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.consumer_status import (
    OLD_VERSION_NAMES,
    V3_0_7_SNAPSHOT,
    GetConsumerStatusBody,
    GetConsumerStatusRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, from_json, to_ext

Offsets = dict[MessageQueue, int]


def plan(
    group: str, members: Sequence[ClientChannelInfo], origin: str | None
) -> list[ClientChannelInfo] | Refusal:
    """The members to ask, in order, or the refusal (module docstring)."""
    if not members:
        return Refusal(
            ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{group}]"
        )
    one = origin if origin is not None and origin.strip() else None
    asked: list[ClientChannelInfo] = []
    for m in members:
        if m.version < V3_0_7_SNAPSHOT:
            name = OLD_VERSION_NAMES[max(m.version, 0)]
            return Refusal(
                ResponseCode.SYSTEM_ERROR,
                f"the client does not support this feature. version={name}",
            )
        if one is None or one == m.client_id:
            asked.append(m)
            if one is not None:
                break
    return asked


def status_body(answers: Sequence[tuple[str, Offsets]]) -> GetConsumerStatusBody:
    """The broker's answer: each answering client's offsets, in Java HashMap order."""
    table = dict(answers)
    order = fastjson.java_hashmap_order(list(table), fastjson.java_string_hash)
    return GetConsumerStatusBody(consumerTable={cid: table[cid] for cid in order})


def client_offsets(resp: RemotingCommand | RemotingError) -> Offsets | None:
    """A member's answer as offsets; None when it is to be left out."""
    if isinstance(resp, RemotingError) or resp.code != ResponseCode.SUCCESS or not resp.body:
        return None
    try:
        return from_json(GetConsumerStatusBody, resp.body).messageQueueTable
    except HeaderError:
        return None


@attrs.define
class StatusRound:
    """One 223 request: the members left to ask and the answers so far."""

    ctx: RequestContext
    b2c: Broker2Client
    header: GetConsumerStatusRequestHeader
    left: list[ClientChannelInfo]
    answers: list[tuple[str, Offsets]] = attrs.field(factory=list)

    def next(self) -> None:
        while self.left:
            member = self.left.pop(0)
            cid = member.client_id

            def done(resp: RemotingCommand | RemotingError, cid: str = cid) -> None:
                offsets = client_offsets(resp)
                if offsets is not None:
                    self.answers.append((cid, offsets))
                self.next()

            conn = member.conn
            assert isinstance(conn, Connection)
            ext = to_ext(self.header)
            request = RemotingCommand(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ext_fields=ext)
            if self.b2c.call_client(conn, request, done) is None:
                return  # `done` goes on
        body = fastjson.encode(status_body(self.answers))
        self.ctx.respond(self.ctx.cmd.make_response(ResponseCode.SUCCESS, body=body))


def consumer_status_handlers(consumers: ConsumerManager, b2c: Broker2Client) -> Handlers:
    async def handle(ctx: RequestContext) -> RemotingCommand | None:
        h = from_ext(GetConsumerStatusRequestHeader, ctx.cmd.ext_fields)
        g = consumers.get(h.group)
        members = [] if g is None else list(g.channels.values())
        asked = plan(h.group, members, h.clientAddr)
        if isinstance(asked, Refusal):
            return ctx.cmd.make_response(asked.code, asked.remark)
        header = GetConsumerStatusRequestHeader(h.topic, h.group)
        StatusRound(ctx, b2c, header, asked).next()
        return None

    return {RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: handle}
