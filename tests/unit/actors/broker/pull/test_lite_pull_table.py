"""LITE_PULL_MESSAGE (361) in the request table: served by the final PULL_MESSAGE handler, the
one a later wrapper (static topics' logic queues) put there, and gated by
litePullMessageEnable."""

from __future__ import annotations

from typing import Any

import trio

from rocketrio.actors.broker.dispatch.table import Handlers, build_table
from rocketrio.actors.broker.pull.handlers import lite_pull_wrapper
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand


class _Ctx:
    def __init__(self) -> None:
        self.cmd = RemotingCommand(code=RequestCode.LITE_PULL_MESSAGE)


def _answering(tag: str) -> Any:
    async def handler(ctx: RequestContext) -> RemotingCommand:
        return ctx.cmd.make_response(ResponseCode.SUCCESS, tag)

    return handler


def test_lite_pull_goes_to_the_wrapped_pull_handler_and_honours_the_switch() -> None:
    enabled = [True]
    plain: Handlers = {
        RequestCode.PULL_MESSAGE: _answering("plain"),
        RequestCode.LITE_PULL_MESSAGE: _answering("plain"),
    }

    def static_topics(table: Handlers) -> Handlers:
        return {RequestCode.PULL_MESSAGE: _answering("logic queues")}

    table = build_table(
        [("pull", plain)],
        wrappers=[
            ("static_topic", static_topics),
            ("pull", lite_pull_wrapper(lambda: enabled[0], lambda: "10.0.0.1")),
        ],
    )
    ctx: Any = _Ctx()
    resp = trio.run(table[RequestCode.LITE_PULL_MESSAGE], ctx)
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, "logic queues")
    enabled[0] = False
    resp = trio.run(table[RequestCode.LITE_PULL_MESSAGE], ctx)
    assert resp.code == ResponseCode.NO_PERMISSION
    assert resp.remark == "the broker[10.0.0.1] for lite pull consumer is forbidden"
