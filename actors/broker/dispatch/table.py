"""The broker's one request table and the gates in front of it.

Every feature package declares the request codes it serves with a ``handlers()`` mapping
(code -> handler); `build_table` merges those declarations ONCE, at start-up, and refuses two
packages claiming one code. A package that changes how other packages' requests are served
(static topics: a logic queue's send, pull and offsets) declares a `Wrapper` instead: it gets the
plain table and returns the entries it replaces, so the wrapping is decided at registration, not
by a layer every plain request passes through. Nothing is added to or patched into the table
afterwards.

`RequestTable.process` is the remoting server's processor: the ACL gate first (when
authentication or authorization is on), then an unknown code is REQUEST_CODE_NOT_SUPPORTED, and
while the broker stops everything but a client's leaving and its offsets is SYSTEM_BUSY.

A handler runs inline in the connection's reader task and returns the response, or None when
it answers later through ``ctx.respond`` (a stored send, a held pull or pop). Most handlers are
coroutine functions; a hot-path handler (the plain send) answers without a coroutine and returns
an awaitable only when it must wait (a full store inbox), so a wrapper that calls a plain
handler awaits `answer_of` its result. `RequestTable.process_nowait` is the remoting server's
processor: it hands the connection the handler's result as it is (no coroutine of its own).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Final

from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import (
    RequestCode,
    ResponseCode,
    not_supported_remark,
    request_name,
)
from rocketrio.protocol.remoting import RemotingCommand

Answer = RemotingCommand | None
Handler = Callable[[RequestContext], Awaitable[Answer] | Answer]
Handlers = Mapping[int, Handler]
# a wrapper gets the plain table and returns the entries it replaces (only codes already there)
Wrapper = Callable[[Handlers], Handlers]
# the ACL gate (auth/remoting_gate.AuthGate): None to serve the request, else the refusal to send
Gate = Callable[[RequestContext], RemotingCommand | None]

# while stopping, clients may still leave and save their progress (persisted last)
ALLOWED_WHILE_STOPPING: Final = frozenset(
    {
        RequestCode.UNREGISTER_CLIENT,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.HEART_BEAT,
    }
)


async def answer_of(result: Awaitable[Answer] | Answer) -> Answer:
    """A handler's answer, awaited when the handler returned an awaitable."""
    if result is None or isinstance(result, RemotingCommand):
        return result
    return await result


class RequestTableError(ValueError):
    """The declarations do not make one table: a code claimed twice, or wrapped unserved."""


def build_table(
    declared: Iterable[tuple[str, Handlers]], wrappers: Iterable[tuple[str, Wrapper]] = ()
) -> Mapping[int, Handler]:
    """One read-only table from ``(package name, handlers)`` declarations, then each wrapper's
    replacements in order."""
    table: dict[int, Handler] = {}
    owner: dict[int, str] = {}
    for package, handlers in declared:
        for code, handler in handlers.items():
            if code in table:
                raise RequestTableError(
                    f"request code {code} ({request_name(code)}) is declared by both "
                    f"{owner[code]} and {package}"
                )
            table[code] = handler
            owner[code] = package
    for package, wrap in wrappers:
        replaced = wrap(MappingProxyType(dict(table)))
        unserved = sorted(set(replaced) - set(table))
        if unserved:
            raise RequestTableError(f"{package} wraps codes nobody serves: {unserved}")
        table.update(replaced)
    return MappingProxyType(table)


class RequestTable:
    """The remoting server's processor over the one table (see the module docstring)."""

    def __init__(
        self, broker_name: str, handlers: Mapping[int, Handler], *, gate: Gate | None = None
    ) -> None:
        self.broker_name = broker_name
        # a plain dict: the look-up per request is the hot path (a mappingproxy's is slower);
        # nothing adds to it after start-up
        # keys as plain ints: a look-up with the decoded int code compares ints, not enums
        self.handlers: dict[int, Handler] = {int(k): v for k, v in handlers.items()}
        self.gate = gate
        self.stopping = False

    def stop_taking_requests(self) -> None:
        """Shutdown: from now on only ALLOWED_WHILE_STOPPING requests are served."""
        self.stopping = True

    async def process(self, ctx: RequestContext) -> Answer:
        return await answer_of(self.process_nowait(ctx))

    def process_nowait(self, ctx: RequestContext) -> Awaitable[Answer] | Answer:
        """The answer, or the handler's awaitable of it (see the module docstring)."""
        if self.gate is not None:  # ACL 2.0: before anything else, as upstream's pipeline
            refused_by_gate = self.gate(ctx)
            if refused_by_gate is not None:
                return refused_by_gate
        code = ctx.cmd.code
        handler = self.handlers.get(code)
        if handler is None:
            return ctx.cmd.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                not_supported_remark(code, f"broker {self.broker_name}"),
            )
        if self.stopping and code not in ALLOWED_WHILE_STOPPING:
            return ctx.cmd.make_response(
                ResponseCode.SYSTEM_BUSY, f"broker {self.broker_name} is shutting down"
            )
        return handler(ctx)
