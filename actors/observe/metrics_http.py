"""The Prometheus scrape endpoint of a server: ``GET /metrics`` over HTTP/1.1 on a Trio stream.

h11 (the HTTP/1.1 state machine trio-websocket already depends on) parses the request; the body
is what `prometheus_client.generate_latest` makes of the server's registry at the moment of the
scrape, on the Trio thread, so a collector reads the server's tables without locks and costs
nothing between scrapes; a collector that raises fails that scrape (500), not the server. One
request per connection (``Connection: close``), at most `MAX_CONNECTIONS` at once, a request
head of at most `MAX_HEAD_BYTES` and `READ_TIMEOUT_S` to send it: a scraper that stalls or
floods holds nothing for long.
"""

from __future__ import annotations

from collections.abc import Callable

import h11
import structlog
import trio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events

log = structlog.get_logger("metrics")

MAX_CONNECTIONS = 16
MAX_HEAD_BYTES = 16 * 1024
READ_TIMEOUT_S = 10.0
PATH = b"/metrics"
_BROKEN = (h11.LocalProtocolError, trio.BrokenResourceError, trio.ClosedResourceError)
BAD_REQUEST = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 12\r\nConnection: close\r\n\r\nbad request\n"
)


def response_for(method: bytes, target: bytes, render: Callable[[], bytes]) -> tuple[int, bytes]:
    """(status, body) of one request: the exposition text for GET/HEAD /metrics; 500 when a
    collector raised (logged with its traceback as ``metrics_collect_failed``)."""
    path = target.split(b"?", 1)[0]
    if path != PATH:
        return 404, b"not found: the metrics are at /metrics\n"
    if method not in (b"GET", b"HEAD"):
        return 405, b"only GET /metrics\n"
    try:
        return 200, render()
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
        events.emit(log, events.MetricsCollectFailed(error=error), exc_info=e)
        return 500, f"metrics collection failed: {error}\n".encode()


class MetricsServer:
    """Serves one registry at ``addr`` (see the module docstring)."""

    def __init__(self, registry: CollectorRegistry, transport: Transport) -> None:
        self.registry = registry
        self.transport = transport
        self._slots = trio.CapacityLimiter(MAX_CONNECTIONS)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def run(self, addr: str, *, task_status: trio.TaskStatus[str]) -> None:
        await self.transport.serve(addr, self._handle, task_status=task_status)

    async def _handle(self, stream: trio.abc.Stream) -> None:
        async with stream:
            try:
                self._slots.acquire_on_behalf_of_nowait(stream)
            except trio.WouldBlock:
                return  # over the cap: closed at once
            try:
                with trio.move_on_after(READ_TIMEOUT_S):
                    await self._one_request(stream)
            except _BROKEN as e:
                events.emit(log, events.MetricsRequestFailed(error=f"{type(e).__name__}: {e}"))
            finally:
                self._slots.release_on_behalf_of(stream)

    async def _one_request(self, stream: trio.abc.Stream) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive_some(MAX_HEAD_BYTES))
                    continue
                if isinstance(event, h11.Request):
                    break
                return  # the peer closed before a request
        except h11.RemoteProtocolError as e:
            events.emit(log, events.MetricsRequestFailed(error=f"bad request: {e}"))
            await stream.send_all(BAD_REQUEST)
            return
        status, body = response_for(event.method, event.target, self.render)
        ctype = CONTENT_TYPE_LATEST if status == 200 else "text/plain; charset=utf-8"
        headers = [
            ("Content-Type", ctype),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
        ]
        out = conn.send(h11.Response(status_code=status, headers=headers)) or b""
        if event.method != b"HEAD":
            out += conn.send(h11.Data(data=body)) or b""
        out += conn.send(h11.EndOfMessage()) or b""
        await stream.send_all(out)
