"""One plain message's record and its dispatch fields in one call (`storage.record_fields`):
the compiled twin (`rocketrio.protocol._speedups.record_fields`,
protocol/speedups/record_fields.c) against the pure-Python reference (`record_fields_py`, which
is the put path's former `wire_properties`, `append_record`, `tags_hash_code`, `key_hashes`).

For any message the compiled path (C, or the reference for what the C declines) must append
the same bytes and give the same record size, tagsCode and index hashes, or raise the same
exception with the same text. The inputs mix plain messages with what the C declines (dict
properties, a stale CRC pair, lone surrogates, the delay and timer topics) and with what
append_record refuses (fields out of their width, properties past their limit, a topic past
V1's 127 bytes), non-ASCII topics, tags and keys, empty values and odd separators.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol import compiled, message_build
from rocketrio.protocol.message_decode import decode_stored
from rocketrio.storage import record_fields as rf
from rocketrio.storage.record_fields import record_fields_py
from tests.harness.speedups import extension_in


@pytest.fixture(scope="module")
def ext() -> Iterator[Any]:
    """The extension, even in a run that asked for pure Python, its twins set as the product
    sets them (record_fields_py for what the C declines)."""
    with extension_in(rf) as loaded:
        loaded.configure_record(message_build._append_record_py)
        loaded.configure_record_fields(record_fields_py)
        yield loaded


@pytest.fixture(scope="module", params=["compiled", "python"])
def path(request: pytest.FixtureRequest, ext: Any) -> Any:
    """The compiled `record_fields` (the product's when built), then the reference alone."""
    return ext.record_fields if request.param == "compiled" else record_fields_py


def test_the_extension_is_built_and_used(ext: Any) -> None:
    assert hasattr(ext, "record_fields")
    if compiled.speedups is not None:  # the product's choice at import (not pure Python)
        assert compiled.speedups is ext and rf.record_fields is ext.record_fields


topics = st.sampled_from(
    ["T", "TopicA", "é", "主题", "a" * 127, "é" * 64, "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer",
     "\ud800"]
)  # fmt: skip
text_values = st.sampled_from(
    ["", "a", "TagA", "é", "𝄞x", "k1 k2", " k3  ", "  ", "x\x01y", "ü ü", "\ud800", "0" * 40]
)
text_atoms = st.one_of(
    st.builds(lambda k, v: f"{k}\x01{v}\x02", st.sampled_from(
        ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "x", "XTAGS", "__CRC32#"]), text_values),
    st.sampled_from(["\x02", "\x01", "TAGS\x01", "KEYS\x01kk", "UNIQ_KEY\x01u"]),
)  # fmt: skip
text_props = st.lists(text_atoms, max_size=6).map("".join)
dict_props = st.dictionaries(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "x", "a\x01"]), text_values, max_size=4
)
big_props = st.integers(32700, 32800).map(lambda n: "UNIQ_KEY\x01u\x02x\x01" + "v" * n)
hosts = st.sampled_from([(b"\x7f\x00\x00\x01", 5), (b"\x00" * 16, 10911), (b"\x01\x02\x03", 1)])
i32 = st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([2**31, -(2**31) - 1]))
i64 = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([2**63]))


@st.composite
def messages(draw: st.DrawFn) -> tuple[Any, ...]:
    """record_fields' arguments after the parts list."""
    small = draw(st.integers(0, 9)) > 0  # most fields in their width
    props = draw(st.one_of(text_props, text_props, dict_props, big_props))
    return (
        draw(topics), draw(st.integers(0, 7) if small else i32), draw(st.binary(max_size=300)),
        draw(st.integers(0, 3) if small else i32), props,
        draw(st.sampled_from([0, 4, 8, 12, 1, 48]) if small else i32),
        draw(st.integers(0, 2**41) if small else i64), draw(hosts),
        draw(st.integers(0, 2**41) if small else i64), draw(hosts),
        draw(st.integers(0, 16) if small else i32), draw(st.integers(0, 2**40) if small else i64),
        draw(st.integers(0, 2**40) if small else i64),
        draw(st.integers(0, 2**40) if small else i64),
        draw(st.booleans()),
    )  # fmt: skip


def outcome(fn: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    parts: list[Any] = [b"before"]
    try:
        got = fn(parts, *args)
    except Exception as e:  # the class and text are what is compared
        return ("raised", type(e), str(e), b"".join(parts))
    return ("ok", got, b"".join(parts))  # the Python twin appends a record as several parts


@settings(max_examples=400, deadline=None)
@given(args=messages())
def test_same_record_and_fields_as_the_reference(path: Any, args: tuple[Any, ...]) -> None:
    assert outcome(path, args) == outcome(record_fields_py, args)


def _declined(parts: list[Any], *rest: Any) -> str:
    """A twin that only says it was asked (to see what the C declines)."""
    return "declined"


@settings(max_examples=200, deadline=None)
@given(args=messages())
def test_the_twin_declines_without_appending_or_matches(ext: Any, args: tuple[Any, ...]) -> None:
    """The C on its own: handed to its twin with nothing appended, or the reference's outcome."""
    ext.configure_record_fields(_declined)
    try:
        parts: list[Any] = []
        try:
            got = ext.record_fields(parts, *args)
        except Exception:  # append_record's refusals, compared below
            got = "raised"
        if got == "declined":
            assert parts == []
        else:
            assert outcome(ext.record_fields, args) == outcome(record_fields_py, args)
    finally:
        ext.configure_record_fields(record_fields_py)


def test_a_plain_message_is_taken_by_the_twin_and_decodes(ext: Any) -> None:
    props = "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U1\x02"
    args = ("TopicA", 3, b"body", 0, props, 0, 1, (b"\x7f\x00\x00\x01", 5), 2,
            (b"\x7f\x00\x00\x01", 10911), 0, 0, 7, 1000, True)  # fmt: skip
    parts: list[Any] = []
    ext.configure_record_fields(_declined)  # the C itself must take it
    try:
        size, code, hashes = ext.record_fields(parts, *args)
        rollback = ext.record_fields([], *args[:5], 12, *args[6:])
    finally:
        ext.configure_record_fields(record_fields_py)
    assert (size, code) == (len(parts[0]), 2598919)  # Java "TagA".hashCode()
    assert hashes is not None and len(hashes) == 3
    m, _ = decode_stored(parts[0], 0, check_crc=True)
    assert (m.topic, m.queue_offset, m.properties["TAGS"]) == ("TopicA", 7, "TagA")
    assert rollback[2] is None  # a ROLLBACK: no index


@pytest.mark.parametrize(
    ("tag", "code"),
    [("é", 233), ("𝄞", 1772394), ("a𝄞b", 57834039), ("主题", 659901)],  # Java String.hashCode
)
def test_tags_hash_of_non_ascii_tags_is_javas(ext: Any, tag: str, code: int) -> None:
    args = ("T", 0, b"", 0, f"TAGS\x01{tag}\x02", 0, 0, (b"\x7f\x00\x00\x01", 1), 0,
            (b"\x7f\x00\x00\x01", 1), 0, 0, 0, 0, False)  # fmt: skip
    assert ext.record_fields([], *args)[1] == code
