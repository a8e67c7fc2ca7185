"""The store on a disk that fills up (`SimFileSystem.set_capacity`, injected ENOSPC fsyncs).

What storage/store_repair.py and the CommitLog's "Write faults" promise, each checked the way a
user would notice it (what the queues serve, what the log holds, what a restart recovers):

- ENOSPC at ANY write of a put (the loop tries every room left, 4 bytes apart, so it fails
  each write: CommitLog records, BLANK + segment roll, ConsumeQueue entries across a file
  boundary, each maybe after a short write) refuses the put with nothing of it stored, or
  stores all of it; the store takes the next put once there is room, and a clean restart and a
  power cut both recover exactly what was stored; the index's write-behind (a put with many
  keys) has its own test, including an undo that cannot write the index and waits for repair;
- a crash between a failed ConsumeQueue fsync and the repair dispatches the lost entries again;
- a CommitLog fsync that fails with ENOSPC and drops the pages (Linux's lost writeback) fences
  the log; `repair` writes the range again, so a power cut afterwards loses nothing; a record
  whose page is gone is cut (no replicas) or keeps a master fenced;
- a ConsumeQueue / index fsync failure makes the derived data since the dispatch checkpoint
  unreliable until `repair` dispatches it again;
- a dispatch behind confirmOffset (replicated store) that fails keeps the records and
  dispatches them on `repair`;
- the checkpoint files are never torn by a full disk.
"""

from __future__ import annotations

import errno
import os
import random

import pytest

from rocketrio.protocol.message import UNIQ_KEY, BatchItem, decode_stored, encode_batch_body
from rocketrio.storage.commitlog import OffsetCheckpoint
from rocketrio.storage.consume_queue import ConsumeQueue
from rocketrio.storage.message_store import (
    MessageStore,
    MessageToStore,
    StoreConfig,
    WritesFenced,
)
from tests.harness.sim_disk import SimFileSystem

STORE = "/sim/full/store"
# small files, so one put rolls a CommitLog segment and crosses a ConsumeQueue file
CFG = StoreConfig(
    mappedFileSizeCommitLog=2048,
    mappedFileSizeConsumeQueue=5 * 20,
    maxMessageSize=600,
    maxHashSlotNum=64,  # a small key index: the default's slot table is 20 MB per file
    maxIndexNum=1000,
)
QUEUES = [("T", 0), ("T", 1), ("U", 0)]


def open_store(
    fs: SimFileSystem, *, replicated: bool = False, config: StoreConfig = CFG
) -> MessageStore:
    store = MessageStore(STORE, config, fs=fs, replicated=replicated)
    store.open()
    return store


def message(n: int, topic: str = "T", queue_id: int = 0, keys: str = "") -> MessageToStore:
    props = {"KEYS": keys or f"k{n}", UNIQ_KEY: f"U{n:06d}", "TAGS": f"t{n % 3}"}
    body = f"message {n} ".encode() * (1 + n % 7)
    return MessageToStore(topic=topic, queue_id=queue_id, body=body, properties=props)


def put_messages(store: MessageStore, first: int, count: int) -> list[bytes]:
    msgs = [message(first + i, *QUEUES[(first + i) % len(QUEUES)]) for i in range(count)]
    store.put_messages(msgs, 1000 + first)
    return [m.body for m in msgs]


def put_batch(store: MessageStore, first: int, count: int) -> list[bytes]:
    items = [
        BatchItem(0, message(first + i).body, {UNIQ_KEY: f"U{first + i:06d}"}) for i in range(count)
    ]
    store.put_batch_body("T", 1, encode_batch_body(items), 1000 + first)
    return [item.body for item in items]


def stored(store: MessageStore) -> list[bytes]:
    """Every message body the store holds, in CommitLog order, after checking that each queue
    serves exactly its messages of the log (queue offsets 0..n-1, nothing twice) and that the
    key index finds each message once."""
    per_queue: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    bodies = []
    for _, record in store.commitlog.iter_records(store.commitlog.min_offset):
        msg, _ = decode_stored(record)
        per_queue.setdefault((msg.topic, msg.queue_id), []).append((msg.queue_offset, msg.body))
        bodies.append(msg.body)
        found = store.query_by_uniq_key(msg.topic, msg.properties[UNIQ_KEY])
        assert [m.body for m in found] == [msg.body], "the key index lost or doubled a message"
    queues = {(t, q) for t, qs in store.topic_queue_ids().items() for q in qs}
    assert set(per_queue) <= queues
    for topic, qid in queues:
        items = per_queue.get((topic, qid), [])
        assert [qo for qo, _ in items] == list(range(len(items))), f"{topic}:{qid} offsets"
        assert store.get_max_offset(topic, qid) == len(items)
        if items:
            res = store.get_messages(topic, qid, 0, 10_000, 1 << 30)
            got = [decode_stored(b)[0].body for b in res.buffers]
            assert got == [b for _, b in items], f"consume queue {topic}:{qid} differs from the log"
    return bodies


