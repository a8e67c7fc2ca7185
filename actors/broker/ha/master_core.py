"""One slave connection on the master (upstream AutoSwitchHAConnection), as a pure state machine.

The shell (master_service.py) owns the socket, decodes `SlaveHandshake` / `SlaveAck` with
`protocol.ha.SlaveStreamDecoder`, feeds them here, and asks `plan_next` what to send; it reads
the bytes through the store view and writes header + body. Time comes in as milliseconds.

States: HANDSHAKE (waiting for the slave's handshake, then for its first ack, which says where
its log ends after truncation) -> TRANSFER. Only the slave's messages move the state; a second
handshake on the same connection restarts it (the slave re-checks its log).

What gets sent (`plan_transfer`, fixing upstream #9689): each batch's epoch is looked up in the
CURRENT epoch list (the entry containing the batch's first offset) and the batch is cut at that
entry's end, so an epoch appended while the connection lives is announced to the slave; a body
never crosses a CommitLog segment; a heartbeat (empty body) carries the epoch of the next offset
(so even an epoch with no data yet reaches the slave) once nothing was sent for
haSendHeartbeatInterval, or sooner (`CONFIRM_PUSH_MS` of quiet) when confirmOffset moved since
the last header: a slave's confirmOffset, and so what its consumers can read, trails the
master's by a fraction of a second, not a heartbeat interval.

Where the slave starts: where its first ack says its log ends, or the master's oldest offset if
that is later (the slave sees a first offset above its end and re-syncs from there: how it is
"told clearly" that the master no longer has its data), or, for an empty slave with
syncFromLastFile, the start of the master's last segment.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Sequence

import attrs

from rocketrio.protocol.ha import SlaveAck, SlaveEvent, SlaveHandshake
from rocketrio.storage.epoch_file import EpochRecord

CONFIRM_PUSH_MS = 200


class Phase(enum.Enum):
    WAIT_HANDSHAKE = "WAIT_HANDSHAKE"
    WAIT_FIRST_ACK = "WAIT_FIRST_ACK"
    TRANSFER = "TRANSFER"


@attrs.frozen(slots=True)
class TransferBatch:
    """Send ``size`` bytes from ``offset`` (0: a heartbeat) labelled with this epoch."""

    offset: int
    size: int
    epoch: int
    epoch_start_offset: int


class NoEpochForOffset(Exception):
    """The master's epoch list covers no entry for an offset it is asked to send."""


def containing_epoch(epochs: Sequence[EpochRecord], offset: int) -> tuple[EpochRecord, int | None]:
    """The entry whose range holds ``offset`` and that range's end (None: open, the last one).

    Entries may share a start (an epoch in which nothing was written); the last entry starting
    at or before the offset is the one holding it.
    """
    starts = [r.start_offset for r in epochs]
    i = bisect.bisect_right(starts, offset) - 1
    if i < 0:
        raise NoEpochForOffset(
            f"offset {offset} lies before the first epoch entry "
            f"({epochs[0].epoch}-{epochs[0].start_offset})"
            if epochs
            else f"offset {offset}: the epoch file is empty"
        )
    end = epochs[i + 1].start_offset if i + 1 < len(epochs) else None
    return epochs[i], end


def plan_transfer(
    next_offset: int,
    master_max: int,
    epochs: Sequence[EpochRecord],
    segment_size: int,
    batch_size: int,
) -> TransferBatch:
    """The next batch from ``next_offset`` (size 0 when there is nothing to send)."""
    entry, end = containing_epoch(epochs, next_offset)
    size = max(0, master_max - next_offset)
    size = min(size, batch_size, segment_size - next_offset % segment_size)
    if end is not None:  # end > next_offset: the entry holding an offset ends after it
        size = min(size, end - next_offset)
    return TransferBatch(next_offset, size, entry.epoch, entry.start_offset)


def start_offset_for(
    requested: int,
    *,
    master_min: int,
    master_max: int,
    segment_size: int,
    sync_from_last_file: bool,
) -> int:
    """Where to start sending to a slave whose log ends at ``requested`` (see module doc)."""
    if requested == 0 and sync_from_last_file:
        return max(master_min, master_max - master_max % segment_size)
    return max(requested, master_min)


