"""The HA channel codec (protocol/ha.py): exact byte layouts of the seed, any chunking, and
malformed input refused (the decoder then stays failed)."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.protocol.ha import (
    NEED_DATA,
    HaEpoch,
    LocalProtocolError,
    MasterHandshake,
    MasterStreamDecoder,
    RemoteProtocolError,
    SlaveAck,
    SlaveHandshake,
    SlaveStreamDecoder,
    Transfer,
    encode_master_handshake,
    encode_slave_ack,
    encode_slave_handshake,
    encode_transfer_header,
)


def test_byte_layouts_match_the_seed() -> None:
    # slave handshake: state(4) + two flags (2 + 2) + brokerId(8), big-endian
    assert encode_slave_handshake(SlaveHandshake(3, True, False)) == struct.pack(
        ">ihhq", 1, 1, 0, 3
    )
    # slave ack: state(4) + maxOffset(8)
    assert encode_slave_ack(1234) == struct.pack(">iq", 2, 1234)
    # master handshake: state + bodySize + maxOffset + epoch + N x (epoch(4), startOffset(8))
    mh = MasterHandshake(500, 2, (HaEpoch(1, 0), HaEpoch(2, 300)))
    assert encode_master_handshake(mh) == struct.pack(">iiqi", 1, 24, 500, 2) + struct.pack(
        ">iqiq", 1, 0, 2, 300
    )
    # transfer: state + bodySize + offset + epoch + epochStartOffset + confirmOffset
    assert encode_transfer_header(100, 2, 50, 90, 7) == struct.pack(">iiqiqq", 2, 7, 100, 2, 50, 90)


def _feed_in_chunks(
    decoder: SlaveStreamDecoder | MasterStreamDecoder, data: bytes, cuts: list[int]
):
    events = []
    pos = 0
    for cut in sorted({min(c, len(data)) for c in cuts} | {len(data)}):
        decoder.receive_data(data[pos:cut])
        pos = cut
        while (ev := decoder.next_event()) is not NEED_DATA:
            events.append(ev)
    return events


slave_events = st.one_of(
    st.builds(SlaveHandshake, st.integers(0, 2**62), st.booleans(), st.booleans()),
    st.builds(SlaveAck, st.integers(0, 2**62)),
)


@given(st.lists(slave_events, max_size=20), st.lists(st.integers(0, 400), max_size=10))
def test_slave_stream_round_trips_under_any_chunking(events, cuts) -> None:
    data = b"".join(
        encode_slave_handshake(e)
        if isinstance(e, SlaveHandshake)
        else encode_slave_ack(e.max_offset)
        for e in events
    )
    assert _feed_in_chunks(SlaveStreamDecoder(), data, cuts) == events


def _epochs(draw_list: list[tuple[int, int]]) -> tuple[HaEpoch, ...]:
    out, epoch, start = [], 0, 0
    for de, ds in draw_list:
        epoch += de
        start += ds
        out.append(HaEpoch(epoch, start))
    return tuple(out)


master_events = st.one_of(
    st.builds(
        lambda mx, le, steps: MasterHandshake(mx, le, _epochs(steps)),
        st.integers(0, 2**50),
        st.integers(-1, 1000),
        st.lists(st.tuples(st.integers(1, 5), st.integers(0, 1000)), max_size=8),
    ),
    st.builds(
        lambda off, ep, back, conf, body: Transfer(off, ep, max(0, off - back), conf, body),
        st.integers(0, 2**50),
        st.integers(0, 1000),
        st.integers(0, 1000),
        st.integers(0, 2**50),
        st.binary(max_size=300),
    ),
)


def _encode_master(ev) -> bytes:
    if isinstance(ev, MasterHandshake):
        return encode_master_handshake(ev)
    header = encode_transfer_header(
        ev.offset, ev.epoch, ev.epoch_start_offset, ev.confirm_offset, len(ev.body)
    )
    return header + ev.body


@given(st.lists(master_events, max_size=12), st.lists(st.integers(0, 3000), max_size=10))
def test_master_stream_round_trips_under_any_chunking(events, cuts) -> None:
    data = b"".join(_encode_master(e) for e in events)
    assert _feed_in_chunks(MasterStreamDecoder(), data, cuts) == events


def test_a_slave_handshake_is_decoded_only_when_all_16_bytes_are_there() -> None:
    d = SlaveStreamDecoder()
    raw = encode_slave_handshake(SlaveHandshake(7))
    d.receive_data(raw[:12])  # upstream's reader would parse here and read past the data
    assert d.next_event() is NEED_DATA
    d.receive_data(raw[12:])
    assert d.next_event() == SlaveHandshake(7)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (struct.pack(">iq", 3, 0), "HA state 3"),
        (struct.pack(">iq", 2, -5), "negative offset"),
        (struct.pack(">ihhq", 1, 2, 0, 1), "flags"),
    ],
)
def test_bad_slave_messages_are_refused_and_latch(data: bytes, reason: str) -> None:
    d = SlaveStreamDecoder()
    d.receive_data(data)
    with pytest.raises(RemoteProtocolError, match=reason):
        d.next_event()
    with pytest.raises(RemoteProtocolError):
        d.receive_data(encode_slave_ack(1))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (struct.pack(">ii", 9, 0) + bytes(28), "HA state 9"),
        (struct.pack(">iiqiqq", 2, -1, 0, 1, 0, 0), "body size -1"),
        (struct.pack(">iiqiqq", 2, 1 << 30, 0, 1, 0, 0), "body size"),
        (struct.pack(">iiqi", 1, 13, 0, 1) + bytes(13), "12 x"),
        (struct.pack(">iiqi", 1, 24, 0, 2) + struct.pack(">iqiq", 2, 0, 1, 5), "does not follow"),
        (struct.pack(">iiqiqq", 2, 0, 10, 1, 20, 0), "starting at 20"),
    ],
)
def test_bad_master_messages_are_refused(data: bytes, reason: str) -> None:
    d = MasterStreamDecoder()
    d.receive_data(data)
    with pytest.raises(RemoteProtocolError, match=reason):
        d.next_event()
    with pytest.raises(RemoteProtocolError):
        d.next_event()


def test_encoders_refuse_what_cannot_be_valid() -> None:
    with pytest.raises(LocalProtocolError):
        encode_slave_ack(-1)
    with pytest.raises(LocalProtocolError):
        encode_transfer_header(10, 1, 11, 0, 0)
    with pytest.raises(LocalProtocolError):
        encode_master_handshake(MasterHandshake(0, 2, (HaEpoch(2, 0), HaEpoch(1, 5))))


# ------------------------------------------------------------ merged transfers (the slave's)


@st.composite
def transfer_runs(draw: st.DrawFn) -> list[Transfer]:
    """Transfers as a master ships them: runs continuing each other (contiguous, one epoch,
    confirmOffset growing), broken now and then by a gap, a new epoch, a lower confirmOffset,
    an empty body (a heartbeat) or a handshake."""
    out: list = []
    offset, epoch, start, confirm = draw(st.integers(0, 10**6)), 1, 0, 0
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["next"] * 6 + ["gap", "epoch", "lower", "empty", "hs"]))
        if kind == "hs":
            out.append(MasterHandshake(offset, epoch, (HaEpoch(epoch, start),)))
            continue
        if kind == "gap":
            offset += draw(st.integers(1, 500))
        elif kind == "epoch":
            epoch, start = epoch + 1, offset
        confirm += -draw(st.integers(1, 50)) if kind == "lower" else draw(st.integers(0, 50))
        body = b"" if kind == "empty" else draw(st.binary(min_size=1, max_size=200))
        out.append(Transfer(offset, epoch, start, max(-1, confirm), body))
        offset += len(body)
    return out


def _continues(run: list[Transfer]) -> bool:
    """Each transfer of ``run`` is one a merging decoder may join to the one before it."""
    return all(
        b.body
        and a.body
        and b.offset == a.end
        and (b.epoch, b.epoch_start_offset) == (a.epoch, a.epoch_start_offset)
        and b.confirm_offset >= a.confirm_offset
        for a, b in itertools.pairwise(run)
    )


def _runs(merged: list, events: list) -> list[list]:
    """The packets (``events``, in order) each merged event was made of; asserts each merged
    event is its packets joined (first offset and epoch, last confirmOffset)."""
    plain, out = iter(events), []
    for ev in merged:
        run = [next(plain)]
        if isinstance(ev, Transfer) and ev.body:
            while run[-1].end < ev.end:
                run.append(next(plain))
            assert _continues(run)
            assert ev == Transfer(
                run[0].offset,
                run[0].epoch,
                run[0].epoch_start_offset,
                run[-1].confirm_offset,
                b"".join(t.body for t in run),
            )
        else:
            assert run[0] == ev
        out.append(run)
    assert next(plain, None) is None
    return out


@given(transfer_runs(), st.lists(st.integers(0, 3000), max_size=10))
def test_merged_transfers_are_runs_of_the_packets_in_order(events, cuts) -> None:
    data = b"".join(_encode_master(e) for e in events)
    _runs(_feed_in_chunks(MasterStreamDecoder(merge_transfers=True), data, cuts), events)


@given(transfer_runs())
def test_a_stream_read_at_once_merges_every_run_it_may(events) -> None:
    data = b"".join(_encode_master(e) for e in events)
    runs = _runs(_feed_in_chunks(MasterStreamDecoder(merge_transfers=True), data, []), events)
    # all was buffered: a run ends only where the next packet may not join it
    for a, b in itertools.pairwise(runs):
        if isinstance(a[-1], Transfer) and isinstance(b[0], Transfer):
            assert not _continues([a[-1], b[0]])


def test_a_bad_header_behind_a_run_is_refused_after_the_run() -> None:
    good = [Transfer(100, 2, 50, 90, b"ab"), Transfer(102, 2, 50, 95, b"cde")]
    bad = struct.pack(">iiqiqq", 2, 4, 105, 2, 200, 95) + b"wxyz"  # its epoch starts past it
    d = MasterStreamDecoder(merge_transfers=True)
    d.receive_data(b"".join(_encode_master(t) for t in good) + bad)
    assert d.next_event() == Transfer(100, 2, 50, 95, b"abcde")
    with pytest.raises(RemoteProtocolError, match="starting at 200"):
        d.next_event()
    with pytest.raises(RemoteProtocolError):
        d.next_event()


def test_a_packet_not_all_buffered_waits_and_joins_the_next_read() -> None:
    a, b = Transfer(0, 1, 0, 10, b"x" * 10), Transfer(10, 1, 0, 20, b"y" * 10)
    wire = _encode_master(a) + _encode_master(b)
    d = MasterStreamDecoder(merge_transfers=True)
    d.receive_data(wire[:-1])
    assert d.next_event() == a
    assert d.next_event() is NEED_DATA
    d.receive_data(wire[-1:])
    assert d.next_event() == b
