"""Static-topic allocation, remapping and generation cleanup (protocol/static_topic_alloc.py):
balanced and deterministic placement, remapping that never changes an existing logic offset."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol.static_topic import (
    LogicQueueMappingItem,
    MappingError,
    TopicConfigAndQueueMapping,
    TopicQueueMappingDetail,
    build_mapping_ones,
    logic_to_physical,
)
from rocketrio.protocol.static_topic_alloc import (
    MappingAllocator,
    TopicRemappingDetailWrapper,
    block_seq_round_up,
    create_static_topic,
    decide_logic_offsets,
    expired_earliest,
    remap_static_topic,
    stale_hosted_queues,
)

Item = LogicQueueMappingItem
NOW = 1_700_000_000_000
BROKERS = [f"broker-{c}" for c in "abcdef"]


def leaders(plan: TopicRemappingDetailWrapper) -> dict[int, str]:
    details = [c.mappingDetail for c in plan.brokerConfigMap.values() if c.mappingDetail]
    return {
        g: o.bname
        for g, o in build_mapping_ones(details, replace=False, check_complete=True).items()
    }


def counts(ids: dict[int, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for b in ids.values():
        out[b] = out.get(b, 0) + 1
    return out


@settings(max_examples=200)
@given(st.sets(st.sampled_from(BROKERS), min_size=1), st.integers(1, 64), st.integers(0, 64))
def test_allocation_is_balanced_and_deterministic(brokers: set[str], n: int, more: int) -> None:
    plan = create_static_topic("T", n, set(brokers), {}, NOW)
    again = create_static_topic("T", n, set(brokers), {}, NOW)
    assert plan == again
    per = counts(leaders(plan))
    assert sorted(leaders(plan)) == list(range(n))
    assert max(per.values()) - min(per.get(b, 0) for b in brokers) <= 1
    # each broker's physical queues are 0..k-1, one per logic queue, all at logic offset 0
    for b, cfg in plan.brokerConfigMap.items():
        assert cfg.mappingDetail is not None
        assert sorted(i[0].queueId for i in cfg.mappingDetail.hostedQueues.values()) == list(
            range(per[b])
        )
        assert cfg.writeQueueNums == per[b]
    if more:
        grown = create_static_topic("T", n + more, set(brokers), plan.brokerConfigMap, NOW + 1)
        assert grown.epoch == NOW + 1000  # max(old + 1000, now)
        old, new = leaders(plan), leaders(grown)
        assert all(new[g] == b for g, b in old.items())  # existing queues stay put
        per = counts(new)
        assert max(per.values()) - min(per.get(b, 0) for b in brokers) <= 1


def test_allocator_breaks_ties_by_remapping_history_then_name() -> None:
    a = MappingAllocator({}, {"x": 0, "y": 0, "z": 0}, {"x": 5, "y": 1})
    a.up_to_num(3)
    assert sorted(a.broker_num.values()) == [1, 1, 1]
    b = MappingAllocator({}, {"x": 0, "y": 0, "z": 0}, {"x": 5, "y": 1})
    b.up_to_num(3)
    assert a.id_to_broker == b.id_to_broker
    with pytest.raises(MappingError, match="no target broker"):
        MappingAllocator({}, {}).up_to_num(1)


def test_create_refuses_shrinking_a_non_static_namesake_and_nothing_to_do() -> None:
    plan = create_static_topic("T", 4, {"a", "b"}, {}, NOW)
    with pytest.raises(MappingError, match="cannot decrease"):
        create_static_topic("T", 3, {"a", "b"}, plan.brokerConfigMap, NOW)
    with pytest.raises(MappingError, match="already has 4"):
        create_static_topic("T", 4, {"a", "b"}, plan.brokerConfigMap, NOW)
    with pytest.raises(MappingError, match="no mapping"):
        create_static_topic("T", 4, {"a"}, {"a": TopicConfigAndQueueMapping("T", 8, 8)}, NOW)
    with pytest.raises(MappingError, match="not a target"):
        create_static_topic("T", 6, {"a"}, plan.brokerConfigMap, NOW)


def _all_items(plan: TopicRemappingDetailWrapper) -> dict[int, list[Item]]:
    details = [c.mappingDetail for c in plan.brokerConfigMap.values() if c.mappingDetail]
    return {
        g: list(o.items)
        for g, o in build_mapping_ones(details, replace=False, check_complete=True).items()
    }


@settings(max_examples=100, deadline=None)
@given(
    st.sets(st.sampled_from(BROKERS), min_size=1, max_size=3),
    st.integers(1, 24),
    st.lists(
        st.tuples(st.sets(st.sampled_from(BROKERS), min_size=1), st.integers(0, 30_000)),
        min_size=1,
        max_size=4,
    ),
)
def test_remapping_never_changes_an_existing_logic_offset(
    first: set[str], n: int, remaps: list[tuple[set[str], int]]
) -> None:
    plan = create_static_topic("T", n, first, {}, NOW)
    now = NOW
    for targets, written in remaps:
        before = _all_items(plan)
        now += 1
        moved = remap_static_topic("T", plan.brokerConfigMap, targets, now)
        assert not moved.brokerToMapIn & moved.brokerToMapOut  # in or out, never both
        assert moved.epoch > plan.epoch
        per = counts(leaders(moved))
        assert set(per) <= targets
        assert max(per.values()) - min(per.get(b, 0) for b in targets) <= 1
        # the old leaders hold ``written`` messages each when they are blocked
        maxes = {
            (it[-2].bname, it[-2].queueId): written
            for it in _all_items(moved).values()
            if len(it) > 1
        }
        plan = decide_logic_offsets(moved, maxes)
        after = _all_items(plan)
        for gid, old_items in before.items():
            new_items = after[gid]
            for old in old_items:
                same = [i for i in new_items if i.gen == old.gen]
                assert len(same) == 1
                assert (same[0].bname, same[0].queueId, same[0].logicOffset) == (
                    old.bname,
                    old.queueId,
                    old.logicOffset,
                )
            # the logic offsets written so far still reach the same physical positions
            for logic in (0, old_items[-1].logicOffset, old_items[-1].logicOffset + written - 1):
                if logic >= old_items[-1].logicOffset and written == 0:
                    continue
                assert logic_to_physical(new_items, logic) == logic_to_physical(
                    [*old_items[:-1], _sealed(old_items[-1], new_items)], logic
                )
            assert all(i.logicOffset >= 0 for i in new_items)


def _sealed(leader: Item, new_items: list[Item]) -> Item:
    return next(i for i in new_items if i.gen == leader.gen)


def test_remap_to_a_third_broker_moves_the_fewest_queues() -> None:
    plan = create_static_topic("T", 6, {"a", "b"}, {}, NOW)
    moved = remap_static_topic("T", plan.brokerConfigMap, {"a", "b", "c"}, NOW)
    assert moved.brokerToMapIn == {"c"} and moved.brokerToMapOut == {"a", "b"}
    assert counts(leaders(moved)) == {"a": 2, "b": 2, "c": 2}
    c = moved.brokerConfigMap["c"].mappingDetail
    assert c is not None
    for gid, items in c.hostedQueues.items():
        old, new = items
        assert (new.gen, new.bname, new.logicOffset) == (1, "c", -1)
        # the map-out broker holds the same list (it must know it is no longer the leader)
        out = plan.brokerConfigMap[old.bname].mappingDetail
        moved_out = moved.brokerConfigMap[old.bname].mappingDetail
        assert out is not None and moved_out is not None
        assert moved_out.hostedQueues[gid] == items and not moved_out.is_leader(gid)
    decided = decide_logic_offsets(
        moved, {(i[0].bname, i[0].queueId): 4321 for i in c.hostedQueues.values()}
    )
    for items in _all_items(decided).values():
        if len(items) == 2:
            assert items[0].endOffset == 4321 and items[1].logicOffset == 10000
    with pytest.raises(MappingError, match="no max offset"):
        decide_logic_offsets(moved, {})


def test_block_seq_round_up() -> None:
    assert [block_seq_round_up(x, 10000) for x in (0, 4999, 5000, 9999, 10000, 123456)] == [
        10000,
        10000,
        20000,
        20000,
        20000,
        130000,
    ]


def test_generation_cleanup() -> None:
    items = [Item(0, 0, "a", 0, 0, 50), Item(1, 0, "b", 10000, 0)]
    assert expired_earliest(items, 50, 50) == items[1:]  # emptied by retention
    assert expired_earliest(items, 0, 0) == items[1:]
    assert expired_earliest(items, 10, 50) is None
    assert expired_earliest(items[1:], 0, 0) is None  # never the leader itself
    # broker a led queue 0 (gen 0), then b (gen 1), then c (gen 2): a still lists [a, b]
    local = TopicQueueMappingDetail("T", totalQueues=2, bname="a", epoch=9)
    local.hostedQueues = {0: items, 1: [Item(0, 1, "a", 0, 0)]}
    c = TopicQueueMappingDetail("T", totalQueues=2, bname="c", epoch=9)
    c.hostedQueues = {0: [items[1], Item(2, 0, "c", 20000, 0)]}
    assert stale_hosted_queues(local, {0: "c"}, {"c": c}) == {0}
    assert stale_hosted_queues(local, {0: "b"}, {"c": c}) == set()  # b still leads: keep
    c.epoch = 10  # the leader's view is of another epoch: unsure, keep
    assert stale_hosted_queues(local, {0: "c"}, {"c": c}) == set()
