"""half_cache.py: the halves END_TRANSACTION takes instead of reading them back.

The commit built from a cached half is byte for byte the commit record built, as before this
cache, from the half read back off the disk (hypothesis, against a real MessageStore and a
reference of the old commit path written out here); the cache is bounded by count and bytes,
gives each half once, and never serves an entry the CommitLog no longer spans."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.transaction.half_cache import CachingHalfPut, HalfCache
from rocketrio.actors.broker.transaction.policy import (
    born_host_of,
    committed_message,
    half_keys,
    half_message,
)
from rocketrio.protocol.message import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    MessageExt,
    build_stored_message,
    encode_properties,
)
from rocketrio.storage.dispatch_request import wire_properties
from rocketrio.storage.message_store import MessageStore, MessageToStore, PutResult, StoreConfig

STORE_HOST = (b"\x0a\x00\x00\x07", 10911)
STORE_TS = 1_700_000_000_123

_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02"),
    min_size=0,
    max_size=12,
)
_props = st.dictionaries(
    st.sampled_from(["KEYS", "TAGS", "a", "b", "UNIQ_KEY", "PGROUP", "__CRC32#", "DELAY", "z"])
    | _text.filter(bool),
    _text,
    max_size=6,
)
_host = st.tuples(st.sampled_from([b"\x7f\x00\x00\x01", bytes(range(16))]), st.integers(0, 65535))


def prepared(
    props: dict[str, str], body: bytes, host: tuple[bytes, int], qid: int
) -> MessageToStore:
    """A prepared send as the send path builds it: the properties as encoded text."""
    text = encode_properties({**props, "UNIQ_KEY": "U1", PROPERTY_TRANSACTION_PREPARED: "true"})
    return half_message(MessageToStore("Real", qid, body, 3, text, 4, 1_000, host, 2))


def record(m: MessageToStore) -> bytes:
    """The commit's record as the store builds it (properties through wire_properties)."""
    raw = wire_properties(m.properties)[0]
    return build_stored_message(
        topic=m.topic, queue_id=m.queue_id, body=m.body, flag=m.flag, properties=raw,
        sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host,
        store_timestamp=STORE_TS, store_host=STORE_HOST, reconsume_times=m.reconsume_times,
        prepared_transaction_offset=m.prepared_transaction_offset, queue_offset=5,
        physical_offset=4096,
    )  # fmt: skip


def old_commit(half: MessageExt) -> MessageToStore:
    """The commit as built before the cache: from the half read back off the disk, its
    properties (with the record's ``__CRC32#``) re-encoded whole."""
    props = dict(half.properties)
    topic, qid = props.pop(PROPERTY_REAL_TOPIC), int(props.pop(PROPERTY_REAL_QUEUE_ID))
    props.pop(PROPERTY_TRANSACTION_PREPARED, None)
    return MessageToStore(
        topic, qid, half.body, half.flag, encode_properties(props), (half.sys_flag & ~0xC) | 0x8,
        half.born_timestamp, _host_of(half), half.reconsume_times,
        half.commitlog_offset,
    )  # fmt: skip


def _host_of(half: MessageExt) -> tuple[bytes, int]:
    from rocketrio.protocol.message import parse_host

    return parse_host(half.born_host)


def test_a_commit_from_a_cached_half_is_the_commit_from_the_disk(tmp_path: Path) -> None:
    store = MessageStore(str(tmp_path), StoreConfig(), store_host=STORE_HOST)
    store.open()
    cache = HalfCache()
    try:

        @settings(max_examples=100, deadline=None)
        @given(_props, st.binary(max_size=64), _host, st.integers(0, 7))
        def check(props: dict[str, str], body: bytes, host: tuple[bytes, int], qid: int) -> None:
            msg = prepared(props, body, host, qid)
            put = store.put_messages([msg], STORE_TS)[0]
            cache.add(msg, put)
            disk = store.look_message_by_offset(put.commitlog_offset)
            lo, hi = store.get_commitlog_min_offset(), store.get_commitlog_max_offset()
            cached = cache.take(put.commitlog_offset, lo, hi)
            assert disk is not None
            if "__CRC32#" in props:  # stored re-encoded without it: not cached, read back
                assert cached is None
                return
            assert cached is not None
            before = record(old_commit(disk))
            assert record(committed_message(cached, _host_of(cached))) == before
            assert record(committed_message(disk, _host_of(disk))) == before
            for field in ("queue_offset", "commitlog_offset", "store_timestamp", "store_size"):
                assert getattr(cached, field) == getattr(disk, field)
            assert cached.offset_msg_id == disk.offset_msg_id == put.msg_id
            assert born_host_of(cached) == born_host_of(disk) == _host_of(disk) == host
            assert {k: v for k, v in disk.properties.items() if k != "__CRC32#"} == {
                k: v for k, v in cached.properties.items() if k != "__CRC32#"
            }

        check()
    finally:
        store.close()


