"""A Java client's plain single send in one handler (send/direct.py `direct_send`): the same
requests, good, bad and odd, sent through it and through the generic handlers it folds (the
static-topic wrapper's handler, then the plain `send_message`) on two identical brokers give the
same answer bytes, the same messages handed to the store and the same refusals; a static topic
is still rerouted, also one made static after its first send; a slave, a full store inbox and a
stopped store answer as before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.dispatch.table import Handler, answer_of
from rocketrio.actors.broker.send.direct import (
    DirectSend,
    DirectSendHandler,
    direct_send_handlers,
)
from rocketrio.actors.broker.send.handlers import send_handlers as plain_send_handlers
from rocketrio.actors.broker.static_topic.send import send_handlers as static_send_handlers
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingManager
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.kernel.remoting_connection import NOT_DIRECT
from rocketrio.protocol.bodies import SubscriptionGroupConfig, TopicConfig
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.compiled import speedups
from rocketrio.protocol.remoting import (
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    FrameDecoder,
    RemotingCommand,
    encode_command,
)
from rocketrio.protocol.static_topic import LogicQueueMappingItem as Item
from rocketrio.protocol.static_topic import TopicQueueMappingDetail
from rocketrio.storage.message_store import PutResult
from tests.harness.processors import ClosedGate, Sender

pytestmark = pytest.mark.skipif(speedups is None, reason="no compiled module: no direct path")

V2 = RequestCode.SEND_MESSAGE_V2
PROPS = "UNIQ_KEY\x01C0A8000100002A9F\x02WAIT\x01true\x02"


class _Conn:
    """What a handler reads of a connection and what its answers go to."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.rpc_latency = None
        self.closed = False
        self.attrs: dict[str, Any] = {}
        self.remote = "10.0.0.9:40000"

    def send_frame_nowait(self, frame: bytes) -> None:
        self.frames.append(frame)

    def send_nowait(self, cmd: RemotingCommand) -> None:
        self.frames.append(encode_command(cmd))


class Side:
    """One broker's send handlers over the harness's processor; ``direct`` picks the path,
    ``frame`` the connection's direct path (`DirectSend`) in front of it."""

    def __init__(self, tmp_path: Path, direct: bool, frame: bool = False, **config: Any) -> None:
        self.sender = Sender(tmp_path, **config)
        self.mappings = TopicQueueMappingManager("broker-a", lambda: 0)
        wrapped = static_send_handlers(
            self.mappings, self.sender.processor, plain_send_handlers(self.sender.processor)
        )
        # the wrapper's one handler serves every send code: under code 10 it is the generic one
        self.handler: Handler = wrapped[V2] if direct else wrapped[RequestCode.SEND_MESSAGE]
        for topic in ("Orders", "ST"):
            self.sender.topics.table[topic] = TopicConfig(topic, 4, 4)
        self.stopping = False
        self.frame_path = None
        if frame:
            paths = direct_send_handlers({V2: self.handler}, gated=False, requests=self)
            self.frame_path = paths[V2]

    async def request(
        self, cmd: RemotingCommand, answer_put: bool = True, status: PutStatus = PutStatus.PUT_OK
    ) -> list[bytes]:
        """Answer frames of ``cmd``: its refusal, or the stored answer once the put is taken."""
        conn = _Conn()
        puts_before = len(self.sender.writer.puts)
        try:
            if not await self._from_frame(conn, cmd):
                ctx = RequestContext(conn, cmd)  # type: ignore[arg-type]
                resp = await answer_of(self.handler(ctx))
                if resp is not None:
                    ctx.respond(resp)
        except Exception as e:  # a header only the Python parse reads: its error, compared
            return [f"{type(e).__name__}: {e}".encode()]
        if answer_put:
            for i, (_msgs, done) in enumerate(self.sender.writer.puts[puts_before:]):
                results = (
                    []
                    if status is PutStatus.SERVICE_NOT_AVAILABLE
                    else [PutResult(4096 + i, 1200, 17, f"ID{i}", 5)]
                )
                done(results, status, None if status is PutStatus.PUT_OK else "why")
        return conn.frames

    async def _from_frame(self, conn: _Conn, cmd: RemotingCommand) -> bool:
        """Served by the connection's direct path (the request decoded from its frame as the
        connection decodes it); False when there is none or it declines."""
        if self.frame_path is None:
            return False
        decoder = FrameDecoder()
        decoder.direct_codes = frozenset({V2})
        decoder.feed(encode_command(cmd))
        got = decoder.next_command()
        if isinstance(got, RemotingCommand):
            got = (got.code, got.opaque, got.ext_fields, got.body, got.serialize_type, got)
        assert got is not None
        served = self.frame_path(conn, got)  # type: ignore[arg-type]
        if served is NOT_DIRECT:
            return False
        if served is not None:
            await served
        return True

    def stored(self) -> list[Any]:
        return [msgs for msgs, _ in self.sender.writer.puts] + [
            (b.topic, b.queue_id, b.body) for b in self.sender.writer.batches
        ]


