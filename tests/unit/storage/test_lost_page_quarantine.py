"""A record lost with its page under later valid records, on the simulated disk
(storage/commitlog/quarantine.py, storage/catch_up_fence.py): recovery refuses with
`LostRecord`; the quarantine copies every byte from the lost record on into a durable file,
writes the fence, and only then cuts; the store then opens with the records before the lost one
and its queues and index cut to match (a lost record in an older segment takes the later
segments along); a crash at any step loses no byte."""

from __future__ import annotations

import os
import random

import pytest

from rocketrio.protocol.message import decode_stored
from rocketrio.storage.catch_up_fence import (
    CatchUpFence,
    clear_fence,
    load_fence,
    quarantine_lost_tail,
)
from rocketrio.storage.commitlog import LostRecord
from rocketrio.storage.commitlog.quarantine import QUARANTINE_DIR, Quarantined, quarantine_tail
from rocketrio.storage.epoch_file import EpochFile
from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig
from tests.harness.sim_disk import SimFileSystem

ROOT = "/sim/lost/store"
EPOCHS = f"{ROOT}/epochFileCheckpoint"
CFG = StoreConfig(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=100 * 20)


def open_store(fs: SimFileSystem) -> MessageStore:
    store = MessageStore(ROOT, CFG, fs=fs, epoch_file_path=EPOCHS)
    store.open()
    return store


def bodies(store: MessageStore) -> list[bytes]:
    """The log's bodies in order, each one where its ConsumeQueue entry points."""
    got = []
    for offset, record in store.commitlog.iter_records(0):
        msg, _ = decode_stored(record)
        _, entries = store.read_queue_entries("T", msg.queue_id, msg.queue_offset, 1)
        assert entries[0][0] == offset
        got.append(msg.body)
    return got


def lost_page_image(fs: SimFileSystem) -> tuple[list[int], bytes, int]:
    """Ten messages in one segment, four flushed; the page under message 6 reads back zeros
    after a crash (messages 7-9 still whole). Returns the offsets, the log's bytes from
    message 6 on as written, and the log end."""
    store = open_store(fs)
    assert store.epochs is not None
    store.epochs.append(3, 0)
    msgs = [MessageToStore("T", i % 2, b"m%02d" % i * 20) for i in range(10)]
    offsets = [r.commitlog_offset for r in store.put_messages(msgs[:4], 1)]
    store.flush()
    offsets += [r.commitlog_offset for r in store.put_messages(msgs[4:], 2)]
    end = store.get_commitlog_max_offset()
    tail = store.commitlog.read(offsets[6], end - offsets[6])
    fs.crash(keep_unsynced=True)  # kill -9: no flush, the abort marker stays
    fd = fs.open(f"{ROOT}/commitlog/{0:020d}", os.O_RDWR)
    fs.pwrite(fd, bytes(64), offsets[6] + 4)  # the lost page reads back zeros
    fs.close(fd)
    return offsets, tail, end


def quarantine(fs: SimFileSystem, offset: int) -> Quarantined:
    return quarantine_lost_tail(
        ROOT, f"{ROOT}/commitlog", CFG.mappedFileSizeCommitLog, offset,
        epoch_file_path=EPOCHS, fence=True, fs=fs,
    )  # fmt: skip


def test_recovery_names_the_lost_record_and_the_quarantine_keeps_every_byte() -> None:
    fs = SimFileSystem(random.Random(1))
    offsets, tail, end = lost_page_image(fs)
    with pytest.raises(LostRecord) as err:
        open_store(fs)
    assert err.value.offset == offsets[6] and err.value.valid_after == offsets[7]
    q = quarantine(fs, err.value.offset)
    assert q.offset == offsets[6] and q.old_end == end and q.bytes == end - offsets[6]
    assert q.path == f"{ROOT}/{QUARANTINE_DIR}/{offsets[6]:020d}-{end:020d}"
    fs.crash(lose_unsynced=True)  # a power cut right after: all of it is durable
    kept = fs.durable_bytes(q.path)
    assert kept[:4] == tail[:4] and kept[68:] == tail[68:]  # all but the lost page, as written
    assert load_fence(ROOT, fs=fs) == CatchUpFence(offsets[6], end, 3, q.path)
    store = open_store(fs)
    assert store.get_commitlog_max_offset() == offsets[6]
    assert bodies(store) == [b"m%02d" % i * 20 for i in range(6)]
    assert store.get_max_offset("T", 0) == 3 and store.get_max_offset("T", 1) == 3
    # the freed queue offsets are taken by the next writes (what a slave fetches again)
    r = store.put_messages([MessageToStore("T", 0, b"again")], 3)[0]
    assert r.commitlog_offset == offsets[6] and r.queue_offset == 3
    store.close()
    clear_fence(ROOT, fs=fs)
    fs.crash(lose_unsynced=True)
    assert load_fence(ROOT, fs=fs) is None
    assert fs.exists(q.path)  # the broker never deletes it


