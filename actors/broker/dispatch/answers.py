"""Replies: typed outcomes -> RemotingCommand, and handlers made of (decode, call, answer).

The feature packages' ``handlers()`` are mostly one line each: how to decode the request (the
typed header from extFields through the cattrs converter, or a JSON body), which processor call
answers it, and how the outcome becomes the response upstream sends (`answer_done`,
`answer_json` with bodies written as upstream's fastjson writes them, `answer_offset` ...). A
`Refusal` always becomes its code and remark (`refused`).

`born_host` caches a connection's client address, as the stored messages' BORN_HOST, on the
connection itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, assert_never

from rocketrio.actors.broker.dispatch.outcomes import Done, Refusal
from rocketrio.actors.broker.dispatch.table import Handler
from rocketrio.actors.kernel.remoting import Connection, RequestContext
from rocketrio.protocol import fastjson
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import GetEarliestMsgStoretimeResponseHeader, OffsetResponseHeader
from rocketrio.protocol.message import parse_host
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext

H = TypeVar("H")  # a typed request header or body
R = TypeVar("R")  # a processor's outcome
Answer = Callable[[RemotingCommand, R], RemotingCommand]
BornHost = tuple[bytes, int]

RC = ResponseCode
_NO_IP: BornHost = (b"\x00\x00\x00\x00", 0)


def refused(cmd: RemotingCommand, refusal: Refusal) -> RemotingCommand:
    return cmd.make_response(refusal.code, refusal.remark)


def answer_done(cmd: RemotingCommand, outcome: Done | Refusal) -> RemotingCommand:
    match outcome:
        case Done():
            return cmd.make_response(RC.SUCCESS)
        case Refusal():
            return refused(cmd, outcome)
        case _:
            assert_never(outcome)


def answer_json(cmd: RemotingCommand, outcome: Any) -> RemotingCommand:
    """A body class (or a Refusal): SUCCESS with the body as upstream's fastjson writes it."""
    if isinstance(outcome, Refusal):
        return refused(cmd, outcome)
    return cmd.make_response(RC.SUCCESS, body=fastjson.encode(outcome))


def answer_offset(cmd: RemotingCommand, outcome: int | Refusal) -> RemotingCommand:
    match outcome:
        case Refusal():
            return refused(cmd, outcome)
        case int():
            return cmd.make_response(RC.SUCCESS, ext_fields=to_ext(OffsetResponseHeader(outcome)))
        case _:
            assert_never(outcome)


def answer_store_time(cmd: RemotingCommand, outcome: int | Refusal) -> RemotingCommand:
    match outcome:
        case Refusal():
            return refused(cmd, outcome)
        case int():
            header = GetEarliestMsgStoretimeResponseHeader(outcome)
            return cmd.make_response(RC.SUCCESS, ext_fields=to_ext(header))
        case _:
            assert_never(outcome)


def answer_record(cmd: RemotingCommand, outcome: bytes | Refusal) -> RemotingCommand:
    match outcome:
        case Refusal():
            return refused(cmd, outcome)
        case bytes():
            return cmd.make_response(RC.SUCCESS, body=outcome)
        case _:
            assert_never(outcome)


def answer_text(cmd: RemotingCommand, text: str) -> RemotingCommand:
    return cmd.make_response(RC.SUCCESS, body=text.encode())


def on_ext(cls: type[H], call: Callable[[H], R], answer: Answer[R]) -> Handler:
    """A handler: extFields -> ``cls`` -> ``call`` -> ``answer``."""

    async def handle(ctx: RequestContext) -> RemotingCommand:
        return answer(ctx.cmd, call(from_ext(cls, ctx.cmd.ext_fields)))

    return handle


def on_ext_awaited(cls: type[H], call: Callable[[H], Awaitable[R]], answer: Answer[R]) -> Handler:
    async def handle(ctx: RequestContext) -> RemotingCommand:
        return answer(ctx.cmd, await call(from_ext(cls, ctx.cmd.ext_fields)))

    return handle


def on_body(cls: type[H], call: Callable[[H], R], answer: Answer[R]) -> Handler:
    """A handler: the JSON body -> ``cls`` -> ``call`` -> ``answer``."""

    async def handle(ctx: RequestContext) -> RemotingCommand:
        return answer(ctx.cmd, call(from_json(cls, ctx.cmd.body)))

    return handle


def on_body_awaited(cls: type[H], call: Callable[[H], Awaitable[R]], answer: Answer[R]) -> Handler:
    async def handle(ctx: RequestContext) -> RemotingCommand:
        return answer(ctx.cmd, await call(from_json(cls, ctx.cmd.body)))

    return handle


def on_no_args(call: Callable[[], R], answer: Answer[R]) -> Handler:
    async def handle(ctx: RequestContext) -> RemotingCommand:
        return answer(ctx.cmd, call())

    return handle


def host_tuple(text: str) -> BornHost:
    """``ip:port`` or a bare ip -> (packed ip, port); anything else -> 0.0.0.0:0."""
    for candidate in (text, text + ":0"):
        try:
            return parse_host(candidate)
        except ValueError:
            continue
    return _NO_IP


def born_host(conn: Connection) -> BornHost:
    """The client's address as stored messages carry it, cached on the connection."""
    host: BornHost | None = conn.attrs.get("born_host")
    if host is None:
        host = conn.attrs["born_host"] = host_tuple(conn.remote)
    return host
