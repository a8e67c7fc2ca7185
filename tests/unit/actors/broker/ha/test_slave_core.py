"""The slave's HA connection state machine (actors/broker/ha/slave_core.py), without sockets or
disks: handshake, truncation, appends of whole records only, resets, heartbeats.
"""

from __future__ import annotations

from rocketrio.actors.broker.ha.slave_core import (
    Append,
    Close,
    Confirm,
    RecordEpoch,
    ResetLogAt,
    SendBytes,
    SlavePhase,
    Truncate,
    whole_records_length,
)
from rocketrio.actors.broker.ha.truncation import TruncateTo
from rocketrio.protocol.ha import (
    HaEpoch,
    MasterHandshake,
    Transfer,
    encode_slave_ack,
)
from rocketrio.storage.epoch_file import EpochRecord
from tests.harness.ha_logs import _BLANK, SEG, build_log, recs, slave


def test_whole_records_length_stops_at_a_partial_record_and_spans_blanks() -> None:
    log = build_log(60, 1)
    assert len(log) > 2 * SEG
    n = whole_records_length(log, 0, SEG)
    assert n == len(log)
    assert whole_records_length(log[: n - 1], 0, SEG) < n - 1
    # the blank record covers the rest of its segment
    first_blank = log.find(_BLANK) - 4
    assert whole_records_length(log[first_blank:SEG], first_blank, SEG) == SEG - first_blank


def test_slave_refuses_a_master_at_another_epoch_before_truncating() -> None:
    s = slave(expected_epoch=3)
    s.connected(0)
    out = s.on_event(MasterHandshake(100, 2, (HaEpoch(1, 0), HaEpoch(2, 50))), 1)
    assert len(out) == 1 and isinstance(out[0], Close) and "nothing truncated" in out[0].reason
    assert s.phase is SlavePhase.READY


def test_slave_truncates_then_acks_then_records_epochs_before_data() -> None:
    log = build_log(5, 2)
    s = slave()
    assert isinstance(s.connected(0)[0], SendBytes)
    out = s.on_event(
        MasterHandshake(len(log), 2, (HaEpoch(1, 0), HaEpoch(2, 40))),
        1,
        local_epochs=recs((1, 0)),
        local_min=0,
        local_max=len(log) + 10,  # ahead of the master within epoch 1... cut it
    )
    assert len(out) == 1 and isinstance(out[0], Truncate)
    assert out[0].plan == TruncateTo(40, 1)
    # nothing is acked or applied until the shell reports the cut durable
    assert s.tick(10) == []
    assert isinstance(s.on_event(Transfer(40, 2, 40, 0, b""), 2)[0], Close)


def test_slave_full_exchange_with_partial_records() -> None:
    log = build_log(8, 3)
    s = slave(expected_epoch=1)
    s.connected(0)
    s.on_event(MasterHandshake(len(log), 1, (HaEpoch(1, 0),)), 1)
    assert s.truncated(0, 0, None, 2) == [SendBytes(encode_slave_ack(0))]  # ack at once
    cut = len(log) // 2 + 3  # inside a record
    out = s.on_event(Transfer(0, 1, 0, cut, log[:cut]), 3)
    assert out[0] == RecordEpoch(1, 0)
    appended = [a for a in out if isinstance(a, Append)]
    assert len(appended) == 1 and appended[0].offset == 0
    whole = len(appended[0].data)
    assert whole < cut and log[:whole] == appended[0].data
    assert [a for a in out if isinstance(a, Confirm)] == [Confirm(whole)]  # never a partial one
    assert s.received_end == cut
    out = s.on_event(Transfer(cut, 1, 0, len(log), log[cut:]), 4)
    assert [a.offset for a in out if isinstance(a, Append)] == [whole]
    assert s.appended(len(log), 5) == [SendBytes(encode_slave_ack(len(log)))]
    assert s.appended(len(log), 6) == []  # acked already


def test_slave_resets_when_the_master_starts_above_its_end() -> None:
    s = slave(expected_epoch=1)
    s.connected(0)
    s.on_event(MasterHandshake(9000, 1, (HaEpoch(1, 0),)), 1)
    s.truncated(0, 500, EpochRecord(1, 0), 2)
    out = s.on_event(Transfer(SEG, 1, 0, 0, b""), 3)
    assert isinstance(out[0], ResetLogAt) and out[0].offset == SEG
    assert "no longer holds" in out[0].reason


def test_slave_closes_on_a_newer_epoch_than_it_was_told() -> None:
    s = slave(expected_epoch=1)
    s.connected(0)
    s.on_event(MasterHandshake(0, 1, (HaEpoch(1, 0),)), 1)
    s.truncated(0, 0, None, 2)
    out = s.on_event(Transfer(0, 2, 0, 0, b""), 3)
    assert isinstance(out[0], Close) and "stale" in out[0].reason


def test_slave_heartbeats_and_housekeeping() -> None:
    s = slave(expected_epoch=1)
    s.connected(0)
    s.on_event(MasterHandshake(0, 1, (HaEpoch(1, 0),)), 10)
    s.truncated(0, 0, None, 10)
    assert s.tick(500) == []
    assert isinstance(s.tick(1010)[0], SendBytes)
    out = s.tick(5011)
    assert isinstance(out[0], Close) and "haHousekeepingInterval" in out[0].reason
