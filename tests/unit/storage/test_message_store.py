"""MessageStore: put/get, statuses, filters, indexes, crash recovery and re-dispatch."""

from __future__ import annotations

import os
from typing import Any

import pytest

from rocketrio.protocol.message import (
    PROPERTY_CRC32,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    UNIQ_KEY,
    BatchItem,
    check_stored_record,
    encode_batch_body,
    iter_stored,
    offset_msg_id,
    tags_hash_code,
)
from rocketrio.storage.commitlog import CorruptionError, segment_name
from rocketrio.storage.fs import OS_FS
from rocketrio.storage.message_store import (
    SCHEDULE_TOPIC,
    GetMessageStatus,
    InvalidMessage,
    MessageStore,
    MessageTooLarge,
    MessageToStore,
    RecordCorrupt,
    StoreConfig,
)
from tests.harness.disk_view import DiskView

# a small index geometry: its files roll within a test
CFG = StoreConfig(
    mappedFileSizeCommitLog=4096,
    mappedFileSizeConsumeQueue=100,
    maxMessageSize=1024,
    maxHashSlotNum=64,
    maxIndexNum=48,
)
HOST = (b"\x0a\x00\x00\x09", 10911)
BIG = 1 << 30


def msg(i: int, topic: str = "T", queue_id: int | None = None, **over: Any) -> MessageToStore:
    fields: dict[str, Any] = dict(
        topic=topic,
        queue_id=i % 2 if queue_id is None else queue_id,
        body=f"body-{i:04d}".encode(),
        properties={
            "TAGS": "even" if i % 2 == 0 else "odd",
            "KEYS": f"k{i} all",
            UNIQ_KEY: f"U{i:04d}",
        },
        born_timestamp=i,
        born_host=(b"\x7f\x00\x00\x01", 40000),
    )
    fields.update(over)
    return MessageToStore(**fields)


def opened(disk: DiskView, path: str, cfg: StoreConfig = CFG) -> MessageStore:
    store = MessageStore(path, cfg, store_host=HOST, fs=disk.fs)
    store.open()
    return store


def bodies(store: MessageStore, topic: str, qid: int, tags: set[int] | None = None) -> list[bytes]:
    res = store.get_messages(topic, qid, store.get_min_offset(topic, qid), 10_000, BIG, tags)
    return [m.body for m in iter_stored(res.body)]


