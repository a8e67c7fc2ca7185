"""Sends whose answers arrive by callback: no task and no cancel scope per send.

`SendFuture` is what `Producer.send_async` returns. `CallbackRequests` puts a request on a
`Connection` with a one-shot `Reply` callback in the connection's response table, and keeps
the requests in send order with their deadlines; ``expire`` (called periodically) fails the
ones whose answer is late, like upstream's scanResponseTable. Because every send of one
producer uses the same timeout, send order is deadline order and expiry only looks at the
oldest entries. Requests go out with `Connection.request_nowait`, and a late one is failed
with `Connection.cancel_request`.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.backend import Reply
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.message import SendResult
from rocketrio.actors.client.remoting import ClientConnection as Connection
from rocketrio.actors.client.remoting import RemotingTimeout
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import request_name
from rocketrio.protocol.remoting import RemotingCommand

log = structlog.get_logger("producer")

OnDone = Callable[[Reply[RemotingCommand]], None]


class SendFuture:
    """The outcome of `Producer.send_async`: ``await fut.wait()`` or ``fut.result()``."""

    __slots__ = ("_callback", "_event", "_exc", "_result", "done", "started", "topic")

    def __init__(
        self, callback: Callable[[SendFuture], None] | None, topic: str = "", started: float = 0.0
    ) -> None:
        self._callback = callback
        self.topic = topic
        self.started = started  # trio time of the send call (kept for the trace line)
        self._event: aio.Event | None = None  # made only when somebody waits
        self._result: SendResult | None = None
        self._exc: BaseException | None = None
        self.done = False

    def finish(self, result: SendResult | None, exc: BaseException | None) -> None:
        if self.done:
            return
        self._result, self._exc, self.done = result, exc, True
        if self._event is not None:
            self._event.set()
        if self._callback is not None:
            try:
                self._callback(self)
            except Exception as e:  # a user callback must not take the producer down
                events.emit(log, events.SendCallbackFailed(), exc_info=e)

    def result(self) -> SendResult:
        if not self.done:
            raise MQClientError("the send has not finished yet")
        if self._exc is not None:
            raise self._exc
        assert self._result is not None
        return self._result

    def exception(self) -> BaseException | None:
        return self._exc

    async def wait(self) -> SendResult:
        if not self.done:
            if self._event is None:
                self._event = aio.new_event()
            await self._event.wait()
        else:
            await aio.checkpoint()
        return self.result()


class CallbackRequests:
    """Requests in flight whose answers go to callbacks, oldest first."""

    def __init__(self) -> None:
        # (connection id, opaque) -> (deadline, connection, code)
        self._items: dict[tuple[int, int], tuple[float, Connection, int]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def start(
        self, conn: Connection, cmd: RemotingCommand, deadline: float, on_done: OnDone
    ) -> None:
        """Send ``cmd``; ``on_done`` gets the answer, a connection failure or a timeout."""
        items = self._items
        key: tuple[int, int] = (id(conn), 0)

        def done(reply: Reply[RemotingCommand]) -> None:
            items.pop(key, None)
            on_done(reply)

        key = (id(conn), conn.request_nowait(cmd, done))
        items[key] = (deadline, conn, cmd.code)

    def expire(self, now: float) -> int:
        """Fail every request whose deadline has passed; returns how many."""
        expired = 0
        items = self._items
        while items:
            key = next(iter(items))
            deadline, conn, code = items[key]
            if deadline > now:
                break
            del items[key]
            if conn.cancel_request(
                key[1], RemotingTimeout(f"{request_name(code)} to {conn.remote} timed out")
            ):
                expired += 1
        return expired
