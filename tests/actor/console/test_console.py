"""The web console against a controller-mode broker set on the simulated network (MockClock):
viewers connect over trio-websocket exactly as the page does.

- the sections show the set (master, MasterEpoch, SyncStateSet and its epoch, offsets,
  confirmOffset), the controller replica's Raft state and the NameServer;
- after the master dies, the new master and epoch reach the viewer within one poll interval
  plus the round trip of the controller's own decision (asserted: <= 1.0 s after the controller
  elected), with an election event in the feed;
- actions: refused without the token, with a wrong one, and on a read-only console (nothing is
  created at the broker); carried out with it; every one logged as a console_action audit event;
- malformed or unknown messages get an error answer and the connection stays;
- a browser page of another origin is refused at the handshake (403);
- a viewer that stops reading never delays the others and is let go after the send timeout.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import structlog.testing
import trio
import trio.testing
import trio_websocket

from rocketrio.actors.console import server as console_server
from rocketrio.actors.console.server import ConsoleServer
from rocketrio.actors.console.service import ConsoleOptions, run_console
from tests.harness.replication import Cluster, cluster, pair, send_many, wait_until

CONSOLE_HOST = "10.0.7.1"
LISTEN = f"{CONSOLE_HOST}:8080"
TOKEN = "a-console-token-of-some-length"


@asynccontextmanager
async def console(c: Cluster, token: str | None = TOKEN) -> AsyncIterator[ConsoleServer]:
    opts = ConsoleOptions(
        namesrv=c.namesrv_addr, controller=c.controller_addr, listen=LISTEN, token=token
    )
    async with trio.open_nursery() as n:
        server = await n.start(run_console, opts, c.net.transport(CONSOLE_HOST))
        yield server
        n.cancel_scope.cancel()


class Viewer:
    """A page's view of the websocket: the latest sections, the feed, the action results."""

    def __init__(self, ws: trio_websocket.WebSocketConnection) -> None:
        self.ws = ws
        self.hello: dict[str, Any] = {}
        self.sections: dict[str, Any] = {}
        self.feed: list[dict[str, Any]] = []
        self.results: dict[str, dict[str, Any]] = {}
        self.points = 0
        self.changed = trio.Event()

    async def read(self) -> None:
        try:
            while True:
                msg = json.loads(await self.ws.get_message())
                assert msg["v"] == 1
                match msg["type"]:
                    case "hello":
                        self.hello = msg
                    case "section":
                        self.sections[msg["name"]] = msg["data"]
                    case "feed":
                        self.feed += msg["items"]
                    case "samples":
                        self.points += len(msg["points"])
                    case "actionResult":
                        self.results[msg["id"]] = msg
                    case other:
                        raise AssertionError(f"unknown message type {other}")
                self.changed.set()
                self.changed = trio.Event()
        except trio_websocket.ConnectionClosed:
            pass

    async def until(self, check: Any, what: str, timeout: float = 30.0) -> None:
        with trio.fail_after(timeout):
            while not check():
                await self.changed.wait()

    async def act(self, action: str, args: dict[str, Any], token: str = TOKEN) -> dict[str, Any]:
        rid = str(len(self.results) + 1) + action
        await self.ws.send_message(
            json.dumps(
                {
                    "v": 1,
                    "type": "action",
                    "id": rid,
                    "action": action,
                    "args": args,
                    "token": token,
                }
            )
        )
        await self.until(lambda: rid in self.results, f"answer to {action}")
        return self.results[rid]

    def broker_set(self) -> dict[str, Any]:
        (s,) = self.sections["brokerSets"]
        return s


@asynccontextmanager
async def viewer(
    c: Cluster, host: str = "10.0.7.9", origin: str | None = None
) -> AsyncIterator[Viewer]:
    stream = await c.net.transport(host).connect(LISTEN)
    headers = [] if origin is None else [(b"Origin", origin.encode())]
    async with trio.open_nursery() as n:
        ws = await trio_websocket.wrap_client_stream(
            n, stream, LISTEN, "/ws", extra_headers=headers
        )  # type: ignore[arg-type]
        v = Viewer(ws)
        n.start_soon(v.read)
        yield v
        await ws.aclose()
        n.cancel_scope.cancel()