def _put(offset: int, size: int = 100) -> PutResult:
    return PutResult(offset, size, 0, f"0A000007{10911:08X}{offset:016X}", STORE_TS)


def _half(body: bytes = b"x") -> MessageToStore:
    return prepared({}, body, (b"\x7f\x00\x00\x01", 1), 0)


def test_a_half_is_served_once_and_only_while_the_commitlog_spans_it() -> None:
    cache = HalfCache()
    cache.add(_half(), _put(0))
    cache.add(_half(), _put(100))
    cache.add(_half(), _put(200))
    assert cache.take(0, 0, 300) is not None
    assert cache.take(0, 0, 300) is None  # taken: a second END reads the disk
    assert cache.take(100, 0, 150) is None  # the log was truncated below its end
    assert cache.take(200, 250, 400) is None  # the log no longer holds its start
    assert len(cache) == 0 and cache.bytes == 0
    assert (cache.hits, cache.misses) == (1, 3)


def test_the_oldest_halves_go_first_beyond_the_count_or_byte_bound() -> None:
    cache = HalfCache(max_halves=3, max_bytes=1000)
    for i in range(5):
        cache.add(_half(), _put(i * 100))
    assert [cache.take(i * 100, 0, 10_000) is not None for i in range(5)] == [0, 0, 1, 1, 1]
    cache.add(_half(b"a" * 600), _put(0, 700))
    cache.add(_half(b"b" * 600), _put(700, 700))  # 1,200 bytes: the first goes
    assert cache.bytes == 600 and len(cache) == 1
    assert cache.take(0, 0, 10_000) is None and cache.take(700, 0, 10_000) is not None
    cache.add(_half(b"c" * 1001), _put(2000, 1100))  # bigger than the bound: never cached
    assert len(cache) == 0


def test_only_a_stored_half_is_cached_and_the_send_is_answered_either_way() -> None:
    cache, seen = HalfCache(), []
    ok = CachingHalfPut(cache, _half(), lambda r, s, m: seen.append(s))
    ok([_put(0)], PutStatus.PUT_OK, None)
    failed = CachingHalfPut(cache, _half(), lambda r, s, m: seen.append(s))
    failed([], PutStatus.SERVICE_NOT_AVAILABLE, "stopped")
    assert seen == [PutStatus.PUT_OK, PutStatus.SERVICE_NOT_AVAILABLE]
    assert len(cache) == 1 and cache.take(0, 0, 100) is not None


_any_text = st.text(st.sampled_from("ab_%\x01\x02é"), max_size=6)


@settings(max_examples=300, deadline=None)
@given(_any_text, st.integers(-1, 300), st.none() | _any_text)
def test_the_half_keys_are_written_as_encode_properties_writes_them(
    topic: str, queue_id: int, uniq: str | None
) -> None:
    """The half's three keys, written out without a dict, are `encode_properties` of them,
    refused (ValueError) exactly when it refuses them."""
    extra = {PROPERTY_REAL_TOPIC: topic, PROPERTY_REAL_QUEUE_ID: str(queue_id)}
    if uniq:
        extra = {"__transactionId__": uniq, **extra}
    try:
        expected: str | None = encode_properties(extra)
    except ValueError:
        expected = None
    try:
        got: str | None = half_keys(topic, str(queue_id), uniq)
    except ValueError:
        got = None
    assert got == expected
