"""`PopBuffer` (buffer_merge.py), the POP buffer's pure core: a CK all acknowledged is dropped
unwritten; one not is written once due and its ACKs after it; a queue's offset moves past a
pop only when its entry is done or its CK stored, in pop order; an offset someone else moved
wins; its bounds; what a withdrawn pop leaves; what it counts in flight."""

from __future__ import annotations

from rocketrio.actors.broker.pop.buffer_merge import (
    NOT_STORED,
    STORED,
    STORING,
    AckWrite,
    BufferConfig,
    CkWrite,
    PopBuffer,
)
from rocketrio.protocol.pop_checkpoint import PopCheckPoint

T0 = 1_700_000_000_000
INVISIBLE = 60_000


class Offsets:
    """A group offset table: what was committed, in order."""

    def __init__(self) -> None:
        self.table: dict[tuple[str, str, int], int] = {}
        self.commits: list[tuple[str, int, int]] = []

    def query(self, group: str, topic: str, queue_id: int) -> int:
        return self.table.get((group, topic, queue_id), -1)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.table[(group, topic, queue_id)] = offset
        self.commits.append((topic, queue_id, offset))


def ck(start: int, num: int, *, queue: int = 0, pop_time: int = T0, invisible: int = INVISIBLE):
    return PopCheckPoint(
        start_offset=start,
        pop_time=pop_time,
        invisible_time=invisible,
        num=num,
        queue_id=queue,
        topic="T",
        cid="G",
        broker_name="broker-a",
        queue_offset_diff=tuple(range(num)),
    )


def make(**kw: int) -> tuple[PopBuffer, Offsets]:
    offsets = Offsets()
    offsets.commit("G", "T", 0, 0)
    offsets.commits.clear()
    buf = PopBuffer(BufferConfig(**kw), offsets)
    buf.enabled = True
    return buf, offsets


def test_a_ck_all_acknowledged_is_dropped_unwritten_and_its_offset_committed() -> None:
    buf, offsets = make()
    c = ck(0, 3)
    assert buf.add_ck(c, 2, 3, T0)
    assert buf.latest("T", "G", 0) == 3
    assert offsets.query("G", "T", 0) == 0  # held back while only here
    for o in (0, 1):
        assert buf.ack(c.merge_key, o)
    assert buf.scan(T0 + 100) == []
    assert offsets.commits == []  # one message still unacknowledged
    assert buf.ack(c.merge_key, 2)
    assert buf.scan(T0 + 200) == []  # nothing to write, ever
    assert offsets.commits == [("T", 0, 3)]
    assert buf.cks == {} and buf.queues == {} and buf.dropped == 1
    assert buf.latest("T", "G", 0) is None
    assert not buf.ack(c.merge_key, 0)  # gone: a late ACK goes the usual way


def test_inflight_counts_the_unacknowledged_messages_of_cks_not_yet_stored() -> None:
    buf, _ = make(stay_ms=10_000)
    a, b = ck(0, 3), ck(0, 2, queue=1)
    buf.add_ck(a, 0, 3, T0)
    buf.add_ck(b, 0, 2, T0)
    buf.ack(a.merge_key, 1)
    assert buf.inflight("G") == {("T", 0): 2, ("T", 1): 2}
    assert buf.inflight("other") == {}
    buf.ack(b.merge_key, 0)
    buf.ack(b.merge_key, 1)  # all acknowledged: none left in flight
    assert buf.inflight("G") == {("T", 0): 2}
    [w] = [w for w in buf.scan(T0 + 10_001) if isinstance(w, CkWrite)]
    assert buf.inflight("G") == {("T", 0): 2}  # being written: still only here
    buf.ck_stored(w.entry, True)
    assert buf.inflight("G") == {}  # stored: the revive service counts it from now on


def test_an_ack_the_buffer_does_not_hold_is_left_to_the_usual_path() -> None:
    buf, _ = make()
    c = ck(10, 2)
    buf.add_ck(c, 0, 12, T0)
    assert not buf.ack(c.merge_key, 12)  # not one of its offsets
    assert not buf.ack(ck(12, 2).merge_key, 12)  # another CK


def test_a_ck_not_all_acknowledged_is_written_when_it_stayed_too_long_then_its_acks() -> None:
    buf, offsets = make(stay_ms=10_000)
    c = ck(0, 3)
    buf.add_ck(c, 5, 3, T0)
    buf.ack(c.merge_key, 1)
    assert buf.scan(T0 + 10_000) == []  # not yet
    writes = buf.scan(T0 + 10_001)
    assert len(writes) == 1 and isinstance(writes[0], CkWrite)
    entry = writes[0].entry
    assert entry.ck is c and entry.revive_qid == 5 and entry.ck_state == STORING
    assert offsets.commits == []  # the CK is being written, not stored
    assert buf.scan(T0 + 10_050) == []  # not written twice
    buf.ack(c.merge_key, 2)  # acknowledged while the CK is written
    buf.ck_stored(entry, True)
    assert offsets.commits == []  # committed by the next round, not by the answer
    writes = buf.scan(T0 + 10_100)
    assert offsets.commits == [("T", 0, 3)]  # the CK is stored: the offset may pass
    assert writes == [AckWrite(entry, 0b110, (1, 2))]
    assert buf.scan(T0 + 10_150) == []  # the ACK record is being written
    buf.acks_stored(entry, 0b110, True)
    assert buf.scan(T0 + 10_200) == []
    assert buf.cks == {}  # stored with its ACKs: left the buffer
    assert not buf.ack(c.merge_key, 0)  # the last one goes the usual way, after the CK