def files_end_where_the_store_says(fs: SimFileSystem, store: MessageStore) -> None:
    """No partial record or entry past the ends the store keeps in memory."""
    clog = store.commitlog
    for base, path in clog.segment_files():
        size = len(fs.visible_bytes(path))
        assert size == min(clog.mapped_file_size, clog.max_offset - base), path
    for (topic, qid), _ in [((t, q), 0) for t, qs in store.topic_queue_ids().items() for q in qs]:
        qdir = f"{STORE}/consumequeue/{topic}/{qid}"
        names = fs.listdir(qdir) if fs.exists(qdir) else []
        total = sum(len(fs.visible_bytes(f"{qdir}/{n}")) for n in names)
        assert total == store.get_max_offset(topic, qid) * 20, f"consume queue {topic}:{qid}"


def warm_store(seed: int) -> tuple[SimFileSystem, MessageStore, list[bytes]]:
    """A store near the end of a segment and of a ConsumeQueue file, everything flushed."""
    fs = SimFileSystem(random.Random(seed))
    store = open_store(fs)
    bodies = put_messages(store, 0, 10)
    store.flush()
    return fs, store, bodies


# (put, messages): each rolls a CommitLog segment and fills a ConsumeQueue file past its end
PUTS = {"put_messages": (put_messages, 7), "put_batch_body": (put_batch, 4)}


@pytest.mark.parametrize("kind", sorted(PUTS))
def test_enospc_at_any_write_of_a_put_refuses_it_whole_and_the_store_recovers(kind: str) -> None:
    put, count = PUTS[kind]
    refused = stored_whole = 0
    failed_in: set[str] = set()
    room = 0
    while stored_whole < 3:  # until the room clearly fits the put
        fs, store, before = warm_store(room)
        end = store.commitlog.max_offset
        fs.set_capacity(fs.used_bytes + room)
        try:
            new = put(store, 100, count)
        except OSError as e:
            assert e.errno == errno.ENOSPC
            refused += 1
            failed_in.add(e.filename.split("/")[4])
            assert store.commitlog.max_offset == end and stored(store) == before
            assert store.write_fault is None  # cut back at once: nothing to repair
            files_end_where_the_store_says(fs, store)
            expected = before
        else:
            stored_whole += 1
            expected = before + new
        fs.set_capacity(None)  # room again (a key query writes the index's pending records)
        assert stored(store) == expected
        expected += put(store, 200, 2)
        assert stored(store) == expected
        store.close()
        assert stored(open_store(fs)) == expected  # a clean restart
        fs.crash(lose_unsynced=True)
        assert stored(open_store(fs)) == expected  # close fsynced everything
        room += 4
    # the loop went through every write of the put: records, BLANK and roll, queue entries
    assert refused > 100 and failed_in == {"commitlog", "consumequeue"}


def test_an_index_write_that_fails_in_a_put_undoes_the_whole_put() -> None:
    """The index writes behind (one write per 64 KiB of records): a put with many keys makes
    it write, and ENOSPC there, after the CommitLog and ConsumeQueue writes went in, undoes
    the put. The undo cuts the CommitLog first, which frees room; when that room is still too
    little for the index to write its records (it writes them before it cuts them), the store
    stays fenced and `repair` finishes the undo once there is room."""
    keys = " ".join(f"key{i}" for i in range(300))
    big = StoreConfig(
        mappedFileSizeCommitLog=1 << 20,
        mappedFileSizeConsumeQueue=100,
        maxHashSlotNum=64,
        maxIndexNum=100_000,
    )
    msgs = [message(50 + i, keys=keys) for i in range(14)]  # 4214 index records: 67 KB
    index_log = f"{STORE}/index/{0:020d}"  # the first (and only) index file

    def three_messages() -> tuple[SimFileSystem, MessageStore, list[bytes]]:
        fs = SimFileSystem(random.Random(1))
        store = open_store(fs, config=big)
        before = put_messages(store, 0, 3)
        store.flush()
        return fs, store, before

    fs, store, _ = three_messages()
    used, index_used = fs.used_bytes, len(fs.visible_bytes(index_log))
    store.put_messages(msgs, 7)
    log_and_cq = fs.used_bytes - used - (len(fs.visible_bytes(index_log)) - index_used)
    for room_after_log, undone_at_once in ((0, False), (60_000, True)):
        fs, store, before = three_messages()
        end = store.commitlog.max_offset
        fs.set_capacity(fs.used_bytes + log_and_cq + room_after_log)
        with pytest.raises(OSError) as err:
            store.put_messages(msgs, 7)
        assert err.value.errno == errno.ENOSPC and err.value.filename == index_log
        assert store.commitlog.max_offset == end  # the log was cut back
        assert (store.write_fault is None) is undone_at_once
        if not undone_at_once:
            with pytest.raises(WritesFenced):
                put_messages(store, 10, 1)
        fs.set_capacity(None)
        assert store.repair(cut_log=True) is None
        assert stored(store) == before
        expected = before + put_messages(store, 10, 2)
        assert stored(store) == expected
        store.close()
        assert stored(open_store(fs, config=big)) == expected


