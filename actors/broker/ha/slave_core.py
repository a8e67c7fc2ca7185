"""The slave's side of the HA channel (upstream AutoSwitchHAClient), as a pure state machine.

The shell (slave_client.py) connects, feeds decoded master messages and store results here, and
carries out the returned actions IN ORDER, awaiting each (a truncation or an epoch record is
durable before the next action runs). States: READY (not connected) -> HANDSHAKE (our handshake
sent, waiting for the master's) -> TRUNCATING (the shell cuts the log) -> TRANSFER; any failure
-> `Close` and back to READY, the shell reconnecting with backoff.

Safety rules, beyond upstream:
- **Only the master the controller named, at that epoch.** The master's handshake must carry
  the masterEpoch this broker was told (``expected_epoch``); an older or newer one closes the
  connection before anything is truncated. A stale master (deposed but not yet aware) must not
  make a slave cut data of a newer epoch. (Classic fixed-role mode has no controller: the one
  configured master's epochs are followed, ``expected_epoch`` None.)
- **Durable truncation before any ack** (#10666): after the handshake the core emits `Truncate`
  and does nothing else until `truncated` reports the cut is on disk.
- **Whole records only.** A transfer body may end inside a record; the partial tail stays here
  (memory) until the rest arrives, so the slave's log, its acks and its confirmOffset always end
  at a record boundary and a crash never leaves half a record below a flushed checkpoint.
- **Epochs are recorded before their data** (`RecordEpoch` precedes the `Append` it labels),
  including an epoch announced by a heartbeat with no data yet.
- **Told where the master's data starts.** The first transfer may start above our log end: the
  master no longer holds our next offsets (or we are empty with syncFromLastFile). The core
  emits `ResetLogAt` (drop everything, restart the log there) instead of failing forever.
- **Acks at once**: right after truncation, and after every append (upstream waited up to
  haSendHeartbeatInterval before its first ack); heartbeats every haSendHeartbeatInterval.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence

import attrs

from rocketrio.actors.broker.ha.truncation import TruncationPlan, plan_truncation
from rocketrio.protocol.compiled import speedups as _speedups
from rocketrio.protocol.ha import (
    MasterEvent,
    MasterHandshake,
    SlaveHandshake,
    Transfer,
    encode_slave_ack,
    encode_slave_handshake,
)
from rocketrio.protocol.message import BLANK_MAGIC_CODE, MAGIC_CODE_V1, MAGIC_CODE_V2
from rocketrio.storage.epoch_file import EpochRecord

_HEAD = struct.Struct(">ii")
_MAGICS = (MAGIC_CODE_V1, MAGIC_CODE_V2)


class SlavePhase(enum.Enum):
    READY = "READY"
    HANDSHAKE = "HANDSHAKE"
    TRUNCATING = "TRUNCATING"
    TRANSFER = "TRANSFER"


@attrs.frozen(slots=True)
class SendBytes:
    data: bytes


@attrs.frozen(slots=True)
class Truncate:
    """Cut the log as planned, durably (CommitLog, ConsumeQueues, index, epoch file), then
    call `SlaveCore.truncated`."""

    plan: TruncationPlan
    master_epochs: tuple[EpochRecord, ...]
    master_max: int


@attrs.frozen(slots=True)
class ResetLogAt:
    """Drop every local record and epoch; the (empty) log continues at ``offset``."""

    offset: int
    reason: str


@attrs.frozen(slots=True)
class RecordEpoch:
    """Append ``<epoch, start_offset>`` to the epoch file (durable) before the next Append."""

    epoch: int
    start_offset: int


@attrs.frozen(slots=True)
class Append:
    """Write whole records at ``offset`` (== the local log end), then call `appended`. With
    ``confirm`` >= 0, confirmOffset may move there once they are written (the shell folds a
    trailing `Confirm` in, and hands it to the store after the append's ack)."""

    offset: int
    data: bytes
    confirm: int = -1


@attrs.frozen(slots=True)
class Confirm:
    """The slave's confirmOffset: dispatch consume queues up to here."""

    offset: int


@attrs.frozen(slots=True)
class Close:
    reason: str


Action = SendBytes | Truncate | ResetLogAt | RecordEpoch | Append | Confirm | Close


class StreamError(Exception):
    """The master's byte stream is not a sequence of records (corrupt or misaligned)."""


def whole_records_length(data: bytes | bytearray, offset: int, segment_size: int) -> int:
    """How many leading bytes of ``data`` (starting at CommitLog ``offset``) are whole records.

    A BLANK record covers the rest of its segment. Only the headers are looked at here; the
    store checks every record in full (CRC, physical offset) when it appends. The compiled
    twin (protocol/speedups/whole_records.c) walks the headers; what it declines (a header
    that is wrong) the Python twin walks again, and raises.
    """
    if _speedups is not None:
        n = _speedups.whole_records(data, offset, segment_size)
        if n is not None:
            return int(n)
    return _whole_records_length_py(data, offset, segment_size)


def _whole_records_length_py(data: bytes | bytearray, offset: int, segment_size: int) -> int:
    """The reference of `whole_records_length` (its compiled twin: `_speedups.whole_records`)."""
    pos = 0
    n = len(data)
    while n - pos >= 8:
        total, magic = _HEAD.unpack_from(data, pos)
        at = offset + pos
        if magic == BLANK_MAGIC_CODE:
            if total != segment_size - at % segment_size:
                raise StreamError(f"blank record at {at} claims {total} bytes")
        elif magic not in _MAGICS or total <= 8:
            raise StreamError(f"no record starts at offset {at} (size {total}, magic {magic:#x})")
        if total > n - pos:
            break
        pos += total
    return pos


class SlaveCore:
    """See module docstring. One instance per (re)connection attempt series of a slave."""

    def __init__(
        self,
        *,
        broker_id: int,
        expected_epoch: int | None,
        segment_size: int,
        async_learner: bool = False,
        sync_from_last_file: bool = False,
        heartbeat_interval_ms: int,
        housekeeping_interval_ms: int,
        confirm_own_max: bool = False,
    ) -> None:
        """``confirm_own_max``: classic mode: no failover can truncate this slave, so it
        dispatches everything it holds (upstream's classic slaves do); otherwise its
        confirmOffset is min(the master's, its own end)."""
        self.broker_id = broker_id
        self.confirm_own_max = confirm_own_max
        self.expected_epoch = expected_epoch
        self.segment_size = segment_size
        self.async_learner = async_learner
        self.sync_from_last_file = sync_from_last_file
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.housekeeping_interval_ms = housekeeping_interval_ms
        self.phase = SlavePhase.READY
        self._tail = bytearray()  # bytes after the last whole record, not yet written
        self.local_max = 0  # whole records on our log
        self.local_empty = True
        self.last_epoch: EpochRecord | None = None
        self.acked = -1
        self.confirm = -1
        self.master_confirm = -1  # the confirmOffset in the master's last header
        self.last_read_ms = 0
        self.last_write_ms = 0

    @property
    def received_end(self) -> int:
        """The offset the master's next batch must start at."""
        return self.local_max + len(self._tail)

    # ------------------------------------------------------------------ connection

    def connected(self, now_ms: int) -> list[Action]:
        self.phase = SlavePhase.HANDSHAKE
        self._tail.clear()
        self.last_read_ms = self.last_write_ms = now_ms
        hs = SlaveHandshake(self.broker_id, self.sync_from_last_file, self.async_learner)
        return [SendBytes(encode_slave_handshake(hs))]

    def closed(self) -> None:
        self.phase = SlavePhase.READY
        self._tail.clear()

    # ------------------------------------------------------------------ from the master

    def on_event(
        self,
        ev: MasterEvent,
        now_ms: int,
        *,
        local_epochs: Sequence[EpochRecord] = (),
        local_min: int = 0,
        local_max: int = 0,
    ) -> list[Action]:
        """Feed one decoded master message. The local log state is needed for a handshake."""
        self.last_read_ms = now_ms
        match ev:
            case MasterHandshake():
                return self._on_handshake(ev, local_epochs, local_min, local_max)
            case Transfer():
                return self._on_transfer(ev)

    def _on_handshake(
        self,
        h: MasterHandshake,
        local_epochs: Sequence[EpochRecord],
        local_min: int,
        local_max: int,
    ) -> list[Action]:
        if self.phase is not SlavePhase.HANDSHAKE:
            return self._close(f"unexpected master handshake in phase {self.phase.value}")
        if self.expected_epoch is not None and h.last_epoch != self.expected_epoch:
            return self._close(
                f"the master answers at masterEpoch {h.last_epoch}, the controller named it at "
                f"{self.expected_epoch}: not following it (nothing truncated)"
            )
        master_epochs = tuple(EpochRecord(e.epoch, e.start_offset) for e in h.epochs)
        plan = plan_truncation(local_epochs, local_min, local_max, master_epochs, h.max_offset)
        self.phase = SlavePhase.TRUNCATING
        return [Truncate(plan, master_epochs, h.max_offset)]

    def truncated(
        self, local_min: int, local_max: int, last_epoch: EpochRecord | None, now_ms: int
    ) -> list[Action]:
        """The cut is durable; the log now holds [local_min, local_max)."""
        if self.phase is not SlavePhase.TRUNCATING:
            return []
        self.phase = SlavePhase.TRANSFER
        self.local_max = local_max
        self.local_empty = local_max <= local_min
        self.last_epoch = last_epoch
        self._tail.clear()
        return [self._ack(local_max, now_ms)]

    def _on_transfer(self, t: Transfer) -> list[Action]:
        if self.phase is not SlavePhase.TRANSFER:
            return self._close(f"transfer at {t.offset} before the handshake finished")
        if self.expected_epoch is not None and t.epoch > self.expected_epoch:
            return self._close(
                f"the master sends epoch {t.epoch}, newer than the masterEpoch "
                f"{self.expected_epoch} we were told: our role information is stale"
            )
        out: list[Action] = []
        end = self.received_end
        if t.offset != end:
            if t.offset < end or self._tail:
                return self._close(f"the master sent offset {t.offset}, our log ends at {end}")
            reason = (
                f"the master's data starts at {t.offset}, above our log end {end}: it no longer "
                "holds what follows our data"
                if not self.local_empty
                else f"empty log: starting at the master's offset {t.offset}"
            )
            out.append(ResetLogAt(t.offset, reason))
            self.local_max = t.offset
            self.local_empty = True
            self.last_epoch = None
        last = self.last_epoch
        if last is None or t.epoch != last.epoch:
            if last is not None and (
                t.epoch < last.epoch or t.epoch_start_offset < last.start_offset
            ):
                return self._close(
                    f"the master labels offset {t.offset} with epoch {t.epoch}-"
                    f"{t.epoch_start_offset}, older than our last epoch "
                    f"{last.epoch}-{last.start_offset}"
                )
            self.last_epoch = EpochRecord(t.epoch, t.epoch_start_offset)
            out.append(RecordEpoch(t.epoch, t.epoch_start_offset))
        elif t.epoch_start_offset != last.start_offset:
            return self._close(
                f"epoch {t.epoch} starts at {t.epoch_start_offset} on the master, at "
                f"{last.start_offset} here"
            )
        if t.body:
            tail = self._tail
            data: bytes | bytearray = t.body
            if tail:  # a record split across transfers: join its parts
                tail += data
                data = tail
            try:
                n = whole_records_length(data, self.local_max, self.segment_size)
            except StreamError as e:
                return self._close(str(e))
            if n:
                # the shell executes this Append or closes: count it as written from here on
                whole = data if n == len(data) and not tail else bytes(memoryview(data)[:n])
                out.append(Append(self.local_max, whole))
                self.local_max += n
                self.local_empty = False
            if tail:
                del tail[:n]
            elif n < len(data):
                tail += memoryview(data)[n:]
        self.master_confirm = t.confirm_offset
        confirm = self.local_max if self.confirm_own_max else min(t.confirm_offset, self.local_max)
        if confirm > self.confirm:
            self.confirm = confirm
            out.append(Confirm(confirm))
        return out

    def appended(self, new_max: int, now_ms: int) -> list[Action]:
        """Whole records up to ``new_max`` are on our log (fsynced if this broker syncs):
        ack them. Several Appends may be written before one call."""
        if new_max > self.acked:
            return [self._ack(new_max, now_ms)]
        return []

    # ------------------------------------------------------------------ timers

    def tick(self, now_ms: int) -> list[Action]:
        if self.phase is SlavePhase.READY:
            return []
        if now_ms - self.last_read_ms > self.housekeeping_interval_ms:
            return self._close(
                f"nothing from the master for {now_ms - self.last_read_ms} ms "
                f"(haHousekeepingInterval {self.housekeeping_interval_ms})"
            )
        if (
            self.phase is SlavePhase.TRANSFER
            and now_ms - self.last_write_ms >= self.heartbeat_interval_ms
        ):
            return [self._ack(self.acked, now_ms)]  # what is durable, not what is queued
        return []

    def next_timer_ms(self) -> int:
        """When `tick` may have something to do. Heartbeats go out only in TRANSFER; before
        it (waiting for the master's handshake, or for a truncation) only housekeeping can
        fire, and a heartbeat deadline already past would wake the timer task again at once,
        for ever (a CPU spin; under a mock clock a livelock)."""
        housekeeping = self.last_read_ms + self.housekeeping_interval_ms + 1
        if self.phase is SlavePhase.TRANSFER:
            return min(self.last_write_ms + self.heartbeat_interval_ms, housekeeping)
        return housekeeping

    # ------------------------------------------------------------------ helpers

    def _ack(self, offset: int, now_ms: int) -> SendBytes:
        self.acked = offset
        self.last_write_ms = now_ms
        return SendBytes(encode_slave_ack(offset))

    def _close(self, reason: str) -> list[Action]:
        self.phase = SlavePhase.READY
        self._tail.clear()
        return [Close(reason)]
