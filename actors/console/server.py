"""The web console's one port: the page and its assets over HTTP/1.1 (h11) and the live channel
over a websocket (trio-websocket), told apart by the request head.

Each connection's request head is read with h11 (at most `MAX_HEAD_BYTES`, within
`HEAD_TIMEOUT_S`). ``GET /ws`` with ``Upgrade: websocket`` is handed, bytes and all, to
trio-websocket once its ``Origin`` passed `origin_allowed` (a browser page of another site must
not drive the console with its user's network position); anything else is answered from the
packaged assets and the connection closed. A viewer gets `hub.Viewer`'s backlog written by its
own sender task; a write that does not finish within `SEND_TIMEOUT_S` (a browser that stopped
reading) ends that viewer, never the poll or the others. The poll loop reads the cluster every
``interval_s`` through `poller.ClusterPoller`, lets `view.ConsoleView` work out what changed
and publishes that to the hub.
"""

from __future__ import annotations

import importlib.resources
import time
from collections.abc import Callable
from http import HTTPStatus
from urllib.parse import urlsplit

import h11
import structlog
import trio
import trio_websocket

from rocketrio.actors.console.actions import ActionRunner
from rocketrio.actors.console.hub import Hub, Viewer
from rocketrio.actors.console.poller import ClusterPoller
from rocketrio.actors.console.protocol import (
    MAX_CLIENT_MESSAGE,
    ActionResult,
    Hello,
    ProtocolError,
    decode_client,
)
from rocketrio.actors.console.view import ConsoleView
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events

log = structlog.get_logger("console")

MAX_HEAD_BYTES = 16 * 1024
HEAD_TIMEOUT_S = 10.0
SEND_TIMEOUT_S = 10.0
MAX_HTTP_CONNECTIONS = 32
WS_PATH = "/ws"
ASSETS = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
}


def load_assets() -> dict[str, bytes]:
    """The page's files, packaged with rocketrio (no CDN, no build step)."""
    root = importlib.resources.files("rocketrio.actors.console") / "static"
    return {name: (root / name).read_bytes() for name, _ in set(ASSETS.values())}


def origin_allowed(origin: str | None, host: str | None, extra: frozenset[str]) -> bool:
    """A websocket may open when it comes from no browser page (no Origin header: curl, the
    tests' clients), from the console's own page (the Origin's host:port is the Host the
    request was sent to), or from an origin named with ``--allow-origin``."""
    if origin is None:
        return True
    if origin in extra:
        return True
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.netloc or host is None:
        return False
    return parts.netloc.lower() == host.lower()


class ReplayStream(trio.abc.Stream):
    """A stream whose first reads return bytes already read from it (the request head)."""

    def __init__(self, inner: trio.abc.Stream, prefix: bytes) -> None:
        self.inner = inner
        self.prefix = prefix

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self.prefix:
            n = len(self.prefix) if max_bytes is None else max_bytes
            out, self.prefix = self.prefix[:n], self.prefix[n:]
            await trio.lowlevel.checkpoint()
            return out
        return await self.inner.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


BAD_REQUEST = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 12\r\nConnection: close\r\n\r\nbad request\n"
)


def respond(
    conn: h11.Connection,
    status: int,
    ctype: str,
    body: bytes,
    extra: list[tuple[str, str]] | None = None,
    *,
    head_only: bool = False,
) -> bytes:
    """The bytes of one whole response on ``conn`` (which has received the request)."""
    headers = [
        ("Content-Type", ctype),
        ("Content-Length", str(len(body))),
        ("Connection", "close"),
        ("Cache-Control", "no-store"),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        *(extra or []),
    ]
    reason = HTTPStatus(status).phrase.encode()
    out = conn.send(h11.Response(status_code=status, headers=headers, reason=reason)) or b""
    if not head_only:
        out += conn.send(h11.Data(data=body)) or b""
    out += conn.send(h11.EndOfMessage()) or b""
    return out


def plain(conn: h11.Connection, status: int, text: str) -> bytes:
    return respond(conn, status, "text/plain; charset=utf-8", text.encode())


