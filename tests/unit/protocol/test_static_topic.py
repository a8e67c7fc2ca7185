"""Static-topic mapping maths (RIP-21, S1/S2): shapes, translation, checks, epochs, the
broker's mapping table. Allocation and remapping properties: test_static_topic_alloc.py."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingManager
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import TopicConfig
from rocketrio.protocol.serde import from_json, to_json
from rocketrio.protocol.static_topic import (
    JAVA_LONG_MAX,
    LogicQueueMappingItem,
    MappingError,
    MappingOne,
    TopicConfigAndQueueMapping,
    TopicQueueMappingDetail,
    TopicQueueMappingSerializeWrapper,
    build_mapping_ones,
    check_immutable,
    check_item_offsets,
    find_item,
    logic_queue_offsets,
    logic_to_physical,
    newest_first,
    physical_to_logic,
)

Item = LogicQueueMappingItem

# -------------------------------------------------------------------- JSON shapes


def test_item_and_detail_json_use_upstreams_field_names_in_fastjson_order() -> None:
    item = Item(1, 2, "broker-b", 10000, 0, -1, -1, -1)
    detail = TopicQueueMappingDetail("T", totalQueues=4, bname="broker-b", epoch=7)
    detail.hostedQueues[3] = [Item(0, 0, "broker-a", 0, 0, 120, -1, -1), item]
    # fastjson (upstream's tools): alphabetical bean properties, bare Integer map keys
    assert fastjson.encode(item) == (
        b'{"bname":"broker-b","endOffset":-1,"gen":1,"logicOffset":10000,"queueId":2,'
        b'"startOffset":0,"timeOfEnd":-1,"timeOfStart":-1}'
    )
    text = fastjson.encode(detail).decode()
    assert text.startswith(
        '{"bname":"broker-b","currIdMap":{},"dirty":false,"epoch":7,"hostedQueues":{3:[{'
    )
    assert text.endswith('"scope":"__global__","topic":"T","totalQueues":4}')
    assert from_json(TopicQueueMappingDetail, text) == detail
    # standard JSON (our file) in upstream's declaration order, string keys
    plain = to_json(detail).decode()
    assert plain.startswith('{"topic":"T","scope":"__global__","totalQueues":4,"bname":"broker-b"')
    assert '"hostedQueues":{"3":[{"gen":0,"queueId":0,"bname":"broker-a"' in plain
    assert from_json(TopicQueueMappingDetail, plain) == detail


def test_reads_what_upstreams_broker_writes() -> None:
    """GET_TOPIC_CONFIG's body from a Java broker (TopicConfigAndQueueMapping, fastjson)."""
    body = (
        '{"attributes":{},"mappingDetail":{"bname":"broker-a","currIdMap":{},"dirty":false,'
        '"epoch":9223372036854775807,"hostedQueues":{0:[{"bname":"broker-a","endOffset":-1,'
        '"gen":0,"logicOffset":0,"queueId":0,"startOffset":0,"timeOfEnd":-1,"timeOfStart":-1}]},'
        '"scope":"__global__","topic":"T","totalQueues":1},"order":false,"perm":6,'
        '"readQueueNums":1,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,'
        '"writeQueueNums":1}'
    )
    cfg = from_json(TopicConfigAndQueueMapping, body)
    assert cfg.topicName == "T" and cfg.writeQueueNums == 1
    assert cfg.mappingDetail is not None
    assert cfg.mappingDetail.epoch == JAVA_LONG_MAX  # a Java long read exactly
    assert cfg.mappingDetail.hostedQueues[0][0] == Item(0, 0, "broker-a", 0, 0)
    # a plain topic config (no lo): mappingDetail absent
    plain = from_json(TopicConfigAndQueueMapping, fastjson.encode(TopicConfig("P", 2, 2)))
    assert plain.mappingDetail is None and plain.readQueueNums == 2


def test_file_wrapper_round_trips() -> None:
    d = TopicQueueMappingDetail("T", totalQueues=1, bname="a", epoch=5)
    d.hostedQueues[0] = [Item(0, 0, "a", 0, 0)]
    w = TopicQueueMappingSerializeWrapper({"T": d})
    back = from_json(TopicQueueMappingSerializeWrapper, to_json(w))
    assert back == w


# -------------------------------------------------------------------- epochs


