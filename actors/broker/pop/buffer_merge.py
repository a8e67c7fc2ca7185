"""The POP buffer (upstream PopBufferMergeService, ``enablePopBufferMerge``): checkpoints kept in
memory while their messages are acknowledged, and the group offsets they hold back. Pure: no
store, no clock, no task; its shell (buffer_service.py) writes what `PopBuffer.scan` asks for.

With the buffer on (off by default, as upstream), a pop whose CK the buffer takes hands its
messages out at once and writes no CK; an ACK of a buffered CK sets its bit here and is answered
at once, writing nothing. What it promises instead of write-before-answer:

- **A CK all of whose messages are acknowledged is dropped**: neither it nor its ACKs are ever
  written (the common case, and the whole point: one POP plus its ACKs cost no store write).
- **A CK not all acknowledged in time is written** as the pop would have written it, once it
  has stayed ``popCkStayBufferTime`` ms or comes within ``popCkStayBufferTimeOut`` ms of its
  revive time; then the ACKs it holds go as one ``bAck`` record. It leaves the buffer once the
  CK is stored where no failover cuts it and its ACKs are stored; later ACKs go the usual way.
- **A group's offset never passes a message whose CK is only here.** A queue's offset moves
  past a pop's messages only when that pop's entry is done (every message acknowledged) or its
  CK stored (`PutStatus.kept_by_failover`), and the entries of one queue commit in the order
  their pops read it (`OffsetQueue`): until then the next pop reads on from the buffer's latest
  offset (`latest`), while the committed offset stays before them. So a crash, a kill -9 or a
  failover that takes the buffer leaves those messages to be popped again: one more delivery,
  never a loss (at-least-once). An ACK answered from memory and lost that way means one more
  delivery of its message too; that is the price of the buffer, and why it is off by default.
- **An offset moved by anyone else wins.** Before a commit the buffer checks that the queue's
  committed offset is still the one it last saw (an admin reset, a group or topic removed); if
  not, that queue's pending offsets are dropped and the CKs stay only for their ACKs and
  writes.

A pop's own offset moves (an offset the store no longer has, messages skipped) go through
`defer_offset`: behind the queue's pending entries when there are any, else straight to the
table. Bounded: at most ``popCkMaxBufferSize`` CKs, ``popCkOffsetMaxQueueSize`` per queue; a CK
the buffer declines (full, too close to its revive time, a merge key it already holds) is
written by the pop as without the buffer, its offset queued behind the pending ones.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Iterator
from typing import Protocol

import attrs

from rocketrio.protocol.pop_checkpoint import MergeKey, PopCheckPoint

LockKey = tuple[str, str, int]  # (topic, group, queue id): one queue's offset of one group
NOT_STORED, STORING, STORED = 0, 1, 2  # a buffered CK's record


class Offsets(Protocol):
    """The group offsets the buffer commits (tables.OffsetTable)."""

    def query(self, group: str, topic: str, queue_id: int) -> int: ...

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None: ...


@attrs.frozen
class BufferConfig:
    """Upstream's BrokerConfig keys and defaults (ms, counts)."""

    stay_ms: int = 10_000  # popCkStayBufferTime
    stay_timeout_ms: int = 3_000  # popCkStayBufferTimeOut
    max_cks: int = 200_000  # popCkMaxBufferSize
    max_per_queue: int = 20_000  # popCkOffsetMaxQueueSize


@attrs.define(eq=False, slots=True)
class Entry:
    """One pop's read of one queue: its CK (None for an offset move alone), the offset after
    its messages, and what of it is acknowledged and written."""

    lock_key: LockKey
    next_offset: int
    ck: PopCheckPoint | None = None
    revive_qid: int = 0
    full: int = 0  # a bit per message of the CK
    bits: int = 0  # acknowledged
    stored_bits: int = 0  # acknowledged, their ACK record stored
    writing_bits: int = 0  # acknowledged, their ACK record being written
    ck_state: int = NOT_STORED
    due: bool = False  # stayed long enough, or near its revive time: the CK must be written

    @property
    def committable(self) -> bool:
        """The offset may pass its messages: no CK, all acknowledged, or the CK stored."""
        return self.ck is None or self.bits == self.full or self.ck_state == STORED


@attrs.define(eq=False, slots=True)
class OffsetQueue:
    """One queue's pending entries in pop order, and the committed offset last seen."""

    expected: int
    entries: deque[Entry] = attrs.field(factory=deque)


@attrs.frozen
class CkWrite:
    """Write this entry's CK (its record built by the shell), then `PopBuffer.ck_stored`."""

    entry: Entry


