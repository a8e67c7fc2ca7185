"""Storage on a disk that loses power: seeded power cuts at any file call, then a restart.

Each seed runs a few cycles of: open the store on a `SimFileSystem`, check what recovery
found, run random operations, and lose power at a random file call (inside an operation,
recovery included, or between two), keeping a random prefix of what was not fsynced, the last
write maybe torn (one cycle in five keeps nothing unsynced). The checks are what the storage
modules promise:

- MessageStore / CommitLog: recovery never raises; every byte below the last offset
  `flush_commitlog` / `flush` returned is intact; the log holds a prefix of the messages put (in
  order); every ConsumeQueue holds exactly its messages of the log, and the key index finds them;
- RaftLog: recovery never raises; the hard state and snapshot are the last saved (or the one
  being saved); the log is a prefix of the log before or after the operation that was cut, and
  holds every entry a returned `sync` covered (unless a later conflicting append dropped it);
- EpochFile, JsonConfigStore, BrokerIdentityStore: loading after a cut during an update gives
  the old or the new content, never a mix, never an error.

`pytest --seeds N` runs seeds 0..N-1 (default 200), `pytest --seed K` replays seed K (the same
options as the Raft simulator; a failing test's id names its seed).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from rocketrio.protocol.message import (
    UNIQ_KEY,
    BatchItem,
    decode_stored,
    encode_batch_body,
    iter_stored,
)
from rocketrio.protocol.raft import Entry, HardState, SnapshotMeta
from rocketrio.storage.broker_identity import BrokerIdentityStore, BrokerMeta
from rocketrio.storage.config_store import JsonConfigStore
from rocketrio.storage.epoch_file import EpochFile, EpochRecord
from rocketrio.storage.message_store import (
    MessageStore,
    MessageToStore,
    StoreConfig,
    WritesFenced,
)
from rocketrio.storage.raft_log import RaftLog
from tests.harness.sim_disk import PowerCut, SimFileSystem, cut_power_after


def _seeds() -> list[int]:
    one = os.environ.get("RAFT_SIM_SEED")
    if one is not None:
        return [int(one)]
    return list(range(int(os.environ.get("RAFT_SIM_SEEDS", "200"))))


SEEDS = _seeds()
CYCLES = 4


def power_cycles(
    fs: SimFileSystem, rng: random.Random, max_calls: int, cycle: Callable[[], None]
) -> None:
    """Run ``cycle`` CYCLES times, each ended by a power cut at a random file call."""
    for _ in range(CYCLES):
        lose = rng.random() < 0.2
        with cut_power_after(fs, rng.randrange(max_calls), lose_unsynced=lose) as cut:
            try:
                cycle()
            except PowerCut:
                pass
        if not cut.fired:
            fs.crash(lose_unsynced=lose)
        fs.heal()  # an fsync failure armed just before the cut must not hit the restart


# ------------------------------------------------------------------------------ MessageStore

STORE = "/sim/broker-a-0/store"
# a small index geometry: its files roll, and power cuts hit rolls and repairs
CFG = StoreConfig(
    mappedFileSizeCommitLog=2048,
    mappedFileSizeConsumeQueue=100,
    maxMessageSize=512,
    maxHashSlotNum=16,
    maxIndexNum=40,
)
HOST = (b"\x0a\x00\x00\x09", 10911)
QUEUES = [("T", 0), ("T", 1), ("T", 2), ("U", 0)]


@attrs.define
class StoreModel:
    """What must hold after a crash, as far as the test knows."""

    # every returned put, in commitlog order; the put a crash may have cut
    bodies: list[bytes] = attrs.field(factory=list, repr=lambda b: f"<{len(b)} messages>")
    in_flight: list[bytes] = attrs.field(factory=list, repr=lambda b: f"<{len(b)} messages>")
    # the commitlog below the last offset a flush returned
    flushed: bytes = attrs.field(default=b"", repr=lambda b: f"<{len(b)} bytes>")
    sent: int = 0


def body_of(n: int, rng: random.Random) -> bytes:
    return f"m{n:05d}-".encode().ljust(rng.randint(8, 300), b"x")


def check_recovered(store: MessageStore, model: StoreModel) -> None:
    clog = store.commitlog
    assert clog.max_offset >= len(model.flushed), "fsynced commitlog bytes were lost"
    assert clog.read(0, len(model.flushed)) == model.flushed, "fsynced commitlog bytes changed"
    per_queue: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    found: list[bytes] = []
    for _, record in clog.iter_records(0):
        msg, _ = decode_stored(record)
        per_queue.setdefault((msg.topic, msg.queue_id), []).append((msg.queue_offset, msg.body))
        found.append(msg.body)
        uniq = msg.properties[UNIQ_KEY]
        assert [m.body for m in store.query_by_uniq_key(msg.topic, uniq)] == [msg.body]
    expected = model.bodies + model.in_flight
    assert found == expected[: len(found)], "the commitlog is not a prefix of what was put"
    queues = [(topic, qid) for topic, qids in store.topic_queue_ids().items() for qid in qids]
    assert set(per_queue) <= set(queues), "a queue with messages in the log has no ConsumeQueue"
    for topic, qid in queues:
        items = per_queue.get((topic, qid), [])
        assert [qo for qo, _ in items] == list(range(len(items)))
        assert store.get_max_offset(topic, qid) == len(items)
        res = store.get_messages(topic, qid, 0, 10_000, 1 << 30)
        got = [m.body for m in iter_stored(res.body)] if items else []
        assert got == [b for _, b in items], f"consume queue {topic}:{qid} differs from the log"
    model.bodies, model.in_flight = found, []


def store_op(store: MessageStore, fs: SimFileSystem, rng: random.Random, model: StoreModel) -> None:
    roll = rng.random()
    if roll < 0.45:
        batch = []
        for _ in range(rng.randint(1, 6)):
            topic, qid = rng.choice(QUEUES)
            n = model.sent = model.sent + 1
            props = {"TAGS": f"t{n % 3}", "KEYS": f"k{n}", UNIQ_KEY: f"U{n:06d}"}
            batch.append(MessageToStore(topic=topic, queue_id=qid, body=body_of(n, rng),
                                        properties=props, born_timestamp=n))  # fmt: skip
        model.in_flight = [m.body for m in batch]
        store.put_messages(batch, 1000 + model.sent)
    elif roll < 0.6:
        topic, qid = rng.choice(QUEUES)
        items = []
        for _ in range(rng.randint(1, 5)):
            n = model.sent = model.sent + 1
            items.append(BatchItem(0, body_of(n, rng), {"KEYS": f"k{n}", UNIQ_KEY: f"U{n:06d}"}))
        model.in_flight = [item.body for item in items]
        store.put_batch_body(topic, qid, encode_batch_body(items), 1000 + model.sent)
    else:
        clog = store.commitlog
        if roll < 0.7 and clog.max_offset > clog.flushed_offset:
            fs.fail_fsync(STORE)  # the next fsync fails: nothing may count as flushed
            with pytest.raises(OSError, match="simulated fsync failure"):
                store.flush_commitlog()
            with pytest.raises(WritesFenced):  # nothing goes after bytes of unknown state
                store.put_messages([MessageToStore(topic="T", queue_id=0, body=b"x")], 1)
            assert store.repair(cut_log=True) is None  # written again: nothing was lost
        flushed = store.flush_commitlog() if roll < 0.85 else store.flush()
        model.flushed = clog.read(0, flushed)
        return
    model.bodies += model.in_flight
    model.in_flight = []


@pytest.mark.parametrize("seed", SEEDS)
def test_message_store_survives_power_cuts(seed: int) -> None:
    rng = random.Random(seed)
    fs = SimFileSystem(rng)
    model = StoreModel()

    def cycle() -> None:
        store = MessageStore(STORE, CFG, store_host=HOST, fs=fs)
        store.open()
        check_recovered(store, model)
        for _ in range(rng.randint(5, 30)):
            store_op(store, fs, rng, model)

    power_cycles(fs, rng, 600, cycle)
    store = MessageStore(STORE, CFG, store_host=HOST, fs=fs)
    store.open()
    check_recovered(store, model)


# ------------------------------------------------------------------------------ RaftLog

RAFT = "/sim/controller-n0/raft/n0"
SEGMENT = 200


@attrs.define
class LogState:
    """A RaftLog as the test expects it: snapshot, visible entries, hard state."""

    snap: SnapshotMeta | None = None
    entries: list[Entry] = attrs.Factory(list)  # from snapshot index + 1
    hard: HardState = attrs.Factory(lambda: HardState(0, None))

    @property
    def first(self) -> int:
        return self.snap.index + 1 if self.snap else 1

    @property
    def last(self) -> int:
        return self.first + len(self.entries) - 1

    def term(self, index: int) -> int:
        if self.snap and index == self.snap.index:
            return self.snap.term
        return self.entries[index - self.first].term if self.first <= index <= self.last else 0

    def copy(self) -> LogState:
        return LogState(self.snap, list(self.entries), self.hard)


def raft_entry(index: int, term: int) -> Entry:
    return Entry(index, term, f"{index}/{term}".encode().ljust((index * 7 + term) % 50, b"#"))


@attrs.define
class RaftOp:
    """One operation: how to run it, the state after it, and how far it lowers durability."""

    run: Callable[[RaftLog], None]
    after: LogState
    durable_last: int  # entries up to here must survive a cut during (and after) the op
    syncs: bool = False


def next_raft_op(state: LogState, durable: int, rng: random.Random) -> RaftOp:
    after = state.copy()
    roll = rng.random()
    if roll < 0.5 or state.last < state.first:
        start = max(state.first, state.last + 1 - rng.randint(0, 4))
        term = state.term(start - 1) + rng.randint(0, 1)
        batch = [raft_entry(start + k, term) for k in range(rng.randint(1, 6))]
        # Raft's rule: entries the log holds are skipped; the first other one cuts the log there
        cut = next(
            (e.index for e in batch if e.index > state.last or state.term(e.index) != e.term),
            None,
        )
        if cut is not None:
            if cut <= state.last:
                durable = min(durable, cut - 1)
            kept = state.entries[: cut - state.first]
            after.entries = kept + [e for e in batch if e.index >= cut]
        return RaftOp(lambda log: log.append(batch), after, durable)
    if roll < 0.7:
        return RaftOp(lambda log: log.sync(), after, durable, syncs=True)
    if roll < 0.85:
        hard = HardState(state.hard.term + 1, rng.choice([None, "n1", "n2"]))
        after.hard = hard
        return RaftOp(lambda log: log.save_hard_state(hard.term, hard.voted_for), after, durable)
    low = state.snap.index if state.snap else 0
    index = rng.randint(max(low, 1), state.last + 3) if state.last >= 1 else 1
    if index < low or (state.snap and index == low):
        return RaftOp(lambda log: log.sync(), after, durable, syncs=True)
    matches = index <= state.last and rng.random() < 0.7
    term = state.term(index) if matches else state.term(index) + 1
    after.snap = SnapshotMeta(index, term)
    if matches:
        after.entries = state.entries[index - state.first + 1 :]
    else:  # an installed snapshot the log does not match: the whole log goes
        after.entries = []
        durable = min(durable, index)

    def install(log: RaftLog) -> None:
        log.save_snapshot(index, term, b"snap")
        log.compact(index - rng.randint(0, 3))

    return RaftOp(install, after, durable)


def recovered_state(log: RaftLog) -> LogState:
    return LogState(log.snapshot_meta, log.all_entries(), log.hard_state)


def check_raft(got: LogState, candidates: list[LogState], durable: int) -> None:
    """``got`` is a prefix of one candidate (the state before or after the cut op) with the
    same snapshot and hard state, holding at least every entry up to ``durable``."""
    for want in candidates:
        n = len(got.entries)
        if (got.snap, got.hard) == (want.snap, want.hard) and got.entries == want.entries[:n]:
            assert got.last >= min(durable, want.last), "a synced entry was lost"
            return
    raise AssertionError(f"recovered {got} is none of {candidates}")


@pytest.mark.parametrize("seed", SEEDS)
def test_raft_log_survives_power_cuts(seed: int) -> None:
    rng = random.Random(seed)
    fs = SimFileSystem(rng)
    state = LogState()
    candidates = [state]
    durable = 0

    def cycle() -> None:
        nonlocal state, candidates, durable
        log = RaftLog.open(RAFT, SEGMENT, fs=fs)
        check_raft(recovered_state(log), candidates, durable)
        state = recovered_state(log)
        candidates = [state]
        for _ in range(rng.randint(3, 25)):
            op = next_raft_op(state, durable, rng)
            candidates = [state, op.after]
            durable = op.durable_last
            op.run(log)
            state, candidates = op.after, [op.after]
            if op.syncs:
                durable = state.last

    power_cycles(fs, rng, 500, cycle)
    with RaftLog.open(RAFT, SEGMENT, fs=fs) as log:
        check_raft(recovered_state(log), candidates, durable)


# ------------------------------------------------------------------------------ small files


def old_or_new(
    seed: int,
    load: Callable[[SimFileSystem], Any],
    updates: Callable[[SimFileSystem, random.Random], list[Update]],
) -> None:
    """Apply updates with power cuts anywhere; every load gives the value before or after
    the update that was cut (``updates`` gives (apply, value after) pairs per cycle)."""
    rng = random.Random(seed)
    fs = SimFileSystem(rng)
    possible = [load(fs)]

    def cycle() -> None:
        nonlocal possible
        got = load(fs)
        assert got in possible, f"loaded {got!r}, expected one of {possible!r}"
        possible = [got]
        for apply, value in updates(fs, rng):
            possible = [got, value]
            apply()
            got = value
            possible = [got]

    power_cycles(fs, rng, 120, cycle)
    got = load(fs)
    assert got in possible, f"loaded {got!r}, expected one of {possible!r}"


EPOCH_PATH = "/sim/broker-a-0/store/epochFileCheckpoint"


Update = tuple[Callable[[], object], Any]  # (apply, what a load gives once it returned)


def epoch_updates(fs: SimFileSystem, rng: random.Random) -> list[Update]:
    f = EpochFile(EPOCH_PATH, fs=fs)
    out: list[Update] = []
    records = f.records
    for _ in range(rng.randint(1, 6)):
        last = records[-1] if records else EpochRecord(0, 0)
        if rng.random() < 0.7 or not records:
            added = EpochRecord(last.epoch + 1, last.start_offset + rng.randint(0, 99))
            new = [*records, added]
            out.append((lambda e=added: f.append(e.epoch, e.start_offset), new))
        else:
            cut = records[-1].start_offset
            new = [r for r in records if r.start_offset < cut]
            out.append((lambda c=cut: f.truncate_suffix(c), new))
        records = new
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_epoch_file_is_old_or_new_after_a_power_cut(seed: int) -> None:
    old_or_new(seed, lambda fs: EpochFile(EPOCH_PATH, fs=fs).records, epoch_updates)


CONFIG_PATH = "/sim/broker-a-0/store/config/consumerOffset.json"


def config_updates(fs: SimFileSystem, rng: random.Random) -> list[Update]:
    store = JsonConfigStore(CONFIG_PATH, fs=fs)
    store.load()
    out: list[Update] = []
    for _ in range(rng.randint(1, 6)):
        offsets = {"t@g": {"0": rng.randrange(10**6)}}
        value = {"offsetTable": offsets, "pad": "x" * rng.randrange(200)}
        out.append((lambda v=value: store.persist(v), value))
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_json_config_is_old_or_new_after_a_power_cut(seed: int) -> None:
    old_or_new(seed, lambda fs: JsonConfigStore(CONFIG_PATH, fs=fs).load(), config_updates)


IDENTITY_DIR = "/sim/broker-a-0/identity"


def identity_updates(fs: SimFileSystem, rng: random.Random) -> list[Update]:
    """The persistent-BrokerId flow: write .broker.meta.temp, then commit it to broker.meta."""
    store = BrokerIdentityStore(IDENTITY_DIR, fs=fs)
    current = store.read_meta()
    out: list[Update] = []
    for _ in range(rng.randint(1, 4)):
        meta = BrokerMeta("c", "broker-a", rng.randrange(1, 9), f"code{rng.randrange(99)}")
        out.append((lambda m=meta: store.write_temp(m), (current, meta)))
        out.append((store.commit_temp, (meta, None)))
        current = meta
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_broker_identity_is_old_or_new_after_a_power_cut(seed: int) -> None:
    def load(fs: SimFileSystem) -> tuple[BrokerMeta | None, BrokerMeta | None]:
        store = BrokerIdentityStore(IDENTITY_DIR, fs=fs)
        return store.read_meta(), store.read_temp()

    old_or_new(seed, load, identity_updates)