def test_put_assigns_offsets_and_get_returns_records(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    results = store.put_messages([msg(i) for i in range(6)], 5000)
    assert [r.queue_offset for r in results] == [0, 0, 1, 1, 2, 2]
    assert results[0].commitlog_offset == 0
    assert results[1].commitlog_offset == results[0].size
    assert results[3].msg_id == offset_msg_id(HOST[0], HOST[1], results[3].commitlog_offset)
    assert {r.store_timestamp for r in results} == {5000}
    more = store.put_messages([msg(6, queue_id=1)], 6000)
    assert more[0].queue_offset == 3
    res = store.get_messages("T", 1, 0, 32, BIG)
    assert res.status is GetMessageStatus.FOUND
    assert (res.message_count, res.next_begin_offset, res.min_offset, res.max_offset) == (
        4,
        4,
        0,
        4,
    )
    got = list(iter_stored(res.body))
    assert [m.body for m in got] == [b"body-0001", b"body-0003", b"body-0005", b"body-0006"]
    assert [m.queue_offset for m in got] == [0, 1, 2, 3]
    for buf, m in zip(res.buffers, got, strict=True):
        check_stored_record(buf, 0, expected_offset=m.commitlog_offset)
        assert m.store_host == "10.0.0.9:10911"
    assert store.get_max_offset("T", 1) == 4
    assert store.topic_queue_ids() == {"T": [0, 1]}
    stats = store.stats()
    assert stats.put_message_count == 7
    assert stats.put_message_bytes == sum(r.size for r in [*results, *more])
    assert stats.commitlog_max_offset == store.get_commitlog_max_offset()
    store.close()


def test_get_statuses(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    store.put_messages([msg(i, queue_id=0) for i in range(4)], 1)
    cases = [
        (("T", 0, 1, 2), GetMessageStatus.FOUND, 3, 2),
        (("T", 0, 4, 2), GetMessageStatus.OFFSET_OVERFLOW_ONE, 4, 0),
        (("T", 0, 9, 2), GetMessageStatus.OFFSET_OVERFLOW_BADLY, 0, 0),  # min is 0
        (("T", 5, 0, 2), GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0),
        (("X", 0, 0, 2), GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0),
    ]
    for (topic, qid, offset, count), status, next_offset, n in cases:
        res = store.get_messages(topic, qid, offset, count, BIG)
        assert (res.status, res.next_begin_offset, res.message_count) == (status, next_offset, n)
    store.truncate_to(0)
    res = store.get_messages("T", 0, 0, 2, BIG)
    assert res.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE


def test_missing_entry_file_moves_to_the_next(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    store.put_messages([msg(i, queue_id=0) for i in range(12)], 1)
    cq = store.consume_queue("T", 0)
    disk.fs.close(cq._fds.pop(1))  # entries 5..9 (five per file) become unreadable
    res = store.get_messages("T", 0, 6, 4, BIG)
    assert (res.status, res.next_begin_offset) == (GetMessageStatus.OFFSET_FOUND_NULL, 10)


def test_max_bytes_returns_at_least_one(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    sizes = [r.size for r in store.put_messages([msg(i, queue_id=0) for i in range(5)], 1)]
    res = store.get_messages("T", 0, 0, 32, 1)
    assert (res.message_count, res.next_begin_offset) == (1, 1)
    res = store.get_messages("T", 0, 1, 32, sizes[1] + sizes[2] + sizes[3] - 1)
    assert (res.message_count, res.next_begin_offset) == (2, 3)


def test_tag_filter_skips_and_advances(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    store.put_messages([msg(i, queue_id=0) for i in range(10)], 1)
    even = {tags_hash_code("even")}
    res = store.get_messages("T", 0, 0, 3, BIG, even)
    assert [m.body for m in iter_stored(res.body)] == [b"body-0000", b"body-0002", b"body-0004"]
    assert res.next_begin_offset == 5
    none = store.get_messages("T", 0, 0, 3, BIG, {tags_hash_code("nope")})
    assert none.status is GetMessageStatus.NO_MATCHED_MESSAGE
    assert (none.message_count, none.next_begin_offset) == (0, 10)


def test_reads_span_other_queues_and_segments(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    for i in range(0, 120, 6):
        store.put_messages([msg(j, queue_id=j % 3) for j in range(i, i + 6)], i)
    assert len(store.commitlog.segment_files()) > 3
    for qid in range(3):
        assert bodies(store, "T", qid) == [f"body-{j:04d}".encode() for j in range(qid, 120, 3)]
        res = store.get_messages("T", qid, 5, 7, BIG)
        assert [m.queue_offset for m in iter_stored(res.body)] == list(range(5, 12))


def test_queries_by_key_and_uniq_key(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    store.put_messages([msg(i) for i in range(5)], 100)
    store.put_messages([msg(i) for i in range(5, 10)], 200)
    store.put_messages([msg(99, topic="Other")], 300)
    assert [m.body for m in store.query_by_key("T", "k3")] == [b"body-0003"]
    newest = store.query_by_key("T", "all", max_num=3)
    assert [m.body for m in newest] == [b"body-0009", b"body-0008", b"body-0007"]
    early = store.query_by_key("T", "all", max_num=100, begin_ts=0, end_ts=150)
    assert len(early) == 5
    assert store.query_by_key("T", "k99") == []  # another topic's key
    assert [m.msg_id for m in store.query_by_uniq_key("T", "U0004")] == ["U0004"]
    assert store.query_by_uniq_key("Other", "U0004") == []
    no_index = opened(disk, disk.path("n"), StoreConfig(messageIndexEnable=False))
    no_index.put_messages([msg(1)], 1)
    assert no_index.query_by_key("T", "k1") == []


def test_look_message_by_offset(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    results = store.put_messages([msg(i) for i in range(3)], 1)
    found = store.look_message_by_offset(results[1].commitlog_offset)
    assert found is not None and found.body == b"body-0001"
    assert store.look_message_by_offset(results[1].commitlog_offset + 1) is None
    assert store.look_message_by_offset(10**9) is None


def test_refused_messages_write_nothing(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    store.put_messages([msg(0, queue_id=0)], 1)
    before = store.get_commitlog_max_offset()
    cases = [
        (msg(1, queue_id=0, body=b"x" * 1025), MessageTooLarge, "maxMessageSize=1024"),
        (msg(1, queue_id=0, properties={"K": "v" * 40000}), MessageTooLarge, "32767"),
        (msg(1, queue_id=0, born_host=(b"\x01", 1)), InvalidMessage, "4 or 16 bytes"),
        (msg(1, queue_id=0, properties={"K": "a\x02b"}), InvalidMessage, "must not contain"),
        (msg(1, queue_id=0, properties="K\x01\ud800\x02"), InvalidMessage, "surrogate"),
    ]
    for bad, exc, text in cases:
        with pytest.raises(exc, match=text):
            store.put_messages([msg(1, queue_id=0), bad], 2)
    big_seg = opened(disk, disk.path("b"), StoreConfig(mappedFileSizeCommitLog=1024))
    with pytest.raises(MessageTooLarge, match="segment"):
        big_seg.put_messages([msg(1, body=b"x" * 1000)], 1)
    assert store.get_commitlog_max_offset() == before
    assert store.put_messages([msg(2, queue_id=0)], 3)[0].queue_offset == 1


def test_transaction_types_and_delay_tags(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    half = store.put_messages([msg(1, queue_id=0, sys_flag=TRANSACTION_PREPARED_TYPE)], 1)
    rollback = store.put_messages([msg(2, queue_id=0, sys_flag=TRANSACTION_ROLLBACK_TYPE)], 1)
    commit = store.put_messages([msg(3, queue_id=0, sys_flag=TRANSACTION_COMMIT_TYPE)], 1)
    assert [r[0].queue_offset for r in (half, rollback, commit)] == [0, 0, 0]
    assert bodies(store, "T", 0) == [b"body-0003"]
    assert store.query_by_uniq_key("T", "U0001")  # prepared messages are indexed
    assert store.query_by_uniq_key("T", "U0002") == []  # rollback ones are not
    delayed = msg(4, topic=SCHEDULE_TOPIC, queue_id=2, properties={"DELAY": "3"})
    store.put_messages([delayed], 50_000)
    cq = store.consume_queue(SCHEDULE_TOPIC, 2)
    assert cq.entry(0)[2] == 50_000 + 10_000  # level 3 = 10s: tagsCode is the deliver time


def test_properties_text_with_stale_crc_is_replaced(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    text = "TAGS\x01a\x02__CRC32#\x010000000001\x02"
    result = store.put_messages([msg(1, properties=text)], 1)[0]
    found = store.look_message_by_offset(result.commitlog_offset)
    assert found is not None and found.tags == "a"
    assert list(found.properties) == ["TAGS", "__CRC32#"]


def test_timestamps(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    for i in range(6):
        store.put_messages([msg(i, queue_id=0)], 1000 * (i + 1))
    assert store.search_offset_by_timestamp("T", 0, 2500) == 2
    assert store.search_offset_by_timestamp("T", 0, 2500, "UPPER") == 1
    assert store.search_offset_by_timestamp("T", 0, 10**9) == 6
    assert store.search_offset_by_timestamp("Nope", 0, 1) == 0
    assert store.get_earliest_msg_store_time("T", 0) == 1000
    assert store.get_message_store_timestamp("T", 0, 4) == 5000
    assert store.get_message_store_timestamp("T", 0, 6) is None


# ----------------------------------------------------------------------------- recovery


def crash_image(disk: DiskView, n: int) -> tuple[str, int, int, int]:
    """Store dir copied while open: n-1 messages flushed, the last one only written.

    Returns (image, start and end of the last record, its queue id).
    """
    src = disk.path("src")
    store = opened(disk, src)
    for i in range(n - 1):
        store.put_messages([msg(i)], 1000 + i)
    store.flush()
    last = store.put_messages([msg(n - 1)], 1000 + n)[0]
    image = disk.path("image")
    disk.copytree(src, image)
    store.close()
    return image, last.commitlog_offset, last.commitlog_offset + last.size, (n - 1) % 2


def assert_queues_within_log(store: MessageStore) -> None:
    end = store.get_commitlog_max_offset()
    for topic, qids in store.topic_queue_ids().items():
        for qid in qids:
            cq = store.consume_queue(topic, qid)
            for phy, size, _ in cq.get(cq.min_offset, 10**6):
                assert phy + size <= end


def restore_image(disk: DiskView, image: str, work: str) -> None:
    """Make ``work`` a copy of ``image`` again, in place.

    Unlinking is slow on a disk mounted with ``discard``; rewriting files is not.
    """
    disk.copytree(image, work)
    wanted = set(disk.files(image))
    for rel in disk.files(work):
        if rel not in wanted:
            disk.unlink(os.path.join(work, rel))


@pytest.fixture
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """fsync changes nothing recovery can read back; skipping it keeps 170 reopenings fast."""
    for name in ("fsync", "fdatasync", "fsync_dir"):
        monkeypatch.setattr(OS_FS, name, lambda fd_or_path: None)


@pytest.mark.usefixtures("no_fsync")
def test_cut_inside_last_message_at_every_byte(disk: DiskView) -> None:
    n = 25
    image, start, end, last_qid = crash_image(disk, n)
    base = start - start % CFG.mappedFileSizeCommitLog
    segment = segment_name(base)
    expected = {q: [f"body-{i:04d}".encode() for i in range(q, n - 1, 2)] for q in (0, 1)}
    work = disk.path("work")
    disk.copytree(image, work)
    for cut in range(start + 1, end):
        restore_image(disk, image, work)
        disk.truncate(os.path.join(work, "commitlog", segment), cut - base)
        store = MessageStore(work, CFG, store_host=HOST, fs=disk.fs)
        report = store.open()
        assert report.commitlog.truncated_at == start, cut
        assert report.commitlog.bytes_dropped == cut - start
        assert report.commitlog.segment == os.path.join(work, "commitlog", segment)
        assert store.get_commitlog_max_offset() == start
        assert_queues_within_log(store)
        assert bodies(store, "T", 0) == expected[0]
        assert bodies(store, "T", 1) == expected[1]
        assert store.query_by_uniq_key("T", f"U{n - 1:04d}") == []
        # the lost message's queue offset is free again
        assert store.put_messages([msg(n - 1)], 1)[0].queue_offset == len(expected[last_qid])
        store.close()


def test_garbage_in_the_middle_is_corruption(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    results = store.put_messages([msg(i) for i in range(8)], 1)
    store.close()
    segment = disk.path("s", "commitlog", segment_name(0))
    disk.patch(segment, results[3].commitlog_offset + 40, b"\x00garbage\x00")
    # recovery trusts what the checkpoint covers; the read check refuses the damaged record
    store = MessageStore(disk.path("s"), CFG, fs=disk.fs)
    store.open()
    with pytest.raises(RecordCorrupt, match=f"offset {results[3].commitlog_offset}"):
        store.get_messages("T", 1, 0, 32, BIG)  # message 3 is in queue 3 % 2
    store.close()
    # without a checkpoint the scan covers it all and refuses the damage in the middle
    disk.unlink(disk.path("s", "commitlog", "flushed.checkpoint"))
    with pytest.raises(CorruptionError, match=f"offset {results[3].commitlog_offset}"):
        MessageStore(disk.path("s"), CFG, fs=disk.fs).open()


def test_torn_consume_queue_entry_is_rebuilt(disk: DiskView) -> None:
    image, _, _, last_qid = crash_image(disk, 12)
    qdir = os.path.join(image, "consumequeue", "T", str(last_qid))
    last_file = os.path.join(qdir, disk.listdir(qdir)[-1])
    disk.truncate(last_file, disk.size(last_file) - 9)
    store = MessageStore(image, CFG, fs=disk.fs)
    report = store.open()
    assert report.cq_torn_bytes == 11
    assert report.redispatched >= 1
    assert bodies(store, "T", last_qid) == [
        f"body-{i:04d}".encode() for i in range(last_qid, 12, 2)
    ]


def test_deleted_consume_queues_and_index_are_rebuilt(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    for i in range(0, 60, 4):
        store.put_messages([msg(j, queue_id=j % 3) for j in range(i, i + 4)], i)
    before = {q: bodies(store, "T", q) for q in range(3)}
    store.close()
    disk.rmtree(disk.path("s", "consumequeue"))
    disk.rmtree(disk.path("s", "index"))
    store = opened(disk, disk.path("s"))
    assert {q: bodies(store, "T", q) for q in range(3)} == before
    assert [m.body for m in store.query_by_key("T", "k17")] == [b"body-0017"]
    assert store.put_messages([msg(60, queue_id=0)], 1)[0].queue_offset == 20
    store.close()
    report = MessageStore(disk.path("s"), CFG, fs=disk.fs).open()
    assert (report.redispatched, report.index_rebuilt, report.cq_entries_dropped) == (0, False, 0)


def test_delete_topic_is_not_resurrected(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    store.put_messages([msg(i) for i in range(4)] + [msg(9, topic="Keep")], 1)
    assert store.delete_topic("T") == 2
    assert not disk.exists(disk.path("s", "consumequeue", "T"))
    assert store.topic_queue_ids() == {"Keep": [1]}
    assert store.put_messages([msg(10, queue_id=0)], 2)[0].queue_offset == 0
    store.close()
    store = opened(disk, disk.path("s"))
    assert bodies(store, "T", 0) == [b"body-0010"]
    assert store.get_max_offset("T", 1) == 0


def test_truncate_to_cuts_dispatched_data(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    results = store.put_messages([msg(i) for i in range(10)], 1)
    store.flush()
    store.truncate_to(results[6].commitlog_offset)
    assert store.get_max_offset("T", 0) == 3
    assert store.get_max_offset("T", 1) == 3
    assert store.query_by_uniq_key("T", "U0007") == []
    assert store.put_messages([msg(10, queue_id=0)], 2)[0].queue_offset == 3
    store.close()
    store = opened(disk, disk.path("s"))
    assert bodies(store, "T", 0) == [b"body-0000", b"body-0002", b"body-0004", b"body-0010"]
    assert_queues_within_log(store)


def test_delete_files_below_moves_queue_minimum(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    for i in range(0, 80, 8):
        store.put_messages([msg(j, queue_id=0) for j in range(i, i + 8)], i)
    deleted = store.delete_files_below(2 * CFG.mappedFileSizeCommitLog)
    assert deleted == [segment_name(0), segment_name(4096)]
    low = store.get_min_offset("T", 0)
    assert low > 0
    res = store.get_messages("T", 0, 0, 4, BIG)
    assert (res.status, res.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, low)
    assert bodies(store, "T", 0)[0] == f"body-{low:04d}".encode()
    assert store.query_by_key("T", "k0") == []
    assert store.query_by_key("T", f"k{low}")
    store.close()
    assert opened(disk, disk.path("s")).get_min_offset("T", 0) == low


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="multiple of 20"):
        StoreConfig(mappedFileSizeConsumeQueue=30)
    with pytest.raises(ValueError, match="messageDelayLevel"):
        StoreConfig(messageDelayLevel="1s 5x")
    with pytest.raises(ValueError, match="maxMessageSize"):
        StoreConfig(maxMessageSize=0)


# ----------------------------------------------------------------------------- batch bodies


def batch_body(first: int, n: int, *, keys: bool = True, all_uniq: bool = False) -> bytes:
    """A client-encoded batch: message i has TAGS, KEYS, and UNIQ_KEY unless i is odd."""
    items = []
    for i in range(first, first + n):
        p = {"TAGS": "even" if i % 2 == 0 else "odd"}
        if keys:
            p["KEYS"] = f"k{i} all"
        if i % 2 == 0 or all_uniq:
            p[UNIQ_KEY] = f"U{i:04d}"
        items.append(BatchItem(i, f"body-{i:04d}".encode(), p))
    return encode_batch_body(items)


def put_body(store: MessageStore, body: bytes, qid: int = 0, ts: int = 7000, **kw: Any) -> Any:
    ids = iter(f"GEN{i}" for i in range(10_000))
    kw.setdefault("new_uniq_key", lambda: next(ids))
    kw.setdefault("properties", {"CLUSTER": "c1", "WAIT": "true"})
    kw.setdefault("born_host", (b"\x7f\x00\x00\x01", 40000))
    return store.put_batch_body("T", qid, body, ts, **kw)


def test_put_batch_body_round_trip(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    store.put_messages([msg(i, queue_id=0) for i in range(2)], 1)
    result = put_body(store, batch_body(2, 4), born_timestamp=55, reconsume_times=2)
    assert (result.topic, result.queue_id, result.first_queue_offset, result.count) == (
        "T",
        0,
        2,
        4,
    )
    assert result.next_queue_offset == 6
    assert result.uniq_keys == [b"U0002", b"GEN0", b"U0004", b"GEN1"]
    assert result.uniq_keys_csv() == "U0002,GEN0,U0004,GEN1"
    assert result.msg_ids() == [
        offset_msg_id(HOST[0], HOST[1], o) for o in result.commitlog_offsets
    ]
    assert result.msg_ids_csv() == ",".join(result.msg_ids())
    assert [(r.queue_offset, r.size, r.store_timestamp) for r in result.put_results()] == [
        (2 + i, n, 7000) for i, n in enumerate(result.sizes)
    ]
    assert store.put_messages([msg(6, queue_id=0)], 1)[0].queue_offset == 6  # offsets go on
    res = store.get_messages("T", 0, 0, 100, BIG)
    assert res.message_count == 7
    got = list(iter_stored(res.body, check_crc=True))
    assert [m.body for m in got] == [f"body-{i:04d}".encode() for i in range(7)]
    assert [m.queue_offset for m in got] == list(range(7))
    for buf, m in zip(res.buffers[2:6], got[2:6], strict=True):
        check_stored_record(buf, 0, expected_offset=m.commitlog_offset)
        props = dict(m.properties)
        assert props.pop(PROPERTY_CRC32).isdigit()
        i = int(m.body[5:])
        assert props == {
            "TAGS": "even" if i % 2 == 0 else "odd",
            "KEYS": f"k{i} all",
            UNIQ_KEY: result.uniq_keys[i - 2].decode(),
            "CLUSTER": "c1",
            "WAIT": "true",
        }
        assert (m.flag, m.born_timestamp, m.store_timestamp, m.reconsume_times) == (i, 55, 7000, 2)
        assert m.born_host == "127.0.0.1:40000" and m.store_host == "10.0.0.9:10911"
    even = store.get_messages("T", 0, 2, 100, BIG, {tags_hash_code("even")})
    assert [m.body for m in iter_stored(even.body)] == [b"body-0002", b"body-0004", b"body-0006"]
    assert [m.body for m in store.query_by_uniq_key("T", "GEN1")] == [b"body-0005"]
    assert [m.body for m in store.query_by_key("T", "k3")] == [b"body-0003"]
    assert len(store.query_by_key("T", "all")) == 7
    stats = store.stats()
    assert stats.put_message_count == 7
    assert stats.put_message_bytes == store.get_commitlog_max_offset()
    store.close()
    store = opened(disk, disk.path("s"))  # nothing to re-dispatch, the index reloads from its log
    assert [m.body for m in store.query_by_uniq_key("T", "U0004")] == [b"body-0004"]


def test_put_batch_body_index_fast_path_and_lazy_lookups(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    first = put_body(store, batch_body(0, 4, keys=False, all_uniq=True))
    assert first.uniq_keys == [b"U0000", b"U0001", b"U0002", b"U0003"]
    assert [m.body for m in store.query_by_uniq_key("T", "U0003")] == [b"body-0003"]
    put_body(store, batch_body(4, 2, keys=False, all_uniq=True))  # after a lookup
    assert [m.body for m in store.query_by_uniq_key("T", "U0005")] == [b"body-0005"]
    store.truncate_to(first.commitlog_offsets[2])
    assert store.query_by_uniq_key("T", "U0002") == []
    assert [m.body for m in store.query_by_uniq_key("T", "U0001")] == [b"body-0001"]


def test_put_batch_body_properties_win_and_text_form(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    result = put_body(store, batch_body(0, 2), properties="TAGS\x01all\x02UNIQ_KEY\x01B\x02")
    assert result.uniq_keys == [b"B", b"B"]  # the batch's own key wins, like a dict update
    assert bodies(store, "T", 0, {tags_hash_code("all")}) == [b"body-0000", b"body-0001"]
    assert [m.body for m in store.query_by_uniq_key("T", "B")] == [b"body-0001", b"body-0000"]


def test_put_batch_body_refusals_write_nothing(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    put_body(store, batch_body(0, 1))
    before = store.get_commitlog_max_offset()
    good = batch_body(1, 1)
    cases: list[tuple[dict[str, Any], type, str]] = [
        (dict(body=good + batch_body(2, 1)[:-1]), InvalidMessage, "truncated"),
        (dict(body=b""), InvalidMessage, "no message"),
        (dict(body=encode_batch_body([BatchItem(0, b"x" * 1025, {})])), MessageTooLarge, "1025"),
        (dict(body=good, sys_flag=TRANSACTION_PREPARED_TYPE), InvalidMessage, "transactional"),
        (dict(body=good, born_host=(b"\x01", 1)), InvalidMessage, "4 or 16 bytes"),
        (dict(body=good, queue_id=2**31), InvalidMessage, "out of range"),
        (dict(body=good, properties={"K": "a\x01"}), InvalidMessage, "must not contain"),
    ]
    for kw, exc, text in cases:
        body, qid = kw.pop("body"), kw.pop("queue_id", 0)
        with pytest.raises(exc, match=text):
            put_body(store, body, qid, **kw)
    with pytest.raises(InvalidMessage, match="SCHEDULE"):
        store.put_batch_body(SCHEDULE_TOPIC, 0, good, 1)
    big_seg = opened(disk, disk.path("b"), StoreConfig(mappedFileSizeCommitLog=1024))
    with pytest.raises(MessageTooLarge, match="segment"):
        put_body(big_seg, encode_batch_body([BatchItem(0, b"x" * 1000, {})]))
    assert store.get_commitlog_max_offset() == before
    assert put_body(store, good).first_queue_offset == 1


def test_put_batch_body_rolls_segments(disk: DiskView) -> None:
    store = opened(disk, disk.path("s"))
    for i in range(0, 120, 12):
        put_body(store, batch_body(i, 12), qid=i // 12 % 2)
    assert len(store.commitlog.segment_files()) > 3
    for qid in (0, 1):
        want = [f"body-{i:04d}".encode() for i in range(120) if i // 12 % 2 == qid]
        assert bodies(store, "T", qid) == want
    store.close()
    store = opened(disk, disk.path("s"))  # recovery re-checks every record CRC of the last segment
    assert bodies(store, "T", 1)[-1] == b"body-0119"


@pytest.mark.usefixtures("no_fsync")
def test_crash_in_the_middle_of_a_batch_write(disk: DiskView) -> None:
    """A batch is one pwrite: a crash may persist any prefix of it. Recovery keeps the whole
    records of that prefix (each is checked by its own CRC), drops the torn one, and the
    ConsumeQueue, index and queue offsets follow."""
    src = disk.path("src")
    store = opened(disk, src)
    put_body(store, batch_body(0, 3))
    store.flush()
    result = put_body(store, batch_body(3, 6))
    image = disk.path("image")
    disk.copytree(src, image)
    store.close()
    start = result.commitlog_offsets[0]
    ends = [o + n for o, n in zip(result.commitlog_offsets, result.sizes, strict=True)]
    cuts = sorted({start + 1, *ends[:-1], *(e - 1 for e in ends), *(e + 7 for e in ends[:-1])})
    work = disk.path("work")
    disk.copytree(image, work)
    for cut in cuts:
        restore_image(disk, image, work)
        disk.truncate(os.path.join(work, "commitlog", segment_name(0)), cut)
        store = MessageStore(work, CFG, store_host=HOST, fs=disk.fs)
        report = store.open()
        whole = sum(1 for e in ends if e <= cut)
        kept_end = ends[whole - 1] if whole else start
        assert store.get_commitlog_max_offset() == kept_end, cut
        assert report.commitlog.truncated_at == (None if kept_end == cut else kept_end)
        assert_queues_within_log(store)
        assert bodies(store, "T", 0) == [f"body-{i:04d}".encode() for i in range(3 + whole)]
        assert len(store.query_by_key("T", "all")) == 3 + whole
        assert store.put_messages([msg(99, queue_id=0)], 1)[0].queue_offset == 3 + whole
        store.close()
