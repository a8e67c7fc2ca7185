"""The ConsumeQueue ext (storage/cq_ext.py): units encode and check themselves, a probe answers
"not matched" only on a valid unit computed after its filter was born, a read with a probe skips
what the bit-map rejects without judging it, cuts and restarts of a queue take its units along,
and after kill -9 and power cuts on the simulated disk the ext and the ConsumeQueue agree (every
entry has the unit of its own record, none lies past the queue's end)."""

from __future__ import annotations

import contextlib
import itertools
import os
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.message_decode import stored_properties
from rocketrio.protocol.message_format import decode_properties
from rocketrio.storage.cq_ext import (
    CONSUME_QUEUE_EXT_DIR,
    BitMapProbe,
    ExtUnit,
    bits_hit,
    decode_unit,
    encode_unit,
    unit_size,
)
from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig
from tests.harness.sim_disk import (
    FILE_CALLS,
    PowerCut,
    PowerCutSwitch,
    SimFileSystem,
    cut_power_after,
)

BITS = 112
EU = (0, 5, 77)  # the positions of the filter "region = 'eu'"
CHEAP = (3, 9, 100)  # ... of "price < 20"
FILTERS = {EU: lambda p: p.get("region") == "eu", CHEAP: lambda p: int(p.get("price", 99)) < 20}


class Calc:
    """A `FilterBitMaps` with two filters on topic T, computed at ``now`` (ms)."""

    def __init__(self, now: int = 10) -> None:
        self.now = now
        self.calls = 0

    def wants(self, topic: str) -> bool:
        return topic == "T"

    def bitmap(self, topic: str, properties: bytes) -> tuple[int, bytes] | None:
        self.calls += 1
        return self.now, expected_bitmap(properties)


