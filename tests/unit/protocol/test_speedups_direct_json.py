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
ODD = ODD_NUMBERS + STRINGS + WORDS
EXT_KEYS = [b'"consumerGroup"', b'"topic"', b'"queueId"', b'"offset"', b'"extraInfo"']
EXT_VALUES = [b'"1 2 3 0 0 b 1 5"', b'"7"', b'""', '"\u00e9"'.encode()]
ODD_KEYS = [b'"a\\"k"', '"\u00e9"'.encode(), b'"\xff"', b'"x\x02"', b'"co\\u0064e"', b"1"]
TOP = {
    b'"code"': [b"200051", b"200051", b"11", b"10"],
    b'"opaque"': NUMBERS,
    b'"flag"': [b"0"],
    b'"version"': NUMBERS,
    b'"language"': [b'"JAVA"', b'"PYTHON"', b"null", b"7"],
    b'"remark"': [b"null", b'"x"', b'""', b"true"],
    b'"serializeTypeCurrentRPC"': [b'"JSON"'],
}
# one odd change to a header the compiled reader takes, or none
CHANGES = [
    "none", "none", "none", "top value", "ext value", "ext key", "repeat top", "repeat ext",
    "odd key", "flag", "after", "trailing comma", "ext not an object", "no code", "no ext",
]  # fmt: skip


def joined(draw: st.DrawFn, pairs: list[tuple[bytes, bytes]], trailing: bytes) -> bytes:
    sep = draw(st.sampled_from([b",", b",", b" , "]))
    text = sep.join(k + draw(WS) + b":" + draw(WS) + v + draw(WS) for k, v in pairs)
    return b"{" + draw(WS) + text + trailing + b"}"


@st.composite
def headers(draw: st.DrawFn) -> bytes:
    """A header as a client writes one (its fields in any order, whitespace between them),
    then at most one odd change: a value or key the compiled reader must decline, a key
    repeated with another value, a flag, bytes after the object, a trailing comma, extFields
    missing or not an object."""
    change = draw(st.sampled_from(CHANGES))
    ext_keys = draw(st.lists(st.sampled_from(EXT_KEYS), unique=True, max_size=5))
    ext = [(k, draw(st.sampled_from(EXT_VALUES))) for k in ext_keys]
    if change == "ext value" and ext:
        ext[-1] = (ext[-1][0], draw(st.sampled_from([*ODD, b"1", b"true"])))
    if change == "ext key":
        ext.append((draw(st.sampled_from(ODD_KEYS)), b'"v"'))
    if change == "repeat ext" and ext:
        ext.append((ext[0][0], b'"again"'))
    trailing = b"," if change == "trailing comma" else b""
    ext_text = joined(draw, ext, trailing if draw(st.booleans()) else b"")
    keys = draw(st.lists(st.sampled_from(list(TOP)), unique=True, max_size=len(TOP)))
    top = [
        (k, draw(st.sampled_from(TOP[k]))) for k in keys if change != "no code" or k != b'"code"'
    ]
    if change != "no code" and b'"code"' not in keys:
        top.append((b'"code"', b"200051"))
    if change != "no ext":
        top.append((b'"extFields"', ext_text if change != "ext not an object" else b'"{}"'))
    if change == "top value" and top:
        top[0] = (top[0][0], draw(st.sampled_from(ODD)))
    if change == "repeat top":  # another value of one of its keys (orjson keeps the last)
        key = draw(st.sampled_from(top))[0]
        top.append((key, draw(st.sampled_from([*TOP.get(key, []), b"{}", b'{"topic":"t"}']))))
    if change == "odd key":
        top.append((draw(st.sampled_from(ODD_KEYS)), draw(st.sampled_from(GOOD_TOKENS))))
    if change == "flag":
        top.append((b'"flag"', draw(st.sampled_from([b"1", b"2", b"-1", b"3"]))))
    top = draw(st.permutations(top))
    after = draw(st.sampled_from([b" x", b"}", b",", b"{}"])) if change == "after" else b""
    return draw(WS) + joined(draw, top, trailing) + draw(WS) + after


GOOD_TOKENS = [*NUMBERS, b'"x"', b"true", b"null"]


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


# each refusal once for sure, beside the draws: the header after ``"code":200051,``
SURE = [
    b'"opaque":01,"extFields":{}', b'"opaque":-0,"extFields":{}', b'"opaque":1.0,"extFields":{}',
    b'"language":01,"extFields":{}', b'"flag":1,"extFields":{}', b'"extFields":{"a":"\x01"}',
    b'"extFields":{"a\\"b":"c"}', b'"extFields":{"a":"\\u0063"}', b'"\xff":1,"extFields":{}',
    b'"extFields":{"a":"b","a":"c"}', b'"code":10,"extFields":{}', b'"extFields":{},"x":[]',
]  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(chunks=streams(), max_frame=st.sampled_from([remoting.DEFAULT_MAX_FRAME, 80]))
def test_the_decoder_agrees_on_both_paths(ext: Any, chunks: list[bytes], max_frame: int) -> None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(remoting, "_next_direct_json", None)
        reference = decoded(chunks, max_frame)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(remoting, "_next_direct_json", ext.next_direct_json)
        assert decoded(chunks, max_frame) == reference


@pytest.mark.parametrize("rest", SURE)
def test_each_refusal_is_the_python_paths(ext: Any, rest: bytes) -> None:
    """One frame per refusal (a decoder stops at its first bad frame), then a good one."""
    chunks = [frame_of(b'{"code":200051,' + rest + b"}"), frame_of(b'{"code":11,"extFields":{}}')]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(remoting, "_next_direct_json", None)
        reference = decoded(chunks, 1 << 20)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(remoting, "_next_direct_json", ext.next_direct_json)
        assert decoded(chunks, 1 << 20) == reference


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
