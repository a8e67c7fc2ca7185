"""MessageIndex (index_file.py, index_segment.py): the on-disk hash index of message keys.

- a model test (hypothesis): random adds, flushes, truncations, retention and reopens on tiny
  geometries (files roll every few entries, slots collide) answer every lookup exactly like a
  list of (key, offset) pairs cut into files, newest first;
- power cuts (unsynced writes lost, kept as a prefix with the last one torn, or kept as any
  subset: a disk reordering its write-back) and kill -9 at any file call (seeded, like
  test_power_cuts.py): recovery never raises, never returns an offset that was not added
  below the ``redo_from`` it is given, and returns every flushed entry below it; with the
  store's dispatch checkpoint as ``redo_from``, and with one above everything (the index must
  then keep every flushed entry on its own, with no re-dispatch to fall back on);
- file rolling and naming, retention deleting whole old files only, the walk cap, damaged files,
  the old ``index.log`` format and an interrupted rebuild, and a flush in a worker thread beside
  appends.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketrio.storage.durable import makedirs_synced, write_file_atomic
from rocketrio.storage.index_file import (
    INDEX_DIR,
    LEGACY_INDEX_LOG,
    MAX_WALK,
    REBUILD_MARKER,
    MessageIndex,
    key_hash,
    segment_name,
)
from rocketrio.storage.index_segment import ENTRY, HEADER_SIZE
from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig
from tests.harness.disk_view import DiskView
from tests.harness.sim_disk import FILE_CALLS, PowerCut, SimFileSystem, cut_power_after

TOPIC = "T"
KEYS = [f"k{i}" for i in range(12)]
ROOT = "/sim/store"
MAX_CALLS = 400  # a power cut falls on one of the first MAX_CALLS file calls of a cycle


def index(
    disk: DiskView | SimFileSystem, slots: int, cap: int, slot_flush: int = 4
) -> MessageIndex:
    """An index with ``slots`` hash slots and ``cap`` entries a file, whose flushes write the
    slots back once ``slot_flush`` entries wait for it (else only the entries)."""
    root, fs = (disk.root, disk.fs) if isinstance(disk, DiskView) else (ROOT, disk)
    return MessageIndex(
        root, fs=fs, max_hash_slot_num=slots, max_index_num=cap, slot_flush_entries=slot_flush
    )


def add(ix: MessageIndex, items: list[tuple[str, int]]) -> None:
    ix.add_keys(TOPIC, [k.encode() for k, _ in items], [off for _, off in items])


# ------------------------------------------------------------------------------ model


@attrs.define
class FilesModel:
    """What the index must hold: (key, offset) pairs in files of ``cap`` entries."""

    cap: int
    files: list[list[tuple[str, int]]] = attrs.Factory(list)

    @property
    def count(self) -> int:
        return sum(map(len, self.files))

    def add(self, items: list[tuple[str, int]]) -> None:
        for item in items:
            if not self.files or len(self.files[-1]) == self.cap:
                self.files.append([])
            self.files[-1].append(item)

    def truncate(self, offset: int) -> int:
        before = self.count
        kept = [[e for e in f if e[1] < offset] for f in self.files]
        self.files = [f for f in kept if f]
        return before - self.count

    def delete_below(self, offset: int) -> int:
        n = 0
        while self.files and self.files[0][-1][1] < offset:
            n += len(self.files.pop(0))
        return n

    def lookup(self, key: str) -> list[int]:
        return [off for f in reversed(self.files) for k, off in reversed(f) if k == key]


def check_model(ix: MessageIndex, model: FilesModel) -> None:
    assert ix.count == model.count
    assert len(ix.files) == len(model.files)
    for key in KEYS:
        assert ix.lookup(TOPIC, key) == model.lookup(key), key


OPS = st.one_of(
    st.tuples(
        st.just("add"), st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 3)), max_size=12)
    ),
    st.tuples(st.just("flush"), st.just(0)),
    st.tuples(st.just("truncate"), st.integers(0, 300)),
    st.tuples(st.just("delete_below"), st.integers(0, 300)),
    st.tuples(st.just("reopen"), st.integers(0, 400)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    slots=st.sampled_from([1, 2, 3, 7, 64, 1500]),
    cap=st.sampled_from([1, 2, 3, 5, 16]),
    slot_flush=st.sampled_from([1, 3, 1000]),
    ops=st.lists(OPS, max_size=40),
)
def test_lookups_match_a_model(
    slots: int, cap: int, slot_flush: int, ops: list[tuple[str, object]]
) -> None:
    fs = SimFileSystem(random.Random(0))
    ix = index(fs, slots, cap, slot_flush)
    ix.open(0)
    model = FilesModel(cap)
    next_offset = 0
    for op, arg in ops:
        if op == "add":
            assert isinstance(arg, list)
            items = []
            for key, step in arg:  # offsets never go back; a message may carry several keys
                next_offset += step
                items.append((key, next_offset))
            add(ix, items)
            model.add(items)
        elif op == "flush":
            ix.flush()
        elif op == "truncate":
            assert isinstance(arg, int)
            assert ix.truncate_from(arg) == model.truncate(arg)
            next_offset = min(next_offset, arg)
        elif op == "delete_below":
            assert isinstance(arg, int)
            assert ix.delete_below(arg) == model.delete_below(arg)
        else:
            assert isinstance(arg, int)
            ix.close()
            ix = index(fs, slots, cap, slot_flush)
            assert ix.exists()
            assert ix.open(arg) == model.truncate(arg)
            next_offset = min(next_offset, arg)
        check_model(ix, model)
    ix.close()


def test_model_scenario_on_both_disks(disk: DiskView) -> None:
    """The same rules on the real disk: rolls, collisions, truncation into an older file."""
    ix = index(disk, 3, 4)
    ix.open(0)
    model = FilesModel(4)
    items = [(KEYS[i % 5], 10 * i) for i in range(30)]
    add(ix, items[:17])
    add(ix, items[17:])
    model.add(items)
    check_model(ix, model)
    assert ix.files == [segment_name(n) for n in range(0, 30, 4)]
    ix.flush()
    assert ix.truncate_from(95) == model.truncate(95)  # inside the third file
    check_model(ix, model)
    add(ix, [("k1", 95), ("k1", 96)])
    model.add([("k1", 95), ("k1", 96)])
    ix.close()
    ix = index(disk, 3, 4)
    assert ix.open(1000) == 0
    check_model(ix, model)
    assert ix.delete_below(45) == model.delete_below(45) == 4  # file 4..7 ends at 70
    check_model(ix, model)
    ix.close()


# ------------------------------------------------------------------------------ crashes


@attrs.define
class CrashModel:
    """What recovery must and may find (sets of (key, offset))."""

    live: set[tuple[str, int]] = attrs.Factory(set)  # what the index holds without a crash
    durable: set[tuple[str, int]] = attrs.Factory(set)  # flushed and not removed since
    maybe: set[tuple[str, int]] = attrs.Factory(set)  # the operation in flight may add these
    doubtful: set[tuple[str, int]] = attrs.Factory(set)  # ... or take these away
    checkpoint: int = 0  # the store's dispatch checkpoint: below it, flushed
    next_offset: int = 0
    keep_all: bool = False  # recovery keeps everything (redo_from above every offset)

    @property
    def redo_from(self) -> int:
        return 1 << 62 if self.keep_all else self.checkpoint


def recover_and_check(ix: MessageIndex, model: CrashModel) -> None:
    fresh = not ix.exists()
    if fresh:  # the first flush never completed: the store rebuilds from the oldest record
        assert not model.durable
    ix.open(model.redo_from)
    found: set[tuple[str, int]] = set()
    for key in KEYS:
        got = ix.lookup(TOPIC, key)
        assert got == sorted(got, reverse=True), f"{key}: not newest first: {got}"
        assert len(got) == len(set(got)), f"{key}: an entry found twice: {got}"
        found |= {(key, off) for off in got}
    below = model.redo_from
    allowed = {e for e in model.live | model.maybe if e[1] < below} if not fresh else set()
    required = {e for e in model.durable - model.doubtful if e[1] < below}
    assert found <= allowed, f"entries never added below {below}: {sorted(found - allowed)}"
    assert required <= found, f"flushed entries lost: {sorted(required - found)}"
    assert ix.count == len(found)
    # what recovery kept is durable: a crash right now must find it again
    model.live, model.durable = set(found), set(found)
    model.maybe, model.doubtful = set(), set()
    model.next_offset = max([model.next_offset, model.checkpoint, *(off for _, off in found)])


def crash_op(ix: MessageIndex, rng: random.Random, model: CrashModel) -> None:
    """One random operation; ``maybe`` / ``doubtful`` say what it may change if cut."""
    roll = rng.random()
    if roll < 0.5:
        items = []
        for _ in range(rng.randint(1, 8)):
            model.next_offset += rng.randint(1, 3)
            for key in rng.sample(KEYS, rng.randint(1, 3)):
                items.append((key, model.next_offset))
        model.maybe = set(items)
        add(ix, items)
        model.live |= model.maybe
    elif roll < 0.75:
        flush(ix, model)
    elif roll < 0.87:
        cut = rng.randint(max(0, model.next_offset - 20), model.next_offset)
        model.checkpoint = min(model.checkpoint, cut)  # the store lowers it first, durably
        model.doubtful = {e for e in model.live if e[1] >= cut}
        model.maybe = model.doubtful
        ix.truncate_from(cut)
        model.live = {e for e in model.live if e[1] < cut}
        model.durable &= model.live
        model.next_offset = cut
    else:
        low = rng.randint(0, model.next_offset)
        model.doubtful = {e for e in model.live if e[1] < low}  # whole files of them go
        ix.delete_below(low)
        kept = {(k, off) for k in KEYS for off in ix.lookup(TOPIC, k)}
        assert model.live - model.doubtful <= kept <= model.live
        model.live = kept
        model.durable &= kept
    model.maybe, model.doubtful = set(), set()


class Killed(Exception):
    """The process was killed (kill -9) before this file call."""


@contextlib.contextmanager
def killed_after(fs: SimFileSystem, calls: int) -> Iterator[None]:
    """Inside the block, file call number ``calls`` and every later one raise Killed and do
    nothing; the disk keeps what was written (`SimFileSystem.crash(keep_unsynced=True)`)."""
    counter = itertools.count()

    def wrap(real: Callable[..., Any], name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if next(counter) >= calls:
                raise Killed(name)
            return real(*args, **kwargs)

        return call

    for name in FILE_CALLS:
        setattr(fs, name, wrap(getattr(fs, name), name))
    try:
        yield
    finally:
        for name in FILE_CALLS:
            delattr(fs, name)


def run_cycles(
    seed: int, cycles: int, slots: int, cap: int, slot_flush: int, *, keep_all: bool
) -> None:
    rng = random.Random(seed)
    fs = SimFileSystem(rng)
    makedirs_synced(ROOT, fs=fs)  # the store's directory: the store makes it durable
    model = CrashModel(keep_all=keep_all)

    def cycle() -> None:
        ix = index(fs, slots, cap, slot_flush)
        recover_and_check(ix, model)
        for _ in range(rng.randint(3, 25)):
            crash_op(ix, rng, model)

    for _ in range(cycles):
        mode = rng.choice(["torn", "lose", "reorder", "kill"])
        if mode == "kill":  # the process dies at a file call; the page cache stays
            with killed_after(fs, rng.randrange(MAX_CALLS)), contextlib.suppress(Killed):
                cycle()
            fs.crash(keep_unsynced=True)
            continue
        lose, reorder = mode == "lose", mode == "reorder"
        with cut_power_after(
            fs, rng.randrange(MAX_CALLS), lose_unsynced=lose, reorder=reorder
        ) as cut:
            try:
                cycle()
            except PowerCut:
                pass
        if not cut.fired:
            fs.crash(lose_unsynced=lose, reorder=reorder)
    recover_and_check(index(fs, slots, cap, slot_flush), model)


@pytest.mark.parametrize("keep_all", [False, True], ids=["checkpoint", "keep_all"])
@pytest.mark.parametrize("seed", range(100))
def test_recovery_after_power_cuts_and_kills(seed: int, keep_all: bool) -> None:
    geo = random.Random(seed)
    slots, cap = geo.choice([1, 2, 5, 16, 4096]), geo.choice([1, 3, 8, 40])
    run_cycles(seed, 5, slots, cap, geo.choice([1, 3, 50]), keep_all=keep_all)


def add_batch(ix: MessageIndex, model: CrashModel, rng: random.Random, n: int) -> None:
    items = []
    for _ in range(n):
        model.next_offset += 1
        items.append((rng.choice(KEYS), model.next_offset))
    model.maybe = set(items)
    add(ix, items)
    ix.lookup(TOPIC, "k0")  # writes them now: the entries reach the file in several writes
    model.live |= model.maybe
    model.maybe = set()


def flush(ix: MessageIndex, model: CrashModel) -> None:
    ix.flush()
    model.durable = set(model.live)
    model.checkpoint = model.next_offset + 1  # past the last record


def built(fs: SimFileSystem, model: CrashModel) -> MessageIndex:
    """Files of 6 entries (3 slots, slots written back every 4): three full ones and one of 4
    entries, all flushed with their slots; then 4 more written behind, which fill the fourth
    file (its next flush writes the slots back) and start a fifth (the next flush does not)."""
    makedirs_synced(ROOT, fs=fs)
    ix = index(fs, 3, 6)
    ix.open(0)
    rng = random.Random(9)  # keys whose new entries share chains with flushed ones
    for n in (4, 5, 6, 7):
        add_batch(ix, model, rng, n)
    flush(ix, model)
    for n in (1, 2, 1):
        add_batch(ix, model, rng, n)
    return ix


def scenario_op(name: str, fs: SimFileSystem, model: CrashModel) -> Callable[[], object]:
    """Build the state for scenario ``name``; returns the operation to cut, with ``model``
    saying what it may add (maybe) or take away (doubtful) if cut."""
    if name == "first_open":  # in the store's directory, which the store made durable
        makedirs_synced(ROOT, fs=fs)
        return lambda: index(fs, 3, 6).open(0)
    ix = built(fs, model)
    if name == "flush":
        return lambda: flush(ix, model)
    if name == "truncate":  # into the second file: two files and a half go
        model.checkpoint = cut = 9
        model.doubtful = model.maybe = {e for e in model.live if e[1] >= cut}
        return lambda: ix.truncate_from(cut)
    if name == "delete_below":
        model.doubtful = {e for e in model.live if e[1] < 15}
        return lambda: ix.delete_below(15)
    assert name == "recovering_open"  # after a kill -9 that left the last commit unsynced
    flush(ix, model)
    fs.crash(keep_unsynced=True)
    model.checkpoint = cut = 14
    model.doubtful = {e for e in model.live if e[1] >= cut}
    return lambda: index(fs, 3, 6).open(cut)


@pytest.mark.parametrize("keep_all", [False, True], ids=["checkpoint", "keep_all"])
@pytest.mark.parametrize(
    "name", ["first_open", "flush", "truncate", "delete_below", "recovering_open"]
)
def test_a_crash_at_every_file_call_is_recovered(name: str, keep_all: bool) -> None:
    """Power cut (torn, reordered, all unsynced lost) or kill -9 at each file call of the
    operation; recovery is checked, (half the time) the power is cut with every unsynced
    write lost (what recovery found must be durable), recovery is checked again, then more
    is added and flushed, the power cut again, and recovery checked a third time."""
    runs = 0
    reorders = 16 if name == "flush" else 6  # the states that need a missing fdatasync are rare
    modes = [("torn", 0), ("lose", 0), ("kill", 0), ("kill", 1)]
    modes += [("reorder", seed) for seed in range(reorders)]
    for call in itertools.count():
        fired = False
        for mode, seed in modes:
            fs = SimFileSystem(random.Random(seed))
            model = CrashModel(keep_all=keep_all)
            op = scenario_op(name, fs, model)
            if mode == "kill":
                with killed_after(fs, call), contextlib.suppress(Killed):
                    op()
                    continue
                fs.crash(keep_unsynced=True)
            else:
                lose, reorder = mode == "lose", mode == "reorder"
                with cut_power_after(fs, call, lose_unsynced=lose, reorder=reorder) as cut:
                    with contextlib.suppress(PowerCut):
                        op()
                if not cut.fired:
                    continue
            fired = True
            runs += 1
            recover_and_check(index(fs, 3, 6), model)
            if seed % 2 == 0:
                fs.crash(lose_unsynced=True)  # what recovery found must be durable
            ix = index(fs, 3, 6)
            recover_and_check(ix, model)
            add_batch(ix, model, random.Random(call), 7)
            flush(ix, model)
            fs.crash(lose_unsynced=True)
            recover_and_check(index(fs, 3, 6), model)
        if not fired:
            break
    assert runs > 20


def test_a_flush_beside_appends_in_a_worker_thread() -> None:
    """The broker flushes in a worker thread while the actor appends and looks up."""
    fs = SimFileSystem(random.Random(3))
    ix = index(fs, 5, 7)
    ix.open(0)
    add(ix, [(KEYS[i % 4], i) for i in range(50)])
    flushed = threading.Event()

    def flush() -> None:
        ix.flush()
        flushed.set()

    worker = threading.Thread(target=flush)
    worker.start()
    for i in range(50, 400):
        add(ix, [(KEYS[i % 4], i)])
        if i % 50 == 0:
            assert ix.lookup(TOPIC, KEYS[i % 4])[0] == i
    worker.join()
    assert flushed.is_set()
    fs.crash(lose_unsynced=True)
    ix = index(fs, 5, 7)
    ix.open(50)
    for k in range(4):
        assert ix.lookup(TOPIC, KEYS[k]) == [i for i in range(49, -1, -1) if i % 4 == k]


# ------------------------------------------------------------------------------ files


def test_files_roll_by_entry_count_and_retention_deletes_whole_files(disk: DiskView) -> None:
    ix = index(disk, 2, 5)
    ix.open(0)
    add(ix, [(KEYS[i % 3], 100 + i) for i in range(23)])  # files of 5: 100..104, 105..109, ...
    assert ix.files == [segment_name(n) for n in (0, 5, 10, 15, 20)]
    ix.flush()
    d = disk.path(INDEX_DIR)
    assert disk.listdir(d) == ix.files  # nothing else (no marker once flushed)
    size = HEADER_SIZE + 4 * 2 + ENTRY.size * 5
    assert [disk.size(os.path.join(d, n)) for n in ix.files[:4]] == [size] * 4
    assert ix.delete_below(112) == 10  # 100..109 go; 110..114 has 110, 111 below but stays
    assert ix.files == [segment_name(n) for n in (10, 15, 20)]
    assert disk.listdir(d) == ix.files
    assert ix.lookup(TOPIC, "k0") == [121, 118, 115, 112]
    assert ix.lookup(TOPIC, "k2") == [120, 117, 114, 111]
    assert ix.delete_below(10_000) == 13
    assert ix.files == [] and ix.count == 0 and ix.lookup(TOPIC, "k0") == []
    add(ix, [("k0", 200)])
    assert ix.files == [segment_name(23)]  # numbering continues
    ix.close()
    ix = index(disk, 64, 1000)  # another geometry: old files keep theirs
    ix.open(1000)
    add(ix, [("k0", 201 + i) for i in range(5)])
    assert ix.files == [segment_name(23), segment_name(28)]
    assert ix.lookup(TOPIC, "k0") == list(range(205, 199, -1))
    ix.close()


def test_slots_are_written_back_every_few_entries_a_full_file_and_at_close() -> None:
    """An ordinary flush makes the entries durable and leaves the slot pages dirty in RAM;
    recovery redoes the entries since the last write-back."""
    fs = SimFileSystem(random.Random(0))
    ix = index(fs, 1024, 100, slot_flush=10)
    ix.open(0)
    path = os.path.join(ROOT, INDEX_DIR, segment_name(0))

    def durable_slots() -> bytes:
        return fs.durable_bytes(path)[HEADER_SIZE : HEADER_SIZE + 4 * 1024]

    add(ix, [(KEYS[i % 3], i) for i in range(9)])
    ix.flush()
    assert durable_slots() == bytes(4 * 1024)  # 9 entries wait: below slot_flush
    fs.crash(lose_unsynced=True)
    ix = index(fs, 1024, 100, slot_flush=10)
    ix.open(1000)  # the 9 flushed entries are redone
    assert ix.lookup(TOPIC, "k0") == [6, 3, 0]
    assert durable_slots() != bytes(4 * 1024)  # and the redo wrote the slots back
    add(ix, [(KEYS[i % 3], i) for i in range(9, 18)])
    ix.flush()
    before = durable_slots()
    add(ix, [(KEYS[i % 3], i) for i in range(18, 19)])
    ix.flush()
    assert durable_slots() != before  # 10 entries waited
    add(ix, [("k0", 19)])
    ix.flush()
    before = durable_slots()
    ix.close()
    assert durable_slots() != before  # at close
    ix = index(fs, 1024, 3, slot_flush=1000)
    ix.open(1000)
    before = durable_slots()
    add(ix, [("k0", 100 + i) for i in range(80)])  # fills the file: 100 entries
    ix.flush()
    assert ix.files == [segment_name(0)]
    assert durable_slots() != before  # a full file is written back whatever slot_flush says
    fs.crash(lose_unsynced=True)
    ix = index(fs, 1024, 3, slot_flush=1000)
    ix.open(1000)
    assert ix.lookup(TOPIC, "k0")[:3] == [179, 178, 177]
    ix.close()


def test_the_walk_is_capped_and_lookups_take_a_limit() -> None:
    fs = SimFileSystem(random.Random(0))
    ix = index(fs, 16, MAX_WALK)
    ix.open(0)
    add(ix, [("hot", i) for i in range(MAX_WALK + 500)])  # two files
    assert ix.lookup(TOPIC, "hot") == list(range(MAX_WALK + 499, 499, -1))
    assert ix.lookup(TOPIC, "hot", limit=3) == [MAX_WALK + 499, MAX_WALK + 498, MAX_WALK + 497]
    assert ix.lookup(TOPIC, "nope") == []
    assert ix.lookup("Other", "hot") == []


def test_topic_is_part_of_the_key_and_add_pairs_agrees_with_add_keys() -> None:
    fs = SimFileSystem(random.Random(0))
    ix = index(fs, 4, 10)
    ix.open(0)
    ix.add_pairs([key_hash("A", "x")], [5])
    ix.add([(key_hash("B", "x"), 6)])
    ix.add_keys("A", [b"x"], [7])
    assert ix.lookup("A", "x") == [7, 5]
    assert ix.lookup("B", "x") == [6]


def test_adding_to_a_closed_index_is_an_error() -> None:
    ix = index(SimFileSystem(random.Random(0)), 4, 10)
    with pytest.raises(RuntimeError, match="not open"):
        add(ix, [("k0", 1)])
    assert ix.lookup(TOPIC, "k0") == [] and ix.truncate_from(0) == 0 and ix.delete_below(9) == 0


# ------------------------------------------------------------------------------ damage


def sealed_index(disk: DiskView) -> MessageIndex:
    ix = index(disk, 2, 4)
    ix.open(0)
    add(ix, [(KEYS[i % 2], i) for i in range(12)])  # three full files
    ix.close()
    return index(disk, 2, 4)


def test_a_torn_header_copy_falls_back_to_the_other(disk: DiskView) -> None:
    ix = sealed_index(disk)
    path = disk.path(INDEX_DIR, segment_name(4))
    disk.patch(path, 10, b"\xff\xff")  # the newer copy: the commit of the last flush
    assert ix.open(1000) == 0  # the intent copy: its entries are redone
    assert ix.lookup(TOPIC, "k0") == [10, 8, 6, 4, 2, 0]
    ix.close()
    disk.patch(path, 10, b"\xff\xff")
    disk.patch(path, 512 + 10, b"\xff")  # both: the file is unusable, later ones go too
    ix = index(disk, 2, 4)
    assert ix.open(1000) == 4  # what the unusable file held is not known
    assert ix.files == [segment_name(0)]
    assert ix.lookup(TOPIC, "k0") == [2, 0]
    ix.close()


def test_corrupt_chains_end_the_walk_and_never_give_foreign_offsets(disk: DiskView) -> None:
    ix = sealed_index(disk)
    path = disk.path(INDEX_DIR, segment_name(8))
    at = HEADER_SIZE + 4 * 2
    raw = disk.read(path)
    h, off, _ = ENTRY.unpack_from(raw, at + 3 * ENTRY.size)  # entry 4: key k1, offset 11
    assert (h, off) == (key_hash(TOPIC, "k1"), 11)
    disk.patch(path, at + 3 * ENTRY.size + 16, struct.pack("<I", 4))  # prev == own number
    slot = (h >> 32) % 2
    ix.open(1000)
    assert ix.lookup(TOPIC, "k1") == [11, 7, 5, 3, 1]  # stops in this file, not in older ones
    ix.close()
    disk.patch(path, HEADER_SIZE + 4 * slot, struct.pack("<I", 99))  # a slot past the count
    ix = index(disk, 2, 4)
    ix.open(1000)
    assert ix.lookup(TOPIC, "k1") == [7, 5, 3, 1]
    ix.close()


# ------------------------------------------------------------------------------ migration


def test_the_old_index_log_is_replaced_by_a_rebuild(disk: DiskView) -> None:
    d = disk.path(INDEX_DIR)
    old = struct.Struct(">Qq")
    write_file_atomic(  # a store of the old format: durable
        os.path.join(d, LEGACY_INDEX_LOG), old.pack(key_hash(TOPIC, "k0"), 0) * 3, fs=disk.fs
    )
    ix = index(disk, 8, 8)
    assert not ix.exists()  # the store re-dispatches from the oldest record
    assert ix.open(0) == 3
    assert disk.listdir(d) == [REBUILD_MARKER]
    if disk.sim is not None:
        assert disk.sim.listdir_durable(d) == [REBUILD_MARKER]
    add(ix, [("k0", 0), ("k0", 40)])
    assert not index(disk, 8, 8).exists()  # a crash now: rebuild again
    ix.flush()
    assert index(disk, 8, 8).exists()
    assert disk.listdir(d) == [segment_name(0)]
    ix.close()
    ix = index(disk, 8, 8)
    ix.open(1000)
    assert ix.lookup(TOPIC, "k0") == [40, 0]
    ix.close()


def test_an_interrupted_rebuild_starts_again() -> None:
    fs = SimFileSystem(random.Random(0))
    ix = index(fs, 8, 4)
    ix.open(0)
    add(ix, [(KEYS[i % 3], i) for i in range(10)])
    fs.crash(keep_unsynced=True)  # before the first flush
    ix = index(fs, 8, 4)
    assert not ix.exists()
    assert ix.open(0) == 0  # files without a durable header count for nothing
    assert ix.files == [] and ix.count == 0


def test_a_flush_whose_marker_fsync_failed_is_retried_and_ends_the_rebuild() -> None:
    """The rebuild marker is unlinked, then the directory fsync fails: the flush raises that
    failure; the next flush (the store's close) must fsync again, not unlink a second time
    (a FileNotFoundError there hid the fsync failure: cluster sim seed 248)."""
    fs = SimFileSystem(random.Random(0))
    ix = index(fs, 8, 4)
    ix.open(0)
    add(ix, [(KEYS[i % 3], i) for i in range(6)])
    real_unlink = fs.unlink

    def unlink(path: str) -> None:
        real_unlink(path)
        if path.endswith(REBUILD_MARKER):
            fs.fail_fsync(None, 1)  # the directory fsync right after the unlink fails

    fs.unlink = unlink  # type: ignore[method-assign]
    with pytest.raises(OSError, match="simulated fsync"):
        ix.flush()
    ix.flush()
    fs.crash(keep_unsynced=False)
    again = index(fs, 8, 4)
    assert again.exists()  # the rebuild is over, durably
    assert again.open(0) == 6


def test_the_store_rebuilds_a_deleted_or_old_format_index(disk: DiskView) -> None:
    cfg = StoreConfig(mappedFileSizeCommitLog=4096, maxHashSlotNum=4, maxIndexNum=6)
    root = disk.path("s")
    props = [{"KEYS": f"k{i % 4} all"} for i in range(10)]
    host = (b"\x7f\x00\x00\x01", 1)
    msgs = [
        MessageToStore("T", 0, b"b%d" % i, properties=p, born_timestamp=i, born_host=host)
        for i, p in enumerate(props)
    ]
    store = MessageStore(root, cfg, fs=disk.fs)
    store.open()
    store.put_messages(msgs, 1)
    store.close()
    index_dir = os.path.join(root, INDEX_DIR)
    assert len(disk.listdir(index_dir)) == 4  # 20 entries in files of 6
    for name in disk.listdir(index_dir):
        disk.unlink(os.path.join(index_dir, name))
    disk.write(os.path.join(index_dir, LEGACY_INDEX_LOG), b"\x00" * 16)
    store = MessageStore(root, cfg, fs=disk.fs)
    report = store.open()
    assert report.index_rebuilt and report.index_records_dropped == 1
    assert [m.body for m in store.query_by_key("T", "k1")] == [b"b9", b"b5", b"b1"]
    assert len(store.query_by_key("T", "all", max_num=100)) == 10
    store.close()
