"""The HA channel codec (protocol/ha.py): exact byte layouts of the seed, any chunking, and
malformed input refused (the decoder then stays failed)."""

from __future__ import annotations

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
