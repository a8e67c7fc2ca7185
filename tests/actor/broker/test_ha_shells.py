"""The HA shells (master service, slave client, group transfer) on the simulated network under
MockClock, with an in-memory store standing in for the store actor (the real store is tested
in test_ha_replication.py). Checks byte-identical replication with epochs, acks gated on the
SyncStateSet, shrink on disconnect through the controller, truncation of a divergent slave;
and the master's inline shipping (a turn's bytes sent from the turn itself, through a stream
with a non-blocking send that may take a part or nothing); the slave's read path (a read's
packets reach its core as merged runs, read through `bulk_receiver`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.ha import slave_client
from rocketrio.actors.broker.ha.group_transfer import (
    AckOutcome,
    AlterAccepted,
    AlterResult,
    GroupTransferService,
)
from rocketrio.actors.broker.ha.master_service import HAMasterService, nowait_sender
from rocketrio.actors.broker.ha.ports import Watermark
from rocketrio.actors.broker.ha.slave_client import HAClient, _merge_appends
from rocketrio.actors.broker.ha.slave_core import (
    Append,
    Confirm,
    RecordEpoch,
    SendBytes,
    SlaveCore,
    whole_records_length,
)
from rocketrio.actors.broker.ha.sync_state import AckPolicy, SyncStateCore
from rocketrio.actors.broker.ha.truncation import TruncateTo, TruncationPlan
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.kernel.stream_read import bulk_receiver
from rocketrio.actors.kernel.transport import Handler, Transport
from rocketrio.protocol.ha import Transfer
from rocketrio.protocol.message import BLANK_MAGIC_CODE, append_record
from rocketrio.storage.epoch_file import EpochRecord
from tests.harness.sim_network import SimNetwork, SimStream

SEG = 8192
MASTER, SLAVE = "10.0.0.1", "10.0.0.2"


class FakeStore:
    """Both store ports over a bytearray (whole records only, like the real store)."""

    def __init__(self, epochs: Sequence[EpochRecord] = ()) -> None:
        self.log = bytearray()
        self.epochs = list(epochs)
        self.written = Watermark(0)
        self.confirm = 0
        self.segment_size = SEG
        self.truncations: list[TruncationPlan] = []

    # master port
    def log_min_offset(self) -> int:
        return 0

    def log_end_offset(self) -> int:
        return len(self.log)

    def read_commitlog(self, offset: int, size: int) -> bytes:
        return bytes(self.log[offset : offset + size])

    def epoch_records(self) -> Sequence[EpochRecord]:
        return list(self.epochs)

    def confirm_offset(self) -> int:
        return self.confirm

    def write(self, n: int, rng: random.Random) -> int:
        for _ in range(n):
            body = rng.randbytes(rng.randint(1, 200))
            rec = _record(body, len(self.log))
            room = SEG - len(self.log) % SEG
            if len(rec) + 8 > room:
                self.log += room.to_bytes(4, "big")
                self.log += BLANK_MAGIC_CODE.to_bytes(4, "big", signed=True) + bytes(room - 8)
                rec = _record(body, len(self.log))
            self.log += rec
        self.written.advance(len(self.log))
        return len(self.log)

    # slave port
    async def truncate(self, plan: TruncationPlan) -> tuple[int, int, EpochRecord | None]:
        await trio.sleep(0.001)
        self.truncations.append(plan)
        cut = plan.offset if isinstance(plan, TruncateTo) else 0
        del self.log[cut:]
        self.epochs = [r for r in self.epochs if r.start_offset < cut]
        self.confirm = min(self.confirm, cut)
        return 0, len(self.log), self.epochs[-1] if self.epochs else None

    async def reset_log_at(self, offset: int, reason: str) -> None:
        raise AssertionError(f"unexpected reset to {offset}: {reason}")

    async def record_epoch(self, epoch: int, start_offset: int) -> None:
        await trio.sleep(0.001)
        self.epochs.append(EpochRecord(epoch, start_offset))

    async def append_replicated(self, offset: int, data: bytes, confirm: int = -1) -> int:
        await trio.sleep(0.0005)
        if offset != len(self.log) or whole_records_length(data, offset, SEG) != len(data):
            raise ValueError(f"bad append at {offset}")
        self.log += data
        self.written.advance(len(self.log))
        if confirm >= 0:
            self.request_confirm(confirm)
        return len(self.log)

    def request_confirm(self, offset: int) -> None:
        self.confirm = max(self.confirm, offset)


def _record(body: bytes, offset: int) -> bytes:
    parts: list = []
    ip = b"\x7f\x00\x00\x01"
    append_record(parts, "T", 0, body, 0, b"", 0, 0, (ip, 1), 0, (ip, 2), 0, 0, 0, offset)
    return b"".join(parts)


class ShellGroup:
    def __init__(
        self,
        nursery: trio.Nursery,
        net: SimNetwork,
        master: FakeStore,
        master_transport: Transport | None = None,
    ) -> None:
        self.nursery = nursery
        self.net = net
        self.master = master
        self.master_transport = master_transport or net.transport(MASTER)
        self.alters: list[tuple[frozenset[int], int]] = []
        self.controller_set = frozenset({1})
        self.controller_epoch = 1

    async def alter(self, members: frozenset[int], base_epoch: int) -> AlterResult:
        await trio.sleep(0.002)
        self.alters.append((members, base_epoch))
        self.controller_set, self.controller_epoch = members, base_epoch + 1
        return AlterAccepted(members, base_epoch + 1)

    async def start_master(self, policy: AckPolicy) -> tuple[HAMasterService, GroupTransferService]:
        store = self.master
        core: SyncStateCore = SyncStateCore(
            1, policy, max_time_not_catchup_ms=15_000, sync_state_set={1},
            sync_state_set_epoch=1, epoch_start_offset=0, local_max=len(store.log),
            confirm_offset=len(store.log), now_ms=int(trio.current_time() * 1000),
        )  # fmt: skip
        gate = GroupTransferService(
            core, sync_timeout_ms=3000, check_period_ms=1000, alter=self.alter,
            on_confirm=lambda c: setattr(store, "confirm", c),
        )  # fmt: skip
        service = HAMasterService(
            self.master_transport, f"{MASTER}:10912", store, segment_size=SEG,
            batch_size=1000, heartbeat_interval_ms=500, housekeeping_interval_ms=3000,
        )  # fmt: skip
        await self.nursery.start(service.run)
        await self.nursery.start(gate.run)
        service.activate(gate, 1)
        return service, gate

    def start_slave(self, store: FakeStore, expected_epoch: int = 1) -> trio.CancelScope:
        client = HAClient(
            self.net.transport(SLAVE), store, f"{MASTER}:10912", broker_id=2,
            expected_epoch=expected_epoch, async_learner=False, sync_from_last_file=False,
            heartbeat_interval_ms=500, housekeeping_interval_ms=3000, rng=random.Random(1),
        )  # fmt: skip
        scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                await client.run()

        self.nursery.start_soon(run)
        self.client = client
        return scope


async def wait_for(cond, timeout: float = 10.0) -> None:
    with trio.fail_after(timeout):
        while not cond():
            await trio.sleep(0.01)


async def test_slave_catches_up_joins_the_set_and_acks_gate_writes(mock_clock) -> None:
    rng = random.Random(7)
    master = FakeStore([EpochRecord(1, 0)])
    master.write(50, rng)
    async with trio.open_nursery() as nursery:
        c = ShellGroup(nursery, SimNetwork(1), master)
        _service, gate = await c.start_master(AckPolicy(all_ack_in_sync_state_set=True))
        slave = FakeStore()
        c.start_slave(slave)
        await wait_for(lambda: bytes(slave.log) == bytes(master.log))
        assert slave.epochs == [EpochRecord(1, 0)]
        await wait_for(lambda: c.controller_set == {1, 2})  # expanded through the "controller"
        assert gate.core.applied == {1, 2}
        # from now on a write is acked only once the slave holds it
        outcomes: list[AckOutcome] = []
        end = master.write(5, rng)
        gate.on_local_max(end)
        gate.submit(end, outcomes.append)
        assert outcomes == []
        await wait_for(lambda: outcomes == [AckOutcome.ACKED])
        assert len(slave.log) >= end
        await wait_for(lambda: slave.confirm == end)
        nursery.cancel_scope.cancel()


class ConfirmOrderStore(FakeStore):
    """A slave store that notes, at each confirmOffset request, what the HA client had acked
    and what the log held."""

    def __init__(self) -> None:
        super().__init__()
        self.client: HAClient | None = None
        self.confirms: list[tuple[int, int, int]] = []  # (confirm, acked, log end)

    def request_confirm(self, offset: int) -> None:
        assert self.client is not None
        self.confirms.append((offset, self.client.core.acked, len(self.log)))
        super().request_confirm(offset)


async def test_a_slave_acks_an_append_before_it_asks_for_its_dispatch(mock_clock) -> None:
    """The confirmOffset a transfer carries reaches the store only after the append's ack
    went out: the store's dispatch up to it is off the master's round trip."""
    rng = random.Random(17)
    master = FakeStore([EpochRecord(1, 0)])
    master.write(30, rng)
    async with trio.open_nursery() as nursery:
        c = ShellGroup(nursery, SimNetwork(17), master)
        _service, gate = await c.start_master(AckPolicy(all_ack_in_sync_state_set=True))
        slave = ConfirmOrderStore()
        c.start_slave(slave)
        slave.client = c.client
        await wait_for(lambda: c.controller_set == {1, 2})
        for _ in range(5):
            end = master.write(10, rng)
            gate.on_local_max(end)
            gate.submit(end, lambda _o: None)
            await wait_for(lambda: len(slave.log) == len(master.log))
        await wait_for(lambda: slave.confirm == len(master.log))
        assert len(slave.confirms) >= 5
        assert all(acked == end for _c, acked, end in slave.confirms), slave.confirms
        nursery.cancel_scope.cancel()


async def test_a_disconnected_slave_is_shrunk_away_before_writes_proceed(mock_clock) -> None:
    rng = random.Random(8)
    master = FakeStore([EpochRecord(1, 0)])
    master.write(10, rng)
    async with trio.open_nursery() as nursery:
        net = SimNetwork(2)
        c = ShellGroup(nursery, net, master)
        _service, gate = await c.start_master(AckPolicy(all_ack_in_sync_state_set=True))
        slave = FakeStore()
        scope = c.start_slave(slave)
        await wait_for(lambda: c.controller_set == {1, 2})
        scope.cancel()
        net.cut(MASTER, SLAVE)
        outcomes: list[tuple[AckOutcome, frozenset[int]]] = []
        end = master.write(3, rng)
        gate.on_local_max(end)
        gate.submit(end, lambda o: outcomes.append((o, c.controller_set)))
        await wait_for(lambda: bool(outcomes), timeout=2)
        # acked, and only once the controller's set no longer held the slave that lacks it
        assert outcomes == [(AckOutcome.ACKED, frozenset({1}))]
        nursery.cancel_scope.cancel()


async def test_a_slave_ahead_in_the_old_epoch_truncates_then_follows(mock_clock) -> None:
    rng = random.Random(9)
    master = FakeStore([EpochRecord(1, 0)])
    shared = master.write(20, rng)
    slave = FakeStore([EpochRecord(1, 0)])
    slave.log = bytearray(master.log)
    slave.write(5, random.Random(99))  # records the master never had (lost in a failover)
    master.epochs.append(EpochRecord(2, shared))
    master.write(7, rng)
    async with trio.open_nursery() as nursery:
        c = ShellGroup(nursery, SimNetwork(3), master)
        await c.start_master(AckPolicy())
        c.start_slave(slave, expected_epoch=2)
        await wait_for(lambda: bytes(slave.log) == bytes(master.log))
        assert slave.truncations == [TruncateTo(shared, 1)]
        assert slave.epochs == [EpochRecord(1, 0), EpochRecord(2, shared)]
        nursery.cancel_scope.cancel()


async def test_a_slave_refuses_a_master_of_another_epoch(mock_clock) -> None:
    master = FakeStore([EpochRecord(1, 0)])
    master.write(5, random.Random(1))
    async with trio.open_nursery() as nursery:
        c = ShellGroup(nursery, SimNetwork(4), master)
        await c.start_master(AckPolicy())
        slave = FakeStore([EpochRecord(1, 0)])
        slave.log = bytearray(master.log[:100])  # junk it would cut if it followed
        c.start_slave(slave, expected_epoch=3)
        await trio.sleep(3)
        assert slave.truncations == [] and len(slave.log) == 100
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("seed", range(5))
async def test_replication_under_delays_and_cuts_converges(mock_clock, seed: int) -> None:
    rng = random.Random(seed)
    master = FakeStore([EpochRecord(1, 0)])
    async with trio.open_nursery() as nursery:
        net = SimNetwork(seed)
        c = ShellGroup(nursery, net, master)
        _service, gate = await c.start_master(AckPolicy())
        slave = FakeStore()
        c.start_slave(slave)
        outcomes: list[AckOutcome] = []
        for _ in range(40):
            end = master.write(rng.randint(1, 8), rng)
            gate.on_local_max(end)
            gate.submit(end, outcomes.append)
            if rng.random() < 0.1:
                net.cut(MASTER, SLAVE)
            if rng.random() < 0.2:
                net.set_delay(MASTER, SLAVE, rng.random() * 0.05)
            await trio.sleep(rng.random() * 0.05)
        net.heal()
        await wait_for(lambda: bytes(slave.log) == bytes(master.log), timeout=30)
        await wait_for(lambda: len(outcomes) == 40, timeout=30)
        assert AckOutcome.NOT_MASTER not in outcomes
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("actions", "merged"),
    [
        # one read's transfers: one append (one store turn, one ack), the confirm riding on it
        (
            [Append(0, b"ab"), Confirm(1), Append(2, b"cd"), Confirm(3)],
            [Append(0, b"abcd", 3)],
        ),
        # an epoch record splits the appends; the confirm rides on the last one
        (
            [Append(0, b"ab"), RecordEpoch(2, 2), Append(2, b"cd"), Confirm(4)],
            [Append(0, b"ab"), RecordEpoch(2, 2), Append(2, b"cd", 4)],
        ),
        # a confirm with no data after it (a heartbeat) stays on its own
        (
            [Append(0, b"ab"), SendBytes(b"x"), Confirm(2)],
            [Append(0, b"ab"), SendBytes(b"x"), Confirm(2)],
        ),
        ([Confirm(7)], [Confirm(7)]),
        ([Append(0, b"ab")], [Append(0, b"ab")]),
    ],
)
def test_merge_appends_joins_a_reads_appends_and_carries_the_confirm(actions, merged) -> None:
    assert _merge_appends(actions) == merged


async def test_ha_clock_reads_back_the_millisecond_a_timer_slept_until(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The HA timers (group transfer deadlines, slave and master heartbeats) sleep until
    ``deadline_ms / 1000`` and then compare ``monotonic_ms()`` with the deadline: it must read
    the same millisecond back, or the timer sees its deadline unreached and spins with the mock
    clock standing still (found by the cluster simulation, seed 1)."""
    for ms in (1001, 1003, 4097, 123_457, 999_999):
        await trio.sleep_until(ms / 1000)
        assert monotonic_ms() == ms