@attrs.frozen
class AckWrite:
    """Write one ``bAck`` record of ``offsets`` of this entry's CK, then `acks_stored`."""

    entry: Entry
    bits: int
    offsets: tuple[int, ...]


Write = CkWrite | AckWrite


class PopBuffer:
    """The buffered CKs by merge key and the pending offsets by queue (module docstring)."""

    def __init__(self, config: BufferConfig, offsets: Offsets) -> None:
        self.config = config
        self.offsets = offsets
        self.cks: dict[MergeKey, Entry] = {}
        self.queues: dict[LockKey, OffsetQueue] = {}
        # when each kept CK falls due (ms, a tie-break, its key), and the CKs whose state
        # changed since the last scan: a scan looks at those only, not at every CK
        self._due: list[tuple[int, int, MergeKey]] = []
        self._seq = itertools.count()
        self._changed: dict[MergeKey, None] = {}
        self.dropped = 0  # CKs dropped all acknowledged, never written
        # set by the shell: True on a master serving (not a slave, not acting for one); pops
        # use the buffer only then
        self.enabled = False

    def latest(self, topic: str, group: str, queue_id: int) -> int | None:
        """Where the next pop of the queue reads: after its last pending entry (None: none)."""
        q = self.queues.get((topic, group, queue_id))
        return q.entries[-1].next_offset if q is not None and q.entries else None

    def inflight(self, group: str) -> dict[tuple[str, int], int]:
        """Messages of ``group`` popped and not acknowledged per (topic, queue id) whose CK is
        only here (not yet stored, so the revive service has not read it)."""
        out: dict[tuple[str, int], int] = {}
        for entry in self.cks.values():
            ck = entry.ck
            if ck is None or ck.cid != group or entry.ck_state == STORED:
                continue
            left = (entry.full & ~entry.bits).bit_count()
            if left:
                key = (ck.topic, ck.queue_id)
                out[key] = out.get(key, 0) + left
        return out

    def takes(self, invisible_ms: int) -> bool:
        """Whether a pop with this invisible time may use the buffer now: it is enabled, not
        full, and such a CK would not be due within the stay timeout (and a margin, as
        upstream's 1.5 s) of its pop."""
        c = self.config
        return (
            self.enabled and invisible_ms >= c.stay_timeout_ms + 1500 and len(self.cks) < c.max_cks
        )

    def queue_full(self, topic: str, group: str, queue_id: int) -> bool:
        """The queue's pending entries are at their bound (a pop skips it, as a queue being
        popped: its offset cannot wait behind more)."""
        q = self.queues.get((topic, group, queue_id))
        return q is not None and len(q.entries) >= self.config.max_per_queue

    def add_ck(self, ck: PopCheckPoint, revive_qid: int, next_offset: int, now_ms: int) -> bool:
        """Keep ``ck`` here instead of writing it; False (nothing kept) when the buffer is full,
        the queue's pending entries are at their bound, the CK is due within the stay timeout
        (and a margin, as upstream's 1.5 s) or the buffer holds its merge key."""
        c = self.config
        if ck.revive_time - now_ms < c.stay_timeout_ms + 1500 or len(self.cks) >= c.max_cks:
            return False
        key = ck.merge_key
        lock_key = (ck.topic, ck.cid, ck.queue_id)
        q = self.queues.get(lock_key)
        if key in self.cks or (q is not None and len(q.entries) >= c.max_per_queue):
            return False
        entry = Entry(lock_key, next_offset, ck, revive_qid, (1 << ck.num) - 1)
        self._queue(lock_key, q).entries.append(entry)
        self.cks[key] = entry
        # due once it stayed stay_ms, or stay_timeout_ms before its revive time
        due = min(ck.pop_time + c.stay_ms, ck.revive_time - c.stay_timeout_ms)
        heapq.heappush(self._due, (due, next(self._seq), key))
        return True

    def withdraw(self, ck: PopCheckPoint) -> None:
        """Take back the CK `add_ck` just kept (the pop that read it hands nothing out): it
        and its offset, the last of its queue's, are forgotten."""
        entry = self.cks.pop(ck.merge_key)
        q = self.queues[entry.lock_key]
        assert q.entries[-1] is entry
        q.entries.pop()
        if not q.entries:
            del self.queues[entry.lock_key]

    def defer_offset(self, topic: str, group: str, queue_id: int, offset: int) -> bool:
        """A pop's own offset move: True when queued behind the queue's pending entries (the
        scan commits it in order), False when there are none (the caller commits it)."""
        lock_key = (topic, group, queue_id)
        q = self.queues.get(lock_key)
        if q is None or not q.entries:
            return False
        q.entries.append(Entry(lock_key, offset))
        return True

    def _queue(self, lock_key: LockKey, q: OffsetQueue | None) -> OffsetQueue:
        if q is None or not q.entries:
            topic, group, queue_id = lock_key
            q = OffsetQueue(self.offsets.query(group, topic, queue_id))
            self.queues[lock_key] = q
        return q

    def holds(self, key: MergeKey, offset: int) -> bool:
        """Whether `ack` of this would be applied here (nothing is set)."""
        entry = self.cks.get(key)
        return entry is not None and entry.ck is not None and entry.ck.index_of_ack(offset) >= 0

    def ack(self, key: MergeKey, offset: int) -> bool:
        """The ACK of ``offset`` of the CK ``key`` names, applied here: True (answer it, write
        nothing); False when the buffer does not hold that CK or that offset (the ACK goes the
        usual way)."""
        entry = self.cks.get(key)
        if entry is None:
            return False
        assert entry.ck is not None
        i = entry.ck.index_of_ack(offset)
        if i < 0:
            return False
        entry.bits |= 1 << i
        if entry.bits == entry.full or entry.ck_state == STORED:
            self._changed[key] = None  # all acknowledged, or an ACK record to write
        return True

    def scan(self, now_ms: int) -> list[Write]:
        """One round: drop the CKs all acknowledged and not written, commit every queue's
        committable head entries in order, and return the writes due: the CKs that stayed too
        long or near their revive time, and the ACKs of stored CKs not written yet. A CK stored
        with all its ACKs written leaves the buffer. Looks only at the CKs fallen due since the
        last round and those whose state changed (`_changed`), not at every CK."""
        due, changed, cks = self._due, self._changed, self.cks
        while due and due[0][0] < now_ms:
            key = heapq.heappop(due)[2]
            entry = cks.get(key)
            if entry is not None:
                entry.due = True
                changed[key] = None
        writes: list[Write] = []
        for key in changed:
            e = cks.get(key)
            if e is None:
                continue  # gone (withdrawn, dropped, cleared)
            ck = e.ck
            assert ck is not None
            if e.ck_state == NOT_STORED:
                if e.bits == e.full:
                    del cks[key]
                    self.dropped += 1
                elif e.due:
                    e.ck_state = STORING
                    writes.append(CkWrite(e))
            elif e.ck_state == STORED:
                todo = e.bits & ~e.stored_bits & ~e.writing_bits
                if todo:
                    e.writing_bits |= todo
                    offsets = tuple(ck.ack_offset_by_index(i) for i in _bits(todo))
                    writes.append(AckWrite(e, todo, offsets))
                elif e.stored_bits == e.bits and not e.writing_bits:
                    del cks[key]
        changed.clear()
        self._commit_heads()
        return writes

    def flush_all(self) -> None:
        """Shutdown: every CK not all acknowledged falls due now (the next scans write them
        and their ACKs), so the offsets pass them and a restart re-delivers nothing."""
        for key, entry in self.cks.items():
            entry.due = True
            self._changed[key] = None

    def settled(self) -> bool:
        """Nothing left to write or being written (after `flush_all`: all stored)."""
        return not self.cks

    def _commit_heads(self) -> None:
        offsets = self.offsets
        empty: list[LockKey] = []
        for lock_key, q in self.queues.items():
            entries = q.entries
            topic, group, queue_id = lock_key
            last = None
            while entries and entries[0].committable:
                last = entries.popleft().next_offset
            if last is not None:
                if offsets.query(group, topic, queue_id) != q.expected:
                    entries.clear()  # someone else moved it (module docstring)
                else:
                    offsets.commit(group, topic, queue_id, last)
                    q.expected = last
            if not entries:
                empty.append(lock_key)
        for lock_key in empty:
            del self.queues[lock_key]

    def ck_stored(self, entry: Entry, ok: bool) -> None:
        """The store answered an entry's CK: stored where no failover cuts it, or not (then the
        next scan writes it again)."""
        if entry.ck_state == STORING:
            entry.ck_state = STORED if ok else NOT_STORED
            self._touch(entry)

    def acks_stored(self, entry: Entry, bits: int, ok: bool) -> None:
        """The store answered an entry's ACK record of ``bits``."""
        entry.writing_bits &= ~bits
        if ok:
            entry.stored_bits |= bits
        self._touch(entry)

    def _touch(self, entry: Entry) -> None:
        if entry.ck is not None:
            self._changed[entry.ck.merge_key] = None

    def clear(self) -> None:
        """Forget everything (no longer the master): no offset is committed for what was
        pending, so the next master pops those messages again."""
        self.cks.clear()
        self.queues.clear()
        self._due.clear()
        self._changed.clear()


def _bits(mask: int) -> Iterator[int]:
    i = 0
    while mask:
        if mask & 1:
            yield i
        mask >>= 1
        i += 1
