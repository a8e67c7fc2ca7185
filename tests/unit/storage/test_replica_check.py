"""A slave's check of replicated bytes (`records.check_replicated`): the compiled twin
(`rocketrio.protocol._speedups.check_replicated`, protocol/speedups/replica.c) against the
pure-Python reference (`records._check_replicated_py`).

For any chunk the product's path (the twin, and the reference for a chunk the twin declines)
must give what the reference gives: the same RecordFields, or a ValueError of the same text.
The chunks are built as a master's CommitLog holds them (records of the usual shape and not,
BLANK records closing segments, records that leave exactly 0-10 bytes in their segment), then
truncated, spliced, corrupted (with and without a re-sealed CRC), moved to another offset or
given a wrong BLANK size. The twin must also take every sound chunk of usual records.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol import compiled
from rocketrio.protocol.message_build import build_stored_message, seal_record_crc
from rocketrio.protocol.message_format import BLANK_MAGIC_CODE
from rocketrio.storage import dispatch_request
from rocketrio.storage.commitlog import records
from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig
from tests.harness.disk_view import DiskView
from tests.harness.speedups import extension_in

SEG = 2048
V4 = (b"\x0a\x00\x00\x02", 50000)
V6 = (bytes(range(16)), 10911)


@pytest.fixture(scope="module")
def ext() -> Iterator[Any]:
    """The extension, even in a run that asked for pure Python (ROCKETRIO_PURE_PYTHON=1 leaves
    the product on the reference, not these tests)."""
    with extension_in(records) as loaded:
        yield loaded


def test_the_extension_is_built_and_used(ext: Any) -> None:
    """CI must test the compiled path: the test venv has it and the product picks it."""
    assert hasattr(ext, "check_replicated")
    if compiled.speedups is not None:  # the product's choice at import (not pure Python)
        assert compiled.speedups is ext


# ------------------------------------------------------------------ chunks as a master holds them

topics = st.sampled_from(["T", "TopicA", "é", "x" * 127, "y" * 128])  # the last needs magic V2
props = st.sampled_from(
    [b"", b"KEYS\x01k1\x02", b"TAGS\x01a\x02UNIQ_KEY\x01U\x02", b"a\x01\xff\x02", b"x" * 300]
)
hosts = st.sampled_from([V4, V4, V4, V6])
specs = st.tuples(topics, st.binary(max_size=400), props, hosts, st.integers(-(2**31), 2**31 - 1))


def record(spec: tuple[str, bytes, bytes, Any, int], at: int, i: int) -> bytes:
    topic, body, prop, born, queue_id = spec
    return build_stored_message(
        topic=topic, queue_id=queue_id, body=body, flag=i, properties=prop, sys_flag=0,
        born_timestamp=1_700_000_000_000 + i, born_host=born, store_timestamp=-i,
        store_host=V4, queue_offset=2**40 + i, physical_offset=at,
    )  # fmt: skip


def blank(room: int) -> bytes:
    return struct.pack(">ii", room, BLANK_MAGIC_CODE) + b"\xee" * (room - 8)


@st.composite
def chunks(draw: st.DrawFn) -> tuple[int, bytes, list[tuple[int, int]]]:
    """(offset, bytes, [(position, size) of each message record]) as a master's log holds them:
    a BLANK record closes a segment where the next record would leave under 8 bytes. With
    ``tight``, the first record is placed to leave exactly 0-10 bytes in its segment."""
    todo = draw(st.lists(specs, max_size=7))
    offset = draw(st.sampled_from([0, 3, 5]).map(lambda k: k * SEG)) + draw(st.integers(0, SEG))
    offset -= offset % 4 if draw(st.booleans()) else 0
    tight = draw(st.none() | st.integers(0, 10))
    out, recs = bytearray(), []
    for i, spec in enumerate(todo):
        size = len(record(spec, 0, i))
        if i == 0 and tight is not None and size + tight <= SEG:
            offset = offset - offset % SEG + SEG - size - tight
        at = offset + len(out)
        room = SEG - at % SEG
        if size + 8 > room and not (i == 0 and tight is not None):
            if room < 8:
                break  # a chunk cannot go on from here (the log never holds this)
            out += blank(room)
            at += room
        recs.append((len(out), size))
        out += record(spec, at, i)
        if i == 0 and tight is not None and tight < 8:
            break
    return offset, bytes(out), recs


int32s = st.integers(-(2**31), 2**31 - 1)
mutations = st.one_of(
    st.just(("none",)),
    st.tuples(st.just("trunc"), st.integers(0, 4000)),
    st.tuples(st.just("flip"), st.integers(0, 4000), st.integers(1, 255)),
    st.tuples(st.just("flip_reseal"), st.integers(0, 9), st.integers(0, 600), st.integers(1, 255)),
    # a field re-written (totalSize, bodyLength, sysFlag, the physical offset's high half)
    st.tuples(st.just("field"), st.integers(0, 9), st.sampled_from([0, 84, 36, 28]), int32s),
    # the topic length byte or the properties length re-written
    st.tuples(st.just("lengths"), st.integers(0, 9), st.booleans(), st.integers(0, 0xFFFF)),
    st.tuples(st.just("offset"), st.sampled_from([SEG, 2 * SEG, 1, -1, 8])),
    st.tuples(st.just("splice"), st.integers(0, 4000), st.integers(0, 4000)),
    st.tuples(st.just("blank"), st.integers(-9, 9)),
)


def mutate(
    offset: int, data: bytes, recs: list[tuple[int, int]], how: tuple[Any, ...]
) -> tuple[int, bytes]:
    buf = bytearray(data)
    match how:
        case ("trunc", k):
            return offset, data[: k % (len(data) + 1)]
        case ("flip", i, x) if buf:
            buf[i % len(buf)] ^= x
        case ("flip_reseal", r, i, x) if recs:
            pos, size = recs[r % len(recs)]
            buf[pos + i % (size - 20)] ^= x
            seal_record_crc(buf, pos, size)
        case ("field", r, at, v) if recs:
            pos, size = recs[r % len(recs)]
            struct.pack_into(">i", buf, pos + at, v)
            seal_record_crc(buf, pos, size)
        case ("lengths", r, topic, v) if recs:
            pos, size = recs[r % len(recs)]
            q = pos + 88 + struct.unpack_from(">i", buf, pos + 84)[0]  # magic V1: 1 byte
            if q + 3 <= pos + size:
                if topic:
                    buf[q] = v & 0xFF
                elif q + 3 + buf[q] <= pos + size:
                    struct.pack_into(">H", buf, q + 1 + buf[q], v)
                seal_record_crc(buf, pos, size)
        case ("offset", d) if offset + d >= 0:
            return offset + d, data
        case ("splice", i, j):
            return offset, data[: i % (len(data) + 1)] + data[j % (len(data) + 1) :]
        case ("blank", d):
            p = buf.find(struct.pack(">i", BLANK_MAGIC_CODE))
            if p >= 4:
                struct.pack_into(">i", buf, p - 4, struct.unpack_from(">i", buf, p - 4)[0] + d)
    return offset, bytes(buf)


def outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", fn(*args))
    except Exception as e:  # the class and the text are what must agree
        return ("raised", type(e), str(e))


def usual(data: bytes, recs: list[tuple[int, int]]) -> bool:
    """Every record of magic V1 with IPv4 hosts and a UTF-8 topic of one byte's length."""
    return all(
        struct.unpack_from(">i", data, p + 4)[0] == -626843481
        and not struct.unpack_from(">i", data, p + 36)[0] & 48
        for p, _ in recs
    )


