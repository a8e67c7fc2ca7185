"""The compiled reader of plain JSON requests of a direct code (protocol/speedups/direct_json.c,
what POP's ACK_MESSAGE frames take) against the decoder's Python path (orjson, then
`remoting._direct_json`): the same DirectRequests (code, opaque, extFields, body, serialize
type, and the command `command_of` rebuilds), the same commands and errors for everything it
declines, on headers built to reach its every refusal (escapes, control characters, bytes that
are not UTF-8, fractions, exponents, leading zeros, -0, long numbers, repeated keys, nested
values, trailing commas and bytes), cut and poked."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol import compiled, remoting
from tests.harness.speedups import extension_in

ACK = 200051
CODES = frozenset({ACK, 11})


@pytest.fixture(scope="module")
def ext() -> Iterator[Any]:
    with extension_in(remoting) as mod:
        yield mod


def test_the_compiled_reader_is_chosen(ext: Any) -> None:
    if compiled.speedups is not None:  # the product's choice at import (not pure Python)
        assert remoting._next_direct_json is compiled.speedups.next_direct_json


def frame_of(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


WS = st.sampled_from([b"", b"", b" ", b"\n\t ", b"\r"])
NUMBERS = [b"0", b"7", b"-1", b"200051", b"11", b"2147483648", b"123456789012345678"]
ODD_NUMBERS = [
    b"-0",
    b"01",
    b"1.0",
    b"1e3",
    b"2E1",
    b"-",
    b"1234567890123456789",
    b"99999999999999999999",
]
STRINGS = [
    b'"x"',
    b'"JAVA"',
    b'""',
    '"é"'.encode(),
    b'"a\\"b"',
    b'"\\u0063"',
    b'"\x01"',
    b'"\xff"',
    b'"\xed\xa0\x80"',
]
WORDS = [b"true", b"false", b"null", b"[]", b"{}", b"[1]", b'{"a":"b"}', b"nul", b"truex"]
tokens = st.sampled_from(NUMBERS + ODD_NUMBERS + STRINGS + WORDS)
ext_keys = st.sampled_from(
    [
        b'"consumerGroup"',
        b'"topic"',
        b'"queueId"',
        b'"offset"',
        b'"extraInfo"',
        b'"a\\"k"',
        '"é"'.encode(),
        b'"\xff"',
    ]
)
ext_values = st.sampled_from([*STRINGS, b'"1 2 3 0 0 b 1 5"', b"1", b"true", b"null", b"1.5"])


@st.composite
def ext_objects(draw: st.DrawFn) -> bytes:
    pairs = draw(st.lists(st.tuples(ext_keys, ext_values), max_size=6))
    body = b",".join(draw(WS) + k + draw(WS) + b":" + draw(WS) + v + draw(WS) for k, v in pairs)
    return b"{" + body + draw(st.sampled_from([b"", b"", b",", b" "])) + b"}"


top_keys = st.sampled_from(
    [
        b'"code"',
        b'"opaque"',
        b'"flag"',
        b'"version"',
        b'"extFields"',
        b'"language"',
        b'"remark"',
        b'"serializeTypeCurrentRPC"',
        b'"co\\u0064e"',
        '"é"'.encode(),
        b'"\xff"',
        b'"x\x02"',
    ]
)


@st.composite
def headers(draw: st.DrawFn) -> bytes:
    """A header object from parts: the fields a request has, in any order, some repeated or
    missing or odd, with whitespace, a trailing comma or bytes after it now and then."""
    pairs = [(b'"code"', draw(st.sampled_from([b"200051", b"200051", b"11", b"10"]) | tokens))]
    pairs.append((b'"extFields"', draw(ext_objects() | tokens)))
    pairs += [(b'"flag"', draw(st.just(b"0") | tokens))] * draw(st.integers(0, 2))
    pairs += draw(st.lists(st.tuples(top_keys, tokens | ext_objects()), max_size=4))
    pairs = draw(st.permutations(pairs))
    if draw(st.integers(0, 9)) == 0 and pairs:
        pairs = pairs[1:]
    sep = draw(st.sampled_from([b",", b",", b" , "]))
    text = sep.join(k + draw(WS) + b":" + draw(WS) + v for k, v in pairs)
    end = draw(st.sampled_from([b"", b"", b"", b",", b" x", b"}", b"\n"]))
    return draw(WS) + b"{" + text + b"}" + end


def client_ack(opaque: int, ext: dict[str, str], body: bytes) -> bytes:
    """An ACK_MESSAGE frame as a client writes it (our encoder: orjson escapes what it must)."""
    cmd = remoting.RemotingCommand(ACK, opaque=opaque, ext_fields=ext, body=body)
    return remoting.encode_command(cmd)


texts = st.text(max_size=12) | st.sampled_from(["", "é", "1 2 3 0 0 b 1 5", 'a"b', "x\ny"])
client_acks = st.builds(
    client_ack,
    st.integers(-(2**31), 2**31 - 1),
    st.dictionaries(
        st.sampled_from(["consumerGroup", "topic", "offset", "é"]) | texts, texts, max_size=6
    ),
    st.binary(max_size=8),
)
frames = st.builds(frame_of, headers(), st.binary(max_size=6)) | client_acks


@st.composite
def streams(draw: st.DrawFn) -> list[bytes]:
    """Frames back to back (one byte poked now and then), cut into the chunks a reader gets."""
    data = b"".join(draw(st.lists(frames, min_size=1, max_size=4)))
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=3)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def decoded(chunks: list[bytes], max_frame: int) -> list[Any]:
    """What a decoder of the direct codes yields: each DirectRequest as its first five fields
    and the command `command_of` rebuilds (or that one's error), each command, the error."""
    dec = remoting.FrameDecoder(max_frame)
    dec.direct_codes = CODES
    out: list[Any] = []
    try:
        for chunk in chunks:
            dec.feed(chunk)
            while (got := dec.next_command()) is not None:
                if got.__class__ is not tuple:
                    out.append(got)
                    continue
                try:
                    rebuilt: Any = remoting.command_of(got)  # type: ignore[arg-type]
                except remoting.RemoteProtocolError as e:
                    rebuilt = ("raised", str(e))
                out.append(("direct", got[:5], rebuilt))
    except remoting.RemoteProtocolError as e:
        out.append(("raised", type(e), str(e), e.reason))
    out.append(("buffered", dec.buffered, dec.missing()))
    return out


@settings(max_examples=600, deadline=None)
@given(chunks=streams(), max_frame=st.sampled_from([remoting.DEFAULT_MAX_FRAME, 80]))
def test_the_decoder_agrees_on_both_paths(ext: Any, chunks: list[bytes], max_frame: int) -> None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(remoting, "_next_direct_json", None)
        reference = decoded(chunks, max_frame)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(remoting, "_next_direct_json", ext.next_direct_json)
        assert decoded(chunks, max_frame) == reference


plain = st.text(
    st.characters(blacklist_categories=["Cs", "Cc"], blacklist_characters='"\\'), max_size=12
)


@settings(max_examples=200, deadline=None)
@given(
    opaque=st.integers(-(2**31), 2**31 - 1),
    fields=st.dictionaries(plain, plain, min_size=1, max_size=6),  # (none: no extFields)
    body=st.binary(max_size=8),
    pos=st.integers(0, 5),
)
def test_a_client_ack_is_read_by_the_compiled_reader(
    ext: Any, opaque: int, fields: dict[str, str], body: bytes, pos: int
) -> None:
    """It declines only what it must: a client's ACK frame without an escaped character is
    taken whole, as the Python path's DirectRequest; cut one byte short it is not."""
    frame = client_ack(opaque, fields, body)
    buf = bytearray(b"\x00" * pos + frame + b"\x00\x00")
    got = ext.next_direct_json(buf, pos, remoting.DEFAULT_MAX_FRAME, CODES)
    assert got is not None
    req, end = got
    assert end == pos + len(frame)
    want = remoting.decode_frame_payload(frame[4:])
    assert req[:5] == (ACK, opaque, fields, body, remoting.SERIALIZE_JSON)
    assert remoting.command_of(req) == want
    assert ext.next_direct_json(buf[: pos + len(frame) - 1], pos, 1 << 20, CODES) is None
    assert ext.next_direct_json(buf, pos, remoting.DEFAULT_MAX_FRAME, frozenset({11})) is None
