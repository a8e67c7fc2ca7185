"""Stored-message codec: upstream layout, round trips, CRC trailer, batch bodies, ids, garbage."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol.message import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    CRC32_RESERVED_LEN,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    PHY_POS_POSITION,
    PROPERTY_CRC32,
    QUEUE_OFFSET_POSITION,
    STOREHOSTADDRESS_V6_FLAG,
    SYSFLAG_POSITION,
    BatchConstants,
    BatchItem,
    MessageDecodeError,
    MessageSizeError,
    append_record,
    build_batch_records,
    build_stored_message,
    check_stored_record,
    checked_dispatch_fields,
    crc32,
    decode_all,
    decode_batch_body,
    decode_properties,
    decode_stored,
    encode_batch_body,
    encode_properties,
    find_property,
    host_to_str,
    iter_stored,
    offset_msg_id,
    parse_offset_msg_id,
    seal_record_crc,
    stored_timestamp,
    tags_code_of_bytes,
    tags_hash_code,
)

LOCAL = (b"\x7f\x00\x00\x01", 10911)
prop_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"),
    min_size=1,
    max_size=12,
)
# __CRC32# is the record-CRC key the codec writes itself, never a user property
properties = st.dictionaries(prop_text.filter(lambda k: k != PROPERTY_CRC32), prop_text, max_size=6)
ipv4 = st.binary(min_size=4, max_size=4)
ipv6 = st.binary(min_size=16, max_size=16)
hosts = st.tuples(ipv4 | ipv6, st.integers(0, 65535))
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(0, 2**63 - 1)


def record(**over: Any) -> bytes:
    fields: dict[str, Any] = dict(
        topic="TopicTest",
        queue_id=3,
        body=b"hello",
        flag=7,
        properties=encode_properties({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"}),
        sys_flag=0,
        born_timestamp=1_700_000_000_000,
        born_host=(b"\x0a\x00\x00\x02", 50000),
        store_timestamp=1_700_000_000_123,
        store_host=LOCAL,
        queue_offset=42,
        physical_offset=4096,
    )
    fields.update(over)
    return build_stored_message(**fields)


# ----------------------------------------------------------------------------- properties


@given(properties)
def test_properties_round_trip(props: dict[str, str]) -> None:
    assert decode_properties(encode_properties(props)) == props


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("A\x011\x02B\x012\x02", {"A": "1", "B": "2"}),
        ("A\x011\x02B\x012", {"A": "1", "B": "2"}),  # no trailing separator
        ("A\x01\x02B\x012\x02", {"B": "2"}),  # empty value dropped, like upstream
        ("\x01x\x02", {}),  # empty key dropped
        ("noseparator\x02", {}),
        ("K\x01v\x01w\x02", {"K": "v\x01w"}),  # first separator splits
    ],
)
def test_decode_properties_like_upstream(text: str, expected: dict[str, str]) -> None:
    assert decode_properties(text) == expected


def test_encode_properties_refuses_separators() -> None:
    with pytest.raises(ValueError, match="must not contain"):
        encode_properties({"K": "a\x02b"})


# ----------------------------------------------------------------------------- layout


def test_layout_matches_upstream_positions() -> None:
    rec = record(record_crc="none")
    total, magic, body_crc, queue_id, flag = struct.unpack_from(">iiiii", rec)
    assert total == len(rec)
    assert magic == MAGIC_CODE_V1
    assert body_crc == zlib.crc32(b"hello") & 0x7FFFFFFF
    assert (queue_id, flag) == (3, 7)
    assert struct.unpack_from(">q", rec, QUEUE_OFFSET_POSITION)[0] == 42
    assert struct.unpack_from(">q", rec, PHY_POS_POSITION)[0] == 4096
    assert struct.unpack_from(">i", rec, SYSFLAG_POSITION)[0] == 0
    assert struct.unpack_from(">q4si", rec, 40) == (1_700_000_000_000, b"\x0a\x00\x00\x02", 50000)
    assert struct.unpack_from(">q4si", rec, 56) == (1_700_000_000_123, LOCAL[0], LOCAL[1])
    assert struct.unpack_from(">iqi", rec, 72) == (0, 0, 5)  # reconsume, prepared, bodyLen
    assert rec[88:93] == b"hello"
    assert rec[93] == len("TopicTest")
    assert rec[94:103] == b"TopicTest"
    props_len = struct.unpack_from(">h", rec, 103)[0]
    assert (
        rec[105:]
        == encode_properties({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"}).encode()
    )
    assert 105 + props_len == total


def test_crc_trailer_is_upstream_format() -> None:
    rec = record()
    trailer = rec[-CRC32_RESERVED_LEN:]
    assert trailer[:9] == PROPERTY_CRC32.encode() + b"\x01"
    assert trailer[-1:] == b"\x02"
    crc = zlib.crc32(rec[:-CRC32_RESERVED_LEN]) & 0x7FFFFFFF
    # upstream writes the least significant digit first
    assert trailer[9:19] == str(crc)[::-1].ljust(10, "0").encode()
    assert check_stored_record(rec, 0, expected_offset=4096) == len(rec)


def test_ipv6_hosts_set_flags_and_widen_layout() -> None:
    v6 = (bytes(range(16)), 9876)
    rec = record(born_host=v6, store_host=v6, record_crc="none")
    sys_flag = struct.unpack_from(">i", rec, SYSFLAG_POSITION)[0]
    assert sys_flag & BORNHOST_V6_FLAG and sys_flag & STOREHOSTADDRESS_V6_FLAG
    assert len(rec) == len(record(record_crc="none")) + 24
    msg, _ = decode_stored(rec)
    assert msg.born_host == host_to_str(v6[0], 9876)
    assert stored_timestamp(rec) == 1_700_000_000_123


def test_long_topic_uses_magic_v2() -> None:
    topic = "T" * 200
    rec = record(topic=topic)
    assert struct.unpack_from(">i", rec, 4)[0] == MAGIC_CODE_V2
    assert decode_stored(rec)[0].topic == topic
    with pytest.raises(ValueError, match="needs magic V2"):
        record(topic=topic, magic=MAGIC_CODE_V1)


# ----------------------------------------------------------------------------- round trips


record_fields = st.fixed_dictionaries(
    {
        "topic": st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=150),
        "queue_id": int32,
        "body": st.binary(max_size=300),
        "flag": int32,
        "sys_flag": st.sampled_from([0, 0x4, 0x8, 0xC]),
        "born_timestamp": int64,
        "born_host": hosts,
        "store_timestamp": int64,
        "store_host": hosts,
        "reconsume_times": int32,
        "prepared_transaction_offset": int64,
        "queue_offset": int64,
        "physical_offset": int64,
        "record_crc": st.sampled_from(["seal", "reserve", "none"]),
    }
)
# MessageExt attribute -> build_stored_message argument
SAME_FIELDS = {
    "topic": "topic",
    "queue_id": "queue_id",
    "body": "body",
    "flag": "flag",
    "born_timestamp": "born_timestamp",
    "store_timestamp": "store_timestamp",
    "reconsume_times": "reconsume_times",
    "prepared_transaction_offset": "prepared_transaction_offset",
    "queue_offset": "queue_offset",
    "commitlog_offset": "physical_offset",
}


@settings(max_examples=150)
@given(fields=record_fields, props=properties)
def test_stored_record_round_trip(fields: dict[str, Any], props: dict[str, str]) -> None:
    rec = build_stored_message(properties=encode_properties(props), **fields)
    msg, end = decode_stored(rec, check_crc=fields["record_crc"] == "seal")
    assert end == len(rec) == msg.store_size
    for attr, arg in SAME_FIELDS.items():
        assert getattr(msg, attr) == fields[arg], attr
    assert msg.sys_flag & 0xC == fields["sys_flag"]
    assert msg.born_host == host_to_str(*fields["born_host"])
    assert msg.store_host == host_to_str(*fields["store_host"])
    got_props = dict(msg.properties)
    if fields["record_crc"] != "none":
        assert got_props.pop(PROPERTY_CRC32).isdigit()
    assert got_props == props
    store_ip, store_port = fields["store_host"]
    assert msg.offset_msg_id == offset_msg_id(store_ip, store_port, fields["physical_offset"])


def test_reserved_trailer_is_sealed_later() -> None:
    buf = bytearray(record(record_crc="reserve"))
    with pytest.raises(MessageDecodeError, match="CRC mismatch"):
        check_stored_record(buf, 0)
    seal_record_crc(buf, 0, len(buf))
    assert bytes(buf) == record(record_crc="seal")


def test_iter_stored_reads_a_pull_body() -> None:
    recs = [record(queue_offset=i, body=bytes([i]) * i) for i in range(5)]
    msgs = list(iter_stored(b"".join(recs)))
    assert [m.queue_offset for m in msgs] == list(range(5))
    assert [m.body for m in msgs] == [bytes([i]) * i for i in range(5)]


def test_message_ext_views() -> None:
    msg, _ = decode_stored(record())
    assert msg.tags == "TagA"
    assert msg.keys == ["k1", "k2"]
    assert msg.msg_id == "ABC"  # UNIQ_KEY wins
    no_uniq, _ = decode_stored(record(properties="TAGS\x01x\x02"))
    assert no_uniq.msg_id == offset_msg_id(LOCAL[0], LOCAL[1], 4096)
    assert no_uniq.keys == []


def test_check_crc_and_decompression() -> None:
    body = zlib.compress(b"payload" * 10)
    rec = record(body=body, sys_flag=COMPRESSED_FLAG)
    assert decode_stored(rec, decompress_body=True)[0].body == b"payload" * 10
    assert decode_stored(rec)[0].body == body
    bad = bytearray(record(record_crc="none"))
    bad[88] ^= 0xFF  # first body byte
    decode_stored(bytes(bad))
    with pytest.raises(MessageDecodeError, match="body CRC"):
        decode_stored(bytes(bad), check_crc=True)


# ----------------------------------------------------------------------------- garbage


def test_every_truncation_raises_decode_error() -> None:
    rec = record()
    for cut in range(len(rec)):
        with pytest.raises(MessageDecodeError):
            decode_stored(rec[:cut])
        with pytest.raises(MessageDecodeError):
            check_stored_record(rec[:cut], 0)


@settings(max_examples=300)
@given(pos=st.integers(0, 10_000), xor=st.integers(1, 255))
def test_any_flipped_byte_fails_the_record_check(pos: int, xor: int) -> None:
    rec = bytearray(record())
    rec[pos % len(rec)] ^= xor
    with pytest.raises(MessageDecodeError):
        check_stored_record(rec, 0, expected_offset=4096)
    try:
        decode_stored(bytes(rec))
    except MessageDecodeError:
        pass


def _dispatch_fields_both_ways(buf: bytes, expected: int, limit: int) -> tuple[object, object]:
    """checked_dispatch_fields of a bytes buffer (the fast path when the record is usual) and
    of the same bytes as a bytearray (the general checks): each a result or the error type."""
    out: list[object] = []
    for b in (buf, bytearray(buf)):
        try:
            out.append(checked_dispatch_fields(b, 0, expected_offset=expected, limit=limit))
        except MessageDecodeError:
            out.append(MessageDecodeError)
    return out[0], out[1]


@settings(max_examples=150)
@given(fields=record_fields, props=properties)
def test_replica_check_fast_path_agrees_with_the_general_checks(
    fields: dict[str, Any], props: dict[str, str]
) -> None:
    fields["record_crc"] = "seal"
    rec = build_stored_message(properties=encode_properties(props), **fields)
    fast, general = _dispatch_fields_both_ways(rec, fields["physical_offset"], len(rec))
    assert fast == general
    msg, _ = decode_stored(rec)
    assert isinstance(fast, tuple)
    assert fast[:6] == (
        len(rec), msg.topic, msg.queue_id, msg.queue_offset, msg.sys_flag, msg.store_timestamp,
    )  # fmt: skip
    assert decode_properties(fast[6].decode()) == msg.properties
    # the record's position, and a limit that cuts it, are refused both ways
    assert _dispatch_fields_both_ways(rec, fields["physical_offset"] + 1, len(rec)) == (
        MessageDecodeError,
        MessageDecodeError,
    )
    assert _dispatch_fields_both_ways(rec, fields["physical_offset"], len(rec) - 1) == (
        MessageDecodeError,
        MessageDecodeError,
    )


@settings(max_examples=300)
@given(pos=st.integers(0, 10_000), xor=st.integers(1, 255))
def test_replica_check_refuses_any_flipped_byte_on_both_paths(pos: int, xor: int) -> None:
    rec = bytearray(record(body=b"x" * 200))
    ok = _dispatch_fields_both_ways(bytes(rec), 4096, len(rec))
    assert ok[0] == ok[1] and ok[0] is not MessageDecodeError
    rec[pos % len(rec)] ^= xor
    assert _dispatch_fields_both_ways(bytes(rec), 4096, len(rec)) == (
        MessageDecodeError,
        MessageDecodeError,
    )


@given(st.binary(max_size=400))
def test_random_bytes_only_raise_decode_error(data: bytes) -> None:
    for fn in (lambda: list(iter_stored(data)), lambda: decode_batch_body(data)):
        try:
            fn()
        except MessageDecodeError:
            pass


def test_blank_record_is_not_a_message() -> None:
    with pytest.raises(MessageDecodeError, match="blank"):
        decode_stored(struct.pack(">ii", 64, -875286124) + bytes(56))


# ----------------------------------------------------------------------------- batch bodies


@given(st.lists(st.builds(BatchItem, int32, st.binary(max_size=50), properties), max_size=6))
def test_batch_body_round_trip(items: list[BatchItem]) -> None:
    assert decode_batch_body(encode_batch_body(items)) == items


def test_batch_body_layout_and_truncation() -> None:
    data = encode_batch_body([BatchItem(5, b"abc", {"K": "v"})])
    props = b"K\x01v\x02"
    assert data == struct.pack(">iiiii", 20 + 3 + 2 + 4, 0, 0, 5, 3) + b"abc" + b"\x00\x04" + props
    for cut in range(1, len(data)):
        with pytest.raises(MessageDecodeError):
            decode_batch_body(data[:cut])


# ----------------------------------------------------------------------------- ids and tags


@given(ip=ipv4 | ipv6, port=st.integers(0, 65535), offset=int64)
def test_offset_msg_id_round_trip(ip: bytes, port: int, offset: int) -> None:
    msg_id = offset_msg_id(ip, port, offset)
    assert msg_id == msg_id.upper()
    assert len(msg_id) == (32 if len(ip) == 4 else 56)
    ip_str, got_port, got_offset = parse_offset_msg_id(msg_id)
    assert host_to_str(ip, port) == f"{ip_str}:{got_port}"
    assert got_offset == offset


def test_offset_msg_id_known_value() -> None:
    assert offset_msg_id(LOCAL[0], 10911, 1234) == "7F00000100002A9F00000000000004D2"
    assert parse_offset_msg_id("7F00000100002A9F00000000000004D2") == ("127.0.0.1", 10911, 1234)


@pytest.mark.parametrize("bad", ["", "XYZ", "7F000001", "G" * 32, "0" * 40])
def test_parse_offset_msg_id_rejects_garbage(bad: str) -> None:
    with pytest.raises(MessageDecodeError):
        parse_offset_msg_id(bad)


@pytest.mark.parametrize(
    ("tag", "java_hash"),
    [
        ("", 0),
        ("a", 97),
        ("TagA", 2598919),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -2147483648),
        ("é", 233),
        ("\U0001f600", 1772899),  # surrogate pair, like Java's UTF-16
    ],
)
def test_tags_hash_code_is_java_string_hash(tag: str, java_hash: int) -> None:
    assert tags_hash_code(tag) == java_hash


# ----------------------------------------------------------------------------- put hot path


pair_text = st.text(st.sampled_from("KTAGSUNIQ_EY\x01\x02"), max_size=40)


@given(text=pair_text, key=st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "K", "EY"]))
def test_find_property_agrees_with_decode(text: str, key: str) -> None:
    # duplicate keys, empty values, keys that end another key, stray separators
    expected = decode_properties(text).get(key)
    assert find_property(text, key + "\x01") == expected
    raw = text.encode()
    got = find_property(raw, (key + "\x01").encode())
    assert got == (None if expected is None else expected.encode())
    padded = b"xx" + raw + b"yy"  # the start/end window is honoured
    assert find_property(padded, (key + "\x01").encode(), 2, 2 + len(raw)) == got


def test_encode_properties_drops_none_values() -> None:
    assert encode_properties({"A": "1", "B": None, "C": "3"}) == "A\x011\x02C\x013\x02"  # type: ignore[dict-item]
    assert encode_properties({}) == ""


@settings(max_examples=100)
@given(fields=record_fields, props=properties)
def test_append_record_equals_build_stored_message(
    fields: dict[str, Any], props: dict[str, str]
) -> None:
    fields = {**fields, "record_crc": "seal"}
    if len(fields["topic"].encode()) > 127:
        fields["topic"] = fields["topic"][:30]
    text = encode_properties(props)
    expected = build_stored_message(properties=text, **fields)
    parts: list[Any] = []
    size = append_record(
        parts, fields["topic"], fields["queue_id"], fields["body"], fields["flag"],
        text.encode(), fields["sys_flag"], fields["born_timestamp"], fields["born_host"],
        fields["store_timestamp"], fields["store_host"], fields["reconsume_times"],
        fields["prepared_transaction_offset"], fields["queue_offset"], fields["physical_offset"],
    )  # fmt: skip
    assert b"".join(parts) == expected
    assert size == len(expected)


def test_append_record_refuses_what_does_not_fit() -> None:
    with pytest.raises(MessageSizeError, match="32767"):
        append_record(
            [], "T", 0, b"", 0, b"K\x01" + b"v" * 40000, 0, 0, LOCAL, 0, LOCAL, 0, 0, 0, 0
        )
    with pytest.raises(ValueError, match="4 or 16 bytes"):
        append_record([], "T", 0, b"", 0, b"", 0, 0, (b"\x01", 1), 0, LOCAL, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="out of range"):
        append_record([], "T", 2**31, b"", 0, b"", 0, 0, LOCAL, 0, LOCAL, 0, 0, 0, 0)


BORN = (b"\x0a\x00\x00\x02", 50000)


def batch_const(properties: bytes = b"", **over: Any) -> BatchConstants:
    fields: dict[str, Any] = dict(
        topic="BT", queue_id=3, sys_flag=0, born_timestamp=111, born_host=BORN,
        store_timestamp=222, store_host=LOCAL, reconsume_times=1, properties=properties,
    )  # fmt: skip
    fields.update(over)
    return BatchConstants(**fields)


def build(data: bytes, const: BatchConstants, **over: Any) -> Any:
    kwargs: dict[str, Any] = dict(
        first_queue_offset=10, first_physical_offset=5000, max_body_size=4096
    )
    kwargs.update(over)
    return build_batch_records(data, const, **kwargs)


@settings(max_examples=100)
@given(
    items=st.lists(st.builds(BatchItem, int32, st.binary(max_size=60), properties), max_size=5),
    extra=properties,
    born_v6=st.booleans(),
)
def test_batch_records_decode_like_the_merged_messages(
    items: list[BatchItem], extra: dict[str, str], born_v6: bool
) -> None:
    born = (bytes(range(16)), 7) if born_v6 else BORN
    const = batch_const(encode_properties(extra).encode(), born_host=born)
    ids = iter(f"GEN{i}" for i in range(100))
    built = build(encode_batch_body(items), const, new_uniq_key=lambda: next(ids))
    assert len(built.sizes) == len(items) and sum(built.sizes) == len(built.data)
    pos = 0
    generated = iter(f"GEN{i}" for i in range(100))
    for i, (item, size) in enumerate(zip(items, built.sizes, strict=True)):
        check_stored_record(built.data, pos, expected_offset=5000 + pos)
        msg, end = decode_stored(built.data, pos, check_crc=True)
        assert end - pos == size == msg.store_size
        merged = {**item.properties, **extra}
        if "UNIQ_KEY" not in merged:
            merged["UNIQ_KEY"] = next(generated)
        got = dict(msg.properties)
        assert got.pop(PROPERTY_CRC32).isdigit()
        assert got == merged
        assert (msg.topic, msg.queue_id, msg.queue_offset, msg.commitlog_offset) == (
            "BT",
            3,
            10 + i,
            5000 + pos,
        )
        assert (msg.body, msg.flag, msg.born_timestamp, msg.store_timestamp) == (
            item.body,
            item.flag,
            111,
            222,
        )
        assert (msg.reconsume_times, msg.born_host) == (1, host_to_str(*born))
        assert bool(msg.sys_flag & BORNHOST_V6_FLAG) == born_v6
        assert built.uniq_keys[i] == merged["UNIQ_KEY"].encode()
        assert built.tags[i] == merged.get("TAGS", "").encode()
        assert built.tags_codes()[i] == tags_hash_code(merged.get("TAGS", ""))
        if built.keys is None:
            assert "KEYS" not in merged
        else:
            assert built.keys[i] == (merged["KEYS"].encode() if "KEYS" in merged else None)
        pos = end


def test_batch_records_without_uniq_source_store_none() -> None:
    data = encode_batch_body([BatchItem(0, b"a", {"TAGS": "t"}), BatchItem(0, b"b", {})])
    built = build(data, batch_const())
    assert built.uniq_keys == [b"", b""]
    assert [decode_stored(r)[0].msg_id for r in split(built)] == [
        offset_msg_id(LOCAL[0], LOCAL[1], 5000),
        offset_msg_id(LOCAL[0], LOCAL[1], 5000 + built.sizes[0]),
    ]


def split(built: Any) -> list[bytes]:
    out, pos = [], 0
    for size in built.sizes:
        out.append(built.data[pos : pos + size])
        pos += size
    return out


def test_batch_records_drop_a_stale_crc_and_fix_a_missing_separator() -> None:
    props = b"__CRC32#\x010000000001\x02A\x01b"  # a stale trailer; the last pair unterminated
    body = struct.pack(">iiiii", 20 + 1 + 2 + len(props), 0, 0, 0, 1) + b"x"
    body += struct.pack(">h", len(props)) + props
    built = build(body, batch_const(b"C\x01d\x02"))
    (rec,) = split(built)
    msg, _ = decode_stored(rec, check_crc=True)
    assert list(msg.properties.items())[:2] == [("A", "b"), ("C", "d")]
    assert rec.count(b"__CRC32#") == 1


@pytest.mark.parametrize(
    ("data", "error", "text"),
    [
        (encode_batch_body([BatchItem(0, b"x" * 4097, {})]), MessageSizeError, "4097"),
        (encode_batch_body([BatchItem(0, b"", {"K": "v" * 32760})]), MessageSizeError, "32767"),
        (
            struct.pack(">iiiii", 20 + 2 + 2, 0, 0, 0, 0) + b"\x00\x02\xff\x01",
            MessageDecodeError,
            "UTF-8",
        ),
        (struct.pack(">iiiii", 10, 0, 0, 0, 0) + b"\x00\x00", MessageDecodeError, "truncated"),
        (struct.pack(">iiiii", 22, 0, 0, 0, -5) + b"\x00\x00", MessageDecodeError, "truncated"),
    ],
)
def test_batch_records_refuse_bad_input(data: bytes, error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        build(data, batch_const())


def test_batch_records_every_truncation_raises() -> None:
    first = encode_batch_body([BatchItem(1, b"abc", {"TAGS": "t"})])
    data = first + encode_batch_body([BatchItem(2, b"de", {})])
    for cut in range(1, len(data)):
        if cut == len(first):
            assert len(build(data[:cut], batch_const()).sizes) == 1
            continue
        with pytest.raises(MessageDecodeError):
            build(data[:cut], batch_const())
    assert build(b"", batch_const()).sizes == []


def test_tags_code_of_bytes_matches_str() -> None:
    assert tags_code_of_bytes(b"TagA") == tags_hash_code("TagA") == 2598919


@given(data=st.binary(max_size=3000), seed=st.integers(0, 2**32 - 1))
def test_crc32_is_zlibs(data: bytes, seed: int) -> None:
    # zlib-ng's when installed: it must agree with zlib, chained from any value
    assert crc32(data, seed) == zlib.crc32(data, seed)
    assert crc32(memoryview(data)[1:]) == zlib.crc32(data[1:])


def test_decode_all_matches_iter_stored_and_rejects_garbage() -> None:
    from rocketrio.protocol.message import decode_all

    recs = [
        build_stored_message(
            topic=f"T{i}",
            queue_id=i,
            body=b"b" * i,
            flag=0,
            properties=f"TAGS\x01t{i}\x02",
            sys_flag=0,
            born_timestamp=i,
            born_host=(b"\x7f\x00\x00\x01", 1),
            store_timestamp=i,
            store_host=(b"\x7f\x00\x00\x01", 2),
            queue_offset=i,
        )
        for i in range(5)
    ]
    buf = b"".join(recs)
    assert decode_all(buf) == list(iter_stored(buf))
    assert [m.tags for m in decode_all(buf)] == [f"t{i}" for i in range(5)]
    with pytest.raises(MessageDecodeError):
        decode_all(buf[:-3])


# decode_all reads usual records in its own loop: it must agree with the record-by-record
# decoder on every shape, and on garbage raise exactly when that decoder raises
stored_fields = st.fixed_dictionaries(
    {
        "topic": st.sampled_from(["T", "TopicTest", "%RETRY%g", "é" * 3, "x" * 200]),
        "queue_id": st.integers(0, 1000),
        "body": st.binary(max_size=64),
        "flag": int32,
        "properties": properties.map(encode_properties),
        "sys_flag": st.sampled_from([0, COMPRESSED_FLAG, 0x4, 0x8]),
        "born_timestamp": int64,
        "born_host": hosts,
        "store_timestamp": int64,
        "store_host": hosts,
        "reconsume_times": st.integers(0, 16),
        "queue_offset": int64,
        "physical_offset": int64,
        "magic": st.sampled_from([None, MAGIC_CODE_V2]),
        "record_crc": st.sampled_from(["seal", "none"]),
    }
)


def _decode_each(buf: bytes, **kw: bool) -> list[Any] | type[MessageDecodeError]:
    try:
        return list(iter_stored(buf, **kw))
    except MessageDecodeError:
        return MessageDecodeError


def _decode_together(buf: bytes, **kw: bool) -> list[Any] | type[MessageDecodeError]:
    try:
        return decode_all(buf, **kw)
    except MessageDecodeError:
        return MessageDecodeError


@settings(max_examples=150)
@given(st.lists(stored_fields, min_size=1, max_size=5), st.booleans())
def test_decode_all_agrees_with_decode_stored(recs: list[dict[str, Any]], inflate: bool) -> None:
    for f in recs:
        if f["sys_flag"] & COMPRESSED_FLAG:
            f["body"] = zlib.compress(f["body"])
    buf = b"".join(build_stored_message(**f) for f in recs)
    got = decode_all(buf, decompress_body=inflate)
    assert got == _decode_each(buf, decompress_body=inflate)
    assert [m.queue_offset for m in got] == [f["queue_offset"] for f in recs]
    assert decode_all(bytearray(buf)) == decode_all(buf)


@settings(max_examples=300)
@given(
    st.lists(stored_fields, min_size=1, max_size=3),
    st.integers(0, 10_000),
    st.integers(1, 255),
    st.integers(0, 10_000),
)
def test_decode_all_rejects_what_decode_stored_rejects(
    recs: list[dict[str, Any]], pos: int, xor: int, cut: int
) -> None:
    buf = bytearray(b"".join(build_stored_message(**f) for f in recs))
    buf[pos % len(buf)] ^= xor
    for data in (bytes(buf), bytes(buf[: cut % len(buf)])):
        assert _decode_together(data) == _decode_each(data)


def test_decode_all_rejects_a_properties_length_above_a_short() -> None:
    # a length with the top bit set is negative for upstream's short field
    props = "K\x01" + "v" * 40_000 + "\x02"
    rec = bytearray(record(properties="", record_crc="none"))
    rec[-2:] = b"\x00\x00"
    n = len(props)
    rec[-2:] = n.to_bytes(2, "big")
    rec += props.encode()
    rec[0:4] = len(rec).to_bytes(4, "big")
    with pytest.raises(MessageDecodeError, match="properties length"):
        decode_all(bytes(rec))
