"""How many leading bytes of a transfer are whole records (`slave_core.whole_records_length`,
which a slave runs on every transfer packet) against its compiled twin
(`rocketrio.protocol._speedups.whole_records`, protocol/speedups/whole_records.c): the same
length, or the same exception (class and text) where the Python twin raises; sound input is
never declined. Only the records' (total size, magic) headers are read, so the streams here
are headers with filler: records of either magic, BLANK records filling their segment's rest
(or claiming a wrong size), garbage, cut anywhere, at offsets up to the int64 edge."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.ha import slave_core
from rocketrio.actors.broker.ha.slave_core import _whole_records_length_py, whole_records_length
from rocketrio.protocol.message import BLANK_MAGIC_CODE, MAGIC_CODE_V1, MAGIC_CODE_V2
from tests.harness.speedups import extension_in

_HEAD = struct.Struct(">ii")


@pytest.fixture(scope="module")
def ext() -> Iterator[Any]:
    with extension_in(slave_core) as loaded:
        yield loaded


def test_the_extension_is_built_and_taken(ext: Any) -> None:
    assert slave_core._speedups is ext and hasattr(ext, "whole_records")


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, int, int, bool]:
    """(data, offset, segment size, sound): ``sound`` when every header is a record's or a
    BLANK of its segment's exact rest."""
    seg = draw(st.sampled_from([64, 100, 512, 4096]))
    # a segment's rest is never 1-7 bytes in a real log: a BLANK record needs its 8
    offset = draw(st.integers(0, 2)) * seg + draw(st.integers(0, seg - 8))
    out = bytearray()
    sound = True
    for _ in range(draw(st.integers(0, 12))):
        at = offset + len(out)
        rest = seg - at % seg
        kind = draw(st.sampled_from(["record", "record", "record", "blank", "odd"]))
        if kind == "record" and rest >= 9:
            total = draw(st.integers(9, rest).filter(lambda t, rest=rest: not 0 < rest - t < 8))
            magic = draw(st.sampled_from([MAGIC_CODE_V1, MAGIC_CODE_V2]))
            out += _HEAD.pack(total, magic)[:total] + bytes(max(0, total - 8))
        elif kind in ("record", "blank"):
            out += _HEAD.pack(rest, BLANK_MAGIC_CODE)[:rest] + bytes(max(0, rest - 8))
        else:
            sound = False
            total = draw(st.sampled_from([-(2**31), -1, 0, 8, 9, rest, rest + 1, 2**31 - 1]))
            magic = draw(st.sampled_from([MAGIC_CODE_V1, BLANK_MAGIC_CODE, 0, -1, 12345]))
            out += _HEAD.pack(total, magic) + draw(st.binary(max_size=40))
    cut = draw(st.integers(0, len(out)))
    return bytes(out[:cut]), offset, seg, sound


def _outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except Exception as e:
        return type(e).__name__, str(e)


@settings(max_examples=400, deadline=None)
@given(case=streams(), as_type=st.sampled_from([bytes, bytearray, memoryview]))
def test_whole_records_twins_agree(
    ext: Any, case: tuple[bytes, int, int, bool], as_type: Any
) -> None:
    data, offset, seg, sound = case
    py = _outcome(_whole_records_length_py, data, offset, seg)
    assert _outcome(whole_records_length, as_type(data), offset, seg) == py
    got = ext.whole_records(as_type(data), offset, seg)
    if sound:
        assert got is not None and py == ("ok", got)
    else:
        assert got is None or py == ("ok", got)


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(max_size=64),
    offset=st.sampled_from([-5, 0, 7, 2**63 - 100, 2**63 - 1, 2**63, -(2**63) - 1]),
    seg=st.sampled_from([-64, 0, 1, 64, 2**63 - 1, 2**63]),
)
def test_whole_records_twins_agree_on_any_bytes_and_edges(
    ext: Any, data: bytes, offset: int, seg: int
) -> None:
    """Random bytes and out-of-range offsets or segment sizes: the compiled call declines
    what it does not take, and the result or the exception is the Python twin's."""
    assert _outcome(whole_records_length, data, offset, seg) == _outcome(
        _whole_records_length_py, data, offset, seg
    )


def test_a_stream_of_1_kib_records_cut_mid_record_is_taken_up_to_the_cut(ext: Any) -> None:
    records = b"".join(_HEAD.pack(1040, MAGIC_CODE_V1) + bytes(1032) for _ in range(40))
    for cut in (0, 7, 8, 1039, 1040, 1041, 32 * 1024, len(records)):
        want = cut - cut % 1040
        assert ext.whole_records(records[:cut], 0, 1 << 30) == want
        assert whole_records_length(records[:cut], 0, 1 << 30) == want


def test_sound_data_never_reaches_the_python_twin(ext: Any, monkeypatch: Any) -> None:
    def refuse(*_a: Any) -> int:
        raise AssertionError("the Python twin ran on sound data")

    monkeypatch.setattr(slave_core, "_whole_records_length_py", refuse)
    records = b"".join(_HEAD.pack(1040, MAGIC_CODE_V2) + bytes(1032) for _ in range(3))
    assert whole_records_length(records + records[:100], 1040, 1 << 30) == len(records)
