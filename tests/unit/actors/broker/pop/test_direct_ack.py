"""ACK_MESSAGE's direct path (pop/direct_ack.py, the connection's `DirectHandler`) against the
generic path (the request table and handlers.py's ``ack_message``), on MockClock over memory
streams: for good and bad requests the two connections answer the same bytes at the same
moments (an ACK only once its record is stored). Only JSON headers: ACK_MESSAGE's code
(200051) does not fit the ROCKETMQ header's short code (`encode_command` refuses it, and a
ROCKETMQ frame cannot name it); the connection's other direct entry, from a decoded command,
is taken by a JSON ACK whose extFields hold numbers (the decoder declines it, the generic decode
makes them strings);
the direct path serves a plain ACK without the processor and declines (to the generic path,
untouched) what it does not take; it is installed only where the generic path adds nothing."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.dispatch.table import RequestTable
from rocketrio.actors.broker.pop.ack import PopAckProcessor
from rocketrio.actors.broker.pop.attempt import PopConfig
from rocketrio.actors.broker.pop.direct_ack import direct_handlers
from rocketrio.actors.broker.pop.handlers import pop_handlers
from rocketrio.actors.broker.store.messages import PutCallback
from rocketrio.actors.broker.store.queue_reader import NoStaticTopics, PlainQueues
from rocketrio.actors.kernel.remoting import Connection, RequestContext, ServerSide
from rocketrio.actors.kernel.server_limits import ServerLimits
from rocketrio.protocol.codes import RPC_ONEWAY, SERIALIZE_JSON, SERIALIZE_ROCKETMQ, RequestCode
from rocketrio.protocol.remoting import LocalProtocolError, RemotingCommand, encode_command
from rocketrio.storage.message_store import MessageToStore, PutResult

TOPIC, GROUP = "T", "G"
POP_TIME = 1_764_360_000_000
STORED = ([PutResult(0, 0, 0, "", 0)], PutStatus.PUT_OK, None)
REFUSED = ([], PutStatus.SERVICE_NOT_AVAILABLE, "stopped")


@attrs.define
class Topic:
    readQueueNums: int  # upstream's name, as TopicConfig has it


class Topics:
    def __init__(self) -> None:
        self.table = {TOPIC: Topic(4)}

    def select(self, topic: str) -> Topic | None:
        return self.table.get(topic)


class Queues:
    """Every queue of the topic holds [10, 20]; ``fail`` makes the read raise."""

    fail = False

    def queue_range(self, topic: str, queue_id: int, read_queue_nums: int) -> Any:
        if self.fail:
            raise OSError("the ConsumeQueue cannot be read")
        return (10, 20) if 0 <= queue_id < read_queue_nums else None

    def plain_queues(self) -> PlainQueues:
        return PlainQueues(NoStaticTopics(), Live(self))  # type: ignore[arg-type]


@attrs.frozen
class Span:
    min_offset: int
    max_offset: int


class Live(Mapping[tuple[str, int], Span]):
    """The store's live table of queues as the direct path reads it: [10, 20] each, or a read
    that raises (``fail``)."""

    def __init__(self, queues: Queues) -> None:
        self.queues = queues

    def __getitem__(self, key: tuple[str, int]) -> Span:
        if self.queues.fail:
            raise OSError("the ConsumeQueue cannot be read")
        if key[0] != TOPIC:
            raise KeyError(key)
        return Span(10, 20)

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter([])

    def __len__(self) -> int:
        return 0


class FakeWriter:
    def __init__(self) -> None:
        self.puts: list[PutCallback] = []

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        self.puts.append(on_done)

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        self.puts.append(on_done)


@attrs.define
class Side:
    """One server connection (direct path or not) over a memory stream, its store and table."""

    client: Any
    writer: FakeWriter
    queues: Queues
    acks: PopAckProcessor
    table: RequestTable
    processed: list[int] = attrs.field(factory=list)


def make_acks(writer: FakeWriter, queues: Queues) -> PopAckProcessor:
    return PopAckProcessor(
        PopConfig("b", "C", 6, "127.0.0.1", revive_queue_num=2),
        topics=Topics(),  # type: ignore[arg-type]
        order=None,  # type: ignore[arg-type]  # no ordered receipt here
        store=queues,  # type: ignore[arg-type]
        writer=writer,  # type: ignore[arg-type]
        now_ms=lambda: POP_TIME + 5,
        store_host=(b"\x7f\0\0\1", 10911),
        next_revive_qid=lambda: 0,
    )


async def start_side(nursery: trio.Nursery, *, direct: bool, batcher: bool = True) -> Side:
    writer, queues = FakeWriter(), Queues()
    acks = make_acks(writer, queues)
    handlers = pop_handlers(None, acks, None)  # type: ignore[arg-type]  # only the ACK's
    table = RequestTable("b", {RequestCode.ACK_MESSAGE: handlers[RequestCode.ACK_MESSAGE]})
    client, server = trio.testing.memory_stream_pair()
    side = Side(client, writer, queues, acks, table)

    def counted(ctx: RequestContext) -> Any:
        side.processed.append(ctx.cmd.code)
        return table.process_nowait(ctx)

    paths = None
    if direct:
        paths = direct_handlers(
            acks, table.handlers, table.handlers[RequestCode.ACK_MESSAGE],
            gated=False, requests=table,
        )  # fmt: skip
        assert set(paths) == {RequestCode.ACK_MESSAGE}
    conn = Connection(server, counted, server=ServerSide(ServerLimits(), None, paths))
    if batcher:
        await nursery.start(acks.batcher.run)
    nursery.start_soon(conn.run)
    return side


async def received(side: Side) -> bytes:
    out = b""
    while True:
        with trio.move_on_after(0.01):
            data = await side.client.receive_some(1 << 16)
            out += data
            continue
        return out


def receipt(offset: int, revive_qid: int = 1) -> str:
    return f"10 {POP_TIME} 60000 {revive_qid} 0 b 0 {offset}"


def ack_ext(at: int = 12, **kw: Any) -> dict[str, Any]:
    ext = {
        "consumerGroup": GROUP,
        "topic": TOPIC,
        "queueId": "0",
        "extraInfo": receipt(at),
        "offset": str(at),
    }
    ext.update(kw)
    return {k: v for k, v in ext.items() if v is not None}


def frame(ext: dict[str, Any], st: int, opaque: int, flag: int = 0) -> bytes:
    cmd = RemotingCommand(
        RequestCode.ACK_MESSAGE, opaque=opaque, flag=flag, ext_fields=ext, serialize_type=st
    )
    return encode_command(cmd)


# (name, extFields, flag, what the store answers, set-up) per request; each both ways
CASES: list[tuple[str, dict[str, Any], int, Any, str]] = [
    ("stored", ack_ext(12), 0, STORED, ""),
    ("store refused", ack_ext(13), 0, REFUSED, ""),
    ("not a receipt", ack_ext(12, extraInfo="nonsense"), 0, STORED, ""),
    ("no revive queue", ack_ext(12, extraInfo=receipt(12, revive_qid=7)), 0, STORED, ""),
    ("unknown topic", ack_ext(12, topic="nope"), 0, STORED, ""),
    ("a queue the topic lacks", ack_ext(12, queueId="9"), 0, STORED, ""),
    ("offset above max", ack_ext(21), 0, STORED, ""),
    ("offset below min", ack_ext(9), 0, STORED, ""),
    ("a field missing", ack_ext(12, offset=None), 0, STORED, ""),
    ("a number that is not one", ack_ext(12, queueId="x"), 0, STORED, ""),
    ("oneway", ack_ext(14), RPC_ONEWAY, STORED, ""),
    ("numbers as JSON numbers", ack_ext(12, queueId=0, offset=12), 0, STORED, ""),
    ("a number as JSON true", ack_ext(12, queueId=True), 0, STORED, ""),
    ("the read raises", ack_ext(12), 0, STORED, "fail"),
    ("stopping", ack_ext(12), 0, STORED, "stopping"),
    ("batcher stopped: put alone, stored", ack_ext(15), 0, STORED, "no batcher"),
    ("batcher stopped: put alone, refused", ack_ext(16), 0, REFUSED, "no batcher"),
]


def test_an_ack_message_cannot_be_a_rocketmq_frame() -> None:
    with pytest.raises(LocalProtocolError):
        frame(ack_ext(12), SERIALIZE_ROCKETMQ, opaque=1)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
async def test_the_direct_path_answers_the_generic_paths_bytes(
    mock_clock: trio.testing.MockClock, case: tuple[str, dict[str, Any], int, Any, str]
) -> None:
    st = SERIALIZE_JSON
    _, ext, flag, store_answer, setup = case
    async with trio.open_nursery() as n:
        sides = [
            await start_side(n, direct=d, batcher=setup != "no batcher") for d in (False, True)
        ]
        for side in sides:
            side.queues.fail = setup == "fail"
            side.table.stopping = setup == "stopping"
            await side.client.send_all(frame(ext, st, opaque=4242, flag=flag))
        await trio.testing.wait_all_tasks_blocked()
        before = [await received(s) for s in sides]
        assert before[0] == before[1]
        assert [len(s.writer.puts) for s in sides] in ([0, 0], [1, 1])
        if sides[0].writer.puts:
            assert before == [b"", b""]  # handed to the store: not answered before it answers
            for side in sides:
                side.writer.puts.pop()(*store_answer)
            await trio.testing.wait_all_tasks_blocked()
        after = [await received(s) for s in sides]
        assert after[0] == after[1]
        assert (before[0] + after[0] == b"") == (flag == RPC_ONEWAY)
        n.cancel_scope.cancel()


async def test_a_plain_ack_skips_the_processor_and_a_declined_one_reaches_it(
    mock_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as n:
        side = await start_side(n, direct=True)
        st = SERIALIZE_JSON
        await side.client.send_all(frame(ack_ext(12), st, opaque=1))
        await side.client.send_all(frame(ack_ext(13, queueId=0, offset=13), st, opaque=2))
        await trio.testing.wait_all_tasks_blocked()
        assert side.processed == []  # served from the frame, then from the decoded command
        await side.client.send_all(frame(ack_ext(12, offset=None), st, opaque=3))
        await trio.testing.wait_all_tasks_blocked()
        assert side.processed == [RequestCode.ACK_MESSAGE]  # declined: the generic way
        n.cancel_scope.cancel()


def test_installed_only_where_the_generic_path_adds_nothing() -> None:
    acks = make_acks(FakeWriter(), Queues())
    ack = pop_handlers(None, acks, None)[RequestCode.ACK_MESSAGE]  # type: ignore[arg-type]
    table = {RequestCode.ACK_MESSAGE: ack}
    plain = direct_handlers(acks, table, ack, gated=False, requests=RequestTable("b", {}))
    assert set(plain) == {RequestCode.ACK_MESSAGE}
    assert direct_handlers(acks, table, ack, gated=True, requests=RequestTable("b", {})) == {}
    wrapped = {RequestCode.ACK_MESSAGE: lambda ctx: ack(ctx)}
    assert direct_handlers(acks, wrapped, ack, gated=False, requests=RequestTable("b", {})) == {}
    # answers timed (rocketmq_rpc_latency): the connection takes no direct path
    assert ServerSide(ServerLimits(), object(), plain).direct is None  # type: ignore[arg-type]
    assert ServerSide(ServerLimits(), None, plain).direct is plain


@pytest.mark.parametrize("store_answer", [STORED, REFUSED], ids=["stored", "refused"])
async def test_a_turns_acks_are_answered_as_the_generic_path_answers_them(
    mock_clock: trio.testing.MockClock, store_answer: Any
) -> None:
    """Several ACKs of one connection in one turn (one put): the same bytes as the generic
    path's answers, once the put is answered."""
    st = SERIALIZE_JSON
    frames = b"".join(frame(ack_ext(at), st, opaque=900 + at) for at in range(11, 18))
    async with trio.open_nursery() as n:
        sides = [await start_side(n, direct=d) for d in (False, True)]
        for side in sides:
            await side.client.send_all(frames)
        await trio.testing.wait_all_tasks_blocked()
        assert [await received(s) for s in sides] == [b"", b""]
        assert [len(s.writer.puts) for s in sides] == [1, 1]
        for side in sides:
            side.writer.puts.pop()(*store_answer)
        await trio.testing.wait_all_tasks_blocked()
        after = [await received(s) for s in sides]
        assert after[0] == after[1] and after[0].count(b'"opaque":9') == 7
        n.cancel_scope.cancel()