def send_cmd(opaque: int = 7, stype: int = SERIALIZE_ROCKETMQ, **over: str) -> RemotingCommand:
    ext = {
        "a": "pg", "b": "Orders", "c": "TBW102", "d": "4", "e": "1", "f": "0",
        "g": "1700000000000", "h": "0", "i": PROPS, "j": "0", "k": "false", "m": "false",
    }  # fmt: skip
    ext.update(over)
    ext = {k: v for k, v in ext.items() if v != "<absent>"}
    return RemotingCommand(V2, opaque=opaque, ext_fields=ext, body=b"x" * 64, serialize_type=stype)


# (name, broker config, what to do to the broker first, the request's header fields)
Setup = Callable[[Side], None]
CASES: list[tuple[str, dict[str, Any], Setup | None, dict[str, str]]] = [
    ("plain", {}, None, {}),
    ("plain, JSON frame", {}, None, {"stype": "json"}),
    ("no UNIQ_KEY: the broker's own", {}, None, {"i": "TAGS\x01a\x02"}),
    ("no properties", {}, None, {"i": "<absent>"}),
    ("queue id at the limit", {}, None, {"e": "4"}),
    ("queue id over the limit", {}, None, {"e": "9"}),
    ("queue -1: the broker picks", {}, None, {"e": "-1"}),
    ("body over maxMessageSize", {"maxMessageSize": 16}, None, {}),
    ("unknown topic, no auto-create", {"autoCreateTopicEnable": False}, None, {"b": "Nope"}),
    ("unknown topic, auto-create", {"autoCreateTopicEnable": True}, None, {"b": "NewOne"}),
    ("a forbidden topic", {}, None, {"b": "SCHEDULE_TOPIC_XXXX"}),
    ("a topic name too long", {}, None, {"b": "T" * 200}),
    ("broker not writable", {"brokerPermission": 4}, None, {}),
    ("a slave's gate", {}, lambda s: setattr(s.sender.processor, "write_gate", ClosedGate()), {}),
    (
        "topic not writable",
        {},
        lambda s: s.sender.topics.table.update(Orders=TopicConfig("Orders", 4, 4, perm=4)),
        {},
    ),
    (
        "a transaction refused",
        {"rejectTransactionMessage": True},
        None,
        {"i": "TRAN_MSG\x01true\x02" + PROPS},
    ),
    ("a transaction half", {}, None, {"i": "TRAN_MSG\x01true\x02" + PROPS}),
    ("a delay level", {}, None, {"i": "DELAY\x013\x02" + PROPS}),
    ("a timer too far", {}, None, {"i": "TIMER_DELAY_SEC\x01999999999\x02" + PROPS}),
    ("a retry topic, no group", {}, None, {"b": "%RETRY%nogroup"}),
    ("a batch flag", {}, None, {"m": "true"}),
    ("a header with a space: the Python parse", {}, None, {"e": " 1"}),
    ("a header missing a field: the error", {}, None, {"d": "<absent>"}),
    ("a bad number: the error", {}, None, {"g": "soon"}),
    ("a static topic, led here", {}, lambda s: _make_static(s, "broker-a"), {"b": "ST", "e": "5"}),
    (
        "a static topic, led elsewhere",
        {},
        lambda s: _make_static(s, "broker-b"),
        {"b": "ST", "e": "5"},
    ),
    (
        "a static topic, physical (lo=false)",
        {},
        lambda s: _make_static(s, "broker-b"),
        {"b": "ST", "e": "1", "lo": "false"},
    ),
    ("a full store inbox", {}, lambda s: setattr(s.sender.writer, "full", True), {}),
    ("a stopped store", {}, lambda s: setattr(s.sender.writer, "stopped", True), {}),
]