def test_a_crash_before_the_cut_keeps_the_log_and_the_next_start_quarantines_again() -> None:
    fs = SimFileSystem(random.Random(2))
    offsets, _, end = lost_page_image(fs)

    def power_cut(_q: Quarantined) -> None:
        raise RuntimeError("power cut")

    with pytest.raises(RuntimeError):  # the power goes while the fence is written
        quarantine_tail(
            f"{ROOT}/commitlog", CFG.mappedFileSizeCommitLog, offsets[6],
            f"{ROOT}/{QUARANTINE_DIR}", fs=fs, before_cut=power_cut,
        )  # fmt: skip
    fs.crash(keep_unsynced=True)
    assert load_fence(ROOT, fs=fs) is None
    with pytest.raises(LostRecord):  # nothing was cut
        open_store(fs)
    q = quarantine(fs, offsets[6])
    assert q.path.endswith(f"{offsets[6]:020d}-{end:020d}.1")  # the first copy stays
    assert len(fs.listdir(f"{ROOT}/{QUARANTINE_DIR}")) == 2
    assert open_store(fs).get_commitlog_max_offset() == offsets[6]


def test_a_later_fence_keeps_the_newest_epoch_and_the_highest_end() -> None:
    fs = SimFileSystem(random.Random(3))
    offsets, _, end = lost_page_image(fs)
    quarantine(fs, offsets[6])
    EpochFile(EPOCHS, fs=fs).append(5, offsets[6])
    store = open_store(fs)
    store.put_messages([MessageToStore("T", 0, b"x" * 40)] * 3, 4)
    second = store.get_commitlog_max_offset() - 1
    fs.crash(keep_unsynced=True)
    fd = fs.open(f"{ROOT}/commitlog/{0:020d}", os.O_RDWR)
    fs.pwrite(fd, bytes(64), offsets[6] + 4)
    fs.close(fd)
    with pytest.raises(LostRecord):
        open_store(fs)
    q = quarantine(fs, offsets[6])
    fence = load_fence(ROOT, fs=fs)
    assert fence is not None and fence.epoch == 5 and fence.old_end == end
    assert q.old_end == second + 1


def test_a_lost_record_in_an_older_segment_moves_the_later_segments_too() -> None:
    fs = SimFileSystem(random.Random(4))
    cfg = StoreConfig(mappedFileSizeCommitLog=1024, mappedFileSizeConsumeQueue=100 * 20)
    store = MessageStore(ROOT, cfg, fs=fs)
    store.open()
    msgs = [MessageToStore("T", i % 2, b"s%02d" % i * 20) for i in range(14)]
    offsets = [r.commitlog_offset for r in store.put_messages(msgs[:2], 1)]
    store.flush()
    offsets += [r.commitlog_offset for r in store.put_messages(msgs[2:], 2)]
    end = store.get_commitlog_max_offset()
    assert end > 2 * 1024  # three segments
    fs.crash(keep_unsynced=True)
    clog = f"{ROOT}/commitlog"
    before = {name: fs.visible_bytes(f"{clog}/{name}") for name in fs.listdir(clog)}
    fd = fs.open(f"{clog}/{0:020d}", os.O_RDWR)
    fs.pwrite(fd, bytes(64), offsets[3] + 4)
    fs.close(fd)
    with pytest.raises(LostRecord) as err:
        MessageStore(ROOT, cfg, fs=fs).open()
    assert err.value.offset == offsets[3]
    q = quarantine_tail(clog, 1024, offsets[3], f"{ROOT}/{QUARANTINE_DIR}", fs=fs)
    assert q.old_end == end
    fs.crash(lose_unsynced=True)
    kept = fs.durable_bytes(q.path)
    seg0 = before[f"{0:020d}"]
    later = before[f"{1024:020d}"] + before[f"{2048:020d}"]
    assert kept[:4] == seg0[offsets[3] : offsets[3] + 4]
    assert kept[68 : 1024 - offsets[3]] == seg0[offsets[3] + 68 :]  # the rest of segment 0
    assert kept[1024 - offsets[3] :] == later  # and the later segments whole
    assert [n for n in fs.listdir_durable(clog) if n.isdigit()] == [f"{0:020d}"]
    store = MessageStore(ROOT, cfg, fs=fs)
    store.open()
    assert store.get_commitlog_max_offset() == offsets[3]
    assert [decode_stored(r)[0].body for _, r in store.commitlog.iter_records(0)] == [
        m.body for m in msgs[:3]
    ]
