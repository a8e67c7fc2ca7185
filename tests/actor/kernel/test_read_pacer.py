"""The read pacer (actors/kernel/read_pacer.py): a server's reader that dispatched work to an
actor between turns waits until the actor takes it, so that turn (and its answers) comes
before the connection's next read; an actor in a turn holds no reader; several connections share
each turn and none reads twice while the others wait; a stalled actor stops the reader after one
read, and a stopped actor releases it.

The stream here behaves as Trio's socket stream does: ``receive_some`` takes the bytes at once
and only then yields, so a reader that loops straight into its next read takes the next bytes
before an actor it woke has run (the order the pacer exists to change)."""

from __future__ import annotations

from collections import deque

import trio
import trio.testing

from rocketrio.actors.kernel.read_pacer import TakeSignal
from rocketrio.actors.kernel.remoting import Connection, RequestContext, ServerSide
from rocketrio.actors.kernel.server_limits import ServerLimits
from rocketrio.protocol.remoting import RemotingCommand, encode_command


class ChunkStream(trio.abc.Stream):
    """Hands out preloaded chunks, one per read, taking each before it yields (as a socket's
    non-blocking recv does); then waits forever. Notes each read in the shared ``log``."""

    def __init__(self, name: str, chunks: list[bytes], log: list[tuple[str, object]]) -> None:
        self.name = name
        self.chunks = deque(chunks)
        self.log = log
        self.sent = b""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if not self.chunks:
            await trio.sleep_forever()
        data = self.chunks.popleft()
        self.log.append(("read", self.name))
        await trio.lowlevel.cancel_shielded_checkpoint()
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.sent += bytes(data)

    async def wait_send_all_might_not_block(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


class FakeActor:
    """An actor with a bounded inbox that answers each turn's requests as the turn ends; with
    ``hold`` set, a turn waits on ``release`` after taking its batch (a SYNC_FLUSH fsync)."""

    def __init__(self, log: list[tuple[str, object]], capacity: int = 64) -> None:
        self.signal = TakeSignal()
        self.log = log
        self.send, self.recv = trio.open_memory_channel[RequestContext](capacity)
        self.hold = False
        self.release = trio.Event()

    def process(self, ctx: RequestContext) -> None:
        self.send.send_nowait(ctx)
        self.signal.untaken = True

    async def run(self) -> None:
        try:
            while True:
                batch = [await self.recv.receive()]
                while True:
                    try:
                        batch.append(self.recv.receive_nowait())
                    except trio.WouldBlock:
                        break
                self.signal.took()
                self.log.append(("turn", sorted(c.cmd.opaque for c in batch)))
                if self.hold:
                    await self.release.wait()
                for ctx in batch:
                    ctx.respond(ctx.cmd.make_response(0))
                self.signal.idle()
        finally:
            self.signal.close()


def _chunk(*opaques: int) -> bytes:
    return b"".join(encode_command(RemotingCommand(code=10, opaque=o)) for o in opaques)


def _conn(stream: ChunkStream, actor: FakeActor, *, paced: bool = True) -> Connection:
    side = ServerSide(ServerLimits(), pacer=actor.signal if paced else None)
    return Connection(stream, actor.process, remote=stream.name, server=side)


def test_the_signal_is_pending_between_queueing_and_the_take_and_never_in_a_turn() -> None:
    s = TakeSignal()
    assert not s.pending()
    s.untaken = True
    assert s.pending()
    s.took()
    assert not s.pending() and s.busy
    s.untaken = True  # queued during the turn (a SYNC_FLUSH fsync): no reader held
    assert not s.pending()
    s.idle()
    assert s.pending()  # the next take is owed
    s.close()
    assert not s.pending()  # a stopped actor holds nobody
    s.untaken = True
    assert not s.pending()


async def test_the_turn_of_a_read_runs_before_the_next_read(
    mock_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, object]] = []
    actor = FakeActor(log)
    stream = ChunkStream("a", [_chunk(1, 2), _chunk(3, 4), _chunk(5)], log)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.run)
        nursery.start_soon(_conn(stream, actor).run)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert log == [
        ("read", "a"),
        ("turn", [1, 2]),
        ("read", "a"),
        ("turn", [3, 4]),
        ("read", "a"),
        ("turn", [5]),
    ]
    assert stream.sent.count(b'"code":0') == 5  # every request answered


async def test_unpaced_the_reader_takes_the_next_read_before_the_turn(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The order the pacer changes (and proof that the stream above reproduces it)."""
    log: list[tuple[str, object]] = []
    actor = FakeActor(log)
    stream = ChunkStream("a", [_chunk(1, 2), _chunk(3, 4)], log)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.run)
        nursery.start_soon(_conn(stream, actor, paced=False).run)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert log[:2] == [("read", "a"), ("read", "a")]


async def test_an_actor_in_a_turn_holds_no_reader(mock_clock: trio.testing.MockClock) -> None:
    log: list[tuple[str, object]] = []
    actor = FakeActor(log)
    actor.hold = True  # the first turn waits (an fsync) until released
    stream = ChunkStream("a", [_chunk(1), _chunk(2), _chunk(3)], log)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.run)
        nursery.start_soon(_conn(stream, actor).run)
        await trio.testing.wait_all_tasks_blocked()
        # the reader read on during the turn: what it read is the next turn's batch
        assert log == [("read", "a"), ("turn", [1]), ("read", "a"), ("read", "a")]
        actor.hold = False
        actor.release.set()
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert log[4:] == [("turn", [2, 3])]  # group commit: one turn for both


async def test_connections_share_each_turn_and_none_reads_twice_while_others_wait(
    mock_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, object]] = []
    actor = FakeActor(log)
    busy = ChunkStream("busy", [_chunk(100 + i) for i in range(40)], log)
    light = ChunkStream("light", [_chunk(i) for i in range(5)], log)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.run)
        nursery.start_soon(_conn(busy, actor).run)
        nursery.start_soon(_conn(light, actor).run)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    # between two turns each connection reads at most once: the busy one cannot take the
    # store's turns (nor the other connection's reads) for itself
    since_turn: set[str] = set()
    for kind, what in log:
        if kind == "turn":
            since_turn.clear()
        else:
            assert what not in since_turn, log
            since_turn.add(str(what))
    reads = [what for kind, what in log if kind == "read"]
    last_light = max(i for i, w in enumerate(reads) if w == "light")
    assert reads[: last_light + 1].count("busy") <= 6  # light's 5 reads came along
    assert busy.sent.count(b'"code":0') == 40 and light.sent.count(b'"code":0') == 5


async def test_a_stalled_actor_stops_the_reader_and_a_stopped_one_releases_it(
    mock_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, object]] = []
    actor = FakeActor(log)  # not running: takes nothing
    stream = ChunkStream("a", [_chunk(1), _chunk(2), _chunk(3)], log)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_conn(stream, actor).run)
        await trio.testing.wait_all_tasks_blocked()
        assert log == [("read", "a")]  # the reader waits for the take: no more input in
        actor.signal.close()  # the actor stopped: its readers must not wait forever
        await trio.testing.wait_all_tasks_blocked()
        assert log == [("read", "a")] * 3
        nursery.cancel_scope.cancel()
