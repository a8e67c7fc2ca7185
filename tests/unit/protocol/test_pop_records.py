"""The ACK path's own decoders and encoders against the generic ones they stand in for:
`pop_headers.ack_fields` (an ACK_MESSAGE header straight from its extFields) against
`serde.from_ext`, and the CK / ACK record JSON through orjson (`pop_checkpoint._dumps`) against
the standard library's encoder the records were written with before."""

from __future__ import annotations

import json
from typing import Any

import attrs
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rocketrio.protocol.pop_checkpoint import AckMsg, PopCheckPoint, PopRecordError, _loads
from rocketrio.protocol.pop_headers import AckMessageRequestHeader, ack_fields
from rocketrio.protocol.serde import HeaderError, from_ext

FIELDS = ("consumerGroup", "topic", "queueId", "extraInfo", "offset", "bname")

# numbers as a client writes them, and the text int() reads or refuses in odd ways
NUMBERISH = st.one_of(
    st.integers(-(2**63), 2**63).map(str),
    st.sampled_from(
        [
            "",
            " 7",
            "7 ",
            "+3",
            "-0",
            "1_000",
            "0x10",
            "1.5",
            "nan",
            "\u0663",
            "\uff11\uff12",
            "9" * 30,
        ]
    ),
    st.text(max_size=6),
)
VALUE = st.one_of(
    st.text(max_size=12),
    NUMBERISH,
    st.integers(-5, 5),
    st.booleans(),
    st.none(),
)


@st.composite
def ext_fields(draw: st.DrawFn) -> dict[str, Any]:
    """extFields of an ACK_MESSAGE: each field present or not, a plain string most of the time
    (numbers for the two int fields), sometimes a value of another type."""
    ext: dict[str, Any] = {}
    for name in FIELDS:
        if draw(st.integers(0, 9)) == 0:
            continue  # missing
        if draw(st.integers(0, 4)) == 0:
            ext[name] = draw(VALUE)
        elif name in ("queueId", "offset"):
            ext[name] = draw(NUMBERISH)
        else:
            ext[name] = draw(st.text(max_size=12))
    if draw(st.booleans()):
        ext["someOtherField"] = draw(st.text(max_size=4))
    return ext


PLAIN = {"consumerGroup": "G", "topic": "T", "queueId": "-1", "extraInfo": "x", "offset": "-5"}


@example(PLAIN)
@example({**PLAIN, "queueId": " 3 ", "offset": "1_0"})
@example({**PLAIN, "offset": ""})
@settings(max_examples=400)
@given(ext_fields())
def test_ack_fields_are_from_ext_or_step_aside(ext: dict[str, Any]) -> None:
    """Whatever ack_fields reads is exactly what from_ext reads; what it does not read
    (None) goes to from_ext, so a header from_ext refuses is never taken here."""
    fast = ack_fields(ext)
    try:
        h = from_ext(AckMessageRequestHeader, ext)
    except HeaderError:
        assert fast is None
        return
    if fast is not None:
        assert fast == (h.consumerGroup, h.topic, h.queueId, h.extraInfo, h.offset)
        assert all(type(a) is type(b) for a, b in zip(fast, ("", "", 0, "", 0), strict=True))


def test_ack_fields_of_a_client_header() -> None:
    ext = {
        "consumerGroup": "G",
        "topic": "T",
        "queueId": "2",
        "extraInfo": "12 1764360000000 60000 3 0 b 2 14",
        "offset": "14",
        "bname": "b",
    }
    assert ack_fields(ext) == ("G", "T", 2, "12 1764360000000 60000 3 0 b 2 14", 14)
    assert ack_fields({**ext, "offset": "x"}) is None
    assert ack_fields({k: v for k, v in ext.items() if k != "topic"}) is None


def _old_dumps(d: dict[str, Any]) -> bytes:
    """The records' encoder before orjson (the standard library's)."""
    kept = {k: v for k, v in d.items() if v is not None}
    return json.dumps(kept, sort_keys=True, separators=(",", ":")).encode()


