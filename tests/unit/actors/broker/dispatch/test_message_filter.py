"""The broker's selectors (actors/broker/dispatch/message_filter.py), pure: a record's
properties read without decoding it (stored_properties, RecordProperties) answer as the full
decode does; a selector drops what it rejects and turns an all-rejected read into
NO_MATCHED_MESSAGE; the refusals of pull and POP with upstream's codes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.dispatch.message_filter import (
    ConsumerFilterManager,
    FilterConfig,
    FilterSelectors,
    MessageSelector,
    RecordProperties,
    record_properties,
    sql_keep,
)
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.protocol.bodies import SubscriptionData
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.message_build import build_stored_message
from rocketrio.protocol.message_decode import dispatch_fields
from rocketrio.protocol.message_format import decode_properties, encode_properties
from rocketrio.protocol.sql92_parse import parse_sql92
from rocketrio.storage.store_types import GetMessageStatus, GetResult

HOST4 = (b"\x7f\x00\x00\x01", 1)
HOST6 = (b"\x00" * 15 + b"\x01", 1)
_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)))


def record(
    props: dict[str, str], *, v6: bool = False, topic: str = "T", body: bytes = b"b"
) -> bytes:
    return build_stored_message(
        topic=topic,
        queue_id=0,
        body=body,
        flag=0,
        properties=encode_properties(props) if props else "",
        sys_flag=(1 << 4 | 1 << 5) if v6 else 0,
        born_timestamp=0,
        born_host=HOST6 if v6 else HOST4,
        store_timestamp=0,
        store_host=HOST6 if v6 else HOST4,
    )


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(_text.filter(bool), _text, max_size=4),
    st.booleans(),
    _text.filter(bool),
    st.binary(max_size=64),
)
def test_record_properties_match_the_full_decode(
    props: dict[str, str], v6: bool, topic: str, body: bytes
) -> None:
    rec = record(props, v6=v6, topic=topic[:100], body=body)
    full = decode_properties(dispatch_fields(rec)[5].decode())
    lazy = record_properties(rec)
    assert dict(lazy) == full
    for name in [*props, "absent"]:
        assert lazy.get(name) == full.get(name)


def test_record_properties_last_pair_wins_and_empty_is_none() -> None:
    p = RecordProperties("a\x011\x02b\x01\x02a\x012")
    assert (p.get("a"), p.get("b"), p.get("c")) == ("2", None, None)
    assert RecordProperties("a\x011\x02a\x01").get("a") == "1"  # as decodeProperties


def _result(records: list[bytes]) -> GetResult:
    return GetResult(GetMessageStatus.FOUND, 9, 0, 9, list(records), len(records))


def test_selector_drops_rejected_records() -> None:
    sel = MessageSelector(None, sql_keep(parse_sql92("n > 1")))
    recs = [record({"n": str(i)}) for i in range(4)] + [record({})]
    r = sel.filter(_result(recs))
    assert r.buffers == recs[2:4] and r.message_count == 2
    r = sel.filter(_result(recs[:2]))
    assert r.status is GetMessageStatus.NO_MATCHED_MESSAGE and r.next_begin_offset == 9
    bad = MessageSelector(None, sql_keep(parse_sql92("n > 1"))).filter(
        _result([record({"n": "x"})])
    )
    assert bad.message_count == 0  # an evaluation error is no match


def _selectors(sub: SubscriptionData | None, enabled: bool = True) -> FilterSelectors:
    return FilterSelectors(FilterConfig(enabled), ConsumerFilterManager(lambda g, t: sub))


def test_pull_refusals() -> None:
    sql = SubscriptionData("T", "a >", expressionType="SQL92", subVersion=3)
    r = _selectors(sql).for_pull(sql, "G", 3, from_request=True)
    assert isinstance(r, Refusal) and r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    r = _selectors(sql).for_pull(sql, "G", 3, from_request=False)
    assert isinstance(r, Refusal) and r.code == ResponseCode.FILTER_DATA_NOT_EXIST
    good = SubscriptionData("T", "a > 1", expressionType="SQL92", subVersion=3)
    r = _selectors(good).for_pull(good, "G", 4, from_request=False)
    assert isinstance(r, Refusal) and r.code == ResponseCode.FILTER_DATA_NOT_LATEST
    r = _selectors(good, enabled=False).for_pull(good, "G", 3, from_request=False)
    assert isinstance(r, Refusal) and r.code == ResponseCode.SYSTEM_ERROR
    sel = _selectors(good).for_pull(good, "G", 3, from_request=False)
    assert isinstance(sel, MessageSelector) and sel.keep is not None
    assert sel.keep(record({"a": "2"})) and not sel.keep(record({"a": "1"}))
    tag = SubscriptionData("T", "x", tagsSet=["x"], codeSet=[120])
    assert _selectors(None).for_pull(tag, "G", 0, from_request=True) == MessageSelector({120})


def test_retry_topic_with_filter_support_retry_uses_the_original_topic() -> None:
    original = SubscriptionData("T", "a > 1", expressionType="SQL92")
    retry_sub = SubscriptionData("%RETRY%G", "a > 0", expressionType="SQL92")

    def subscription(group: str, topic: str) -> SubscriptionData | None:
        return {"T": original, "%RETRY%G": retry_sub}.get(topic)

    sels = FilterSelectors(FilterConfig(True, True), ConsumerFilterManager(subscription))
    sel = sels.for_pull(retry_sub, "G", 0, from_request=False)
    assert isinstance(sel, MessageSelector) and sel.keep is not None
    assert not sel.keep(record({"a": "1", "RETRY_TOPIC": "T"}))  # judged by "a > 1"
    assert sel.keep(record({"a": "2", "RETRY_TOPIC": "T"}))