class MasterConnectionCore:
    """One slave as the master sees it; see module docstring."""

    def __init__(
        self,
        *,
        segment_size: int,
        batch_size: int,
        heartbeat_interval_ms: int,
        housekeeping_interval_ms: int,
        now_ms: int,
    ) -> None:
        self.segment_size = segment_size
        self.batch_size = batch_size
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.housekeeping_interval_ms = housekeeping_interval_ms
        self.phase = Phase.WAIT_HANDSHAKE
        self.slave_id: int | None = None
        self.async_learner = False
        self.sync_from_last_file = False
        self.next_offset: int | None = None
        self.ack_offset = -1
        self.last_read_ms = now_ms
        self.last_write_ms = now_ms
        self.confirm_sent = -1
        self._confirm_pending = False
        self._last_check_ms = now_ms

    # ------------------------------------------------------------------ from the slave

    def on_event(self, ev: SlaveEvent, now_ms: int) -> SlaveEvent | None:
        """Feed one decoded slave message. Returns it when the service must act on it:
        a `SlaveHandshake` (reply with the handshake) or a `SlaveAck` (feed the SyncStateSet
        core); None when it only updated state."""
        self.last_read_ms = now_ms
        match ev:
            case SlaveHandshake():
                if self.slave_id is not None and ev.broker_id != self.slave_id:
                    raise ValueError(
                        f"slave {self.slave_id} re-handshook as brokerId {ev.broker_id} on the "
                        "same connection"
                    )
                self.slave_id = ev.broker_id
                self.async_learner = ev.async_learner
                self.sync_from_last_file = ev.sync_from_last_file
                self.phase = Phase.WAIT_FIRST_ACK
                self.next_offset = None
                self.ack_offset = -1
                return ev
            case SlaveAck():
                if self.phase is Phase.WAIT_HANDSHAKE:
                    raise ValueError("slave acked before its handshake")
                self.ack_offset = ev.max_offset
                return ev

    def begin_transfer(self, *, master_min: int, master_max: int) -> int:
        """After the first ack: fix where sending starts; returns that offset."""
        if self.phase is not Phase.WAIT_FIRST_ACK:
            raise ValueError(f"begin_transfer in phase {self.phase.value}")
        if self.ack_offset > master_max:
            raise ValueError(
                f"slave {self.slave_id} says its log ends at {self.ack_offset}, beyond the "
                f"master's end {master_max}: it did not truncate"
            )
        self.next_offset = start_offset_for(
            self.ack_offset,
            master_min=master_min,
            master_max=master_max,
            segment_size=self.segment_size,
            sync_from_last_file=self.sync_from_last_file,
        )
        self.phase = Phase.TRANSFER
        return self.next_offset

    # ------------------------------------------------------------------ to the slave

    def plan_next(
        self, master_max: int, epochs: Sequence[EpochRecord], now_ms: int, confirm: int = -1
    ) -> TransferBatch | None:
        """The next batch to send, a heartbeat when one is due, or None (wait for data)."""
        if self.phase is not Phase.TRANSFER or self.next_offset is None:
            return None
        batch = plan_transfer(
            self.next_offset, master_max, epochs, self.segment_size, self.batch_size
        )
        if batch.size:
            return batch
        quiet = now_ms - self.last_write_ms
        if quiet >= self.heartbeat_interval_ms:
            return batch
        # the slave has data whose confirmation it has not heard yet: push it, at most every
        # CONFIRM_PUSH_MS (re-checked on that timer while the confirmation lags)
        self._confirm_pending = self.confirm_sent < self.next_offset
        if confirm > self.confirm_sent and quiet >= CONFIRM_PUSH_MS:
            return batch
        self._last_check_ms = now_ms
        return None

    def plan_burst(
        self,
        master_max: int,
        epochs: Sequence[EpochRecord],
        now_ms: int,
        confirm: int,
        max_bytes: int,
    ) -> list[TransferBatch]:
        """Every batch that can go out back to back now (`plan_next`, then what follows it),
        up to ``max_bytes`` of bodies: the shell writes them with ONE socket write, so a
        slave reads, stores and acks a master's turn in one go instead of per
        haTransferBatchSize. Each batch still keeps the wire limits (haTransferBatchSize, one
        epoch, one segment). Empty: nothing to send (wait for data)."""
        first = self.plan_next(master_max, epochs, now_ms, confirm)
        if first is None:
            return []
        out = [first]
        total = first.size
        offset = first.offset + first.size
        while first.size and total < max_bytes and offset < master_max:
            nxt = plan_transfer(offset, master_max, epochs, self.segment_size, self.batch_size)
            if not nxt.size:
                break
            out.append(nxt)
            total += nxt.size
            offset += nxt.size
        return out

    def sent_burst(self, batches: Sequence[TransferBatch], now_ms: int, confirm: int) -> None:
        """The shell wrote every batch of a `plan_burst` (each header carrying ``confirm``)."""
        for batch in batches:
            self.sent(batch, now_ms, confirm)

    def sent(self, batch: TransferBatch, now_ms: int, confirm: int = -1) -> None:
        """The shell wrote ``batch`` (its header carrying ``confirm``) to the socket."""
        if self.next_offset != batch.offset:
            raise ValueError(f"sent a batch at {batch.offset}, expected {self.next_offset}")
        self.next_offset = batch.offset + batch.size
        self.last_write_ms = now_ms
        self.confirm_sent = max(self.confirm_sent, confirm)
        self._confirm_pending = False

    def handshake_sent(self, now_ms: int) -> None:
        self.last_write_ms = now_ms

    def expired(self, now_ms: int) -> bool:
        """Nothing read for haHousekeepingInterval: the slave is gone (close the socket)."""
        return now_ms - self.last_read_ms > self.housekeeping_interval_ms

    def next_timer_ms(self) -> int:
        """When `plan_next` may have a heartbeat or a confirmOffset push due, or `expired` may
        turn true. Heartbeats and pushes go out only in TRANSFER; before the slave's first ack
        only housekeeping can fire, and a heartbeat deadline already past would wake the writer
        again at once, for ever (a CPU spin; under a mock clock a livelock)."""
        housekeeping = self.last_read_ms + self.housekeeping_interval_ms + 1
        if self.phase is not Phase.TRANSFER or self.next_offset is None:
            return housekeeping
        due = self.last_write_ms + self.heartbeat_interval_ms
        if self._confirm_pending:
            due = min(due, max(self.last_write_ms, self._last_check_ms) + CONFIRM_PUSH_MS)
        return min(due, housekeeping)