def expected_bitmap(properties: bytes) -> bytes:
    props = decode_properties(properties.decode())
    bits = bytearray(BITS // 8)
    for positions, match in FILTERS.items():
        if match(props):
            for p in positions:
                bits[p >> 3] |= 1 << (p & 7)
    return bytes(bits)


def probe(positions: tuple[int, ...] = EU, born: int = 5, topic: str = "T") -> BitMapProbe:
    return BitMapProbe(topic, positions, born, BITS)


def msg(i: int, topic: str = "T", queue_id: int = 0) -> MessageToStore:
    props = {"region": ("eu", "us", "asia")[i % 3], "price": str(i * 7 % 40), "n": str(i)}
    return MessageToStore(topic, queue_id, f"m{i}".encode(), properties=props)


def bodies(store: MessageStore, p: BitMapProbe | None, topic: str = "T", qid: int = 0) -> list:
    res = store.get_messages(topic, qid, 0, 1000, 1 << 30, p)
    return [m.body.decode() for m in iter_stored(res.body)] if res.buffers else []


def ext_store(path: str, calc: Calc | None = None, **kw: object) -> MessageStore:
    cfg = StoreConfig(enableConsumeQueueExt=True, **kw)  # type: ignore[arg-type]
    store = MessageStore(path, cfg)
    store.set_filter_bitmaps(calc or Calc())
    store.open()
    return store


# ------------------------------------------------------------------------------ units


def test_a_unit_checks_itself() -> None:
    raw = encode_unit(4096, 77, bytes(range(14)))
    assert len(raw) == unit_size(BITS)
    assert decode_unit(raw, 4096, BITS) == ExtUnit(77, bytes(range(14)))
    assert decode_unit(raw, 4097, BITS) is None  # another record's unit
    assert decode_unit(raw, 4096, 120) is None  # another bit-map length
    assert decode_unit(bytes(len(raw)), 4096, BITS) is None  # a hole
    assert decode_unit(raw[:-1], 4096, BITS) is None  # torn
    for i in range(len(raw)):
        flipped = bytearray(raw)
        flipped[i] ^= 0x10
        assert decode_unit(bytes(flipped), 4096, BITS) is None, i


def test_a_probe_says_no_only_on_a_unit_computed_after_its_filter_was_born() -> None:
    eu = bytearray(14)
    for p in EU:
        eu[p >> 3] |= 1 << (p & 7)
    matched = encode_unit(0, 10, bytes(eu))
    not_matched = encode_unit(0, 10, bytes(14))
    assert probe(EU, born=5).rejects(not_matched, 0)
    assert not probe(EU, born=5).rejects(matched, 0)
    assert not probe(EU, born=10).rejects(not_matched, 0)  # born when the map was computed
    assert not probe(EU, born=11).rejects(not_matched, 0)  # born after: the map knows nothing
    assert not probe(EU, born=5).rejects(not_matched, 1)  # not this record's unit
    assert not probe(EU, born=5).rejects(b"", 0)  # no unit


# ------------------------------------------------------------------------------ reads


def test_a_read_skips_what_the_bit_map_rejects(tmp_path: object) -> None:
    store = ext_store(str(tmp_path))
    for i in range(30):
        store.put_messages([msg(i)], 1000 + i)
    eu = [f"m{i}" for i in range(30) if i % 3 == 0]
    cheap = [f"m{i}" for i in range(30) if i * 7 % 40 < 20]
    assert bodies(store, probe(EU)) == eu
    assert bodies(store, probe(CHEAP)) == cheap
    res = store.get_messages("T", 0, 0, 1000, 1 << 30, probe(EU))
    assert res.next_begin_offset == 30  # the rejected entries were stepped over
    # a filter born after the maps were computed, or of another topic: nothing skipped
    assert len(bodies(store, probe(EU, born=10))) == 30
    assert len(bodies(store, probe(EU, topic="U"))) == 30
    # a filter whose positions are set by two others together (a bloom false positive on the
    # records both match): the store answers "maybe", judging is the caller's
    assert bodies(store, probe((0, 9))) == [b for b in eu if b in cheap]
    store.close()


def test_no_unit_for_a_topic_without_filters_or_without_the_ext(tmp_path: object) -> None:
    calc = Calc()
    store = ext_store(str(tmp_path / "a"), calc)  # type: ignore[operator]
    store.put_messages([msg(i, topic="U") for i in range(5)], 1000)
    assert calc.calls == 0 and len(bodies(store, probe(topic="U"), topic="U")) == 5
    store.close()
    plain = MessageStore(str(tmp_path / "b"), StoreConfig())  # type: ignore[operator]
    plain.set_filter_bitmaps(calc)
    plain.open()
    plain.put_messages([msg(i) for i in range(5)], 1000)
    assert calc.calls == 0 and plain.consume_queue_ext("T", 0) is None
    assert len(bodies(plain, probe())) == 5
    plain.close()


def test_batch_bodies_get_units_too(tmp_path: object) -> None:
    from rocketrio.protocol.message import BatchItem, encode_batch_body

    store = ext_store(str(tmp_path))
    items = [BatchItem(0, f"m{i}".encode(), {"region": "eu" if i % 2 else "us"}) for i in range(6)]
    store.put_batch_body("T", 0, encode_batch_body(items), 1000)
    assert bodies(store, probe(EU)) == ["m1", "m3", "m5"]
    store.close()


# ------------------------------------------------------------------------------ cuts


def test_a_cut_queue_takes_its_units_along(tmp_path: object) -> None:
    store = ext_store(str(tmp_path), mappedFileSizeConsumeQueue=100)  # 5 entries a file
    puts = [store.put_messages([msg(i)], 1000 + i)[0] for i in range(12)]
    cut = puts[4].commitlog_offset
    store.truncate_to(cut)  # entries 4.. go; so must their units
    ext = store.consume_queue_ext("T", 0)
    assert ext is not None
    assert ext.read(4, 8) == bytes(8 * ext.unit)
    assert sorted(os.listdir(ext.path)) == [f"{0:020d}"]
    # the same offsets now hold other records (all "eu"): none may be judged by a stale unit
    store.set_filter_bitmaps(None)
    for i in range(4, 12):
        store.put_messages(
            [MessageToStore("T", 0, f"n{i}".encode(), properties={"region": "eu"})], 2000 + i
        )
    assert bodies(store, probe(EU)) == ["m0", "m3", *[f"n{i}" for i in range(4, 12)]]
    store.close()


def test_an_ext_left_by_a_run_without_it_is_deleted(tmp_path: object) -> None:
    store = ext_store(str(tmp_path))
    store.put_messages([msg(i) for i in range(3)], 1000)
    store.close()
    ext_dir = os.path.join(str(tmp_path), CONSUME_QUEUE_EXT_DIR)
    assert os.path.isdir(ext_dir)
    plain = MessageStore(str(tmp_path), StoreConfig())
    plain.open()
    assert not os.path.exists(ext_dir)
    plain.close()


def test_topic_deletion_deletes_the_ext(tmp_path: object) -> None:
    store = ext_store(str(tmp_path))
    store.put_messages([msg(i) for i in range(3)], 1000)
    store.delete_topic("T")
    assert not os.path.exists(os.path.join(str(tmp_path), CONSUME_QUEUE_EXT_DIR, "T"))
    store.close()


# ------------------------------------------------------------------------------ power cuts

STORE = "/sim/broker-a-0/store"
CFG = StoreConfig(
    mappedFileSizeCommitLog=4096,
    mappedFileSizeConsumeQueue=100,  # 5 entries a file: ext files roll too
    maxMessageSize=512,
    messageIndexEnable=False,
    enableConsumeQueueExt=True,
)


def check_agree(store: MessageStore) -> int:
    """Every ConsumeQueue entry has its own record's unit; none lies past the queue's end."""
    checked = 0
    for topic, qids in store.topic_queue_ids().items():
        for qid in qids:
            cq, ext = store.consume_queue(topic, qid), store.consume_queue_ext(topic, qid)
            assert cq is not None and ext is not None
            for q in range(cq.min_offset, cq.max_offset):
                entry = cq.entry(q)
                assert entry is not None
                phy, size, _ = entry
                unit = decode_unit(ext.read(q, 1), phy, BITS)
                assert unit is not None, f"{topic}:{qid} entry {q} has no unit"
                props = stored_properties(store.commitlog.read(phy, size))
                assert unit.bitmap == expected_bitmap(props), f"{topic}:{qid} entry {q}"
                checked += 1
            past = ext.read(cq.max_offset, ext.entries_per_file)
            assert past == bytes(len(past)), f"{topic}:{qid}: a unit past the queue's end"
            files = store.fs.listdir(ext.path) if store.fs.isdir(ext.path) else []
            assert all(int(f) < cq.max_offset for f in files), (files, cq.max_offset)
    return checked


@contextlib.contextmanager
def killed_after(fs: SimFileSystem, calls: int) -> Iterator[PowerCutSwitch]:
    """`cut_power_after`, but a kill -9: the process stops at file call ``calls`` while the
    machine keeps what was written (unsynced, in the page cache)."""
    switch = PowerCutSwitch()
    counter = itertools.count()

    def wrap(real: Callable[..., Any], name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if not switch.fired and next(counter) == calls:
                fs.crash(keep_unsynced=True)
                switch.fired = True
            if switch.fired:
                raise PowerCut(name)
            return real(*args, **kwargs)

        return call

    for name in FILE_CALLS:
        setattr(fs, name, wrap(getattr(fs, name), name))
    try:
        yield switch
    finally:
        for name in FILE_CALLS:
            delattr(fs, name)


@pytest.mark.parametrize("seed", range(40))
def test_ext_and_consume_queue_agree_after_power_cuts(seed: int) -> None:
    """Each cycle ends, at a random file call, in a kill -9 (the page cache survives) or a
    power cut (unsynced writes lost or kept in part, the last one maybe torn)."""
    rng = random.Random(seed)
    fs = SimFileSystem(rng)
    sent = 0
    checked = 0
    for _cycle in range(4):
        lose = rng.random() < 0.5
        kill = rng.random() < 0.4
        at = rng.randrange(400)
        stop = killed_after(fs, at) if kill else cut_power_after(fs, at, lose_unsynced=lose)
        with stop as cut:
            try:
                store = MessageStore(STORE, CFG, fs=fs)
                store.set_filter_bitmaps(Calc())  # recovery's re-dispatch computes maps too
                store.open()
                checked += check_agree(store)
                for _ in range(rng.randint(5, 25)):
                    if rng.random() < 0.8:
                        batch = [msg(sent + k, queue_id=rng.randrange(2)) for k in range(3)]
                        sent += len(batch)
                        store.put_messages(batch, 1000 + sent)
                    else:
                        store.flush()
            except PowerCut:
                pass
        if not cut.fired:
            fs.crash(keep_unsynced=kill, lose_unsynced=lose and not kill)
        fs.heal()
    store = MessageStore(STORE, CFG, fs=fs)
    store.set_filter_bitmaps(Calc())
    store.open()
    checked += check_agree(store)
    store.close()
    assert checked > 0


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # which record the unit claims (phys are 0..3)
            st.integers(0, 20),  # calcTimeMillis (the probe's filter is born at 10)
            st.binary(min_size=14, max_size=14),
            st.sampled_from(["whole", "torn", "hole", "flipped"]),
        ),
        max_size=12,
    ),
    st.lists(st.integers(0, 111), min_size=1, max_size=3),
)
def test_a_scan_answers_as_the_reference_decoder(units: list, positions: list[int]) -> None:
    """`BitMapProbe.rejected` (the one-pass scan) says "no" exactly where `decode_unit` finds
    a valid unit, computed after the filter's birth, whose bits miss the filter."""
    p = BitMapProbe("T", tuple(positions), 10, BITS)
    raws, phys = [], []
    for i, (claim, calc, bitmap, damage) in enumerate(units):
        raw = encode_unit(claim, calc, bitmap)
        if damage == "torn":
            raw = raw[: len(raw) // 2].ljust(len(raw), b"\x00")
        elif damage == "hole":
            raw = bytes(len(raw))
        elif damage == "flipped":
            raw = raw[:5] + bytes([raw[5] ^ 1]) + raw[6:]
        raws.append(raw)
        phys.append(i % 4)
    want = []
    for raw, phy in zip(raws, phys, strict=True):
        unit = decode_unit(raw, phy, BITS)
        want.append(
            unit is not None and unit.calc_ms > 10 and not bits_hit(unit.bitmap, p.positions)
        )
    assert p.rejected(b"".join(raws), phys) == want


# ------------------------------------------------------------------------------ the floor


def test_open_finds_the_latest_map_time_past_holes_and_torn_units(tmp_path: object) -> None:
    store = ext_store(str(tmp_path), Calc(now=700), mappedFileSizeConsumeQueue=100)
    store.put_messages([msg(i) for i in range(7)], 1000)  # two ext files
    store.put_messages([msg(7, topic="U")], 1000)  # no unit: U has no filters
    assert store.filter_bitmap_floor_ms == -1  # nothing was on disk at open
    store.close()
    reopened = ext_store(str(tmp_path), mappedFileSizeConsumeQueue=100)
    assert reopened.filter_bitmap_floor_ms == 700
    ext = reopened.consume_queue_ext("T", 0)
    assert ext is not None
    path = os.path.join(ext.path, f"{5:020d}")
    unit = ext.unit
    reopened.close()
    # the last unit torn (its CRC fails): the one before it still counts
    with open(path, "r+b") as f:
        f.seek(unit + 30)
        f.write(b"\xff")
    again = ext_store(str(tmp_path), Calc(now=800), mappedFileSizeConsumeQueue=100)
    assert again.filter_bitmap_floor_ms == 700
    again.put_messages([msg(8)], 1000)
    again.close()
    last = ext_store(str(tmp_path), mappedFileSizeConsumeQueue=100)
    assert last.filter_bitmap_floor_ms == 800
    last.close()
