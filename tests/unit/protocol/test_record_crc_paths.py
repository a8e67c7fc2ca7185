"""The record CRC's two ways (issue 28, third pass): below `_COMBINE_MIN` the body is read twice
(bodyCRC, then the record CRC chained over head, body and tail); from it on, the record CRC is
zlib-ng's `crc32_combine` of the head's CRC and bodyCRC. Both must give the bytes of the
generic path (`build_stored_message`, whose CRC is one pass over the whole record), and
`check_stored_record` must accept what either builds."""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol import message_build
from rocketrio.protocol.message import (
    BatchConstants,
    BatchItem,
    append_record,
    build_batch_records,
    build_stored_message,
    check_stored_record,
    decode_stored,
    encode_batch_body,
)
from rocketrio.protocol.message_format import crc32, crc32_combine

LOCAL = (b"\x7f\x00\x00\x01", 10911)
BORN = (b"\x0a\x00\x00\x02", 50000)
# bodies on both sides of the threshold, the big ones well past it
bodies = st.one_of(
    st.binary(max_size=64),
    st.integers(2000, 9000).map(lambda n: bytes(i * 7 % 251 for i in range(n))),
    st.binary(min_size=2040, max_size=2056),
)


def test_zlib_ng_is_the_crc_and_agrees_with_zlib() -> None:
    data = bytes(range(256)) * 20
    assert crc32_combine is not None, "zlib-ng is a dependency (pyproject.toml)"
    assert crc32(data) == zlib.crc32(data)
    assert crc32_combine(crc32(data[:100]), crc32(data[100:]), len(data) - 100) == crc32(data)
    assert message_build._COMBINE_MIN == 2048


@settings(max_examples=60, deadline=None)
@given(body=bodies, queue_offset=st.integers(0, 2**40), props=st.sampled_from([b"", b"A\x01b"]))
def test_append_record_equals_the_generic_record(
    body: bytes, queue_offset: int, props: bytes
) -> None:
    expected = build_stored_message(
        topic="CrcTopic", queue_id=2, body=body, flag=5, properties=props, sys_flag=0,
        born_timestamp=1, born_host=BORN, store_timestamp=2, store_host=LOCAL,
        queue_offset=queue_offset, physical_offset=777,
    )  # fmt: skip
    parts: list[Any] = []
    size = append_record(
        parts, "CrcTopic", 2, body, 5, props, 0, 1, BORN, 2, LOCAL, 0, 0, queue_offset, 777
    )
    assert b"".join(parts) == expected and size == len(expected)
    check_stored_record(expected, 0, expected_offset=777)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(bodies, min_size=1, max_size=4))
def test_batch_records_check_and_decode_whatever_the_body_size(sizes: list[bytes]) -> None:
    items = [BatchItem(i, body, {"UNIQ_KEY": f"U{i}"}) for i, body in enumerate(sizes)]
    const = BatchConstants("BT", 3, 0, 111, BORN, 222, LOCAL, 0, b"CLUSTER\x01c\x02")
    built = build_batch_records(
        encode_batch_body(items), const, first_queue_offset=0, first_physical_offset=5000,
        max_body_size=1 << 20,
    )  # fmt: skip
    pos = 0
    for item, size in zip(items, built.sizes, strict=True):
        check_stored_record(built.data, pos, expected_offset=5000 + pos)
        msg, end = decode_stored(built.data, pos, check_crc=True)
        assert (msg.body, end - pos) == (item.body, size)
        pos = end


def test_without_combine_the_bytes_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    body = bytes(range(256)) * 12  # 3 KiB: the combined path by default
    args = ("T", 0, body, 0, b"K\x01v", 0, 1, BORN, 2, LOCAL, 0, 0, 9, 100)
    combined: list[Any] = []
    append_record(combined, *args)
    monkeypatch.setattr(message_build, "_COMBINE_MIN", 1 << 62)  # zlib's path: two passes
    twice: list[Any] = []
    append_record(twice, *args)
    assert b"".join(combined) == b"".join(twice)
