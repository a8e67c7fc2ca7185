"""The registered SQL92 filters (actors/broker/dispatch/filter_data.py), pure with a fake clock:
registration and rebirth rules, the dead-group clean-up after filterDataCleanTimeSpan (the
memory goes, a returning group works), the bit-maps computed from them, and the rule that a
filter is born after every map computed so far."""

from __future__ import annotations

from pathlib import Path

from rocketrio.actors.broker.dispatch.bloom import BloomFilter
from rocketrio.actors.broker.dispatch.filter_data import ConsumerFilterManager
from rocketrio.protocol.bodies import SubscriptionData
from rocketrio.protocol.message_format import encode_properties
from rocketrio.storage.cq_ext import bits_hit, encode_unit
from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig

BLOOM = BloomFilter.create_by_fn(20, 32)
DAY = 24 * 3600 * 1000


def sql(topic: str, expr: str, version: int = 1) -> SubscriptionData:
    return SubscriptionData(topic=topic, subString=expr, subVersion=version, expressionType="SQL92")


class World:
    """Live groups' heartbeat subscriptions and a clock."""

    def __init__(self) -> None:
        self.now = 1_000
        self.subs: dict[str, dict[str, SubscriptionData]] = {}
        self.manager = ConsumerFilterManager(
            lambda group, topic: self.subs.get(group, {}).get(topic),
            live=lambda: [(g, s) for g, subs in self.subs.items() for s in subs.values()],
            bloom=BLOOM,
            now_ms=lambda: self.now,
            clean_span_ms=DAY,
        )

    def join(self, group: str, *subs: SubscriptionData) -> None:
        self.subs[group] = {s.topic: s for s in subs}


def props(**kv: str) -> bytes:
    return encode_properties(kv).encode()


def test_a_heartbeat_subscription_is_registered_by_the_sweep_with_its_bloom_bits() -> None:
    w = World()
    w.join("cg", sql("Orders", "region = 'eu'"), SubscriptionData(topic="Other", subString="*"))
    assert len(w.manager) == 0 and not w.manager.wants("Orders")
    w.manager.sweep()
    data = w.manager.registered("Orders", "cg")
    assert data is not None and data.born_ms == 1_000 and not data.is_dead
    assert data.positions == BLOOM.positions_of("cg", "Orders") == (98, 8, 83)
    assert w.manager.wants("Orders") and not w.manager.wants("Other")
    assert len(w.manager) == 1  # TAG subscriptions are not filters


def test_the_same_expression_keeps_its_filter_another_one_is_born_again() -> None:
    w = World()
    w.join("cg", sql("T", "a > 1"))
    first = w.manager.get("T", "cg")
    assert first is not None
    w.now += 5
    w.join("cg", sql("T", "a > 1", version=2))
    again = w.manager.get("T", "cg")
    assert again is first and again.client_version == 2 and again.born_ms == 1_000
    w.join("cg", sql("T", "a > 2", version=3))
    other = w.manager.get("T", "cg")
    assert other is not None and other is not first and other.born_ms == 1_005
    w.join("cg", sql("T", "a >", version=4))  # does not compile: no filter, none kept
    assert w.manager.get("T", "cg") is None and len(w.manager) == 0


def test_a_departed_groups_filter_is_dropped_after_the_clean_span() -> None:
    w = World()
    w.join("cg", sql("T", "a > 1"))
    w.join("other", sql("T", "b = 'x'"))
    w.manager.sweep()
    assert len(w.manager) == 2
    del w.subs["cg"]  # its last consumer left
    w.manager.sweep()
    dead = w.manager.registered("T", "cg")
    assert dead is not None and dead.is_dead and dead.dead_ms == 1_000
    assert len(w.manager) == 2  # dead, kept (and still computed at dispatch) for the span
    w.now += DAY - 1
    assert w.manager.sweep() == 0 and len(w.manager) == 2
    w.now += 1
    assert w.manager.sweep() == 1
    assert w.manager.registered("T", "cg") is None and len(w.manager) == 1  # memory released
    assert w.manager.registered("T", "other") is not None
    # the group comes back: a new filter, born now, bits computed again
    w.join("cg", sql("T", "a > 1"))
    back = w.manager.get("T", "cg")
    assert back is not None and back.born_ms == w.now and not back.is_dead
    assert w.manager.bitmap("T", props(a="5")) is not None


def test_a_group_back_within_the_span_keeps_its_filter() -> None:
    w = World()
    w.join("cg", sql("T", "a > 1"))
    w.manager.sweep()
    data = w.manager.registered("T", "cg")
    del w.subs["cg"]
    w.manager.sweep()
    w.now += 1_000
    w.join("cg", sql("T", "a > 1"))
    w.manager.sweep()
    assert w.manager.registered("T", "cg") is data and data is not None and not data.is_dead