@settings(max_examples=400, deadline=None)
@given(
    chunk=chunks(),
    how=mutations,
    with_fields=st.booleans(),
    kind=st.sampled_from([bytes, bytearray, memoryview]),
)
def test_check_replicated_twins_agree(
    ext: Any,
    chunk: tuple[int, bytes, list[tuple[int, int]]],
    how: tuple[Any, ...],
    with_fields: bool,
    kind: type,
) -> None:
    offset, data = mutate(*chunk, how)
    arg = kind(data)
    want = outcome(records._check_replicated_py, offset, arg, SEG, with_fields)
    got = outcome(records.check_replicated, offset, arg, SEG, with_fields)
    assert got == want
    taken = ext.check_replicated(offset, arg, SEG, with_fields)
    if taken is not None:  # what the twin takes, the reference accepts with the same fields
        assert ("ok", taken) == want
    elif how == ("none",) and want[0] == "ok" and usual(*chunk[1:]):
        pytest.fail("the twin declined a sound chunk of usual records")


@settings(max_examples=200, deadline=None)
@given(
    offset=st.integers(-(2**64), 2**64),
    data=st.binary(max_size=300),
    seg=st.integers(-5, 2**63) | st.sampled_from([1, 8, 111, SEG]),
)
def test_no_input_crashes_the_twin(ext: Any, offset: int, data: bytes, seg: int) -> None:
    """Random bytes, offsets and segment sizes at and past the int64 edges: the product's path
    answers as the reference does (ZeroDivisionError for a zero segment size included)."""
    for with_fields in (False, True):
        want = outcome(records._check_replicated_py, offset, data, seg, with_fields)
        assert outcome(records.check_replicated, offset, data, seg, with_fields) == want


