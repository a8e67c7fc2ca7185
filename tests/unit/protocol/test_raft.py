"""Round trips and malformed input for the Raft message and entry codec."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.protocol.raft import (
    ENTRY_HEADER,
    AppendEntriesRequest,
    AppendEntriesResponse,
    Entry,
    HeartBeatRequest,
    HeartBeatResponse,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    RaftCodecError,
    ResponseCode,
    VoteRequest,
    VoteResponse,
    VoteResult,
    decode_entries,
    decode_entry_from,
    decode_message,
    encode_entries,
    encode_entry,
    encode_message,
)

u64 = st.integers(min_value=0, max_value=2**64 - 1)
small = st.integers(min_value=0, max_value=2**40)
node_id = st.text(min_size=0, max_size=40).filter(lambda s: len(s.encode()) <= 255)
entries = st.lists(st.builds(Entry, small, small, st.binary(max_size=64)), max_size=8).map(tuple)

messages = st.one_of(
    st.builds(VoteRequest, node_id, node_id, node_id, u64, u64, u64, u64),
    st.builds(VoteResponse, node_id, node_id, u64, u64, st.sampled_from(VoteResult)),
    st.builds(HeartBeatRequest, node_id, node_id, node_id, u64, u64, u64),
    st.builds(HeartBeatResponse, node_id, node_id, u64, u64, st.sampled_from(ResponseCode)),
    st.builds(AppendEntriesRequest, node_id, node_id, node_id, u64, u64, u64, u64, entries),
    st.builds(
        AppendEntriesResponse, node_id, node_id, u64, st.sampled_from(ResponseCode), u64, u64
    ),
    st.builds(
        InstallSnapshotRequest, node_id, node_id, node_id, u64, u64, u64, st.binary(max_size=256)
    ),
    st.builds(InstallSnapshotResponse, node_id, node_id, u64, st.sampled_from(ResponseCode), u64),
)


@given(messages)
def test_message_round_trip(msg: object) -> None:
    wire = encode_message(msg)
    assert decode_message(wire) == msg
    assert decode_message(memoryview(wire)) == msg


@given(messages)
def test_every_truncation_is_rejected(msg: object) -> None:
    wire = encode_message(msg)
    for cut in range(len(wire)):
        with pytest.raises(RaftCodecError):
            decode_message(wire[:cut])


@given(messages)
def test_trailing_bytes_are_rejected(msg: object) -> None:
    with pytest.raises(RaftCodecError, match="trailing"):
        decode_message(encode_message(msg) + b"\x00")


@given(entries)
def test_entries_round_trip(es: tuple[Entry, ...]) -> None:
    assert decode_entries(encode_entries(es)) == list(es)


@given(st.builds(Entry, small, small, st.binary(max_size=64)))
def test_single_entry_layout(e: Entry) -> None:
    raw = encode_entry(e)
    assert len(raw) == ENTRY_HEADER.size + len(e.data)
    assert ENTRY_HEADER.unpack_from(raw) == (e.index, e.term, len(e.data))
    assert decode_entry_from(b"xx" + raw, 2) == (e, 2 + len(raw))


@pytest.mark.parametrize(
    ("wire", "error"),
    [
        (b"", "empty"),
        (b"\x63", "unknown Raft message tag 99"),
        # a VoteResponse whose result byte is 99
        (b"\x02" + b"\x00" * 16 + b"\x63" + b"\x01a\x01b", "unknown VoteResult 99"),
        # an AppendEntries claiming 10**9 entries in a few bytes
        (
            b"\x05" + b"\x00" * 32 + b"\x01a\x01b\x01a" + (10**9).to_bytes(4, "big"),
            "does not fit",
        ),
        # a node id that is not UTF-8
        (b"\x04" + b"\x00" * 18 + b"\x01\xff\x01b", "not UTF-8"),
    ],
)
def test_malformed_messages_name_the_problem(wire: bytes, error: str) -> None:
    with pytest.raises(RaftCodecError, match=error):
        decode_message(wire)


def test_node_id_longer_than_255_bytes_is_refused() -> None:
    with pytest.raises(RaftCodecError, match="longer than 255"):
        encode_message(HeartBeatRequest("x" * 256, "b", "a", 1, 1, 0))