PRINTABLE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=16)
ANY_TEXT = st.text(max_size=16)
OFFSET = st.integers(0, 2**63 - 1)


def _records(text: st.SearchStrategy[str], number: st.SearchStrategy[int]) -> Any:
    acks = st.builds(
        AckMsg,
        st.lists(number, min_size=1, max_size=5).map(tuple),
        number,
        text,
        text,
        st.integers(0, 1024),
        number,
        text,
        st.booleans(),
    )
    cks = st.builds(
        PopCheckPoint,
        start_offset=number,
        pop_time=number,
        invisible_time=number,
        num=st.integers(1, 32),
        queue_id=st.integers(0, 1024),
        topic=text,
        cid=text,
        broker_name=text,
        bit_map=number,
        revive_offset=number,
        queue_offset_diff=st.lists(st.integers(0, 64), max_size=8).map(tuple),
        re_put_times=st.none() | st.integers(0, 17).map(str),
    )
    return st.one_of(acks, cks)


def _read_back(record: AckMsg | PopCheckPoint, body: bytes) -> AckMsg | PopCheckPoint:
    """``body`` read as ``record``'s kind, and what it should equal (an ``ack`` record writes
    its first offset only)."""
    if isinstance(record, PopCheckPoint):
        return PopCheckPoint.from_json(body)
    return AckMsg.from_json(body, batch=record.batch)


def _expected(record: AckMsg | PopCheckPoint) -> AckMsg | PopCheckPoint:
    if isinstance(record, AckMsg) and not record.batch:
        return attrs.evolve(record, ack_offsets=record.ack_offsets[:1])
    return record


@given(_records(PRINTABLE, OFFSET))
def test_record_json_is_byte_for_byte_the_standard_encoders_for_printable_text(
    record: AckMsg | PopCheckPoint,
) -> None:
    body = record.to_json()
    assert body == _old_dumps(json.loads(body))
    assert _read_back(record, body) == _expected(record)


@given(_records(ANY_TEXT, st.integers(-(2**70), 2**70)))
def test_record_json_is_the_same_value_for_any_text_and_any_number(
    record: AckMsg | PopCheckPoint,
) -> None:
    """Any text (UTF-8 where the standard encoder escapes) and numbers beyond 64 bits (the
    standard encoder, as before): the same JSON value, and the record reads back."""
    body = record.to_json()
    assert json.loads(body) == json.loads(_old_dumps(json.loads(body)))
    assert _read_back(record, body) == _expected(record)


def _old_loads(body: bytes) -> dict[str, Any] | str:
    """The standard decoder's reading of a record body (before orjson): the object, or why
    it is not one."""
    try:
        d = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "not JSON"
    return d if isinstance(d, dict) else "not an object"


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


@settings(max_examples=400)
@given(
    st.one_of(
        _JSON.map(lambda v: json.dumps(v, ensure_ascii=False).encode()),
        _JSON.map(lambda v: json.dumps(v).encode("utf-16")),  # the standard decoder reads it
        st.binary(max_size=40),
        st.sampled_from([b'{"so":NaN}', b'{"t":"\\ud800"}', b'{"a":1,"a":2}', b"[1]"]),
    )
)
@example(b'{"pt":-9223372036854775809,"so":18446744073709551616}')
@example(b'{"pt":1e400}')
def test_record_bodies_read_as_the_standard_decoder_reads_them(body: bytes) -> None:
    """orjson first, the standard decoder for what orjson refuses or might read otherwise: the
    same object (ints stay ints), or a PopRecordError where the standard one found none."""
    try:
        got: dict[str, Any] | str = _loads(body)
    except PopRecordError as e:
        got = "not JSON" if str(e).startswith("not JSON") else "not an object"
    assert got == _old_loads(body)
    if isinstance(got, dict):
        assert json.dumps(got, sort_keys=True) == json.dumps(_old_loads(body), sort_keys=True)