def test_the_twin_declines_what_is_not_bytes(ext: Any) -> None:
    assert ext.check_replicated(0, "text", SEG, True) is None
    with pytest.raises(TypeError):
        records.check_replicated(0, "text", SEG, True)  # type: ignore[arg-type]


# ------------------------------------------------------------------ both paths, a slave's store

CFG = StoreConfig(
    mappedFileSizeCommitLog=4096,
    mappedFileSizeConsumeQueue=20 * 64,
    maxHashSlotNum=64,
    maxIndexNum=64,
)


@pytest.mark.parametrize("compiled_path", [False, True])
def test_a_slave_appends_and_dispatches_on_each_path(
    disk: DiskView, ext: Any, compiled_path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slave fed a master's log in uneven whole-record chunks (BLANK records included) holds
    the same bytes and, once confirmed, the same queues and index as the master, on either
    path (the check and the dispatch runs); a corrupted chunk is refused with the reference's
    error and nothing written."""
    from rocketrio.actors.broker.ha.slave_core import whole_records_length

    monkeypatch.setattr(records, "_speedups", ext if compiled_path else None)
    monkeypatch.setattr(dispatch_request, "_speedups", ext if compiled_path else None)
    rng = random.Random(7)

    def open_store(name: str) -> MessageStore:
        s = MessageStore(
            disk.path(name), CFG, store_host=V4, fs=disk.fs, replicated=True,
            epoch_file_path=disk.path(name, "epochFileCheckpoint"),
        )  # fmt: skip
        s.open()
        return s

    m, sl = open_store("m"), open_store("s")
    m.begin_epoch(1)
    sl.record_epoch(1, 0)
    for _ in range(6):
        m.put_messages(
            [
                MessageToStore(
                    "T",
                    rng.randrange(2),
                    rng.randbytes(rng.randint(10, 400)),
                    properties={"KEYS": f"k{rng.randrange(50)}", "TAGS": "a"},
                )
                for _ in range(8)
            ],
            1,
        )
    end = m.get_commitlog_max_offset()
    m.advance_confirm(end)
    bad = bytearray(m.commitlog.read(0, 600))
    bad[100] ^= 1
    with pytest.raises(ValueError, match="replicated record at 0: record CRC mismatch"):
        sl.append_replicated(0, bytes(bad))
    assert sl.get_commitlog_max_offset() == 0
    while (at := sl.get_commitlog_max_offset()) < end:
        data = m.commitlog.read(at, min(rng.randint(200, 1800), end - at))
        n = whole_records_length(data, at, 4096) or whole_records_length(
            m.commitlog.read(at, end - at), at, 4096
        )
        sl.append_replicated(at, m.commitlog.read(at, n))
    sl.advance_confirm(end)
    assert sl.commitlog.read(0, end) == m.commitlog.read(0, end)
    for q in (0, 1):
        assert list(sl.consume_queue("T", q).get(0, 10**6)) == list(  # type: ignore[union-attr]
            m.consume_queue("T", q).get(0, 10**6)  # type: ignore[union-attr]
        )
    for k in range(0, 50, 7):
        assert sl.query_by_key("T", f"k{k}") == m.query_by_key("T", f"k{k}")
    m.close()
    sl.close()


def _sound_chunk() -> tuple[int, bytes]:
    """Three usual records, the last closing its segment with a BLANK record, then one more
    record at the start of the next segment."""
    spec = ("T", b"a" * 40, b"KEYS\x01k\x02", V4, 1)
    offset = SEG - 3 * len(record(spec, 0, 0)) - 30
    out = bytearray()
    for i in range(3):
        out += record(spec, offset + len(out), i)
    out += blank(SEG - (offset + len(out)) % SEG)
    out += record(("é", b"b" * 9, b"", V4, 2), offset + len(out), 3)
    return offset, bytes(out)


@pytest.mark.parametrize("with_fields", [False, True])
def test_every_single_byte_flip_agrees(ext: Any, with_fields: bool) -> None:
    """Each byte of a sound chunk flipped in turn (a CRC left stale, a length or offset
    wrong, a BLANK record's size or magic broken): the twin takes the sound chunk and, for
    every flip, the product's path answers as the reference does."""
    offset, data = _sound_chunk()
    assert ext.check_replicated(offset, data, SEG, with_fields) is not None
    for i in range(len(data)):
        if data[i] == 0xEE:  # a BLANK record's fill: nobody reads it
            continue
        buf = bytearray(data)
        buf[i] ^= 0x41
        want = outcome(records._check_replicated_py, offset, bytes(buf), SEG, with_fields)
        assert want[0] == "raised", i
        assert outcome(records.check_replicated, offset, bytes(buf), SEG, with_fields) == want


@pytest.mark.parametrize("short", [1, 8, 16])
def test_a_blank_record_must_fill_its_segment(ext: Any, short: int) -> None:
    """A BLANK record ``short`` bytes short of its segment's end, the rest a BLANK record of
    its own (well-formed but for the size): refused on both paths with the reference's text."""
    offset, data = _sound_chunk()
    at = data.rfind(struct.pack(">i", BLANK_MAGIC_CODE)) - 4
    room = struct.unpack_from(">i", data, at)[0]
    tail = blank(short) if short >= 8 else b""
    buf = data[:at] + blank(room - short)[: room - short] + tail
    want = outcome(records._check_replicated_py, offset, buf, SEG, True)
    assert want[0] == "raised" and "blank record" in want[2]
    assert outcome(records.check_replicated, offset, buf, SEG, True) == want


@pytest.mark.parametrize("left", [0, 1, 7, 8, 9])
def test_a_record_must_leave_room_for_a_blank_record(ext: Any, left: int) -> None:
    """A record ending ``left`` bytes before its segment's end: under 8 (no room for the BLANK
    record that must close the segment) refused on both paths, else taken by the twin."""
    spec = ("T", b"c" * 33, b"", V4, 0)
    offset = 5 * SEG - len(record(spec, 0, 0)) - left
    data = record(spec, offset, 0) + (blank(left) if left >= 8 else b"")
    want = outcome(records._check_replicated_py, offset, data, SEG, True)
    assert want[0] == ("raised" if left < 8 else "ok")
    assert outcome(records.check_replicated, offset, data, SEG, True) == want
    if left >= 8:
        assert ext.check_replicated(offset, data, SEG, True) is not None


def test_a_chunk_meant_for_another_offset_is_refused(ext: Any) -> None:
    """The same bytes one or two segments further (every segment room the same): each record's
    physical offset field no longer matches its position."""
    offset, data = _sound_chunk()
    for moved in (offset + SEG, offset + 2 * SEG):
        want = outcome(records._check_replicated_py, moved, data, SEG, True)
        assert want[0] == "raised" and "physical offset" in want[2]
        assert outcome(records.check_replicated, moved, data, SEG, True) == want


@pytest.mark.parametrize("delta", [-2, -1, 1, 2])
def test_a_length_rewritten_under_a_valid_crc_is_refused(ext: Any, delta: int) -> None:
    """totalSize, bodyLength, the topic length or the properties length of the first record
    moved by ``delta`` and the record CRC sealed again: only the layout checks can tell."""
    offset, data = _sound_chunk()
    size = struct.unpack_from(">i", data, 0)[0]
    q = 88 + struct.unpack_from(">i", data, 84)[0]  # the topic length byte
    for at, fmt in ((0, ">I"), (84, ">I"), (q, ">B"), (q + 1 + data[q], ">H")):
        buf = bytearray(data)
        value = (struct.unpack_from(fmt, buf, at)[0] + delta) % (1 << 8 * struct.calcsize(fmt))
        struct.pack_into(fmt, buf, at, value)
        seal_record_crc(buf, 0, size)
        want = outcome(records._check_replicated_py, offset, bytes(buf), SEG, True)
        assert want[0] == "raised", (at, want)
        assert outcome(records.check_replicated, offset, bytes(buf), SEG, True) == want