def _make_static(side: Side, leader: str) -> None:
    items = [Item(0, 1, "broker-b", 0, 0, 37), Item(1, 2, leader, 100)]
    side.mappings.table["ST"] = TopicQueueMappingDetail(
        "ST", totalQueues=8, bname="broker-a", epoch=1, hostedQueues={5: items}
    )


@pytest.mark.parametrize(("name", "config", "setup", "fields"), CASES, ids=[c[0] for c in CASES])
async def test_the_direct_handler_answers_every_request_as_the_generic_path(
    tmp_path: Path, name: str, config: dict[str, Any], setup: Setup | None, fields: dict[str, str]
) -> None:
    fields = dict(fields)
    stype = SERIALIZE_JSON if fields.pop("stype", "") == "json" else SERIALIZE_ROCKETMQ
    out = []
    for direct, frame in ((False, False), (True, False), (True, True)):
        side = Side(tmp_path / f"{direct}{frame}", direct, frame, **config)
        if setup is not None:
            setup(side)
        frames = await side.request(send_cmd(stype=stype, **fields))
        out.append((frames, side.stored(), side.sender.writer.awaited))
    assert out[1] == out[0]
    assert out[2] == out[0]  # the connection's direct path too
    assert out[0][0] or out[0][1]  # the case answered or stored something


async def test_a_topic_made_static_after_its_first_send_is_rerouted(tmp_path: Path) -> None:
    sides = [Side(tmp_path / str(d), d) for d in (False, True)]
    for side in sides:
        await side.request(send_cmd(b="ST", e="1"))
        _make_static(side, "broker-b")  # now led by another broker: this one refuses
        await side.request(send_cmd(b="ST", e="5"))
        side.mappings.table = {}  # a reload without the mapping: a plain topic again
        await side.request(send_cmd(b="ST", e="1"))
    assert [s.stored() for s in sides[1:]] == [sides[0].stored()]
    direct = sides[1]
    assert [m[0].queue_id for m in direct.stored()] == [1, 1]  # the refused one stored nothing
    frames = await direct.request(send_cmd(b="ST", e="5"))
    assert frames  # answered (plain topic again: queue 5 is over its 4 queues, refused)
    _make_static(direct, "broker-b")
    refused = await direct.request(send_cmd(b="ST", e="5"))
    assert b"not led" in refused[0] and len(direct.stored()) == 2


async def test_a_static_topic_led_here_goes_to_its_physical_queue(tmp_path: Path) -> None:
    side = Side(tmp_path, True)
    _make_static(side, "broker-a")
    frames = await side.request(send_cmd(b="ST", e="5"))
    ((msg,),) = side.stored()
    assert (msg.topic, msg.queue_id) == ("ST", 2)  # the item's physical queue
    decoder = FrameDecoder()
    decoder.feed(frames[0])
    answer = decoder.next_command()
    assert answer is not None and answer.ext_fields["queueId"] == "5"  # the logic queue
    assert answer.ext_fields["queueOffset"] == "117"  # 17 on queue 2 + the item's 100


