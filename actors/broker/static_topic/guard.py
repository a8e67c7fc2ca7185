"""Calls that do not know a static topic's logic queues yet, refused on static topics (RIP-21).

QUERY_CONSUME_TIME_SPAN works on a topic's physical queues of this broker, while a static
topic's consumer offsets are logic values stored under the logic queue ids on each queue's
leader (offsets.py). Run on a static topic it would read physical offsets under ids that mean
logic queues and report a wrong span, so it answers INVALID_PARAMETER with a remark naming the
topic and the call, and changes nothing.

(POP works on logic queues: pop.py, logic_store.py; resetOffsetByTime, skipAccumulatedMessage,
consumerProgress and cloneGroupOffset: offset_tools.py.) Other topics go to the plain handlers
untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rocketrio.actors.broker.dispatch.table import Handler
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand

# request code -> what the admin or client calls it (for the remark)
GUARDED: dict[int, str] = {
    RequestCode.QUERY_CONSUME_TIME_SPAN: "the consume time span",
}


def request_topics(ext: Mapping[str, str]) -> list[str]:
    """The topics a guarded request names (``topic``, and GET_CONSUME_STATS's ``topicList``)."""
    topics = [t for t in (ext.get("topicList") or "").split(";") if t]
    topic = ext.get("topic")
    if topic:
        topics.append(topic)
    return topics


def guard_handlers(
    is_static: Callable[[str], bool], plain: Mapping[int, Handler]
) -> dict[int, Handler]:
    """The guarded codes' handlers: a refusal for a static topic, else the ``plain`` one."""

    def make(code: int, what: str) -> Handler:
        plain_handler = plain[code]

        async def handle(ctx: RequestContext) -> RemotingCommand | None:
            static = [t for t in request_topics(ctx.cmd.ext_fields) if is_static(t)]
            if not static:
                return await plain_handler(ctx)
            return ctx.cmd.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"topic {static[0]} is a static topic: {what} does not support its logic "
                "queues yet",
            )

        return handle

    return {code: make(code, what) for code, what in GUARDED.items() if code in plain}
