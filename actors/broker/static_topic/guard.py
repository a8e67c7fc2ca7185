"""Calls that do not know a static topic's logic queues, refused on static topics (RIP-21).

These handlers work on a topic's physical queues of this broker, while a static topic's
consumer offsets are logic values stored under the logic queue ids on each queue's leader
(static_topic_offsets.py). Run on a static topic they would read or write physical offsets
under ids that mean logic queues, and so report wrong lags or move a group's offsets to wrong
places. Until they translate, they answer INVALID_PARAMETER with a remark naming the topic and
the call, and change nothing:

- INVOKE_BROKER_TO_RESET_OFFSET (resetOffsetByTime, skipAccumulatedMessage) and
  CLONE_GROUP_OFFSET with the static topic named;
- GET_CONSUME_STATS (consumerProgress) and QUERY_CONSUME_TIME_SPAN on it.

(POP works on logic queues: pop.py, logic_store.py.)

Other topics go to the plain handlers untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rocketrio.actors.broker.dispatch.table import Handler
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand

# request code -> what the admin or client calls it (for the remark)
GUARDED: dict[int, str] = {
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: "resetting offsets",
    RequestCode.CLONE_GROUP_OFFSET: "cloning group offsets",
    RequestCode.GET_CONSUME_STATS: "consume stats (consumerProgress)",
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