async def test_the_page_shows_the_set_and_a_failover_within_one_poll(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 61) as c:
        a, _b = await pair(c)
        assert await send_many(c, a, 20, "m", {}) == 20
        end = a.b.store.message_store.get_commitlog_max_offset()
        async with console(c) as srv, viewer(c, origin=f"http://{LISTEN}") as v:
            assert srv.addr == LISTEN
            await v.until(lambda: "brokerSets" in v.sections, "first sections")
            assert v.hello == {
                "type": "hello", "v": 1, "actions": True, "intervalMs": 500,
                "historySeconds": 300,
            }  # fmt: skip
            (ns,) = v.sections["namesrvs"]
            assert ns["ok"] and ns["brokers"] == 2
            (ctl,) = v.sections["controllers"]
            assert ctl["role"] == "leader" and ctl["selfId"] == "n0" and ctl["commitIndex"] > 0
            s = v.broker_set()
            assert (s["masterId"], s["masterEpoch"], s["syncStateSet"]) == (1, 1, [1, 2])
            assert s["syncStateSetEpoch"] >= 1
            await v.until(
                lambda: all(r["maxOffset"] == end for r in v.broker_set()["replicas"]),
                "both replicas at the end",
            )
            reps = {r["brokerId"]: r for r in v.broker_set()["replicas"]}
            assert reps[1]["role"] == "SYNC_MASTER" and reps[2]["role"] == "SLAVE"
            assert reps[1]["confirmOffset"] == end and reps[2]["lagBytes"] == 0
            await trio.sleep(11)  # past the controller's listening window after its election

            await a.crash()
            elected_at = None
            with trio.fail_after(30):
                while elected_at is None:
                    info = await c.sync_state()
                    if info is not None and info.master_broker_id == 2:
                        elected_at = trio.current_time()
                    await trio.sleep(0.01)
            await v.until(
                lambda: (v.broker_set()["masterId"], v.broker_set()["masterEpoch"]) == (2, 2),
                "the new master on the page",
            )
            seen_after = trio.current_time() - elected_at
            assert seen_after <= 1.0, seen_after
            await v.until(lambda: any(e["kind"] == "election" for e in v.feed), "feed")
            election = next(e for e in v.feed if e["kind"] == "election")
            assert election["epoch"] == 2 and "brokerId 2" in election["text"]
            assert srv.hub.viewers and len(srv.hub.viewers) == 1


async def test_actions_need_the_token_and_are_audited(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 62) as c:
        a, _b = await pair(c)
        assert await send_many(c, a, 12, "m", {}) == 12  # topic HA, 4 queues, nothing consumed
        args = {"topic": "FromThePage", "cluster": "DefaultCluster", "readQueueNums": 3,
                "writeQueueNums": 3}  # fmt: skip
        with structlog.testing.capture_logs() as logs:
            async with console(c) as _srv, viewer(c) as v:
                await v.until(lambda: "brokerSets" in v.sections, "sections")
                for token, why in [("", "wrong or missing token"), (TOKEN[:-1], "wrong")]:
                    res = await v.act("updateTopic", args, token=token)
                    assert not res["ok"] and why in res["error"]
                assert "FromThePage" not in a.b.tables.topics.table
                res = await v.act("updateTopic", {**args, "topic": "bad name"})
                assert not res["ok"] and "illegal characters" in res["error"]
                res = await v.act("updateTopic", args)
                assert res["ok"], res
                assert a.b.tables.topics.table["FromThePage"].readQueueNums == 3
                await v.until(
                    lambda: any(
                        t["topic"] == "FromThePage" and len(t["queues"]) == 3
                        for t in v.sections.get("topics", [])
                    ),
                    "the topic in the topics section",
                )
                res = await v.act("deleteTopic", {"topic": "FromThePage",
                                                  "cluster": "DefaultCluster"})  # fmt: skip
                assert res["ok"] and "FromThePage" not in a.b.tables.topics.table
                res = await v.act(
                    "previewResetOffset", {"group": "G1", "topic": "HA", "timestamp": -1}
                )
                assert res["ok"], res
                assert (res["data"]["lagBefore"], res["data"]["lagAfter"]) == (12, 0)
                assert {q["newOffset"] for q in res["data"]["queues"]} == {3}
        audit = [e for e in logs if e["event"] == "console_action"]
        assert [(e["action"], e["ok"]) for e in audit] == [
            ("updateTopic", False),
            ("updateTopic", False),
            ("updateTopic", False),
            ("updateTopic", True),
            ("deleteTopic", True),
            ("previewResetOffset", True),
        ]
        assert all(e["peer"] == "10.0.7.9" for e in audit)
        assert "token" not in json.dumps(audit[0]["arguments"])