def test_all_filters_of_a_topic_go_when_the_last_is_cleaned() -> None:
    w = World()
    w.join("cg", sql("T", "a > 1"))
    w.manager.sweep()
    del w.subs["cg"]
    w.manager.sweep()
    w.now += DAY
    w.manager.sweep()
    assert not w.manager.wants("T") and w.manager.bitmap("T", props(a="5")) is None


def test_the_bit_map_sets_the_bits_of_the_filters_that_match() -> None:
    w = World()
    w.join("eu", sql("T", "region = 'eu'"))
    w.join("cheap", sql("T", "price < 20"))
    w.join("bad", sql("T", "price > 5"))  # 'abc' does not evaluate: never a match
    w.manager.sweep()
    w.now += 1
    got = w.manager.bitmap("T", props(region="eu", price="abc"))
    assert got is not None
    when, bits = got
    assert when == 1_001 and len(bits) == 14
    eu, cheap = (w.manager.registered("T", g) for g in ("eu", "cheap"))
    assert eu is not None and cheap is not None
    assert bits_hit(bits, eu.positions)
    # a probe of a filter says "no" on a unit whose bits miss it
    unit = encode_unit(0, when, bits)
    assert not w.manager.probe(eu).rejects(unit, 0)
    matched = [g for g in ("eu", "cheap", "bad") if bits_hit(bits, BLOOM.positions_of(g, "T"))]
    assert "eu" in matched  # others only by a false positive of the bloom filter
    _, none = w.manager.bitmap("T", props(region="us", price="30")) or (0, b"")
    assert not w.manager.probe(eu).rejects(encode_unit(0, 1_000, none), 0)  # computed at birth
    assert w.manager.probe(eu).rejects(encode_unit(0, 1_001, none), 0)


def test_a_filter_is_born_after_every_map_computed_so_far() -> None:
    w = World()
    w.join("eu", sql("T", "region = 'eu'"))
    w.manager.sweep()
    w.now = 5_000
    got = w.manager.bitmap("T", props(region="us"))
    assert got is not None and got[0] == 5_000
    w.now = 4_000  # the wall clock stepped back
    w.join("late", sql("T", "region = 'us'"))
    w.manager.sweep()
    late = w.manager.registered("T", "late")
    assert late is not None and late.born_ms == 5_001
    # the map computed before "late" existed has no bit for it: no answer, judge the record
    assert not w.manager.probe(late).rejects(encode_unit(0, got[0], got[1]), 0)


def test_after_a_restart_no_filter_is_born_before_a_map_on_disk() -> None:
    """The store found maps computed at 9000 (its floor); the clock now says 4000: a filter
    registered now is born after 9000, so those maps (without its bits) are not used for it,
    and new maps are timed after its birth (they evaluated it: they count)."""
    w = World()
    w.now = 4_000
    floor = 9_000
    manager = ConsumerFilterManager(
        lambda group, topic: w.subs.get(group, {}).get(topic),
        bloom=BLOOM,
        now_ms=lambda: w.now,
        calc_floor=lambda: floor,
    )
    w.join("late", sql("T", "region = 'us'"))
    late = manager.get("T", "late")
    assert late is not None and late.born_ms == 9_001
    old_map = encode_unit(0, floor, bytes(14))  # computed by the run before, without "late"
    assert not manager.probe(late).rejects(old_map, 0)
    got = manager.bitmap("T", props(region="eu"))
    assert got is not None and got[0] == 9_002  # after every birth, whatever the clock says
    assert manager.probe(late).rejects(encode_unit(0, got[0], got[1]), 0)


def test_maps_of_an_earlier_run_are_not_used_after_the_clock_went_back(tmp_path: Path) -> None:
    """A store's maps computed at 9000 by a run whose filter was "eu"; the broker restarts with
    the clock at 4000 and a new filter registers: every old record is judged for it (none is
    skipped on a map that never evaluated it)."""
    cfg = StoreConfig(enableConsumeQueueExt=True)
    store = MessageStore(str(tmp_path), cfg)
    first = World()
    first.now = 9_000
    first.join("eu", sql("T", "region = 'eu'"))
    first.manager.sweep()
    store.set_filter_bitmaps(first.manager)
    store.open()
    first.now = 9_100
    store.put_messages([MessageToStore("T", 0, b"m", properties={"region": "us"})] * 5, 1)
    store.close()
    store = MessageStore(str(tmp_path), cfg)
    second = World()
    second.now = 4_000  # the wall clock was set back across the restart
    second.manager = ConsumerFilterManager(
        lambda group, topic: second.subs.get(group, {}).get(topic),
        bloom=BLOOM,
        now_ms=lambda: second.now,
        calc_floor=lambda: store.filter_bitmap_floor_ms,
    )
    store.set_filter_bitmaps(second.manager)
    store.open()
    second.join("us", sql("T", "region = 'us'"))
    us = second.manager.get("T", "us")
    assert us is not None
    res = store.get_messages("T", 0, 0, 100, 1 << 20, second.manager.probe(us))
    assert res.message_count == 5  # maybe: read and judged, all match
    store.close()
