"""`PutPath.put_messages` encodes a plain message inline (storage/store_put.py): the same
results, CommitLog bytes, ConsumeQueue entries, index keys and errors as the reference path,
which sends every message through `_encode` (`PutPath.inline_encode = False`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketrio.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rocketrio.storage.message_store import (
    SCHEDULE_TOPIC,
    InvalidMessage,
    MessageStore,
    MessageTooLarge,
    MessageToStore,
    StoreConfig,
)
from rocketrio.storage.timer_wheel import TIMER_TOPIC

CFG = StoreConfig(mappedFileSizeCommitLog=1 << 16, maxMessageSize=600)
HOST = (b"\x0a\x00\x00\x09", 10911)
BIG = 1 << 30

PROPS = [
    "UNIQ_KEY\x01U1\x02TAGS\x01a\x02",
    "UNIQ_KEY\x01U1\x02TAGS\x01a\x02",
    "UNIQ_KEY\x01U2\x02",
    "KEYS\x01k1 k2\x02UNIQ_KEY\x01U2\x02CLUSTER\x01c\x02",
    "",
    {"TAGS": "t", "KEYS": "x"},
    "DELAY\x013\x02UNIQ_KEY\x01U3\x02",
    "K\x01a\x02\x02",  # an empty pair
    "K\x01\ud800\x02",  # not UTF-8: InvalidMessage
    {"K": "a\x02b"},  # a separator: InvalidMessage
]


def message(draw_fields: tuple[Any, ...]) -> MessageToStore:
    topic, queue_id, body_len, props, sys_flag, host = draw_fields
    return MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=b"b" * body_len,
        properties=props,
        sys_flag=sys_flag,
        born_timestamp=11,
        born_host=host,
    )


MESSAGES = st.lists(
    st.tuples(
        st.sampled_from(["T", "T", "T", "U", "U", SCHEDULE_TOPIC, TIMER_TOPIC]),
        st.integers(0, 2),
        st.sampled_from([0, 1, 300, 300, 600, 600, 601]),
        st.sampled_from(PROPS),
        st.sampled_from(
            [0] * 6
            + [TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE]
        ),
        st.sampled_from([(b"\x7f\x00\x00\x01", 4000)] * 5 + [(b"\x01", 1)]),
    ).map(message),
    min_size=1,
    max_size=8,
)


def opened(path: str, inline: bool, cfg: StoreConfig = CFG) -> MessageStore:
    store = MessageStore(path, cfg, store_host=HOST)
    store.open()
    store._put.inline_encode = inline
    return store


def outcome(store: MessageStore, msgs: list[MessageToStore]) -> Any:
    try:
        return store.put_messages(msgs, 50_000)
    except (InvalidMessage, MessageTooLarge, ValueError) as e:
        return type(e), str(e)


def state(store: MessageStore) -> Any:
    """The CommitLog's bytes, every queue's entries and the index's UNIQ_KEY lookups."""
    end = store.get_commitlog_max_offset()
    log = store.commitlog.read(0, end) if end else b""
    queues = {}
    for topic in ("T", "U", SCHEDULE_TOPIC, TIMER_TOPIC):
        for qid in range(20):
            n = store.get_max_offset(topic, qid)
            cq = store.consume_queue(topic, qid)
            if n and cq is not None:
                queues[topic, qid] = [cq.entry(i) for i in range(n)]
    keys = {u: store.query_by_uniq_key("T", u) for u in ("U1", "U2", "U3")}
    return log, queues, keys


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(puts=st.lists(MESSAGES, min_size=1, max_size=4))
def test_the_inline_encode_is_the_reference(
    tmp_path: Path, puts: list[list[MessageToStore]]
) -> None:
    base = os.path.join(str(tmp_path), os.urandom(6).hex())
    fast, ref = opened(base + "-inline", True), opened(base + "-ref", False)
    try:
        for msgs in puts:
            assert outcome(fast, msgs) == outcome(ref, msgs)
        assert state(fast) == state(ref)
    finally:
        fast.close()
        ref.close()


def good(i: int, **over: Any) -> MessageToStore:
    fields: dict[str, Any] = dict(topic="T", queue_id=i % 2, body=b"m%d" % i, properties=PROPS[0])
    fields.update(over)
    return MessageToStore(**fields)


@pytest.mark.parametrize(
    "bad",
    [
        good(9, body=b"x" * 601),
        good(9, properties=PROPS[-1]),
        good(9, properties=PROPS[-2]),
        good(9, born_host=(b"\x01", 1)),
        good(9, queue_id=2**31),
        good(9, properties={"K": "v" * 40000}),
    ],
    ids=["body", "separator", "surrogate", "host", "queue", "properties"],
)
def test_each_refusal_is_the_references(tmp_path: Path, bad: MessageToStore) -> None:
    fast = opened(str(tmp_path / "inline"), True)
    ref = opened(str(tmp_path / "ref"), False)
    for msgs in ([good(0), good(1), bad], [bad], [good(2), bad, good(3)], [good(4)]):
        got = outcome(fast, msgs)
        assert got == outcome(ref, msgs)
        assert isinstance(got, list) == (bad not in msgs)
    assert state(fast) == state(ref)
    fast.close()
    ref.close()


def test_a_record_over_a_segment_is_refused_inline_too(tmp_path: Path) -> None:
    cfg = StoreConfig(mappedFileSizeCommitLog=1024, maxMessageSize=4096)
    store = opened(str(tmp_path / "s"), True, cfg)
    ok = MessageToStore(topic="T", queue_id=0, body=b"x" * 10)
    big = MessageToStore(topic="T", queue_id=0, body=b"x" * 1000)
    with pytest.raises(MessageTooLarge, match="segment"):
        store.put_messages([ok, big], 1)
    assert store.get_commitlog_max_offset() == 0
    assert store.put_messages([ok], 1)[0].queue_offset == 0
    store.close()
