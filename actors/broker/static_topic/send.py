"""Sending to a static topic's logic queue (RIP-21 S4; upstream TopicQueueMappingManager
buildTopicQueueMappingContext / rewriteRequestForStaticTopic and SendMessageProcessor
rewriteResponseForStaticTopic).

A client sends to the broker leading the logic queue with ``queueId`` = the logic id (its
route's `logic_queue_endpoints`). On a broker holding a mapping of the topic:

- the request is taken only when this broker leads the logic queue (the newest item is its
  own); otherwise NOT_LEADER_FOR_QUEUE (501): the old leader after a remapping, or a broker
  the client's stale route still names. That is what blocks the old leader's writes;
- a leader whose logic offset is not decided yet (the first step of a remapping wrote the new
  leader, the old one is not sealed yet) refuses too, with the same code: upstream lets such a
  send through and answers queueOffset -1; refusing keeps every answered offset a real logic
  offset and the logic queue's order intact (the producer retries elsewhere);
- the message goes to the item's physical queue, and the answer names the logic queue and
  its logic offset (physical offset + the item's OffsetDelta).

A request with ``lo=false`` (a forwarded, physical request) and topics with no mapping here
pass unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping

import attrs

from rocketrio.actors.broker.dispatch.answers import born_host, refused
from rocketrio.actors.broker.dispatch.outcomes import Refusal, SendOutcome, SendStored
from rocketrio.actors.broker.dispatch.table import Answer, Handler, answer_of
from rocketrio.actors.broker.send.completions import OnSent
from rocketrio.actors.broker.send.direct import direct_send
from rocketrio.actors.broker.send.handlers import SendAnswer, send_header
from rocketrio.actors.broker.send.processor import SendMessageProcessor
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingManager
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import SendMessageRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.static_topic import LogicQueueMappingItem


@attrs.frozen
class MappedSend:
    """A send to a logic queue led here: the header for the physical queue and the item."""

    header: SendMessageRequestHeader
    global_id: int
    item: LogicQueueMappingItem

    def answer(self, on_done: OnSent) -> OnSent:
        """``on_done`` with the answer's queue and offset in logic terms."""
        return _LogicAnswer(on_done, self.global_id, self.item)


class _LogicAnswer:
    __slots__ = ("global_id", "item", "on_done")

    def __init__(self, on_done: OnSent, global_id: int, item: LogicQueueMappingItem) -> None:
        self.on_done = on_done
        self.global_id = global_id
        self.item = item

    def __call__(self, outcome: SendOutcome) -> None:
        if isinstance(outcome, SendStored):
            outcome = attrs.evolve(
                outcome,
                queue_id=self.global_id,
                queue_offset=self.item.static_offset_loosely(outcome.queue_offset),
            )
        self.on_done(outcome)


def not_leader(topic: str, global_id: int, bname: str, why: str) -> Refusal:
    return Refusal(
        ResponseCode.NOT_LEADER_FOR_QUEUE,
        f"{topic}-{global_id} {why} on broker {bname}: refresh the topic's route and send to "
        "the logic queue's current leader",
    )


def map_send(
    mappings: TopicQueueMappingManager, h: SendMessageRequestHeader, physical: bool = False
) -> MappedSend | Refusal | None:
    """None: not a static topic here (or ``physical``: a forwarded request with lo=false),
    send as usual."""
    if physical:
        return None
    detail = mappings.get(h.topic)
    if detail is None:
        return None
    gid = h.queueId
    items = detail.hostedQueues.get(gid)
    if not items or items[-1].bname != detail.bname:
        return not_leader(h.topic, gid, detail.bname, "is not led")
    leader = items[-1]
    if not leader.logic_decided():
        return not_leader(h.topic, gid, detail.bname, "is being remapped (logic offset undecided)")
    return MappedSend(attrs.evolve(h, queueId=leader.queueId), gid, leader)


def send_handlers(
    mappings: TopicQueueMappingManager,
    send: SendMessageProcessor,
    plain: Mapping[int, Handler],
) -> dict[int, Handler]:
    """SEND_MESSAGE(_V2) / SEND_BATCH_MESSAGE handlers that map a static topic's logic queue
    and hand every other request to the ``plain`` handler (one dict look-up on the hot path)."""

    send_message_code = int(RequestCode.SEND_MESSAGE)  # an int: no enum look-up per send

    def handle(ctx: RequestContext) -> Awaitable[Answer] | Answer:
        # not a coroutine itself: a plain send gets the plain handler's answer as it is
        cmd = ctx.cmd
        topic = cmd.ext_fields.get("topic" if cmd.code == send_message_code else "b")
        if topic is None or not mappings.is_static(topic):
            return plain[cmd.code](ctx)
        return handle_static(ctx)

    async def handle_static(ctx: RequestContext) -> RemotingCommand | None:
        cmd = ctx.cmd
        ext = cmd.ext_fields
        h = send_header(cmd)
        mapped = map_send(mappings, h, physical=ext.get("lo") == "false")
        if isinstance(mapped, Refusal):
            return refused(cmd, mapped)
        if mapped is None:
            return await answer_of(plain[cmd.code](ctx))
        answer = mapped.answer(SendAnswer(ctx))
        born = born_host(ctx.conn)
        if mapped.header.batch or cmd.code == RequestCode.SEND_BATCH_MESSAGE:
            refusal = await send.send_batch(mapped.header, cmd.body, born, ctx.conn.remote, answer)
        else:
            refusal = await send.send(mapped.header, cmd.body, born, ctx.conn.remote, answer)
        return None if refusal is None else refused(cmd, refusal)

    codes = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
    wrapped: dict[int, Handler] = {code: handle for code in codes if code in plain}
    v2 = RequestCode.SEND_MESSAGE_V2
    if v2 in wrapped:  # a plain topic's single send skips this wrapper (send/direct.py)
        wrapped[v2] = direct_send(send, handle, mappings)
    return wrapped