def test_a_commitlog_fsync_enospc_with_lost_pages_is_written_again_by_repair() -> None:
    fs = SimFileSystem(random.Random(2))
    store = open_store(fs)
    expected = put_messages(store, 0, 4)
    store.flush()
    expected += put_messages(store, 4, 6)  # acknowledged without fsync (ASYNC_FLUSH)
    flushed = store.flushed_offset
    fs.fail_fsync(f"{STORE}/commitlog", err=errno.ENOSPC, lose_writeback=True)
    with pytest.raises(OSError):
        store.flush_commitlog()
    assert store.flush_commitlog() == flushed  # the next fsync "works": it counts nothing
    with pytest.raises(WritesFenced):  # nothing goes after bytes that may be missing
        put_messages(store, 10, 1)
    assert store.write_fault is not None and store.write_fault.offset == flushed
    assert store.repair(cut_log=False) is None  # every record read back whole: rewritten
    expected += put_messages(store, 10, 2)
    store.flush_commitlog()
    fs.crash(lose_unsynced=True)
    assert stored(open_store(fs)) == expected  # nothing lost, no hole in the middle


def test_without_the_rewrite_a_power_cut_finds_a_hole_recovery_refuses() -> None:
    """Why the fence exists: trusting the next fsync after a lost writeback."""
    fs = SimFileSystem(random.Random(2))
    store = open_store(fs)
    put_messages(store, 0, 4)
    store.flush()
    put_messages(store, 4, 3)
    fs.fail_fsync(f"{STORE}/commitlog", err=errno.ENOSPC, lose_writeback=True)
    with pytest.raises(OSError):
        store.flush_commitlog()
    store.commitlog.fence.lift()  # what the code did before the fence
    put_messages(store, 7, 3)
    store.flush()
    fs.crash(lose_unsynced=True)
    with pytest.raises(Exception, match=r"damage in the middle|fsynced data"):
        open_store(fs)


def lose_page(fs: SimFileSystem, store: MessageStore, offset: int) -> None:
    """The kernel dropped the page holding ``offset`` and reads it back from disk (zeros)."""
    clog = store.commitlog
    base = clog.segment_base(offset)
    fd = fs.open(f"{STORE}/commitlog/{base:020d}", os.O_RDWR)
    fs.pwrite(fd, bytes(40), offset - base)
    fs.close(fd)


def test_a_lost_page_in_the_fenced_range_is_cut_without_replicas_and_fences_a_master() -> None:
    for cut_log in (True, False):
        fs = SimFileSystem(random.Random(3))
        store = open_store(fs)
        kept = put_messages(store, 0, 3)
        store.flush()
        start = store.commitlog.max_offset
        kept += put_messages(store, 3, 1)
        lost_at = store.commitlog.max_offset
        put_messages(store, 4, 2)
        fs.fail_fsync(f"{STORE}/commitlog", err=errno.ENOSPC, lose_writeback=True)
        with pytest.raises(OSError):
            store.flush()
        lose_page(fs, store, lost_at + 4)
        fault = store.repair(cut_log=cut_log)
        if cut_log:  # a broker without replicas: lost like a crash loses unflushed data
            assert fault is None and store.commitlog.max_offset == lost_at
            assert stored(store) == kept
            kept += put_messages(store, 20, 1)
            store.close()
            assert stored(open_store(fs)) == kept
        else:  # a master: what is provably good is durable now; the rest stays fenced
            assert fault is not None and fault.offset == lost_at
            assert store.flushed_offset == lost_at > start
            with pytest.raises(WritesFenced):
                put_messages(store, 20, 1)