def test_newest_first_never_wraps_like_upstreams_int_cast() -> None:
    """#10580/#10849: upstream sorted with (int)(o2.epoch - o1.epoch); a difference of 2**32
    casts to 0 and a stale detail could come first."""
    base = 1_700_000_000_000
    old = TopicQueueMappingDetail("T", bname="old", epoch=base)
    new = TopicQueueMappingDetail("T", bname="new", epoch=base + 2**32)
    huge = TopicQueueMappingDetail("T", bname="huge", epoch=JAVA_LONG_MAX)
    neg = TopicQueueMappingDetail("T", bname="neg", epoch=-(2**63))
    assert [d.bname for d in newest_first([old, neg, huge, new])] == ["huge", "new", "old", "neg"]


def test_epochs_near_the_java_long_limit() -> None:
    m = TopicQueueMappingManager("a", lambda: 1)
    d = TopicQueueMappingDetail("T", totalQueues=1, bname="a", epoch=JAVA_LONG_MAX - 1)
    d.hostedQueues[0] = [Item(0, 0, "a", 0, 0)]
    assert m.update(d)
    older = attrs.evolve(d.copy(), epoch=JAVA_LONG_MAX - 2**33)
    with pytest.raises(MappingError, match="older"):
        m.update(older)
    assert m.update(attrs.evolve(d.copy(), epoch=JAVA_LONG_MAX))
    with pytest.raises(MappingError, match="64-bit"):
        m.update(attrs.evolve(d.copy(), epoch=JAVA_LONG_MAX + 1))
    assert m.table["T"].epoch == JAVA_LONG_MAX


# -------------------------------------------------------------------- translation


@st.composite
def item_chains(draw: st.DrawFn) -> list[Item]:
    """A valid chain: sealed generations with holes between them, then an open leader."""
    n = draw(st.integers(1, 5))
    items = []
    logic = draw(st.integers(0, 50))
    for gen in range(n):
        start = 0
        last = gen == n - 1
        length = draw(st.integers(1, 40))
        end = -1 if last else start + length
        # a physical queue is never reused by another generation (checked elsewhere)
        queue_id = draw(st.integers(0, 7)) * 10 + gen
        items.append(Item(gen, queue_id, f"b{gen % 3}", logic, start, end))
        logic = logic + length + draw(st.integers(1, 30))  # a sealed item's end, a hole
    check_item_offsets(items)
    return items


@settings(max_examples=300)
@given(item_chains(), st.data())
def test_a_logic_offset_maps_to_exactly_one_physical_position_and_back(
    items: list[Item], data: st.DataObject
) -> None:
    top = items[-1].logicOffset + 60
    for logic in range(top):
        holders = [
            i
            for i, it in enumerate(items)
            if it.logicOffset <= logic
            and (it.endOffset < 0 or logic < it.logicOffset + it.endOffset - it.startOffset)
        ]
        assert len(holders) <= 1
        pos = logic_to_physical(items, logic)
        if not holders:
            assert pos is None, (logic, pos)
            continue
        it = items[holders[0]]
        assert pos is not None and (pos.bname, pos.queueId) == (it.bname, it.queueId)
        assert pos.offset == logic - it.logicOffset + it.startOffset
        assert physical_to_logic(items, pos.bname, pos.queueId, pos.offset) == logic
    # and every physical position of every generation maps back to itself
    for it in items:
        end = it.endOffset if it.endOffset >= 0 else it.startOffset + 50
        for phys in range(it.startOffset, end):
            logic = physical_to_logic(items, it.bname, it.queueId, phys)
            assert logic is not None
            pos = logic_to_physical(items, logic)
            assert pos is not None and (pos.bname, pos.queueId, pos.offset) == (
                it.bname,
                it.queueId,
                phys,
            )
        if it.endOffset >= 0:  # endOffset is excluded
            assert physical_to_logic(items, it.bname, it.queueId, it.endOffset) is None


