"""The revive decision (upstream PopReviveService's matching), pure: CK vs ACK, what is due.

One `ReviveCore` per revive queue. Its shell (pop_revive_service.py) reads the queue's records in
order and feeds them: `on_ck` for a checkpoint (with the record's offset in the revive queue),
`on_ack` for an ACK or a batch ACK. ACKs set bits in their CK's bit set, matched by the merge
key (topic, group, queue, start offset, pop time, brokerName); a CK with every bit set is done
and forgotten. An ACK whose CK is not pending (already revived or done, or before the revive
offset after a restart) changes nothing.

`due(now_ms)` lists the CKs whose invisible time is over (``now_ms >= popTime +
invisibleTime``) with the offsets still unacknowledged; the shell re-puts those messages and
calls `revived`. Time is an argument: the core never reads a clock.

Records this broker stored itself need not be read back: `written` keeps each such record with
its revive-queue offset, and `catch_up` feeds those that continue the read position exactly as
a read would have (same record, same order) and moves the position past them; it stops at the
first offset it was not given (a record another path wrote: an escaped CK, a record stored
before this core existed), which the shell then reads from the store as before. A record
given behind the read position (already read) is dropped, and at most `MAX_AHEAD` are kept
(past that, the store is read).

`revive_offset` is where a restart must read the queue from again: the revive-queue offset of
the oldest pending CK, or the read position when nothing is pending. Persisting it (as the
revive group's consumer offset) makes a restart see every CK still in flight and every ACK
written after it, so an acknowledged message is never revived and an unacknowledged one is.
"""

from __future__ import annotations

from collections import Counter, deque

import attrs

from rocketrio.protocol.pop_checkpoint import AckMsg, MergeKey, PopCheckPoint

MAX_AHEAD = 65_536  # written records kept for `catch_up`; past that they are read back


@attrs.define
class _Pending:
    ck: PopCheckPoint
    offset: int  # of the CK record in the revive queue
    acked: int  # bit i set: message i acknowledged
    bits: dict[int, int] | None = None  # ck.ack_bits(), made at the CK's first ACK

    @property
    def all_acked(self) -> bool:
        return self.acked == (1 << self.ck.num) - 1


@attrs.frozen
class Revival:
    """A CK whose invisible time is over: ``offsets`` (queue offsets) were never acked."""

    key: MergeKey
    ck: PopCheckPoint
    ck_offset: int
    offsets: tuple[int, ...]


@attrs.frozen
class AckMatch:
    """What an ACK did: ``matched`` bits newly set; ``done`` when its CK is fully acked."""

    matched: int
    done: bool


class ReviveCore:
    """The pending CKs of one revive queue and the position read so far."""

    def __init__(self, queue_id: int, read_offset: int) -> None:
        self.queue_id = queue_id
        self.read_offset = read_offset
        self._pending: dict[MergeKey, _Pending] = {}
        self.unmatched_acks = 0
        self._ahead: deque[tuple[int, PopCheckPoint | AckMsg]] = deque()
        self.fed_written = 0  # records fed by `catch_up`, not read back

    # -- records this broker stored
    def written(self, offset: int, record: PopCheckPoint | AckMsg) -> None:
        """``record`` is stored at ``offset`` of this revive queue (module docstring)."""
        if offset >= self.read_offset and len(self._ahead) < MAX_AHEAD:
            self._ahead.append((offset, record))

    def catch_up(self) -> None:
        """Feed the written records that continue the read position, up to the first offset
        not given (module docstring)."""
        ahead = self._ahead
        while ahead:
            offset, record = ahead[0]
            if offset > self.read_offset:
                return  # a gap: read from the store
            ahead.popleft()
            if offset < self.read_offset:
                continue  # read back already
            if isinstance(record, PopCheckPoint):
                self.on_ck(record, offset)
            else:
                self.on_ack(record)
            self.read_offset = offset + 1
            self.fed_written += 1

    # -- feeding
    def on_ck(self, ck: PopCheckPoint, offset: int) -> None:
        if ck.num <= 0:
            return
        key = ck.merge_key
        if key not in self._pending:  # a CK read twice (re-scan) keeps its bits
            self._pending[key] = _Pending(ck, offset, ck.bit_map & ((1 << ck.num) - 1))

    def on_ack(self, ack: AckMsg) -> AckMatch:
        pending = self._pending.get(ack.merge_key)
        if pending is None:
            self.unmatched_acks += 1
            return AckMatch(0, False)
        newly = 0
        bits = pending.bits
        if bits is None:
            bits = pending.bits = pending.ck.ack_bits()
        acked = pending.acked
        for i in map(bits.get, ack.ack_offsets):  # ck.index_of_ack(offset), None: -1
            if i is not None and not acked >> i & 1:
                acked |= 1 << i
                newly += 1
        pending.acked = acked
        if pending.all_acked:
            del self._pending[ack.merge_key]
            return AckMatch(newly, True)
        return AckMatch(newly, False)

    def advance_read(self, next_offset: int) -> None:
        self.read_offset = max(self.read_offset, next_offset)

    # -- deciding
    def due(self, now_ms: int) -> list[Revival]:
        """CKs whose invisible time is over, oldest revive time first."""
        out = []
        for key, p in self._pending.items():
            if now_ms >= p.ck.revive_time:
                offsets = tuple(
                    p.ck.ack_offset_by_index(i) for i in range(p.ck.num) if not p.acked >> i & 1
                )
                out.append(Revival(key, p.ck, p.offset, offsets))
        out.sort(key=lambda r: (r.ck.revive_time, r.ck_offset))
        return out

    def revived(self, key: MergeKey) -> None:
        """The shell re-put the CK's unacknowledged messages: forget it."""
        self._pending.pop(key, None)

    def next_due_ms(self) -> int | None:
        if not self._pending:
            return None
        return min(p.ck.revive_time for p in self._pending.values())

    def revive_offset(self) -> int:
        if not self._pending:
            return self.read_offset
        return min(p.offset for p in self._pending.values())

    # -- views
    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def inflight(self) -> Counter[tuple[str, str, int]]:
        """Unacknowledged popped messages per (group, topic, queueId)."""
        out: Counter[tuple[str, str, int]] = Counter()
        for p in self._pending.values():
            unacked = p.ck.num - p.acked.bit_count()
            if unacked:
                out[(p.ck.cid, p.ck.topic, p.ck.queue_id)] += unacked
        return out