async def test_a_read_only_console_refuses_every_action(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 63) as c:
        a, _b = await pair(c)
        async with console(c, token=None), viewer(c) as v:
            await v.until(lambda: bool(v.hello), "hello")
            assert v.hello["actions"] is False
            for token in ("", TOKEN):
                res = await v.act(
                    "updateTopic", {"topic": "X", "cluster": "DefaultCluster"}, token=token
                )
                assert not res["ok"] and "read-only" in res["error"]
            res = await v.act(
                "electMaster",
                {"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerId": 2},
            )
            assert not res["ok"] and "read-only" in res["error"]
            assert "X" not in a.b.tables.topics.table
            assert (await c.sync_state()).master_broker_id == 1


async def test_bad_messages_are_answered_and_the_connection_stays(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 64) as c:
        async with console(c), viewer(c) as v:
            await v.until(lambda: bool(v.hello), "hello")
            for text, why in [
                ("{", "not JSON"),
                ('{"v": 2, "type": "action"}', "unsupported protocol version 2"),
                ('{"v": 1, "type": "subscribe"}', "unknown message type"),
                (
                    '{"v": 1, "type": "action", "id": "9", "action": "rm", "args": {}}',
                    "unknown action 'rm'",
                ),
            ]:
                before = len(v.results)
                await v.ws.send_message(text)
                await v.until(lambda b=before: len(v.results) > b or "" in v.results, why)
                res = v.results.pop("")
                assert not res["ok"] and why in res["error"], res
            points = v.points
            await v.until(lambda: v.points > points, "updates keep coming")