def test_translation_edges() -> None:
    items = [Item(0, 0, "a", 0, 0, 100), Item(1, 0, "b", 10000, 0, -1)]
    assert logic_to_physical(items, 99) is not None
    assert logic_to_physical(items, 99).offset == 99  # type: ignore[union-attr]
    assert logic_to_physical(items, 100) is None  # the hole left by the round-up
    assert logic_to_physical(items, 9999) is None
    pos = logic_to_physical(items, 10005)
    assert pos is not None and (pos.bname, pos.offset) == ("b", 5)
    assert physical_to_logic(items, "b", 5, 5) is None  # not a physical queue of the chain
    assert physical_to_logic(items, "b", 0, 5) == 10005
    # an undecided new leader holds nothing yet; the old one stays open until sealed
    pending = [Item(0, 0, "a", 0, 0, -1), Item(1, 0, "b", -1, 0, -1)]
    assert physical_to_logic(pending, "b", 0, 0) is None
    assert logic_to_physical(pending, 500) == logic_to_physical(pending[:1], 500)
    # before the first item (#5493: upstream NPE'd): no position, find_item gives the oldest
    later = [Item(3, 1, "a", 500, 0, -1)]
    assert logic_to_physical(later, 10) is None
    assert find_item(later, 10, ignore_negative=True) == later[0]
    assert find_item([Item(0, 0, "a", -1, 0)], 5, ignore_negative=True) is None


# -------------------------------------------------------------------- checks


def test_item_offset_checks() -> None:
    check_item_offsets([Item(0, 0, "a", 0, 0, 10), Item(1, 0, "b", 20, 0)])
    bad = {
        "negative": [Item(0, -1, "a", 0, 0)],
        "only the newest": [Item(0, 0, "a", -1, 0), Item(1, 0, "b", 20, 0)],
        "generations": [Item(1, 0, "a", 0, 0, 10), Item(1, 0, "b", 20, 0)],
        "endOffset is smaller": [Item(0, 0, "a", 0, 5, 3)],
        "logicOffset must increase": [Item(0, 0, "a", 20, 0, 10), Item(1, 0, "b", 20, 0)],
        "overlaps": [Item(0, 0, "a", 0, 0, 30), Item(1, 0, "b", 20, 0)],
    }
    for match, items in bad.items():
        with pytest.raises(MappingError, match=match):
            check_item_offsets(items)


def test_immutability_of_existing_generations() -> None:
    old = [Item(0, 0, "a", 0, 0), Item(1, 0, "b", -1, 0)]
    check_immutable(old, [Item(0, 0, "a", 0, 0, 7), Item(1, 0, "b", 10000, 0)], True)
    with pytest.raises(MappingError, match="logicOffset"):
        check_immutable(old, [Item(0, 0, "a", 5, 0), Item(1, 0, "b", 10000, 0)], False)
    with pytest.raises(MappingError, match="physical queue"):
        check_immutable(old, [Item(0, 1, "a", 0, 0), Item(1, 0, "b", 10000, 0)], False)
    with pytest.raises(MappingError, match="leader changed"):
        check_immutable(old, [Item(0, 0, "a", 0, 0), Item(2, 0, "c", -1, 0)], True)
    # an older generation cleaned away on one side is fine
    check_immutable(old, [Item(1, 0, "b", 10000, 0)], False)


def test_build_mapping_ones_needs_a_complete_unshared_set() -> None:
    a = TopicQueueMappingDetail("T", totalQueues=2, bname="a", epoch=1)
    b = TopicQueueMappingDetail("T", totalQueues=2, bname="b", epoch=1)
    a.hostedQueues[0] = [Item(0, 0, "a", 0, 0)]
    b.hostedQueues[1] = [Item(0, 0, "b", 0, 0)]
    ones = build_mapping_ones([a, b], replace=False, check_complete=True)
    assert {g: o.bname for g, o in ones.items()} == {0: "a", 1: "b"}
    with pytest.raises(MappingError, match="totalQueues is 2"):
        build_mapping_ones([a], replace=False, check_complete=True)
    b.hostedQueues[1] = [Item(0, 0, "a", 0, 0, 5), Item(1, 0, "b", 10000, 0)]
    with pytest.raises(MappingError, match="share the physical queue a-0"):
        build_mapping_ones([a, b], replace=False, check_complete=True)


def test_logic_queue_offsets_for_topic_status() -> None:
    one = MappingOne(
        "T", "b", 0, (Item(0, 0, "a", 0, 0, 120), Item(1, 3, "b", 10000, 0)), "__global__"
    )
    got = logic_queue_offsets({0: one}, {("a", 0): (0, 120, 5), ("b", 3): (0, 7, 9)})
    assert [(o.globalId, o.minOffset, o.maxOffset, o.lastUpdateTimestamp) for o in got] == [
        (0, 0, 10007, 9)
    ]
    # broker a retired: its generation is passed over, the min is where b's begins
    got = logic_queue_offsets({0: one}, {("b", 3): (0, 7, 9)})
    assert [(o.globalId, o.minOffset, o.maxOffset) for o in got] == [(0, 10000, 10007)]
    # the newest generation's broker unknown: the queue is left out
    assert logic_queue_offsets({0: one}, {("a", 0): (0, 120, 5)}) == []


