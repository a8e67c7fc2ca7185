"""The HA shells (master service, slave client, group transfer) on the simulated network under
MockClock, with an in-memory store standing in for the store actor (the real store is tested
in test_ha_replication.py). Checks byte-identical replication with epochs, acks gated on the
SyncStateSet, shrink on disconnect through the controller, truncation of a divergent slave."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.ha.group_transfer import (
    AckOutcome,
    AlterAccepted,
    AlterResult,
    GroupTransferService,
)
from rocketrio.actors.broker.ha.master_service import HAMasterService
from rocketrio.actors.broker.ha.ports import Watermark
from rocketrio.actors.broker.ha.slave_client import HAClient, _merge_appends
from rocketrio.actors.broker.ha.slave_core import (
    Append,
    Confirm,
    RecordEpoch,
    SendBytes,
    whole_records_length,
)
from rocketrio.actors.broker.ha.sync_state import AckPolicy, SyncStateCore
from rocketrio.actors.broker.ha.truncation import TruncateTo, TruncationPlan
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.protocol.message import BLANK_MAGIC_CODE, append_record
from rocketrio.storage.epoch_file import EpochRecord
from tests.harness.sim_network import SimNetwork

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
    def __init__(self, nursery: trio.Nursery, net: SimNetwork, master: FakeStore) -> None:
        self.nursery = nursery
        self.net = net
        self.master = master
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
            self.net.transport(MASTER), f"{MASTER}:10912", store, segment_size=SEG,
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