def test_a_ck_near_its_revive_time_is_written_before_it_is_due() -> None:
    buf, _ = make(stay_ms=10_000, stay_timeout_ms=3_000)
    c = ck(0, 1, invisible=5_000)
    assert buf.add_ck(c, 0, 1, T0)
    assert buf.scan(T0 + 1_999) == []
    writes = buf.scan(T0 + 2_001)  # revive time T0+5s is within 3 s
    assert [type(w) for w in writes] == [CkWrite]


def test_a_refused_write_is_written_again_by_the_next_round() -> None:
    buf, offsets = make(stay_ms=1_000)
    c = ck(0, 2)
    buf.add_ck(c, 0, 2, T0)
    buf.ack(c.merge_key, 0)
    (w,) = buf.scan(T0 + 1_001)
    assert isinstance(w, CkWrite)
    buf.ck_stored(w.entry, False)  # e.g. FLUSH_SLAVE_TIMEOUT: a failover could cut it
    assert w.entry.ck_state == NOT_STORED
    (w2,) = buf.scan(T0 + 1_002)
    assert isinstance(w2, CkWrite) and w2.entry is w.entry
    assert offsets.commits == []
    buf.ck_stored(w.entry, True)
    (a,) = buf.scan(T0 + 1_003)
    assert isinstance(a, AckWrite) and a.offsets == (0,)
    buf.acks_stored(a.entry, a.bits, False)
    (a2,) = buf.scan(T0 + 1_004)
    assert a2 == a
    assert w.entry.ck_state == STORED


def test_a_queues_offset_moves_only_past_done_entries_in_pop_order() -> None:
    buf, offsets = make(stay_ms=10_000)
    first, second = ck(0, 2), ck(2, 2, pop_time=T0 + 1)
    buf.add_ck(first, 0, 2, T0)
    buf.add_ck(second, 1, 4, T0 + 1)
    assert buf.latest("T", "G", 0) == 4
    buf.ack(second.merge_key, 2)
    buf.ack(second.merge_key, 3)
    buf.scan(T0 + 10)
    assert offsets.commits == []  # the second is done, the first is not: nothing passes it
    buf.ack(first.merge_key, 0)
    buf.ack(first.merge_key, 1)
    buf.scan(T0 + 20)
    assert offsets.commits == [("T", 0, 4)]  # both at once, to the last


def test_a_pops_own_offset_move_waits_behind_the_pending_entries() -> None:
    buf, offsets = make()
    assert not buf.defer_offset("T", "G", 0, 5)  # nothing pending: the caller commits
    c = ck(0, 1)
    buf.add_ck(c, 0, 1, T0)
    assert buf.defer_offset("T", "G", 0, 7)  # e.g. messages skipped past the buffered pop
    assert buf.latest("T", "G", 0) == 7
    buf.scan(T0 + 1)
    assert offsets.commits == []
    buf.ack(c.merge_key, 0)
    buf.scan(T0 + 2)
    assert offsets.commits == [("T", 0, 7)]


def test_an_offset_someone_else_moved_wins_over_the_pending_ones() -> None:
    buf, offsets = make()
    c = ck(0, 2)
    buf.add_ck(c, 0, 2, T0)
    offsets.commit("G", "T", 0, 100)  # an admin reset
    buf.ack(c.merge_key, 0)
    buf.ack(c.merge_key, 1)
    buf.scan(T0 + 1)
    assert offsets.query("G", "T", 0) == 100
    assert offsets.commits == [("T", 0, 100)]
    assert buf.latest("T", "G", 0) is None  # the next pop reads from the reset offset


def test_the_bounds_and_the_revive_margin_decline_a_ck() -> None:
    buf, _ = make(max_cks=2, max_per_queue=1, stay_timeout_ms=3_000)
    assert not buf.takes(4_499)  # due within the stay timeout and upstream's 1.5 s margin
    assert buf.takes(4_500)
    assert not buf.add_ck(ck(0, 1, invisible=4_000), 0, 1, T0)
    assert buf.add_ck(ck(0, 1), 0, 1, T0)
    assert buf.queue_full("T", "G", 0)
    assert not buf.add_ck(ck(1, 1, pop_time=T0 + 1), 0, 2, T0 + 1)  # the queue's bound
    assert buf.add_ck(ck(0, 1, queue=1), 0, 1, T0)
    assert not buf.takes(INVISIBLE)  # the buffer's bound
    assert not buf.add_ck(ck(0, 1, queue=2), 0, 1, T0)
    buf.enabled = False
    assert not make()[0].add_ck(ck(0, 1, pop_time=T0), 0, 1, T0 + INVISIBLE)  # past due
    assert not buf.takes(INVISIBLE)


def test_a_merge_key_it_holds_is_declined() -> None:
    buf, _ = make()
    assert buf.add_ck(ck(0, 1), 0, 1, T0)
    assert not buf.add_ck(ck(0, 1), 0, 1, T0)


def test_a_withdrawn_pop_leaves_nothing_held_back() -> None:
    buf, offsets = make()
    first, second = ck(0, 1), ck(1, 1, pop_time=T0 + 1)
    buf.add_ck(first, 0, 1, T0)
    buf.add_ck(second, 0, 2, T0 + 1)
    buf.withdraw(second)
    assert buf.latest("T", "G", 0) == 1
    assert second.merge_key not in buf.cks
    buf.withdraw(first)
    assert buf.latest("T", "G", 0) is None and buf.queues == {} and buf.cks == {}
    assert offsets.commits == []


def test_clear_commits_nothing_pending() -> None:
    buf, offsets = make()
    c = ck(0, 1)
    buf.add_ck(c, 0, 1, T0)
    buf.ack(c.merge_key, 0)
    buf.clear()
    assert buf.scan(T0 + 1) == []
    assert offsets.commits == [] and buf.latest("T", "G", 0) is None