class ConsoleServer:
    """The console: poll loop, hub, actions and the listener (see the module docstring)."""

    def __init__(
        self,
        *,
        poller: ClusterPoller,
        actions: ActionRunner,
        transport: Transport,
        interval_s: float = 0.5,
        max_viewers: int = 256,
        allowed_origins: frozenset[str] = frozenset(),
        wall_ms: Callable[[], int] | None = None,
    ) -> None:
        self.poller = poller
        self.actions = actions
        self.transport = transport
        self.interval_s = interval_s
        self.allowed_origins = allowed_origins
        self.view = ConsoleView()
        self.hub = Hub(
            Hello(
                actions=actions.token is not None,
                intervalMs=int(interval_s * 1000),
                historySeconds=int(600 * interval_s),
            ),
            max_viewers,
        )
        self.assets = load_assets()
        self.addr = ""
        self.rounds = 0
        self._http_slots = trio.CapacityLimiter(MAX_HTTP_CONNECTIONS)
        self._wall_ms = wall_ms or self._trio_wall_ms()

    @staticmethod
    def _trio_wall_ms() -> Callable[[], int]:
        """Epoch ms that advance with Trio's clock (so a MockClock test moves them too)."""
        base_wall, base_trio = time.time(), trio.current_time()
        return lambda: int((base_wall + trio.current_time() - base_trio) * 1000)

    async def run(self, listen: str, *, task_status: trio.TaskStatus[str]) -> None:
        async with trio.open_nursery() as n:
            self.addr = await n.start(self.transport.serve, listen, self._handle)
            events.emit(
                log,
                events.ConsoleListening(
                    url=f"http://{self.addr}/", actions=self.actions.token is not None
                ),
            )
            n.start_soon(self._poll_loop)
            task_status.started(self.addr)

    async def _poll_loop(self) -> None:
        while True:
            started = trio.current_time()
            poll = await self.poller.poll(self._wall_ms())
            changes = self.view.update(poll)
            for name, data in changes.sections.items():
                self.hub.publish_section(name, data)
            self.hub.publish_point(changes.sample)
            self.hub.publish_feed_items(changes.feed_items)
            self.rounds += 1
            await trio.sleep_until(started + self.interval_s)

    # -- connections --------------------------------------------------------------------------

    async def _handle(self, stream: trio.abc.Stream) -> None:
        peer = _peer(stream)
        async with stream:
            with trio.move_on_after(HEAD_TIMEOUT_S) as head_scope:
                got = await self._read_head(stream, peer)
            if head_scope.cancelled_caught or got is None:
                return
            conn, request, raw = got
            headers = {k.decode().lower(): v.decode("latin-1") for k, v in request.headers}
            path = request.target.decode("latin-1").split("?", 1)[0]
            try:
                if headers.get("upgrade", "").lower() == "websocket":
                    await self._websocket(stream, conn, raw, path, headers, peer)
                else:
                    await self._http(stream, conn, request.method, path, headers)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return

    async def _read_head(
        self, stream: trio.abc.Stream, peer: str
    ) -> tuple[h11.Connection, h11.Request, bytes] | None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        raw = b""
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(MAX_HEAD_BYTES)
                    if not data:
                        return None
                    raw += data
                    conn.receive_data(data)
                    continue
                if isinstance(event, h11.Request):
                    return conn, event, raw
                return None
        except h11.RemoteProtocolError as e:
            events.emit(log, events.ConsoleViewerRefused(peer=peer, reason=f"bad request: {e}"))
            await stream.send_all(BAD_REQUEST)
            return None

    async def _http(
        self,
        stream: trio.abc.Stream,
        conn: h11.Connection,
        method: bytes,
        path: str,
        headers: dict[str, str],
    ) -> None:
        try:
            self._http_slots.acquire_on_behalf_of_nowait(stream)
        except trio.WouldBlock:
            await stream.send_all(plain(conn, 503, "too many requests at once\n"))
            return
        try:
            if method not in (b"GET", b"HEAD"):
                await stream.send_all(plain(conn, 405, "the console's pages are read with GET\n"))
                return
            asset = ASSETS.get(path)
            if asset is None:
                await stream.send_all(plain(conn, 404, f"not found: {path}\n"))
                return
            name, ctype = asset
            host = headers.get("host", "")
            csp = (
                "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                f"connect-src 'self' ws://{host}; frame-ancestors 'none'"
            )
            data = respond(
                conn,
                200,
                ctype,
                self.assets[name],
                [("Content-Security-Policy", csp)],
                head_only=method == b"HEAD",
            )
            await stream.send_all(data)
        finally:
            self._http_slots.release_on_behalf_of(stream)

    async def _websocket(
        self,
        stream: trio.abc.Stream,
        conn: h11.Connection,
        raw: bytes,
        path: str,
        headers: dict[str, str],
        peer: str,
    ) -> None:
        if path != WS_PATH:
            await stream.send_all(plain(conn, 404, f"the live channel is at {WS_PATH}\n"))
            return
        origin = headers.get("origin")
        if not origin_allowed(origin, headers.get("host"), self.allowed_origins):
            events.emit(
                log, events.ConsoleViewerRefused(peer=peer, reason=f"origin {origin} refused")
            )
            await stream.send_all(plain(conn, 403, f"origin {origin} may not open the console\n"))
            return
        viewer = self.hub.join(peer)
        if viewer is None:
            events.emit(
                log,
                events.ConsoleViewerRefused(
                    peer=peer, reason=f"{self.hub.max_viewers} viewers connected already"
                ),
            )
            await stream.send_all(plain(conn, 503, "too many viewers\n"))
            return
        try:
            async with trio.open_nursery() as n:
                request = await trio_websocket.wrap_server_stream(
                    n,
                    ReplayStream(stream, raw),
                    message_queue_size=4,
                    max_message_size=MAX_CLIENT_MESSAGE,
                )
                ws = await request.accept()
                await self._serve_viewer(ws, viewer, peer)
                n.cancel_scope.cancel()
        except (trio_websocket.HandshakeError, trio_websocket.ConnectionClosed):
            pass
        finally:
            self.hub.leave(viewer)

    async def _serve_viewer(
        self, ws: trio_websocket.WebSocketConnection, viewer: Viewer, peer: str
    ) -> None:
        async with trio.open_nursery() as n:
            n.start_soon(self._sender, ws, viewer, peer, n.cancel_scope)
            try:
                while True:
                    text = await ws.get_message()
                    try:
                        msg = decode_client(text)
                    except ProtocolError as e:
                        viewer.offer_reply(ActionResult(id="", ok=False, error=str(e)))
                        continue
                    viewer.offer_reply(await self.actions.run(msg, peer))
            except trio_websocket.ConnectionClosed:
                pass
            n.cancel_scope.cancel()

    async def _sender(
        self,
        ws: trio_websocket.WebSocketConnection,
        viewer: Viewer,
        peer: str,
        scope: trio.CancelScope,
    ) -> None:
        try:
            while True:
                await viewer.wait()
                for text in viewer.take():
                    with trio.move_on_after(SEND_TIMEOUT_S) as cs:
                        await ws.send_message(text)
                    if cs.cancelled_caught:
                        events.emit(
                            log,
                            events.ConsoleViewerRefused(
                                peer=peer,
                                reason=f"did not read an update within {SEND_TIMEOUT_S:.0f} s",
                            ),
                        )
                        scope.cancel()
                        return
        except trio_websocket.ConnectionClosed:
            scope.cancel()


def _peer(stream: trio.abc.Stream) -> str:
    """host:port of the other end (a TCP socket), or the simulated network's host name."""
    sock = getattr(stream, "socket", None)
    if sock is not None:
        try:
            host, port = sock.getpeername()[:2]
        except OSError:
            return "?"
        return f"{host}:{port}"
    return str(getattr(stream, "remote_host", "?"))