# ---------------------------------------------------------------------- shipping inline


class NowaitStream(trio.abc.Stream):
    """A simulated stream with a non-blocking send that takes what ``take(len)`` allows (all,
    a part, or nothing, as a socket with a full buffer would); sends are logged."""

    def __init__(self, inner: SimStream, take: Callable[[int], int]) -> None:
        self.inner, self.take = inner, take
        self.remote_host = inner.remote_host
        self.nowait_sends: list[tuple[int, int]] = []  # (offered, taken)

    def send_nowait(self, buffers: list[bytes | memoryview]) -> int:
        data = b"".join(buffers)
        n = self.take(len(data))
        self.nowait_sends.append((len(data), n))
        if n:
            tx, net = self.inner._tx, self.inner._net
            if tx.broken or tx.closed:
                raise OSError("connection reset (simulated)")
            at = max(trio.current_time() + net.delay(MASTER, SLAVE), tx.last_at)
            tx.last_at = at
            tx.chunks.append((at, bytes(data[:n])))
            tx.queued += n
            tx.lot.unpark_all()
        return n

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return await self.inner.receive_some(max_bytes)

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


class NowaitTransport(Transport):
    """The master's side of a SimNetwork, its accepted streams wrapped in `NowaitStream`."""

    def __init__(self, net: SimNetwork, take: Callable[[int], int]) -> None:
        self.inner, self.take = net.transport(MASTER), take
        self.streams: list[NowaitStream] = []

    async def serve(
        self, addr: str, handler: Handler, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        async def wrapped(stream: trio.abc.Stream) -> None:
            assert isinstance(stream, SimStream)
            ours = NowaitStream(stream, self.take)
            self.streams.append(ours)
            await handler(ours)

        await self.inner.serve(addr, wrapped, task_status=task_status)

    async def connect(self, addr: str) -> trio.abc.Stream:
        return await self.inner.connect(addr)


async def _in_sync(c: ShellGroup, slave: FakeStore) -> tuple[HAMasterService, GroupTransferService]:
    service, gate = await c.start_master(AckPolicy(all_ack_in_sync_state_set=True))
    c.start_slave(slave)
    await wait_for(lambda: c.controller_set == {1, 2})
    await wait_for(lambda: bytes(slave.log) == bytes(c.master.log))
    return service, gate


async def test_a_turn_is_on_the_wire_before_the_store_turn_yields(mock_clock) -> None:
    """The advance of `written` ships the turn's bytes itself: they are queued on the socket
    before the turn reaches a checkpoint, and the writer task is not even woken for them."""
    rng = random.Random(21)
    master = FakeStore([EpochRecord(1, 0)])
    master.write(10, rng)
    async with trio.open_nursery() as nursery:
        net = SimNetwork(21)
        transport = NowaitTransport(net, lambda n: n)
        c = ShellGroup(nursery, net, master, transport)
        service, gate = await _in_sync(c, FakeStore())
        stream = transport.streams[-1]
        (conn,) = service._conns.values()
        conn.inline_bursts = 0
        outcomes: list[AckOutcome] = []
        for i in range(5):
            before = len(stream.inner._tx.chunks)
            start = len(master.log)
            end = master.write(4, rng)  # no checkpoint from here ...
            queued = b"".join(d for _at, d in list(stream.inner._tx.chunks)[before:])
            # ... and the turn is on the wire: headers (one per 1000 bytes) and its bytes
            assert conn.core.next_offset == end and conn.inline_bursts == i + 1
            assert master.written.woke is False  # the writer task was not woken for it
            assert len(queued) == stream.nowait_sends[-1][1] > end - start
            assert queued.endswith(bytes(master.log[end - (end - start) % 1000 : end]))
            gate.on_local_max(end)
            gate.submit(end, outcomes.append)
            assert len(outcomes) == i  # shipped, not acknowledged before the slave acks
            await wait_for(lambda i=i: len(outcomes) == i + 1)
        assert outcomes == [AckOutcome.ACKED] * 5
        assert c.client.sessions == 1
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("seed", range(6))
async def test_partial_and_refused_inline_sends_keep_the_stream_in_order(
    mock_clock, seed: int
) -> None:
    """The socket takes all, a part or nothing of each inline send, while the writer task
    writes too: the slave reads one ordered stream (one session, no protocol error), ends
    byte-identical, and every write is acknowledged in order."""
    rng = random.Random(seed)
    master = FakeStore([EpochRecord(1, 0)])
    master.write(5, rng)
    sizes = random.Random(seed + 100)

    def take(n: int) -> int:
        return sizes.choice([n, n, 0, sizes.randint(1, max(1, n - 1)), min(n, 7)])

    async with trio.open_nursery() as nursery:
        net = SimNetwork(seed)
        transport = NowaitTransport(net, take)
        c = ShellGroup(nursery, net, master, transport)
        _service, gate = await _in_sync(c, FakeStore())
        slave = c.client.store
        outcomes: list[int] = []
        for i in range(60):
            end = master.write(rng.randint(1, 6), rng)
            gate.on_local_max(end)
            gate.submit(end, lambda o, i=i: outcomes.append(i if o is AckOutcome.ACKED else -1))
            await trio.sleep(rng.choice([0, 0, 0.0001, 0.002]))
        await wait_for(lambda: len(outcomes) == 60)
        assert outcomes == list(range(60))
        assert bytes(slave.log) == bytes(master.log)
        assert c.client.sessions == 1
        offered = transport.streams[-1].nowait_sends
        assert any(0 < t < o for o, t in offered) and any(t == 0 for _o, t in offered)
        nursery.cancel_scope.cancel()


class StallingStore(FakeStore):
    """A slave store whose appends wait while ``stall`` is set (a slave that stops acking)."""

    def __init__(self) -> None:
        super().__init__()
        self.stall = False
        self.resume = trio.Event()

    async def append_replicated(self, offset: int, data: bytes, confirm: int = -1) -> int:
        while self.stall:
            await self.resume.wait()
        return await super().append_replicated(offset, data, confirm)


async def test_answers_wait_for_the_in_sync_offset_and_a_silent_slave_holds_them(
    mock_clock,
) -> None:
    """A write shipped inline is answered only once the slave acked its end; a slave that
    stops acking holds the answers until syncFlushTimeout (FLUSH_SLAVE_TIMEOUT, never ACKED);
    the acks it sends on resuming release nothing that timed out twice."""
    rng = random.Random(5)
    master = FakeStore([EpochRecord(1, 0)])
    master.write(5, rng)
    async with trio.open_nursery() as nursery:
        net = SimNetwork(5)
        c = ShellGroup(nursery, net, master, NowaitTransport(net, lambda n: n))
        slave = StallingStore()
        _service, gate = await _in_sync(c, slave)
        outcomes: list[tuple[int, AckOutcome]] = []
        end1 = master.write(3, rng)
        gate.on_local_max(end1)
        gate.submit(end1, lambda o: outcomes.append((end1, o)))
        await wait_for(lambda: bool(outcomes))
        assert outcomes == [(end1, AckOutcome.ACKED)] and c.client.core.acked == end1
        slave.stall = True
        end2 = master.write(3, rng)
        gate.on_local_max(end2)
        gate.submit(end2, lambda o: outcomes.append((end2, o)))
        t0 = trio.current_time()
        await trio.sleep(2.9)
        assert outcomes == [(end1, AckOutcome.ACKED)]  # held: the slave has not acked end2
        await wait_for(lambda: len(outcomes) == 2)
        assert outcomes[1] == (end2, AckOutcome.FLUSH_SLAVE_TIMEOUT)
        assert trio.current_time() - t0 >= 3.0
        slave.stall = False
        slave.resume.set()
        await wait_for(lambda: c.client.core.acked == end2)
        assert len(outcomes) == 2
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("partial", [False, True])
async def test_a_master_that_steps_down_mid_ship_sends_nothing_more(
    mock_clock, partial: bool
) -> None:
    """Deactivated with a turn shipped and not yet acked (and, in a second case, with the
    rest of a partial inline send still unsent): the waiting write is answered NOT_MASTER,
    and no later turn is shipped inline to the slave."""
    rng = random.Random(6)
    master = FakeStore([EpochRecord(1, 0)])
    master.write(5, rng)
    half = [False]
    async with trio.open_nursery() as nursery:
        net = SimNetwork(6)
        transport = NowaitTransport(net, lambda n: n // 2 if half[0] else n)
        c = ShellGroup(nursery, net, master, transport)
        service, gate = await _in_sync(c, FakeStore())
        stream = transport.streams[-1]
        outcomes: list[AckOutcome] = []
        half[0] = partial
        end = master.write(4, rng)  # on the wire (half of it when partial), not acked
        offered, taken = stream.nowait_sends[-1]
        assert taken == (offered // 2 if partial else offered)
        gate.on_local_max(end)
        gate.submit(end, outcomes.append)
        service.deactivate()
        gate.close()
        assert outcomes == [AckOutcome.NOT_MASTER]
        sends = len(stream.nowait_sends)
        master.write(4, rng)
        assert len(stream.nowait_sends) == sends
        await trio.sleep(1)
        assert service.connection_count == 0
        nursery.cancel_scope.cancel()


async def test_a_tcp_stream_gets_a_nonblocking_send_that_shares_its_socket() -> None:
    """`nowait_sender` on a real socket pair: what it takes (its buffers gathered in order)
    arrives in order with what the stream sends; a full buffer takes 0 bytes instead of
    blocking; a stream without a socket gets none."""
    a, b = trio.socket.socketpair()
    left, right = trio.SocketStream(a), trio.SocketStream(b)
    send, release = nowait_sender(left)
    assert send is not None
    assert send([b"ab", memoryview(b"xcx")[1:2]]) == 3  # gathered, in order
    await left.send_all(b"def")
    got = b""
    while len(got) < 6:
        got += await right.receive_some(10)
    assert got == b"abcdef"
    chunk = bytes(1 << 20)
    while send([chunk]) > 0:  # fill the buffer: then nothing, never a block
        pass
    assert send([b"x"]) == 0
    release()
    await left.send_all(b"")  # the stream's own socket is still open
    await left.aclose()
    await right.aclose()
    assert nowait_sender(trio.testing.memory_stream_pair()[0])[0] is None


async def test_a_simulated_stream_sends_nowait_what_its_window_has_room_for(mock_clock) -> None:
    """The simulated network offers the inline send too (so the cluster simulation runs the
    master's inline shipping): up to the window's room, then 0."""
    net = SimNetwork(1, window_bytes=10)
    async with trio.open_nursery() as nursery:
        await nursery.start(
            net.transport(MASTER).serve, f"{MASTER}:1", lambda s: trio.sleep_forever()
        )
        sim = await net.transport(SLAVE).connect(f"{MASTER}:1")
        assert isinstance(sim, SimStream)
        assert sim.send_nowait([b"0123", b"456789ab"]) == 10  # the window's room, no more
        assert sim.send_nowait([b"x"]) == 0
        nursery.cancel_scope.cancel()


# ------------------------------------------------------------ the slave's read path (i28-repl7)


async def test_a_reads_packets_reach_the_slave_core_as_one_run(mock_clock, monkeypatch) -> None:
    transfers: list[Transfer] = []
    receivers: list[int] = []
    on_event = SlaveCore.on_event

    def noted(self: SlaveCore, ev: Any, now_ms: int, **kw: Any) -> Any:
        if isinstance(ev, Transfer) and ev.body:
            transfers.append(ev)
        return on_event(self, ev, now_ms, **kw)

    def receiver(stream: trio.abc.Stream, max_bytes: int) -> Any:
        receivers.append(max_bytes)
        return bulk_receiver(stream, max_bytes)

    monkeypatch.setattr(SlaveCore, "on_event", noted)
    monkeypatch.setattr(slave_client, "bulk_receiver", receiver)
    rng = random.Random(3)
    master = FakeStore([EpochRecord(1, 0)])
    master.write(300, rng)  # ~33 KiB: 34 packets of haTransferBatchSize 1000 here
    async with trio.open_nursery() as nursery:
        c = ShellGroup(nursery, SimNetwork(1), master)
        await c.start_master(AckPolicy(all_ack_in_sync_state_set=True))
        slave = FakeStore()
        c.start_slave(slave)
        await wait_for(lambda: bytes(slave.log) == bytes(master.log))
        nursery.cancel_scope.cancel()
    packets = -(-len(master.log) // 1000)
    assert receivers == [slave_client.READ_SIZE]  # one receiver for the session's reads
    assert b"".join(t.body for t in transfers) == bytes(master.log)
    assert len(transfers) * 4 <= packets, (len(transfers), packets)
