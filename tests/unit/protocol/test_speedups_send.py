"""The send path's compiled frame calls against their Python references: the next ROCKETMQ
frame of a decoder's buffer (protocol/speedups/frame.c, remoting.FrameDecoder) and a stored
send's answer frame (protocol/speedups/answer.c, send_answer.py). Same commands, same bytes,
same errors (class, text, reason), on well-formed, cut, spliced and random input."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol import compiled, remoting, send_answer
from rocketrio.protocol.codes import RPC_TYPE_RESPONSE, SERIALIZE_JSON, SERIALIZE_ROCKETMQ
from tests.harness.speedups import extension_in


@pytest.fixture(scope="module")
def ext() -> Iterator[Any]:
    """The extension, configured, even in a run that asked for pure Python."""
    with (
        extension_in(remoting, send_answer, remoting_configured=True) as mod,
        pytest.MonkeyPatch.context() as m,
    ):
        m.setattr(remoting, "_decode_rocketmq_header", remoting._decode_rocketmq_header_c)
        yield mod


def test_the_compiled_frame_calls_are_chosen(ext: Any) -> None:
    if compiled.speedups is not None:  # the product's choice at import (not pure Python)
        assert remoting._next_rocketmq_frame is compiled.speedups.next_rocketmq_frame
        assert send_answer.send_answer_frame is send_answer._send_answer_frame_c


# ------------------------------------------------------------------ the next frame

texts = st.text(max_size=10) | st.sampled_from(["", "a\udcff", "é", "x" * 30])
keys = st.sampled_from(["a", "b", "e", "i", "topic"]) | st.text(
    st.characters(max_codepoint=127), max_size=4
)


def rocketmq_frame(
    code: int, opaque: int, flag: int, remark: bytes, ext: list[tuple[bytes, bytes]], body: bytes
) -> bytes:
    entries = b"".join(
        struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext
    )
    header = (
        struct.pack(">hbhiii", code, 0, 453, opaque, flag, len(remark)) + remark
        + struct.pack(">i", len(entries)) + entries
    )  # fmt: skip
    return struct.pack(">ii", 4 + len(header) + len(body), (1 << 24) | len(header)) + header + body


utf8ish = st.text(max_size=8).map(str.encode) | st.binary(max_size=4)
good_rocketmq = st.builds(
    rocketmq_frame,
    st.integers(-32768, 32767),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 3),
    st.just(b"") | utf8ish,
    st.lists(st.tuples(utf8ish, utf8ish), max_size=6),
    # (a last byte that is not 0: a frame taken one byte early must not look whole)
    st.binary(max_size=40) | st.binary(max_size=40).map(lambda b: b + b"!") | st.just(b"z" * 5000),
)
json_frames = st.builds(
    lambda code, opaque, ext, body: remoting.encode_command(
        remoting.RemotingCommand(code, opaque=opaque, ext_fields=ext, body=body)
    ),
    st.integers(0, 400),
    st.integers(0, 2**31 - 1),
    st.dictionaries(keys, st.text(max_size=10), max_size=3),
    st.binary(max_size=20),
)


@st.composite
def frame_streams(draw: st.DrawFn) -> list[bytes]:
    """Frames back to back (some damaged), cut into the chunks a reader would get."""
    frames = draw(st.lists(good_rocketmq | json_frames, min_size=1, max_size=6))
    how = draw(st.sampled_from(["keep", "keep", "keep", "poke", "cut", "random"]))
    data = b"".join(frames)
    if how == "poke":  # one byte changed: a length word, a header word, a field
        at = draw(st.integers(0, len(data) - 1) | st.integers(0, min(12, len(data) - 1)))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    elif how == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif how == "random":
        data = data[:16] + draw(st.binary(max_size=40))
    ends = [sum(map(len, frames[: i + 1])) for i in range(len(frames))]
    near_ends = st.sampled_from(ends).flatmap(lambda e: st.integers(e - 2, e + 1))
    cuts = sorted(
        min(max(c, 0), len(data))
        for c in draw(st.lists(st.integers(0, len(data)) | near_ends, max_size=5))
    )
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def decoded(chunks: list[bytes], max_frame: int) -> list[Any]:
    """Every command (or the error, as class, text and reason) a decoder yields, and what
    it still buffers."""
    dec = remoting.FrameDecoder(max_frame)
    out: list[Any] = []
    try:
        for chunk in chunks:
            dec.feed(chunk)
            while (cmd := dec.next_command()) is not None:
                out.append(cmd)
    except remoting.RemoteProtocolError as e:
        out.append(("raised", type(e), str(e), e.reason))
    out.append(("buffered", dec.buffered, dec.missing()))
    return out


@settings(max_examples=400, deadline=None)
@given(chunks=frame_streams(), max_frame=st.sampled_from([remoting.DEFAULT_MAX_FRAME, 64]))
def test_the_frame_decoder_agrees_on_both_paths(
    ext: Any, chunks: list[bytes], max_frame: int
) -> None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(remoting, "_next_rocketmq_frame", None)
        reference = decoded(chunks, max_frame)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(remoting, "_next_rocketmq_frame", ext.next_rocketmq_frame)
        assert decoded(chunks, max_frame) == reference


@settings(max_examples=200, deadline=None)
@given(frame=good_rocketmq, pos=st.integers(0, 9), tail=st.binary(max_size=9))
def test_the_compiled_frame_call_takes_every_whole_frame_the_reference_decodes(
    ext: Any, frame: bytes, pos: int, tail: bytes
) -> None:
    """It declines only what it must hand to the Python path, never a whole good frame."""
    buf = bytearray(b"\x00" * pos + frame + tail)
    try:
        want = remoting.decode_frame_payload(frame[4:])
    except remoting.RemoteProtocolError:
        assert ext.next_rocketmq_frame(buf, pos, remoting.DEFAULT_MAX_FRAME) is None
        return
    assert ext.next_rocketmq_frame(buf, pos, remoting.DEFAULT_MAX_FRAME) == (want, pos + len(frame))
    assert ext.next_rocketmq_frame(buf[: pos + len(frame) - 1], pos, 1 << 20) is None  # cut
    over = len(frame) - 5  # the frame's length word is len(frame) - 4: one over the limit
    assert ext.next_rocketmq_frame(buf, pos, over) is None  # the Python path refuses it


# ------------------------------------------------------------------ the answer frame


def reference_answer(request: remoting.RemotingCommand, *values: Any) -> tuple[Any, ...]:
    """The frame the generic path sends: a response command, encoded."""
    remark, msg_id, queue_id, queue_offset, uniq = values
    ext = {
        "msgId": msg_id,
        "queueId": str(queue_id),
        "queueOffset": str(queue_offset),
        "transactionId": uniq,
    }
    try:
        return ("returned", remoting.encode_command(request.make_response(0, remark, ext)))
    except Exception as e:
        return ("raised", type(e), str(e))


def outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    try:
        return ("returned", fn(*args))
    except Exception as e:
        return ("raised", type(e), str(e))


@settings(max_examples=500, deadline=None)
@given(
    stype=st.sampled_from([SERIALIZE_ROCKETMQ, SERIALIZE_JSON]),
    opaque=st.integers(-(2**31), 2**31 - 1) | st.integers(-(2**33), 2**33),
    remark=st.none() | texts,
    msg_id=texts | st.just("0A00000100002A9F0000000000000064"),
    queue_id=st.integers(-1, 2**31 - 1) | st.integers(-(2**64), 2**64),
    queue_offset=st.integers(-(2**63), 2**63 - 1) | st.integers(-(2**65), 2**65),
    uniq=texts | st.just("7F0000010C1C18B4AAC2740A6B9C0000"),
)
def test_the_send_answer_twins_agree_with_the_generic_encoder(
    ext: Any, stype: int, opaque: int, remark: str | None, msg_id: str, queue_id: int,
    queue_offset: int, uniq: str,
) -> None:  # fmt: skip
    request = remoting.RemotingCommand(310, opaque=opaque, serialize_type=stype)
    values = (remark, msg_id, queue_id, queue_offset, uniq)
    want = reference_answer(request, *values)
    assert outcome(send_answer._send_answer_frame_py, request, *values) == want
    assert outcome(send_answer._send_answer_frame_c, request, *values) == want
    if stype == SERIALIZE_ROCKETMQ:  # the compiled call declines only what the twin refuses
        head = send_answer._HEAD
        direct = ext.send_answer_frame(head, opaque, RPC_TYPE_RESPONSE, *values)
        fits = -(2**63) <= queue_id < 2**63 and -(2**63) <= queue_offset < 2**63
        if want[0] == "returned" and fits:
            assert direct == want[1]
        elif want[0] == "raised":
            assert direct is None


# ------------------------------------------------------------------ the V2 send header

FIELDS = "abcdefghijklmn"
plain_ints = st.integers(-(10**18) + 1, 10**18 - 1).map(str)
odd_ints = st.sampled_from(["+1", " 1", "1 ", "1_0", "٣", "", "-", "0x1", "1.0", "a\udcff"])
bools = st.sampled_from(["true", "false"])
plain_values = {key: plain_ints for key in "defghjl"} | {"k": bools, "m": bools}


@st.composite
def v2_headers(draw: st.DrawFn) -> tuple[dict[str, str], bool]:
    """SEND_MESSAGE_V2 extFields and whether every value is plain (the compiled call's case)."""
    ext: dict[str, Any] = {}
    plain = True
    for key in FIELDS:
        if key in "abcdefgh" and draw(st.integers(0, 30)) == 0:
            plain = False  # a required field left out
            continue
        if key in "ijklmn" and draw(st.booleans()):
            continue  # an optional field left out
        value = draw(plain_values.get(key, texts))
        if draw(st.integers(0, 8)) == 0:  # a value int() or the bool parse treats otherwise
            value = draw(odd_ints | st.sampled_from(["TRUE", "1", "0", "maybe"]) | st.integers())
            plain = False
        ext[key] = value
    return ext, plain


@settings(max_examples=500, deadline=None)
@given(case=v2_headers())
def test_the_send_header_twins_agree(ext: Any, case: tuple[dict[str, str], bool]) -> None:
    from rocketrio.actors.broker.send.handlers import parse_send_header_v2
    from rocketrio.protocol.headers import SendMessageRequestHeader

    fields, plain = case
    direct = ext.send_header_v2(fields, SendMessageRequestHeader)
    want = outcome(parse_send_header_v2, fields)
    if direct is not None:
        assert ("returned", direct) == want
    else:  # declined: only what is not plain
        assert not plain
    if plain:
        assert direct is not None


# ------------------------------------------------------------------ a message's properties

prop_atoms = st.sampled_from(
    ["TAGS\x01", "KEYS\x01", "UNIQ_KEY\x01", "__CRC32#", "__CRC32#\x01", "\x01", "\x02", "a",
     "TagA", "k1 k2", "XTAGS\x01", "TAGS", "é", "ø\x01", "a\udcff", "UNIQ_KEY\x01U1\x02",
     "TAGS\x01\x02", "KEYS\x01x\x02"]
)  # fmt: skip
prop_texts = st.lists(prop_atoms | st.text(max_size=5), max_size=10).map("".join)


@settings(max_examples=500, deadline=None)
@given(props=prop_texts)
def test_the_wire_properties_twins_agree(ext: Any, props: str) -> None:
    from rocketrio.storage import dispatch_request

    with pytest.MonkeyPatch.context() as m:
        m.setattr(dispatch_request, "_wire_text", None)
        want = outcome(dispatch_request.wire_properties, props)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(dispatch_request, "_wire_text", ext.wire_text_properties)
        assert outcome(dispatch_request.wire_properties, props) == want
    direct = ext.wire_text_properties(props)
    plain = "__CRC32#" not in props and "\udcff" not in props
    assert (direct is not None) == plain  # it declines only a CRC pair or a surrogate
    if direct is not None:
        assert ("returned", direct) == want
