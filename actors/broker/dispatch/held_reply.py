"""The one held reply: a request answered later (a held pull or pop, a stored send's logic
rewrite) keeps its way back to the connection here.

`HeldReply` is the `Waiter` of the long-polling loop (long_poll.py): ``gone`` once the
connection closed (skip the read), ``owner`` the connection (per-connection bounds), and
``deliver`` encodes the outcome with the package's own encoder and writes it to the request's
connection.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.remoting import RemotingCommand

OutcomeT = TypeVar("OutcomeT")  # the processor's outcome


class HeldReply(Generic[OutcomeT]):
    """A held request's way back to its connection."""

    __slots__ = ("ctx", "encode")

    def __init__(
        self, ctx: RequestContext, encode: Callable[[RemotingCommand, OutcomeT], RemotingCommand]
    ) -> None:
        self.ctx = ctx
        self.encode = encode

    @property
    def gone(self) -> bool:
        return self.ctx.conn.closed

    @property
    def owner(self) -> Hashable:
        return self.ctx.conn

    def deliver(self, outcome: OutcomeT) -> None:
        ctx = self.ctx
        ctx.respond(self.encode(ctx.cmd, outcome))
