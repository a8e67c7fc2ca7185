"""confirmOffset and the records waiting for it: what a MessageStore may dispatch (H4).

RIP-44: ConsumeQueues (and the key index) are dispatched only up to confirmOffset, so no reader
ever sees a record that a failover could later truncate. `DispatchGate` owns:

- ``gated``: False for a broker without replication (dispatch at put time, as before); True for
  a replicated broker from boot (until its role is known, nothing past the stored confirmOffset
  becomes visible; upstream fenced the store the same way, #6609);
- ``after_flush``: a broker without replication in a set with slaves (classic master/slave) and
  SYNC_FLUSH: a put is dispatched once the CommitLog's fsync passes it, not at put time. A
  reader never sees a record a power cut can take back: the restarted master, which classic
  mode does not replace, would give its queue offset to another message (sim seed 303252);
- ``confirm``: the offset dispatch may reach, persisted in ``confirm.checkpoint`` (offset + CRC,
  see `OffsetCheckpoint`). Written behind on every store flush — a stale, LOWER value after a
  crash is safe (those records are dispatched again once the role is known), and every change
  that LOWERS it (a slave's truncation) is written and fsynced first;
- ``held``: the master's put path already knows every record's queue, queue offset, tags and
  keys; rather than re-reading them once confirmed, each stored put leaves its dispatch data
  here (`Held`, in CommitLog order, contiguous) until confirm passes its end. Records without
  held data (replicated to a slave, recovered after a restart) are dispatched by scanning the
  CommitLog instead; any truncation or role change simply drops the held data;
- ``replica``: the same for a slave: what `CommitLog.append_raw` parsed of every record while
  it checked the master's bytes (`RecordFields`: offset, size, topic, queue, ...), one list per
  append, in CommitLog order, contiguous, so confirmOffset may release part of an append (found
  by bisection, not record by record: a slave's confirmOffset is usually an append or more
  behind its log end, so nearly every release is partial). Bounded (`REPLICA_HELD_MAX`
  records): past it the data is dropped and dispatch scans the CommitLog until it has caught
  up with the appends again.

The store calls `MessageStore.advance_confirm`, which releases what this gate allows.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable

import attrs

from rocketrio.storage.commitlog import OffsetCheckpoint, RecordFields
from rocketrio.storage.fs import OS_FS, FileSystem

CONFIRM_CHECKPOINT = "confirm.checkpoint"
REPLICA_HELD_MAX = 65536


def _record_end(r: RecordFields) -> int:
    return r[0] + r[1]


@attrs.frozen(slots=True)
class Held:
    """Dispatch data of one stored put: [start, end) of the CommitLog, and the call that
    dispatches it (ConsumeQueue entries and index records)."""

    start: int
    end: int
    dispatch: Callable[[], None]


class DispatchGate:
    def __init__(self, path: str, *, fs: FileSystem = OS_FS) -> None:
        self.gated = False
        self.after_flush = False
        self.confirm = 0
        self.held: deque[Held] = deque()
        self.replica: deque[list[RecordFields]] = deque()  # one non-empty list per append
        self.replica_held = 0  # records in `replica`
        self.replica_end = -1  # where the appends behind `replica` end
        self._ckpt = OffsetCheckpoint(path, fs=fs)
        self._stored = -1

    @property
    def holds(self) -> bool:
        """A put's dispatch waits (for confirmOffset or the fsync), not done at put time."""
        return self.gated or self.after_flush

    def limit(self, max_offset: int, flushed_offset: int) -> int:
        """How far dispatch may go in a log ending at ``max_offset``, fsynced to
        ``flushed_offset``."""
        if self.gated:
            return self.confirm
        return flushed_offset if self.after_flush else max_offset

    def load(self) -> int | None:
        """The persisted confirmOffset (None: never written or damaged)."""
        return self._ckpt.load()

    def persist(self, *, sync: bool = False) -> None:
        """Write confirm (behind; ``sync`` for a lowered value)."""
        if self.confirm != self._stored or sync:
            self._ckpt.store(self.confirm, sync=sync)
            self._stored = self.confirm

    def lower(self, offset: int) -> None:
        """confirm <= offset, durable before the caller cuts data (a truncation)."""
        if self.confirm > offset or self._stored > offset:
            self.confirm = min(self.confirm, offset)
            self.persist(sync=True)
        self.drop_held()

    def hold(self, item: Held) -> None:
        self.held.append(item)

    def hold_replicated(
        self, start: int, end: int, records: list[RecordFields], dispatched: int
    ) -> None:
        """A slave appended [start, end) holding ``records``: keep them while they continue
        what is held (or, with nothing held, what is dispatched) and the bound allows."""
        replica = self.replica
        follows = start == self.replica_end if replica else start == dispatched
        if not follows or self.replica_held + len(records) > REPLICA_HELD_MAX:
            self.drop_replica()
            return
        if records:
            replica.append(records)
            self.replica_held += len(records)
        self.replica_end = end

    def release_replica(self, limit: int) -> list[RecordFields]:
        """Take the held records (from the first) that end at or below ``limit``."""
        replica, out = self.replica, []
        while replica:
            records = replica[0]
            last = records[-1]
            if last[0] + last[1] <= limit:
                out += replica.popleft()
                continue
            n = bisect_right(records, limit, key=_record_end)
            if n:
                out += records[:n]
                replica[0] = records[n:]
            break
        self.replica_held -= len(out)
        return out

    def drop_replica(self) -> None:
        self.replica.clear()
        self.replica_held = 0

    def drop_held(self) -> None:
        """Forget all held dispatch data (truncation, role change): dispatch scans instead."""
        self.held.clear()
        self.drop_replica()

    def close(self) -> None:
        self._ckpt.close()
