"""The master's HA connection state machine (actors/broker/ha/master_core.py), without sockets or
disks: transfer plans, phases, heartbeats, timers; and an end-to-end test that wires a master core
and a slave core through the real codec, with random chunking and batch sizes, and checks the
slave ends byte-identical to the master with the master's epochs, having written and acked whole
records only.
"""

from __future__ import annotations

import random

import pytest

from rocketrio.actors.broker.ha.master_core import (
    MasterConnectionCore,
    NoEpochForOffset,
    Phase,
    TransferBatch,
    plan_transfer,
    start_offset_for,
)
from rocketrio.actors.broker.ha.slave_core import (
    Append,
    Close,
    Confirm,
    RecordEpoch,
    ResetLogAt,
    SendBytes,
    SlaveCore,
    Truncate,
    whole_records_length,
)
from rocketrio.protocol.ha import (
    NEED_DATA,
    HaEpoch,
    MasterHandshake,
    MasterStreamDecoder,
    SlaveAck,
    SlaveHandshake,
    SlaveStreamDecoder,
    encode_master_handshake,
    encode_transfer_header,
)
from rocketrio.storage.epoch_file import EpochRecord
from tests.harness.ha_logs import SEG, build_log, recs, slave

# --------------------------------------------------------------------------- transfer plan


@pytest.mark.parametrize(
    ("nxt", "mx", "epochs", "batch", "expected"),
    [
        (0, 100, recs((1, 0)), 64, TransferBatch(0, 64, 1, 0)),
        (64, 100, recs((1, 0)), 64, TransferBatch(64, 36, 1, 0)),
        # a batch never crosses an epoch boundary: cut at 80, then the next is epoch 2
        (64, 100, recs((1, 0), (2, 80)), 64, TransferBatch(64, 16, 1, 0)),
        (80, 100, recs((1, 0), (2, 80)), 64, TransferBatch(80, 20, 2, 80)),
        # nor a segment boundary
        (SEG - 10, SEG + 50, recs((1, 0)), 64, TransferBatch(SEG - 10, 10, 1, 0)),
        # caught up: a heartbeat labelled with the epoch of the next offset, even an empty one
        (100, 100, recs((1, 0), (2, 100)), 64, TransferBatch(100, 0, 2, 100)),
        # an epoch with no data shares its start with the next: the later one holds the offset
        (100, 150, recs((1, 0), (2, 100), (3, 100)), 64, TransferBatch(100, 50, 3, 100)),
    ],
)
def test_plan_transfer(nxt, mx, epochs, batch, expected) -> None:
    assert plan_transfer(nxt, mx, epochs, SEG, batch) == expected


def test_plan_transfer_refuses_an_offset_no_epoch_covers() -> None:
    with pytest.raises(NoEpochForOffset):
        plan_transfer(10, 100, recs((2, 50)), SEG, 64)


@pytest.mark.parametrize(
    ("requested", "sync_last", "expected"),
    [(500, False, 500), (0, False, 0), (0, True, 2 * SEG), (100, True, 100)],
)
def test_start_offset(requested: int, sync_last: bool, expected: int) -> None:
    got = start_offset_for(
        requested, master_min=0, master_max=2 * SEG + 10, segment_size=SEG,
        sync_from_last_file=sync_last,
    )  # fmt: skip
    assert got == expected


def test_start_offset_is_the_masters_oldest_when_the_slave_is_too_old() -> None:
    got = start_offset_for(
        100, master_min=SEG, master_max=3 * SEG, segment_size=SEG, sync_from_last_file=False
    )
    assert got == SEG


def master_conn(now: int = 0) -> MasterConnectionCore:
    return MasterConnectionCore(
        segment_size=SEG, batch_size=64, heartbeat_interval_ms=1000,
        housekeeping_interval_ms=5000, now_ms=now,
    )  # fmt: skip


def test_master_connection_phases_and_heartbeats() -> None:
    m = master_conn()
    with pytest.raises(ValueError):
        m.on_event(SlaveAck(0), 0)
    assert m.on_event(SlaveHandshake(2, False, True), 1) == SlaveHandshake(2, False, True)
    assert m.phase is Phase.WAIT_FIRST_ACK and m.async_learner
    m.on_event(SlaveAck(40), 2)
    assert m.begin_transfer(master_min=0, master_max=100) == 40
    b = m.plan_next(100, recs((1, 0)), 3)
    assert b == TransferBatch(40, 60, 1, 0)
    m.sent(b, 3)
    assert m.plan_next(100, recs((1, 0)), 500) is None  # nothing new, heartbeat not due
    hb = m.plan_next(100, recs((1, 0)), 1003)
    assert hb == TransferBatch(100, 0, 1, 0)
    assert not m.expired(4000) and m.expired(5003)


