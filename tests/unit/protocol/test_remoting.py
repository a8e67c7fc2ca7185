"""Remoting frame codec: round trips (JSON and ROCKETMQ headers) and malformed input."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol.codes import SERIALIZE_JSON, SERIALIZE_ROCKETMQ
from rocketrio.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from rocketrio.protocol.remoting import (
    FrameDecoder,
    RemoteProtocolError,
    RemotingCommand,
    encode_command,
    encode_response,
)
from rocketrio.protocol.serde import HeaderError, from_ext, to_ext

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
commands = st.builds(
    RemotingCommand,
    code=st.integers(-32768, 32767),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.none() | text,
    ext_fields=st.dictionaries(text.filter(bool), text, max_size=5),
    body=st.binary(max_size=200),
    language=st.sampled_from(["JAVA", "PYTHON", "GO"]),
    version=st.integers(0, 500),
    serialize_type=st.sampled_from([SERIALIZE_JSON, SERIALIZE_ROCKETMQ]),
)


@given(st.lists(commands, min_size=1, max_size=5), st.integers(1, 64))
@settings(max_examples=200)
def test_round_trip_in_any_chunking(cmds: list[RemotingCommand], chunk: int) -> None:
    wire = b"".join(encode_command(c) for c in cmds)
    dec = FrameDecoder()
    out = []
    for i in range(0, len(wire), chunk):
        dec.feed(wire[i : i + chunk])
        while (c := dec.next_command()) is not None:
            out.append(c)
    assert len(out) == len(cmds)
    for a, b in zip(cmds, out, strict=True):
        assert (a.code, a.opaque, a.flag, a.body, a.ext_fields) == (
            b.code,
            b.opaque,
            b.flag,
            b.body,
            b.ext_fields,
        )
        assert (a.remark or None) == (b.remark or None)
        assert a.serialize_type == b.serialize_type


def test_json_header_matches_upstream_shape() -> None:
    cmd = RemotingCommand(code=0, opaque=7, flag=1, ext_fields={"offset": "1"}, language="JAVA")
    frame = encode_command(cmd)
    total, hword = struct.unpack_from(">ii", frame)
    assert total == len(frame) - 4 and hword >> 24 == 0
    header = json.loads(frame[8 : 8 + (hword & 0xFFFFFF)])
    assert header["extFields"] == {"offset": "1"} and header["opaque"] == 7 and header["flag"] == 1


def _frame(header: bytes, body: bytes = b"", stype: int = 0) -> bytes:
    return (
        struct.pack(">ii", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body
    )


@pytest.mark.parametrize(
    "wire",
    [
        struct.pack(">i", -5) + b"xxxx",  # negative length
        struct.pack(">i", 2) + b"xx",  # shorter than the header-length word
        struct.pack(">i", 64 * 1024 * 1024),  # huge
        _frame(b"{not json"),
        _frame(b"[1,2]"),
        _frame(b'{"code":"x"}'),
        _frame(b'{"code":1,"extFields":[1]}'),
        _frame(b"\x00\x01", stype=1),  # truncated binary header
        _frame(b"{}", stype=9),  # unknown serialize type
        struct.pack(">ii", 8, 100) + b"abcd",  # header length beyond frame
    ],
)
def test_malformed_frames_raise_protocol_error(wire: bytes) -> None:
    dec = FrameDecoder()
    dec.feed(wire)
    with pytest.raises(RemoteProtocolError):
        dec.next_command()
    with pytest.raises(RemoteProtocolError):  # and it stays failed
        dec.feed(b"more")


@given(st.binary(max_size=300))
@settings(max_examples=300)
def test_random_bytes_never_crash_the_decoder(data: bytes) -> None:
    dec = FrameDecoder(max_frame=1024)
    try:
        dec.feed(data)
        while dec.next_command() is not None:
            pass
    except RemoteProtocolError:
        pass


def test_typed_headers_round_trip_and_name_bad_fields() -> None:
    h = SendMessageRequestHeaderV2(
        a="pg", b="T", c="TBW102", d=4, e=1, f=0, g=123, h=0, i="TAGS\x01a\x02"
    )
    assert from_ext(SendMessageRequestHeaderV2, to_ext(h)) == h
    assert h.to_v1().topic == "T"
    ext = to_ext(PullMessageRequestHeader("g", "T", 0, 5, 32, 2, 0, 15000, 0))
    del ext["topic"]
    with pytest.raises(HeaderError, match="topic"):
        from_ext(PullMessageRequestHeader, ext)
    ext["topic"] = "T"
    ext["queueOffset"] = "five"
    with pytest.raises(HeaderError, match="queueOffset"):
        from_ext(PullMessageRequestHeader, ext)


def _hand_rocketmq_frame(ext: dict[str, str], remark: str) -> bytes:
    """Upstream's ROCKETMQ header layout, built field by field, independently of the codec."""
    h = struct.pack(">hbhii", 310, 0, 453, 77, 0)  # code, language JAVA, version, opaque, flag
    r = remark.encode()
    h += struct.pack(">i", len(r)) + r
    e = b""
    for k, v in ext.items():
        kb, vb = k.encode(), v.encode()
        e += struct.pack(">h", len(kb)) + kb + struct.pack(">i", len(vb)) + vb
    h += struct.pack(">i", len(e)) + e
    body = b"payload"
    return (
        struct.pack(">ii", 4 + len(h) + len(body), (SERIALIZE_ROCKETMQ << 24) | len(h)) + h + body
    )


def test_rocketmq_header_matches_upstream_layout_both_ways() -> None:
    # a Java SEND_MESSAGE_V2 header: one-letter keys, properties with \x01/\x02, one non-ASCII
    ext = {"a": "group", "b": "Topic", "g": "1764343200123", "i": "UNIQ_KEY\x01AB\x02K\x01é"}
    wire = _hand_rocketmq_frame(ext, "ré")
    dec = FrameDecoder()
    dec.feed(wire)
    cmd = dec.next_command()
    assert cmd is not None
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque) == (310, "JAVA", 453, 77)
    assert (cmd.ext_fields, cmd.remark, cmd.body) == (ext, "ré", b"payload")
    assert encode_command(cmd) == wire


@given(commands, st.integers(-32768, 32767), st.none() | text, st.dictionaries(text, text))
@settings(max_examples=200)
def test_encode_response_is_the_frame_of_make_response(
    req: RemotingCommand, code: int, remark: str | None, ext: dict[str, str]
) -> None:
    # the send path's answer skips the response command; the bytes must not change
    assert encode_response(req, code, remark, ext) == encode_command(
        req.make_response(code, remark, ext)
    )


@pytest.mark.parametrize("size", [4095, 4096, 4097, 70_000])
def test_a_big_body_decodes_whole_in_any_chunking(size: int) -> None:
    # bodies above a few KiB leave the decoder's buffer through a view, smaller by a slice
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    cmds = [RemotingCommand(code=320, opaque=i, body=body[i:]) for i in range(3)]
    wire = b"".join(encode_command(c) for c in cmds)
    dec = FrameDecoder()
    got = []
    for i in range(0, len(wire), 5000):
        dec.feed(wire[i : i + 5000])
        while (cmd := dec.next_command()) is not None:
            got.append(cmd)
    assert [(c.opaque, c.body) for c in got] == [(c.opaque, c.body) for c in cmds]
    assert all(type(c.body) is bytes for c in got)
