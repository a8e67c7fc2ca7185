"""The background scrub's core (storage/scrub.py): which range next, what a chunk's check
finds, where it resumes, the rate budget. Records come from a real MessageStore on the
simulated disk; the checks run on its bytes, no file or clock involved."""

from __future__ import annotations

import random

import pytest

from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig
from rocketrio.storage.scrub import (
    LapWait,
    ScrubBounds,
    ScrubCursor,
    ScrubRange,
    next_range,
    pause_s,
    verify_chunk,
)
from tests.harness.sim_disk import SimFileSystem

SEG = 4096
CFG = StoreConfig(mappedFileSizeCommitLog=SEG, mappedFileSizeConsumeQueue=200, maxMessageSize=1024)
HOST = (b"\x0a\x00\x00\x09", 10911)


def segment_bytes(n: int = 30) -> tuple[bytes, list[int]]:
    """Segment 0 of a store holding ``n`` 150-byte-ish records (two segments), and the
    offsets of the records in segment 0."""
    store = MessageStore("/sim/s", CFG, store_host=HOST, fs=SimFileSystem(random.Random(0)))
    store.open()
    offsets = []
    for i in range(n):
        m = MessageToStore(topic="T", queue_id=0, body=b"x" * 80, born_timestamp=i)
        offsets.append(store.put_messages([m], 1000 + i)[0].commitlog_offset)
    assert offsets[-1] >= SEG
    return store.commitlog.read(0, SEG), [o for o in offsets if o < SEG]


def test_next_range_stays_in_one_segment_and_below_the_checkpoint() -> None:
    b = ScrubBounds(min_offset=SEG, verified_from=3 * SEG + 100, segment_size=SEG)
    assert next_range(-1, b, 1000) == ScrubRange(SEG, 1000, False)  # a new pass
    assert next_range(2 * SEG - 10, b, 1000) == ScrubRange(2 * SEG - 10, 10, True)
    assert next_range(3 * SEG, b, 1000) == ScrubRange(3 * SEG, 100, True)
    assert next_range(3 * SEG + 100, b, 1000) == ScrubRange(SEG, 1000, False)  # lap ends
    assert next_range(0, b, 1000) == ScrubRange(SEG, 1000, False)  # deleted segment
    assert next_range(5, ScrubBounds(SEG, SEG, SEG), 1000) is None  # nothing below


def test_a_clean_segment_verifies_to_its_end_chunk_by_chunk() -> None:
    data, offsets = segment_bytes()
    cursor = ScrubCursor(chunk_bytes=700)
    bounds = ScrubBounds(0, SEG, SEG)
    while True:
        rng = cursor.next(bounds)
        assert rng is not None
        if cursor.laps == 2:
            break
        result = verify_chunk(data[rng.start : rng.start + rng.size], rng, SEG)
        assert result.finding is None
        assert cursor.advance(result) is None
    assert cursor.records == len(offsets)
    assert cursor.verified_bytes == SEG  # every record and the end-of-segment BLANK
    assert cursor.found == {}


def test_a_record_bigger_than_the_chunk_is_read_whole_next_time() -> None:
    data, offsets = segment_bytes()
    cursor = ScrubCursor(chunk_bytes=50)
    rng = cursor.next(ScrubBounds(0, SEG, SEG))
    assert rng == ScrubRange(0, 50, False)
    first = verify_chunk(data[:50], rng, SEG)
    assert (first.next_offset, first.records, first.need_bytes) == (0, 0, offsets[1])
    cursor.advance(first)
    rng = cursor.next(ScrubBounds(0, SEG, SEG))
    assert rng == ScrubRange(0, offsets[1], False)
    assert verify_chunk(data[: offsets[1]], rng, SEG).records == 1


@pytest.mark.parametrize("where", [3, 12, 40, -4])  # totalSize, queueId, body, CRC digits
def test_a_flipped_byte_is_a_finding_reported_once(where: int) -> None:
    data, offsets = segment_bytes()
    victim, after = offsets[5], offsets[6]
    pos = (after if where < 0 else victim) + where
    bad = bytearray(data)
    bad[pos] ^= 0x01
    cursor = ScrubCursor(chunk_bytes=SEG)
    bounds = ScrubBounds(0, SEG, SEG)
    rng = cursor.next(bounds)
    assert rng is not None
    result = verify_chunk(bytes(bad), rng, SEG)
    assert result.finding is not None
    assert result.finding.offset == victim and result.finding.segment_base == 0
    assert result.finding.reason
    assert result.records == 5 and result.verified_bytes == victim
    assert result.next_offset == SEG  # lengths after it cannot be trusted: next segment
    assert cursor.advance(result) == result.finding
    rng = cursor.next(bounds)  # the next pass finds it again, reported no more
    assert rng is not None and cursor.laps == 2
    assert cursor.advance(verify_chunk(bytes(bad), rng, SEG)) is None
    assert list(cursor.found) == [victim]


def test_a_wrong_blank_record_is_a_finding() -> None:
    data, offsets = segment_bytes()
    last = max(offsets)
    blank_at = last + int.from_bytes(data[last : last + 4], "big")
    bad = bytearray(data)
    bad[blank_at + 3] ^= 0x01  # the BLANK's size no longer covers the rest
    result = verify_chunk(bytes(bad), ScrubRange(0, SEG, True), SEG)
    assert result.finding is not None and result.finding.offset > last
    assert "blank" in result.finding.reason


def test_pause_is_bytes_over_rate() -> None:
    assert pause_s(8 * 1024 * 1024, 8 * 1024 * 1024) == 1.0
    assert pause_s(1024, 4096) == 0.25
    assert pause_s(1024, 0) == 0.0


def test_findings_of_deleted_segments_are_forgotten_but_still_counted() -> None:
    data, offsets = segment_bytes()
    bad = bytearray(data)
    bad[offsets[2] + 40] ^= 0x01
    cursor = ScrubCursor(chunk_bytes=SEG)
    rng = cursor.next(ScrubBounds(0, 2 * SEG, SEG))
    assert rng is not None
    assert cursor.advance(verify_chunk(bytes(bad), rng, SEG)) is not None
    assert list(cursor.found) == [offsets[2]] and cursor.damage_found == 1
    assert cursor.next(ScrubBounds(SEG, 2 * SEG, SEG)) == ScrubRange(SEG, SEG, True)
    assert cursor.found == {} and cursor.damage_found == 1  # retention removed segment 0


def test_a_new_lap_waits_for_the_interval_and_the_first_lap_never_waits() -> None:
    cursor = ScrubCursor(chunk_bytes=SEG)
    bounds = ScrubBounds(0, SEG, SEG)
    data, _ = segment_bytes()
    rng = cursor.next(bounds, now=50.0, lap_interval_s=100.0)  # the first lap: no wait
    assert rng == ScrubRange(0, SEG, True) and cursor.laps == 1
    cursor.advance(verify_chunk(data, rng, SEG))
    assert cursor.next(bounds, now=80.0, lap_interval_s=100.0) == LapWait(70.0)
    assert cursor.laps == 1  # a wait starts nothing
    assert cursor.next(bounds, now=150.0, lap_interval_s=100.0) == ScrubRange(0, SEG, True)
    assert cursor.laps == 2