def _transferring(at: int, master_max: int) -> MasterConnectionCore:
    m = master_conn()
    m.on_event(SlaveHandshake(2), 0)
    m.on_event(SlaveAck(at), 0)
    m.begin_transfer(master_min=0, master_max=master_max)
    return m


def test_a_burst_is_every_ready_batch_each_within_the_wire_limits() -> None:
    """One wake-up plans every batch ready (one socket write), each still at most
    haTransferBatchSize (64 here), inside one epoch and one segment."""
    end = SEG + 100
    m = _transferring(SEG - 150, end)
    epochs = recs((1, 0), (2, SEG - 20))
    burst = m.plan_burst(end, epochs, 1, 0, 1 << 20)
    assert burst == [
        TransferBatch(SEG - 150, 64, 1, 0),
        TransferBatch(SEG - 86, 64, 1, 0),
        TransferBatch(SEG - 22, 2, 1, 0),  # epoch 2 starts at SEG - 20
        TransferBatch(SEG - 20, 20, 2, SEG - 20),  # the segment ends at SEG
        TransferBatch(SEG, 64, 2, SEG - 20),
        TransferBatch(SEG + 64, 36, 2, SEG - 20),
    ]
    m.sent_burst(burst, 1, 0)
    assert m.next_offset == end
    assert m.plan_burst(end, epochs, 2, 0, 1 << 20) == []  # caught up, no heartbeat due
    assert m.plan_burst(end, epochs, 1001, 0, 1 << 20) == [TransferBatch(end, 0, 2, SEG - 20)]


def test_a_burst_stops_once_it_holds_max_bytes() -> None:
    m = _transferring(0, 1000)
    assert [b.size for b in m.plan_burst(1000, recs((1, 0)), 1, 0, 100)] == [64, 64]
    assert [b.size for b in m.plan_burst(1000, recs((1, 0)), 1, 0, 1)] == [64]


def test_master_refuses_a_slave_that_claims_more_than_the_master_has() -> None:
    m = master_conn()
    m.on_event(SlaveHandshake(2), 0)
    m.on_event(SlaveAck(200), 0)
    with pytest.raises(ValueError, match="did not truncate"):
        m.begin_transfer(master_min=0, master_max=100)


# --------------------------------------------------------------------------- records


# --------------------------------------------------------------------------- slave core


# --------------------------------------------------------------------------- both, wired