# -------------------------------------------------------------------- the broker's table


def _detail(bname: str, epoch: int, items: dict[int, list[Item]]) -> TopicQueueMappingDetail:
    return TopicQueueMappingDetail("T", totalQueues=4, bname=bname, epoch=epoch, hostedQueues=items)


def test_a_mapping_copied_from_another_broker_is_refused() -> None:
    m = TopicQueueMappingManager("broker-b", lambda: 1)
    with pytest.raises(MappingError, match="belongs to broker broker-a"):
        m.update(_detail("broker-a", 1, {0: [Item(0, 0, "broker-a", 0, 0)]}))
    assert m.table == {}
    # in a file: left out and reported, the broker's own mapping kept
    own = _detail("broker-b", 1, {1: [Item(0, 0, "broker-b", 0, 0)]})
    copied = _detail("broker-a", 1, {0: [Item(0, 0, "broker-a", 0, 0)]})
    copied.topic = "U"
    refused = m.adopt(TopicQueueMappingSerializeWrapper({"T": own, "U": copied}))
    assert refused == [copied] and list(m.table) == ["T"]


def test_table_updates_keep_history_and_refuse_rewrites() -> None:
    m = TopicQueueMappingManager("a", lambda: 42)
    first = _detail("a", 10, {0: [Item(0, 0, "a", 0, 0)], 1: [Item(0, 1, "a", 0, 0)]})
    assert m.update(first) and m.data_version.counter == 1
    assert not m.update(first.copy())  # same again: idempotent, no new version
    assert m.data_version.counter == 1
    # a newer epoch that omits queue 1 keeps its list
    moved = _detail("a", 20, {0: [Item(0, 0, "a", 0, 0), Item(1, 0, "c", -1, 0)]})
    assert m.update(moved)
    assert sorted(m.table["T"].hostedQueues) == [0, 1]
    rewrite = _detail("a", 30, {0: [Item(0, 0, "a", 7, 0), Item(1, 0, "c", 10000, 0)]})
    with pytest.raises(MappingError, match="logicOffset"):
        m.update(rewrite)
    with pytest.raises(MappingError, match="missing at the same epoch"):
        m.update(_detail("a", 20, {0: moved.hostedQueues[0]}))
    forced = _detail("a", 5, {2: [Item(0, 2, "a", 0, 0)]})
    assert m.update(forced, force=True)
    assert sorted(m.table["T"].hostedQueues) == [0, 1, 2] and m.table["T"].epoch == 5


def test_topic_configs_to_repair_after_a_crash_between_the_writes() -> None:
    m = TopicQueueMappingManager("a", lambda: 1)
    m.update(_detail("a", 1, {0: [Item(0, 0, "a", 0, 0)], 1: [Item(0, 2, "a", 0, 0)]}))
    (missing,) = m.topic_configs_to_repair({})
    assert (missing.topicName, missing.readQueueNums, missing.writeQueueNums) == ("T", 3, 3)
    (short,) = m.topic_configs_to_repair({"T": TopicConfig("T", 1, 1, perm=4)})
    assert (short.writeQueueNums, short.perm) == (3, 4)
    assert m.topic_configs_to_repair({"T": TopicConfig("T", 3, 3)}) == []


def test_released_by_names_the_queues_a_new_detail_no_longer_leads_here() -> None:
    def item(gen: int, qid: int, bname: str) -> LogicQueueMappingItem:
        return LogicQueueMappingItem(gen, qid, bname, gen * 10_000, 0)

    old = TopicQueueMappingDetail(
        "T", totalQueues=3, bname="a", epoch=1,
        hostedQueues={0: [item(0, 0, "a")], 1: [item(0, 1, "a")], 2: [item(0, 0, "b")]},
    )  # fmt: skip
    new = old.copy()
    new.hostedQueues[1] = [item(0, 1, "a"), item(1, 0, "c")]  # logic 1 moved to c
    assert old.released_by(new) == {1: 1}
    assert old.released_by(old.copy()) == {}
    assert old.released_by(None) == {0: 0, 1: 1}  # the topic gone: all it led here
    assert new.released_by(old) == {}  # led more after: nothing released