async def test_another_sites_page_is_refused(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 65) as c:
        async with console(c) as srv:
            upgrade = (
                f"GET /ws HTTP/1.1\r\nHost: {LISTEN}\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Version: 13\r\n"
            )
            got = await http_get(c, upgrade + "Origin: http://evil.example\r\n\r\n")
            assert got.startswith(b"HTTP/1.1 403"), got
            got = await http_get(c, upgrade + f"Origin: http://{LISTEN}.evil.example\r\n\r\n")
            assert got.startswith(b"HTTP/1.1 403"), got
            assert not srv.hub.viewers
            # the page and its assets, and nothing else
            for path, status in [("/", 200), ("/app.js", 200), ("/app.css", 200),
                                 ("/etc/passwd", 404), ("/../app.js", 404)]:  # fmt: skip
                got = await http_get(c, f"GET {path} HTTP/1.1\r\nHost: {LISTEN}\r\n\r\n")
                assert got.startswith(f"HTTP/1.1 {status}".encode()), (path, got[:80])
            got = await http_get(c, f"POST / HTTP/1.1\r\nHost: {LISTEN}\r\n\r\n")
            assert got.startswith(b"HTTP/1.1 405")
            got = await http_get(c, "GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
            assert got.startswith(b"HTTP/1.1 400")


async def http_get(c: Cluster, request: str) -> bytes:
    stream = await c.net.transport("10.0.7.8").connect(LISTEN)
    async with stream:
        await stream.send_all(request.encode())
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    return data


async def test_a_viewer_that_stops_reading_delays_nobody_and_is_let_go(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 66) as c:
        c.net.window_bytes = 8 * 1024  # what a socket buffers before the sender waits
        a, _b = await pair(c)
        async with console(c) as srv, viewer(c, "10.0.7.20") as fast:
            stuck = await c.net.transport("10.0.7.21").connect(LISTEN)
            await stuck.send_all(
                f"GET /ws HTTP/1.1\r\nHost: {LISTEN}\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n".encode()
            )  # and never reads a byte
            await wait_until(lambda: _async(len(srv.hub.viewers) == 2), "both connected")
            # traffic: every poll changes the sections, until the stuck socket's buffer is full
            # and its writer has waited SEND_TIMEOUT_S
            started = trio.current_time()
            for i in range(200):
                assert await send_many(c, a, 20, f"x{i}", {}) == 20
                rounds = srv.rounds
                await fast.until(lambda r=rounds: srv.rounds > r, "a poll")
                stuck_viewer = [v for v in srv.hub.viewers if v.peer == "10.0.7.21"]
                if not stuck_viewer:
                    break
                assert stuck_viewer[0].backlog() <= 1 + 5 + 2 + 16  # hello, sections, ...
            waited = trio.current_time() - started
            assert waited >= console_server.SEND_TIMEOUT_S
            end = a.b.store.message_store.get_commitlog_max_offset()
            await fast.until(
                lambda: fast.broker_set()["replicas"][0]["maxOffset"] == end, "fast is current"
            )
            assert {v.peer for v in srv.hub.viewers} == {"10.0.7.20"}
            await stuck.aclose()


async def _async(value: bool) -> bool:
    return value


async def test_group_offset_and_controller_actions_from_the_page(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 67) as c:
        a, b = await pair(c)
        assert await send_many(c, a, 12, "m", {}) == 12  # topic HA, 4 queues of 3
        cl = "DefaultCluster"
        async with console(c), viewer(c) as v:
            await v.until(lambda: "brokerSets" in v.sections, "sections")
            res = await v.act("updateSubGroup", {"group": "G1", "cluster": cl, "retryMaxTimes": 3})
            assert res["ok"], res
            assert a.b.tables.groups.table["G1"].retryMaxTimes == 3
            # skip everything accumulated: the preview says where each queue goes, the reset
            # puts them there (no member online: set from the admin side, as mqadmin does)
            args = {"group": "G1", "topic": "HA", "timestamp": -1}
            preview = await v.act("previewResetOffset", args)
            assert preview["ok"] and preview["data"]["lagAfter"] == 0, preview
            res = await v.act("resetOffset", args)
            assert res["ok"], res
            moved = {(r["queueId"], r["rollbackOffset"]) for r in res["data"]["rollback"]}
            assert moved == {(q, 3) for q in range(4)}
            await v.until(
                lambda: any(
                    g["group"] == "G1" and g["totalLag"] == 0 and len(g["queues"]) == 4
                    for g in v.sections.get("groups", [])
                ),
                "G1 with no lag on the page",
            )
            # electMaster: brokerId 2 becomes master in epoch 2, on the page and in the feed
            res = await v.act("electMaster", {"cluster": cl, "brokerName": "broker-a",
                                              "brokerId": 2})  # fmt: skip
            assert res["ok"] and res["data"]["masterBrokerId"] == 2, res
            assert res["data"]["masterEpoch"] == 2
            await v.until(
                lambda: (v.broker_set()["masterId"], v.broker_set()["masterEpoch"]) == (2, 2),
                "the elected master on the page",
            )
            await v.until(lambda: any(e["kind"] == "election" for e in v.feed), "feed")
            # cleanBrokerMetadata: refused for a living broker, done once it is gone
            clean = {"cluster": cl, "brokerName": "broker-a", "brokerIds": "1"}
            res = await v.act("cleanBrokerMetadata", clean)
            assert not res["ok"] and "still alive" in res["error"], res
            await a.crash()
            await wait_until(
                lambda: _async(
                    not next(r for r in v.broker_set()["replicas"] if r["brokerId"] == 1)["alive"]
                ),
                "brokerId 1 dead for the controller",
            )
            res = await v.act("cleanBrokerMetadata", clean)
            assert res["ok"], res
            await v.until(
                lambda: [r["brokerId"] for r in v.broker_set()["replicas"]] == [2],
                "brokerId 1 gone from the page",
            )
            assert b.rm.serving_as_master()
