"""Pure parts of the broker, table-driven (no trio): header fast path, property helpers,
topic rules, subscriptions, pull status mapping, client and lock bookkeeping, offsets, stats."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.clients.client_manager import ClientChannelInfo, ConsumerManager
from rocketrio.actors.broker.clients.lock_manager import RebalanceLockManager
from rocketrio.actors.broker.pull.handlers import pull_code
from rocketrio.actors.broker.send.handlers import parse_send_header_v2
from rocketrio.actors.broker.send.processor import append_props, prop_value
from rocketrio.actors.broker.tables.consumer_offset import ConsumerOffsetManager
from rocketrio.actors.broker.tables.topic_config import (
    TopicConfigManager,
    check_perm,
    check_queue_nums,
    check_topic_name,
)
from rocketrio.protocol.bodies import MessageQueue, SubscriptionData, TopicConfigSerializeWrapper
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.filter import (
    SubscriptionParseError,
    build_subscription,
    tag_codes_of,
)
from rocketrio.protocol.headers import SendMessageRequestHeaderV2
from rocketrio.protocol.message import decode_properties, encode_properties
from rocketrio.protocol.serde import HeaderError, from_ext
from rocketrio.storage.message_store import GetMessageStatus as S

# --------------------------------------------------------------------------- send header

_BASE = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "-1", "f": "0", "g": "17", "h": "3"}


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"i": "TAGS\x01a\x02", "j": "2", "l": "16", "k": "false", "m": "true", "n": "broker-a"},
        {"k": "1", "m": "0"},
        {"m": ""},
    ],
)
def test_fast_send_header_matches_cattrs(extra: dict[str, str]) -> None:
    ext = {**_BASE, **extra}
    assert parse_send_header_v2(ext) == from_ext(SendMessageRequestHeaderV2, ext).to_v1()


@pytest.mark.parametrize(
    ("ext", "field"),
    [
        ({k: v for k, v in _BASE.items() if k != "b"}, "b"),
        ({**_BASE, "d": "four"}, "d"),
        ({**_BASE, "m": "maybe"}, "m"),
    ],
)
def test_fast_send_header_errors_name_the_field(ext: dict[str, str], field: str) -> None:
    with pytest.raises(HeaderError, match=field):
        parse_send_header_v2(ext)


_prop_text = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1
)


@given(st.dictionaries(_prop_text, _prop_text, max_size=6), _prop_text)
def test_prop_value_agrees_with_decoding(props: dict[str, str], key: str) -> None:
    text = encode_properties(props)
    assert prop_value(text, key) == decode_properties(text).get(key)
    extended = append_props(text, f"{key}\x01v\x02")
    assert decode_properties(extended)[key] == "v"


def test_append_props_repairs_a_missing_separator() -> None:
    assert decode_properties(append_props("A\x011", "B\x012\x02")) == {"A": "1", "B": "2"}


# --------------------------------------------------------------------------- topics


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("Orders", None),
        ("%RETRY%group-1|x_y", None),
        ("", "blank"),
        ("a b", "illegal characters"),
        ("a.b", "illegal characters"),
        ("x" * 127, None),
        ("x" * 128, "longer than topic max length"),
    ],
)
def test_topic_names(name: str, problem: str | None) -> None:
    result = check_topic_name(name)
    assert (result is None) if problem is None else (problem in (result or ""))


@pytest.mark.parametrize(
    ("read", "write", "perm", "ok"),
    [(1, 1, 6, True), (1024, 8, 2, True), (0, 1, 6, False), (1, 1025, 6, False), (1, 1, 16, False)],
)
def test_queue_nums_and_perm(read: int, write: int, perm: int, ok: bool) -> None:
    assert (check_queue_nums(read, write) is None and check_perm(perm) is None) == ok


def _topics(**config: object) -> TopicConfigManager:
    mgr = TopicConfigManager(BrokerConfig(**config), lambda: 1000)  # type: ignore[arg-type]
    mgr.load(TopicConfigSerializeWrapper())
    return mgr


def test_system_topics_and_auto_create() -> None:
    mgr = _topics(defaultTopicQueueNums=8)
    tbw = mgr.select("TBW102")
    assert tbw is not None and tbw.perm == 7 and tbw.writeQueueNums == 8
    assert mgr.select("broker-a") is not None and mgr.select("DefaultCluster") is not None
    assert mgr.is_system_topic("broker-a") and mgr.is_system_topic("rmq_sys_x")
    version = mgr.data_version.counter
    created = mgr.create_in_send("New", "TBW102", 4)
    assert created is not None and (created.readQueueNums, created.perm) == (4, 6)
    assert mgr.data_version.counter == version + 1
    assert mgr.create_in_send("Big", "TBW102", 64).writeQueueNums == 8  # type: ignore[union-attr]
    assert mgr.create_in_send("Other", "NoSuchDefault", 4) is None


def test_auto_create_disabled() -> None:
    mgr = _topics(autoCreateTopicEnable=False)
    assert mgr.select("TBW102") is None
    assert mgr.create_in_send("New", "TBW102", 4) is None
    retry, created = mgr.create_in_send_back("%RETRY%g", 1, 6)
    assert created and retry.readQueueNums == 1
    assert mgr.create_in_send_back("%RETRY%g", 5, 6) == (retry, False)


# --------------------------------------------------------------------------- subscriptions / pull


@pytest.mark.parametrize(
    ("expr", "tags"),
    [("*", None), ("", None), (None, None), ("a", ["a"]), (" a || b ||c ", ["a", "b", "c"])],
)
def test_build_subscription(expr: str | None, tags: list[str] | None) -> None:
    sub = build_subscription("T", expr)
    if tags is None:
        assert sub.subString == "*" and tag_codes_of(sub) is None
    else:
        assert sub.tagsSet == tags
        # Java String.hashCode of the tags
        java = {"a": 97, "b": 98, "c": 99}
        assert tag_codes_of(sub) == {java[t] for t in tags}


def test_sql92_is_refused_with_a_reason() -> None:
    with pytest.raises(SubscriptionParseError, match="SQL92"):
        build_subscription("T", "a > 1", "SQL92")
    with pytest.raises(SubscriptionParseError):
        build_subscription("T", "||")


def test_tag_codes_from_tags_only() -> None:
    # "TagA".hashCode() in Java: ((84 * 31 + 97) * 31 + 103) * 31 + 65
    assert tag_codes_of(SubscriptionData("T", "TagA", tagsSet=["TagA"])) == {2_598_919}


@pytest.mark.parametrize(
    ("status", "offset", "code"),
    [
        (S.FOUND, 3, ResponseCode.SUCCESS),
        (S.NO_MATCHED_MESSAGE, 3, ResponseCode.PULL_RETRY_IMMEDIATELY),
        (S.MESSAGE_WAS_REMOVING, 3, ResponseCode.PULL_RETRY_IMMEDIATELY),
        (S.OFFSET_OVERFLOW_ONE, 3, ResponseCode.PULL_NOT_FOUND),
        (S.OFFSET_OVERFLOW_BADLY, 3, ResponseCode.PULL_OFFSET_MOVED),
        (S.OFFSET_TOO_SMALL, 3, ResponseCode.PULL_OFFSET_MOVED),
        (S.NO_MESSAGE_IN_QUEUE, 0, ResponseCode.PULL_NOT_FOUND),
        (S.NO_MESSAGE_IN_QUEUE, 3, ResponseCode.PULL_OFFSET_MOVED),
        (S.NO_MATCHED_LOGIC_QUEUE, 0, ResponseCode.PULL_NOT_FOUND),
    ],
)
def test_pull_status_mapping(status: S, offset: int, code: int) -> None:
    assert pull_code(status, offset) == code


# --------------------------------------------------------------------------- clients / locks


def test_consumer_membership() -> None:
    mgr = ConsumerManager()
    subs = [SubscriptionData("T", "a")]

    def member(conn: str, client: str, now: float) -> ClientChannelInfo:
        return ClientChannelInfo(conn, client, "JAVA", 1, now)

    assert mgr.register("G", member("c1", "id1", 0), "PUSH", "CLUSTERING", "LAST", subs)
    assert not mgr.register("G", member("c1", "id1", 50), "PUSH", "CLUSTERING", "LAST", subs)
    assert mgr.register("G", member("c2", "id2", 60), "PUSH", "CLUSTERING", "LAST", subs)
    assert mgr.get("G").client_ids() == ["id1", "id2"]  # type: ignore[union-attr]
    assert mgr.connection_closed("c2") == ["G"]
    assert mgr.scan_expired(now_s=169) == []  # id1's last heartbeat was at 50
    gone = mgr.scan_expired(now_s=171)
    assert [(g, m.client_id) for g, m in gone] == [("G", "id1")]
    assert mgr.get("G") is None


def test_subscriptions_follow_the_latest_heartbeat() -> None:
    mgr = ConsumerManager()
    info = ClientChannelInfo("c", "id", "JAVA", 1, 0)
    mgr.register(
        "G", info, "PUSH", "CLUSTERING", "LAST", [SubscriptionData("T", "a", subVersion=5)]
    )
    mgr.register("G", info, "PUSH", "CLUSTERING", "LAST", [SubscriptionData("U", "*")])
    group = mgr.get("G")
    assert group is not None and list(group.subscriptions) == ["U"]


def test_locks_expire() -> None:
    locks = RebalanceLockManager(max_live_s=60)
    q = [MessageQueue("T", "b", 0)]
    assert locks.try_lock_batch("G", q, "A", now_s=0) == q
    assert locks.try_lock_batch("G", q, "B", now_s=59) == []
    assert not locks.all_expired("G", now_s=59)
    assert locks.try_lock_batch("G", q, "B", now_s=61) == q
    assert locks.is_locked("G", q[0], "B", now_s=61)


# --------------------------------------------------------------------------- offsets / stats


def test_offsets_version_bumps_once_per_persisted_change() -> None:
    now = [1000]
    mgr = ConsumerOffsetManager(lambda: now[0])
    assert mgr.snapshot_for_persist() is None
    mgr.commit("G", "T", 0, 5)
    mgr.commit("G", "T", 0, 6)
    now[0] = 2000
    snap = mgr.snapshot_for_persist()
    assert snap is not None and snap.offsetTable == {"T@G": {0: 6}}
    assert (snap.dataVersion.counter, snap.dataVersion.timestamp) == (1, 2000)
    assert mgr.snapshot_for_persist() is None
    mgr.commit("G", "T", 0, 6)  # unchanged value: nothing to write
    assert mgr.snapshot_for_persist() is None
    assert mgr.query("G", "T", 0) == 6 and mgr.query("G", "T", 1) == -1
    assert mgr.remove_topic("T") and mgr.query("G", "T", 0) == -1