def failed_consume_queue_fsync() -> tuple[SimFileSystem, MessageStore, list[bytes]]:
    """Six flushed messages, six more whose ConsumeQueue fsync failed with ENOSPC and lost
    its pages: the disk, the store and every message stored."""
    fs = SimFileSystem(random.Random(4))
    store = open_store(fs)
    expected = put_messages(store, 0, 6)
    store.flush()
    expected += put_messages(store, 6, 6)
    fs.fail_fsync(f"{STORE}/consumequeue", err=errno.ENOSPC, lose_writeback=True)
    with pytest.raises(OSError):
        store.flush()
    return fs, store, expected


def test_a_consume_queue_fsync_failure_is_dispatched_again_before_anything_else() -> None:
    fs, store, expected = failed_consume_queue_fsync()
    with pytest.raises(WritesFenced):
        put_messages(store, 20, 1)
    store.flush()  # the dispatch checkpoint must not move past the unreliable entries
    assert store.repair(cut_log=True) is None
    store.flush()
    fs.crash(lose_unsynced=True)
    assert stored(open_store(fs)) == expected


def test_a_crash_before_the_repair_dispatches_the_unreliable_entries_again() -> None:
    """Between a failed ConsumeQueue fsync and the repair, flushes go on (the periodic flush):
    the dispatch checkpoint must not vouch for the entries whose pages were lost, or the
    restart would not dispatch them again."""
    fs, store, expected = failed_consume_queue_fsync()
    store.flush()
    writeback(fs, f"{STORE}/dispatch.checkpoint")  # the kernel wrote it back meanwhile
    fs.crash(lose_unsynced=True)
    assert stored(open_store(fs)) == expected


def writeback(fs: SimFileSystem, path: str) -> None:
    """What the kernel's writeback does to a file nobody fsyncs, given time."""
    fd = fs.open(path, os.O_RDONLY)
    fs.fsync(fd)
    fs.close(fd)
    fs.fsync_dir(os.path.dirname(path))


def test_a_failed_dispatch_behind_confirm_offset_keeps_the_records_and_repair_dispatches() -> None:
    fs = SimFileSystem(random.Random(5))
    store = open_store(fs, replicated=True)
    first = put_messages(store, 0, 3)
    store.advance_confirm(store.commitlog.max_offset)
    assert stored(store) == first
    store.flush()
    more = put_messages(store, 3, 4)
    fs.set_capacity(fs.used_bytes)  # the log is written; the queues have no room
    with pytest.raises(OSError):
        store.advance_confirm(store.commitlog.max_offset)
    assert store.write_fault is not None
    with pytest.raises(WritesFenced):
        put_messages(store, 10, 1)
    fs.set_capacity(None)
    assert store.repair(cut_log=False) is None
    assert stored(store) == first + more
    assert store.dispatched_offset == store.commitlog.max_offset


def test_a_full_disk_never_tears_a_checkpoint() -> None:
    fs = SimFileSystem(random.Random(6))
    fs.makedirs("/sim/c")
    fs.set_capacity(fs.used_bytes + 5)
    ckpt = OffsetCheckpoint("/sim/c/x.checkpoint", fs=fs)
    with pytest.raises(OSError):
        ckpt.store(12345)  # its first version does not fit
    assert ckpt.load_state() == (None, "missing") and fs.listdir("/sim/c") == []
    fs.set_capacity(None)
    ckpt.store(12345)
    fs.set_capacity(fs.used_bytes)  # full: a new version overwrites the same 12 bytes
    ckpt.store(67890, sync=True)
    assert OffsetCheckpoint("/sim/c/x.checkpoint", fs=fs).load() == 67890


def test_a_consume_queue_append_that_fails_leaves_no_partial_entry() -> None:
    fs = SimFileSystem(random.Random(7))
    fs.makedirs("/sim/cq")
    cq = ConsumeQueue("/sim/cq", "T", 0, 5 * 20, fs=fs)
    cq.open()
    entries = b"".join((i * 100).to_bytes(8, "big") + b"\0\0\0\x64" + bytes(8) for i in range(8))
    cq.append(entries[:60], 0)
    fs.set_capacity(fs.used_bytes + 50)  # room for 2.5 entries; 8 more cross a file
    with pytest.raises(OSError):
        cq.append(entries[60:], 3)
    assert cq.max_offset == 3 and cq.get(0, 10) == [(i * 100, 100, 0) for i in range(3)]
    files = fs.listdir("/sim/cq/T/0")
    assert [len(fs.visible_bytes(f"/sim/cq/T/0/{n}")) for n in files] == [60]
    fs.set_capacity(None)
    cq.append(entries[60:], 3)
    assert cq.get(0, 10) == [(i * 100, 100, 0) for i in range(8)]
