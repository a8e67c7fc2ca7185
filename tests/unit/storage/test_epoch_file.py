"""The broker's epoch file (storage/epoch_file.py) and its .bak: upstream's lines plus a CRC,
appends, fallback to the backup, truncation.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.storage.epoch_file import (
    OPEN_END_OFFSET,
    EpochFile,
    EpochFileError,
    EpochRange,
    EpochRecord,
    decode_records,
    encode_records,
)
from tests.harness.disk_view import DiskView


@st.composite
def epoch_lists(draw: st.DrawFn) -> list[EpochRecord]:
    epochs = sorted(draw(st.sets(st.integers(0, 10_000), max_size=8)))
    offsets = sorted(
        draw(st.lists(st.integers(0, 2**50), min_size=len(epochs), max_size=len(epochs)))
    )
    return [EpochRecord(e, o) for e, o in zip(epochs, offsets, strict=True)]


@given(epoch_lists())
def test_epoch_records_round_trip(records: list[EpochRecord]) -> None:
    assert decode_records(encode_records(records), "f") == records


def test_epoch_format_is_upstream_lines_plus_crc() -> None:
    text = encode_records([EpochRecord(1, 0), EpochRecord(3, 4096)]).decode()
    assert text.startswith("2\n1-0\n3-4096\ncrc=")


def test_append_persists_both_copies_and_reloads(disk: DiskView) -> None:
    path = disk.path("store", "epochFileCheckpoint")
    f = EpochFile(path, fs=disk.fs)
    assert f.records == [] and f.last_epoch() == -1
    assert f.append(1, 0)
    assert f.append(2, 500)
    assert not f.append(2, 500)  # the same master registering again
    again = EpochFile(path, fs=disk.fs)
    assert again.records == [EpochRecord(1, 0), EpochRecord(2, 500)]
    assert not again.loaded_from_backup
    assert disk.read(path) == disk.read(path + ".bak")
    assert again.ranges() == [EpochRange(1, 0, 500), EpochRange(2, 500, OPEN_END_OFFSET)]
    assert again.find(1) == EpochRange(1, 0, 500) and again.find(9) is None


@pytest.mark.parametrize(
    ("epoch", "start", "why"),
    [(2, 900, "cannot append 2-900"), (1, 900, "cannot append 1-900"), (3, 499, "3-499")],
)
def test_append_refuses_going_backwards(disk: DiskView, epoch: int, start: int, why: str) -> None:
    f = EpochFile(disk.path("e"), fs=disk.fs)
    f.append(1, 0)
    f.append(2, 500)
    with pytest.raises(EpochFileError, match=why):
        f.append(epoch, start)
    assert EpochFile(disk.path("e"), fs=disk.fs).records == [EpochRecord(1, 0), EpochRecord(2, 500)]


def test_damaged_main_falls_back_to_backup(disk: DiskView) -> None:
    path = disk.path("e")
    f = EpochFile(path, fs=disk.fs)
    f.append(1, 0)
    f.append(2, 100)
    disk.write(path, b"2\n1-0\n2-1")  # torn by something outside our write path
    again = EpochFile(path, fs=disk.fs)
    assert again.loaded_from_backup and again.last_epoch() == 2
    # a lone backup (main deleted) is also used
    disk.unlink(path)
    assert EpochFile(path, fs=disk.fs).records == [EpochRecord(1, 0), EpochRecord(2, 100)]


def test_both_copies_damaged_is_an_error_naming_both(disk: DiskView) -> None:
    path = disk.path("e")
    EpochFile(path, fs=disk.fs).append(1, 0)
    disk.write(path, b"garbage")
    disk.write(path + ".bak", b"1\n1-0\ncrc=00000000\n")
    with pytest.raises(EpochFileError, match=r"e: checksum mismatch.*e\.bak: checksum mismatch"):
        EpochFile(path, fs=disk.fs)


def test_bad_entries_are_rejected(disk: DiskView) -> None:
    def crc_ok(body: str) -> bytes:
        import zlib

        return (body + f"crc={zlib.crc32(body.encode()):08x}\n").encode()

    with pytest.raises(EpochFileError, match="expected 3 entries, found 1"):
        decode_records(crc_ok("3\n1-0\n"), "f")
    with pytest.raises(EpochFileError, match="does not follow"):
        decode_records(crc_ok("2\n2-0\n1-5\n"), "f")
    with pytest.raises(EpochFileError, match="malformed"):
        decode_records(crc_ok("1\n7\n"), "f")


def test_truncation_keeps_the_file_consistent(disk: DiskView) -> None:
    path = disk.path("e")
    f = EpochFile(path, fs=disk.fs)
    for epoch, start in ((1, 0), (2, 100), (4, 300)):
        f.append(epoch, start)
    f.truncate_suffix(300)  # the CommitLog was cut at 300: epoch 4 holds nothing any more
    assert f.records == [EpochRecord(1, 0), EpochRecord(2, 100)]
    f.truncate_prefix(150)  # files below 150 deleted: epoch 1 is gone, epoch 2 keeps its start
    assert f.records == [EpochRecord(2, 100)]
    assert EpochFile(path, fs=disk.fs).records == [EpochRecord(2, 100)]
    f.replace_all([EpochRecord(2, 150), EpochRecord(5, 900)])
    assert EpochFile(path, fs=disk.fs).last_record() == EpochRecord(5, 900)
    with pytest.raises(EpochFileError, match="does not follow"):
        f.replace_all([EpochRecord(5, 0), EpochRecord(3, 10)])
