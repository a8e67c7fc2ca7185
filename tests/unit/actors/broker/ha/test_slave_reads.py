"""The slave's read path (ha/slave_client.py `_read`): a read's transfer packets decoded one by
one or merged into runs (`MasterStreamDecoder(merge_transfers=True)`) give the slave core the
same work: per read, the same actions once its appends are joined (`_merge_appends`: the same
bytes appended at the same offsets, the same epochs recorded, the same acks and confirmOffset),
and the same state after it, however the master cut its packets and the socket cut its reads."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.ha.slave_client import _merge_appends
from rocketrio.actors.broker.ha.slave_core import Append, Close, SlaveCore, Truncate
from rocketrio.protocol.ha import (
    NEED_DATA,
    HaEpoch,
    MasterHandshake,
    MasterStreamDecoder,
    encode_master_handshake,
    encode_transfer_header,
)
from tests.harness.ha_logs import build_log, slave


@st.composite
def shipments(draw: st.DrawFn) -> tuple[bytes, bytes, list[int]]:
    """(the log, the master's wire: a handshake then transfer packets of any size, with a new
    epoch partway and a confirmOffset that mostly grows, the socket's read cuts)."""
    log = build_log(draw(st.integers(1, 40)), draw(st.integers(0, 1000)))
    new_epoch_at = draw(st.integers(0, len(log)))
    wire = [encode_master_handshake(MasterHandshake(len(log), 2, (HaEpoch(1, 0),)))]
    at, confirm = 0, 0
    while at < len(log):
        size = min(draw(st.integers(1, 700)), len(log) - at)
        if at < new_epoch_at < at + size:
            size = new_epoch_at - at  # the master cuts a packet where an epoch starts
        epoch, start = (2, new_epoch_at) if at >= new_epoch_at else (1, 0)
        confirm = max(-1, confirm + draw(st.integers(-30, 400)))
        if draw(st.integers(0, 9)) == 0:  # a heartbeat between packets
            wire.append(encode_transfer_header(at, epoch, start, confirm, 0))
        wire.append(encode_transfer_header(at, epoch, start, confirm, size) + log[at : at + size])
        at += size
    data = b"".join(wire)
    cuts = sorted(set(draw(st.lists(st.integers(0, len(data)), max_size=12))) | {len(data)})
    # `_read` leaves what follows a truncation buffered until its next read: one more, empty
    return log, data, [*cuts, len(data)]


def _reads(core: SlaveCore, merge: bool, data: bytes, cuts: list[int]) -> list[Any]:
    """What `_read` hands `_run_actions` for each read, and the core's state after it (the
    shell's store answers: the log truncated to empty, each Append written at once)."""
    decoder = MasterStreamDecoder(merge_transfers=merge)
    core.connected(0)
    out: list[Any] = []
    pos = 0
    for cut in cuts:
        decoder.receive_data(data[pos:cut])
        pos = cut
        actions: list[Any] = []
        while (ev := decoder.next_event()) is not NEED_DATA:
            actions += core.on_event(ev, 1)
            if any(isinstance(a, (Truncate, Close)) for a in actions):
                break
        merged = _merge_appends(actions)
        for a in merged:
            if isinstance(a, Truncate):
                core.truncated(0, 0, None, 1)
            elif isinstance(a, Append):
                core.appended(a.offset + len(a.data), 1)
        state = (core.local_max, core.acked, core.confirm, core.master_confirm, core.last_epoch)
        out.append((merged, state))
    return out


@settings(max_examples=150, deadline=None)
@given(shipments())
def test_merged_packets_give_the_slave_the_same_work_read_by_read(case) -> None:
    log, data, cuts = case
    plain = _reads(slave(expected_epoch=2), False, data, cuts)
    assert _reads(slave(expected_epoch=2), True, data, cuts) == plain
    appended = b"".join(a.data for actions, _ in plain for a in actions if isinstance(a, Append))
    assert appended == log  # and the slave holds the whole log, as it came