async def test_the_direct_path_routes_what_the_processor_routes(tmp_path: Path) -> None:
    """Queue -1 is picked, a delay waits in its schedule queue, a retry past its maximum goes
    to the DLQ: `send_nowait` calls `_route` for each (not only the generic path's requests)."""
    side = Side(tmp_path, True)
    side.sender.groups.update(SubscriptionGroupConfig("G", retryMaxTimes=2))
    for _ in range(3):
        await side.request(send_cmd(e="-1"))
    await side.request(send_cmd(i="DELAY\x013\x02" + PROPS))
    await side.request(send_cmd(b="%RETRY%G", e="0", j="3"))
    stored = [(m.topic, m.queue_id) for (m,) in side.stored()]
    assert stored == [
        ("Orders", 1), ("Orders", 2), ("Orders", 3), ("SCHEDULE_TOPIC_XXXX", 2), ("%DLQ%G", 0),
    ]  # fmt: skip


async def test_the_direct_handler_takes_a_plain_send_without_the_generic_one(
    tmp_path: Path,
) -> None:
    """The common request does not reach the handler it folds (else there is nothing direct)."""
    side = Side(tmp_path, True)
    reached: list[int] = []
    plain = plain_send_handlers(side.sender.processor)

    def counting(ctx: RequestContext) -> Any:
        reached.append(ctx.cmd.opaque)
        return plain[V2](ctx)

    side.handler = static_send_handlers(side.mappings, side.sender.processor, {V2: counting})[V2]
    await side.request(send_cmd(opaque=1))
    await side.request(send_cmd(opaque=2, m="true"))  # a batch: the generic handler
    assert reached == [2] and len(side.stored()) == 2


async def test_the_frame_path_takes_a_plain_send_without_the_table_and_declines_when_stopping(
    tmp_path: Path,
) -> None:
    """The connection's direct path serves the common request itself (no RequestContext, no
    table handler); a stopping broker's request it declines untouched (the table answers)."""
    side = Side(tmp_path, True, True)
    reached: list[int] = []
    table_handler = side.handler

    def counting(ctx: RequestContext) -> Any:
        reached.append(ctx.cmd.opaque)
        return table_handler(ctx)

    side.handler = counting
    await side.request(send_cmd(opaque=1))
    await side.request(send_cmd(opaque=2, stype=SERIALIZE_JSON))
    assert reached == [] and len(side.stored()) == 2
    side.stopping = True
    await side.request(send_cmd(opaque=3))
    assert reached == [3] and len(side.stored()) == 3  # through the table (here not stopping)


def test_the_frame_path_is_installed_only_where_it_skips_nothing(tmp_path: Path) -> None:
    """Only over a `DirectSendHandler` (the send package's or the static wrapper's, no other
    wrapper in its place) and with no ACL gate."""
    side = Side(tmp_path, True)
    assert isinstance(side.handler, DirectSendHandler)  # the static wrapper's
    plain = {V2: DirectSendHandler(side.sender.processor, side.handler, None)}
    assert isinstance(direct_send_handlers(plain, gated=False, requests=side)[V2], DirectSend)
    assert direct_send_handlers({V2: side.handler}, gated=True, requests=side) == {}
    wrapped = {V2: plain_send_handlers(side.sender.processor)[V2]}
    assert direct_send_handlers(wrapped, gated=False, requests=side) == {}
    assert direct_send_handlers({}, gated=False, requests=side) == {}


@pytest.mark.parametrize(
    "status", [PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.SERVICE_NOT_AVAILABLE, PutStatus.PUT_OK]
)
@pytest.mark.parametrize("stype", [SERIALIZE_ROCKETMQ, SERIALIZE_JSON])
async def test_every_store_answer_is_the_same_bytes_all_three_ways(
    tmp_path: Path, status: PutStatus, stype: int
) -> None:
    """A put stored but not PUT_OK, or not stored, is answered as the generic path answers it
    (the frame path's `FrameAnswer` hands those to `SendAnswer`)."""
    out = []
    for direct, frame in ((False, False), (True, False), (True, True)):
        side = Side(tmp_path / f"{direct}{frame}", direct, frame)
        out.append(await side.request(send_cmd(stype=stype), status=status))
    assert out[0] and out[1] == out[0] and out[2] == out[0]