@pytest.mark.parametrize("seed", range(20))
def test_master_and_slave_cores_converge_byte_identical(seed: int) -> None:
    rng = random.Random(seed)
    log = build_log(rng.randint(20, 80), seed)
    epochs = recs((1, 0), (2, len(log) // 3), (3, len(log) // 3), (4, 2 * len(log) // 3))
    # epoch boundaries on record boundaries: move each to the next record start
    starts = _record_starts(log)
    epochs = [EpochRecord(e.epoch, min(s for s in starts if s >= e.start_offset)) for e in epochs]
    m = MasterConnectionCore(
        segment_size=SEG, batch_size=rng.choice([17, 64, 500, 5000]),
        heartbeat_interval_ms=1000, housekeeping_interval_ms=10_000, now_ms=0,
    )  # fmt: skip
    s = SlaveCore(
        broker_id=2, expected_epoch=4, segment_size=SEG,
        heartbeat_interval_ms=1000, housekeeping_interval_ms=10_000,
    )  # fmt: skip
    burst_bytes = rng.choice([1, 100, 1000, 1 << 20])  # 1: one batch per wake-up
    to_master, to_slave = SlaveStreamDecoder(), MasterStreamDecoder()
    slave_log = bytearray()
    slave_epochs: list[EpochRecord] = []
    for a in s.connected(0):
        to_master.receive_data(a.data)  # type: ignore[union-attr]
    now = 1
    for _ in range(10_000):
        now += 1
        while (ev := to_master.next_event()) is not NEED_DATA:
            got = m.on_event(ev, now)
            if isinstance(got, SlaveHandshake):
                mh = MasterHandshake(
                    len(log), 4, tuple(HaEpoch(e.epoch, e.start_offset) for e in epochs)
                )
                to_slave.receive_data(encode_master_handshake(mh))
            elif m.phase is Phase.WAIT_FIRST_ACK:
                m.begin_transfer(master_min=0, master_max=len(log))
        burst = m.plan_burst(len(log), epochs, now, -1, burst_bytes)
        if burst:
            wire = b"".join(
                encode_transfer_header(b.offset, b.epoch, b.epoch_start_offset, len(log), b.size)
                + log[b.offset : b.offset + b.size]
                for b in burst
            )
            cut = rng.randint(0, len(wire))  # deliver in two pieces
            to_slave.receive_data(wire[:cut])
            to_slave.receive_data(wire[cut:])
            m.sent_burst(burst, now, -1)
        while (ev := to_slave.next_event()) is not NEED_DATA:
            for a in s.on_event(ev, now):
                match a:
                    case Truncate():
                        for b in s.truncated(0, 0, None, now):
                            to_master.receive_data(b.data)  # type: ignore[union-attr]
                    case RecordEpoch():
                        slave_epochs.append(EpochRecord(a.epoch, a.start_offset))
                    case Append():
                        assert a.offset == len(slave_log)
                        assert whole_records_length(a.data, a.offset, SEG) == len(a.data)
                        slave_log += a.data
                        for b in s.appended(len(slave_log), now):
                            to_master.receive_data(b.data)  # type: ignore[union-attr]
                    case SendBytes():
                        to_master.receive_data(a.data)
                    case Confirm() | ResetLogAt():
                        pass
                    case Close():
                        raise AssertionError(a.reason)
        if m.ack_offset == len(log) and len(slave_log) == len(log):
            break
    assert bytes(slave_log) == log
    assert slave_epochs == [e for e in epochs if e.epoch != 2]  # epoch 2 holds no data


def _record_starts(log: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(log):
        out.append(pos)
        pos += int.from_bytes(log[pos : pos + 4], "big")
    out.append(len(log))
    return out


def test_master_pushes_a_moved_confirm_offset_without_waiting_for_a_heartbeat() -> None:
    m = master_conn()
    m.on_event(SlaveHandshake(2), 0)
    m.on_event(SlaveAck(0), 0)
    m.begin_transfer(master_min=0, master_max=100)
    b = m.plan_next(100, recs((1, 0)), 10, confirm=0)
    assert b is not None and b.size == 64
    m.sent(b, 10, confirm=0)
    b = m.plan_next(100, recs((1, 0)), 11, confirm=0)
    assert b is not None and b.size == 36
    m.sent(b, 11, confirm=0)
    # all data sent; the slave has not heard that it is confirmed: checked every 200 ms
    assert m.plan_next(100, recs((1, 0)), 100, confirm=0) is None
    assert m.next_timer_ms() == 300
    assert m.plan_next(100, recs((1, 0)), 150, confirm=100) is None  # not quiet long enough
    hb = m.plan_next(100, recs((1, 0)), 300, confirm=100)
    assert hb == TransferBatch(100, 0, 1, 0)
    m.sent(hb, 300, confirm=100)
    assert m.plan_next(100, recs((1, 0)), 600, confirm=100) is None
    assert m.next_timer_ms() == 1300  # back to the heartbeat interval


def test_timers_are_never_due_in_the_past_without_work() -> None:
    """Each shell's timer task sleeps until ``next_timer_ms()`` and then runs the core's timer
    step; if that step has nothing to do, the next deadline must lie in the future, or the task
    wakes again at once for ever (a heartbeat deadline is not work before TRANSFER: found by the
    cluster simulation, seed 159, as a livelock under the mock clock)."""
    s = slave(expected_epoch=1)
    s.connected(0)  # HANDSHAKE: the master's answer is slow (partition, busy master)
    assert s.tick(2500) == [] and s.next_timer_ms() > 2500
    s.on_event(MasterHandshake(0, 1, (HaEpoch(1, 0),)), 3000)  # TRUNCATING: a slow disk
    assert s.tick(4500) == [] and s.next_timer_ms() > 4500
    m = master_conn()
    m.on_event(SlaveHandshake(2, False, False), 0)
    m.handshake_sent(1)  # WAIT_FIRST_ACK: the slave is truncating
    assert m.plan_next(100, recs((1, 0)), 2500) is None and not m.expired(2500)
    assert m.next_timer_ms() > 2500
