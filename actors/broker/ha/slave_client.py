"""The slave's HA client (H2; upstream AutoSwitchHAClient): the shell of `SlaveCore`.

Connects to the master's HA address, runs one session per connection and reconnects with a
short jittered backoff (100 ms doubling to 2 s: upstream waited 5 s after every close, which
alone would cost a failover's new master its first slave for 5 s). In a session:

- the reader decodes the master's messages, feeds them to the core, and carries out the
  returned actions in order, awaiting each: a truncation, an epoch record and an append are done
  by the store actor (durably where the port says so) before the next action runs, and an ack
  goes out only after the append (or truncation) it reports;
- consecutive appends from one read are merged into one store call (one write, one fsync with
  SYNC_FLUSH, one ack), which is what keeps a slave up with a master's group commits; the
  confirmOffset they carry is handed to the store only once the ack is sent, so the store's
  dispatch up to it (ConsumeQueue entries, which the master does not wait for) is off the
  round trip of every replicated write;
- a timer task runs the core's heartbeat and housekeeping.

The master and its masterEpoch come from the ReplicasManager; a new master or epoch means a
new `HAClient`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import structlog
import trio

from rocketrio.actors.broker.ha.ports import SlaveStorePort, first_leaf
from rocketrio.actors.broker.ha.slave_core import (
    Action,
    Append,
    Close,
    Confirm,
    RecordEpoch,
    ResetLogAt,
    SendBytes,
    SlaveCore,
    Truncate,
)
from rocketrio.actors.broker.ha.status_body import ByteRate, SlaveView
from rocketrio.actors.broker.ha.truncation import DiscardAll, TruncateTo
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.kernel.stream_read import bulk_receiver
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.protocol.ha import NEED_DATA, MasterStreamDecoder, RemoteProtocolError

READ_SIZE = 1024 * 1024
BACKOFF_MIN_S = 0.1
BACKOFF_MAX_S = 2.0
CONNECT_TIMEOUT_S = 3.0


class _Closing(Exception):
    pass


_CLOSE_REASONS = (
    _Closing,
    RemoteProtocolError,
    ValueError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    OSError,
)


class HAClient:
    """See module docstring. Run with ``nursery.start_soon(client.run)``; cancel to stop."""

    def __init__(
        self,
        transport: Transport,
        store: SlaveStorePort,
        master_ha_addr: str,
        *,
        broker_id: int,
        expected_epoch: int | None,
        async_learner: bool,
        sync_from_last_file: bool,
        heartbeat_interval_ms: int,
        housekeeping_interval_ms: int,
        rng: random.Random,
        log: Any = None,
        on_session: Callable[[bool], None] = lambda _up: None,
        confirm_own_max: bool = False,
    ) -> None:
        self.transport = transport
        self.store = store
        self.master_ha_addr = master_ha_addr
        self.rng = rng
        self.log = log or structlog.get_logger("ha").bind(actor="ha_client")
        self.on_session = on_session
        self.core = SlaveCore(
            broker_id=broker_id,
            expected_epoch=expected_epoch,
            segment_size=store.segment_size,
            async_learner=async_learner,
            sync_from_last_file=sync_from_last_file,
            heartbeat_interval_ms=heartbeat_interval_ms,
            housekeeping_interval_ms=housekeeping_interval_ms,
            confirm_own_max=confirm_own_max,
        )
        self.sessions = 0
        self.connected = False
        self.received = ByteRate()  # bytes read from the master per second
        self._progressed = False
        self._send_lock = trio.Lock()
        self._rearm = trio.Event()  # set when the core acted: the timer recomputes its deadline
        self._armed_ms = 0  # the deadline the timer task sleeps until (`_timers`)

    async def run(self) -> None:
        backoff = BACKOFF_MIN_S
        failures = 0
        while True:
            self._progressed = False
            reason = await self._one_session()
            self.core.closed()
            self.on_session(False)
            if self._progressed:
                failures = 0
                backoff = BACKOFF_MIN_S  # the session made progress: retry soon
            failures += 1
            if failures == 1 or failures % 20 == 0:  # a streak of failures is logged sparsely
                events.emit(
                    self.log,
                    events.HaConnectionClosed(
                        side="slave", peer=self.master_ha_addr, reason=reason, attempts=failures
                    ),
                )
            await trio.sleep(backoff * (0.5 + self.rng.random()))
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _one_session(self) -> str:
        with trio.move_on_after(CONNECT_TIMEOUT_S) as scope:
            try:
                stream = await self.transport.connect(self.master_ha_addr)
            except OSError as e:
                return f"connect failed: {e}"
        if scope.cancelled_caught:
            return "connect timed out"
        self.sessions += 1
        self.core.acked = -1
        try:
            async with stream, trio.open_nursery() as nursery:
                events.emit(self.log, events.HaConnected(side="slave", peer=self.master_ha_addr))
                self.on_session(True)
                self.connected = True
                await self._run_actions(stream, self.core.connected(monotonic_ms()))
                nursery.start_soon(self._timers, stream)
                await self._read(stream)
        except BaseException as e:
            leaf = first_leaf(e, _CLOSE_REASONS)
            if leaf is None:
                raise
            match leaf:
                case _Closing():
                    return str(leaf)
                case RemoteProtocolError():
                    return f"protocol error: {leaf}"
                case ValueError():  # the store refused the data (bad record, wrong offset)
                    return f"store refused replicated data: {leaf}"
                case _:
                    return f"socket: {leaf}"
        finally:
            self.connected = False
        return "session ended"

    def view(self) -> SlaveView:
        """This connection's state for GET_BROKER_HA_STATUS (runtime_info.py)."""
        core, ever = self.core, self.sessions > 0
        return SlaveView(
            master_ha_addr=self.master_ha_addr,
            max_offset=self.store.log_end_offset(),
            connected=self.connected,
            last_read_ms=core.last_read_ms if ever else None,
            last_write_ms=core.last_write_ms if ever else None,
            bytes_per_s=self.received.per_second(monotonic_ms()),
            master_confirm_offset=core.master_confirm,
        )

    async def _read(self, stream: trio.abc.Stream) -> None:
        decoder = MasterStreamDecoder(merge_transfers=True)  # one event per read (protocol/ha.py)
        receive = bulk_receiver(stream, READ_SIZE)  # one buffer for every read (stream_read.py)
        store = self.store
        while True:
            data = await receive()
            if not data:
                raise _Closing("the master closed the connection")
            self.received.add(len(data), monotonic_ms())
            decoder.receive_data(data)
            actions: list[Action] = []
            while (ev := decoder.next_event()) is not NEED_DATA:
                actions += self.core.on_event(
                    ev,
                    monotonic_ms(),
                    local_epochs=store.epoch_records(),
                    local_min=store.log_min_offset(),
                    local_max=store.log_end_offset(),
                )
                if any(isinstance(a, (Truncate, Close)) for a in actions):
                    break  # the rest waits: nothing may follow a truncation until it is done
            await self._run_actions(stream, _merge_appends(actions))

    async def _timers(self, stream: trio.abc.Stream) -> None:
        """Run the core's tick at its next deadline, recomputed whenever the core has acted
        and moved it earlier: a deadline taken before the handshake is housekeeping's (20 s),
        and once the session reaches TRANSFER the first heartbeat is due in
        haSendHeartbeatInterval, not then. A deadline that moved later (every read and ack
        moves it) is found when the earlier one fires: the tick then has nothing to do, and
        the loop sleeps again, so a read does not wake this task."""
        while True:
            rearm = self._rearm = trio.Event()
            self._armed_ms = self.core.next_timer_ms()
            with trio.move_on_at(self._armed_ms / 1000):
                await rearm.wait()
            if not rearm.is_set():
                await self._run_actions(stream, self.core.tick(monotonic_ms()))

    async def _run_actions(self, stream: trio.abc.Stream, actions: list[Action]) -> None:
        if self.core.next_timer_ms() < self._armed_ms:
            self._rearm.set()  # the core moved its next timer deadline earlier
        store, core = self.store, self.core
        for a in actions:
            match a:
                case SendBytes():
                    async with self._send_lock:
                        await stream.send_all(a.data)
                case Truncate():
                    before = (store.log_min_offset(), store.log_end_offset())
                    lo, hi, last = await store.truncate(a.plan)
                    self._progressed = True
                    self._log_truncation(a, before, lo, hi)
                    await self._run_actions(stream, core.truncated(lo, hi, last, monotonic_ms()))
                case ResetLogAt():
                    before = (store.log_min_offset(), store.log_end_offset())
                    await store.reset_log_at(a.offset, a.reason)
                    events.emit(
                        self.log,
                        events.HaLogReset(
                            from_min=before[0],
                            from_max=before[1],
                            to_offset=a.offset,
                            reason=a.reason,
                        ),
                    )
                case RecordEpoch():
                    await store.record_epoch(a.epoch, a.start_offset)
                    events.emit(
                        self.log,
                        events.EpochRecorded(
                            epoch=a.epoch, start_offset=a.start_offset, source="replicated"
                        ),
                    )
                case Append():
                    new_max = await store.append_replicated(a.offset, a.data)
                    self._progressed = True
                    await self._run_actions(stream, core.appended(new_max, monotonic_ms()))
                    if a.confirm >= 0:  # after the ack: the master waits for that, not this
                        store.request_confirm(a.confirm)
                case Confirm():
                    store.request_confirm(a.offset)
                case Close():
                    raise _Closing(a.reason)

    def _log_truncation(self, a: Truncate, before: tuple[int, int], lo: int, hi: int) -> None:
        plan = a.plan
        local_epochs = self.store.epoch_records()
        fields: dict[str, Any] = {
            "from_offset": before[1],
            "to_offset": hi,
            "master_max": a.master_max,
            "master_epochs": [f"{r.epoch}-{r.start_offset}" for r in a.master_epochs],
            "epochs_now": [f"{r.epoch}-{r.start_offset}" for r in local_epochs],
        }
        match plan:
            case TruncateTo():
                events.emit(
                    self.log, events.HaTruncated(matched_epoch=plan.matched_epoch, **fields)
                )
            case DiscardAll():
                events.emit(self.log, events.HaLogReset(reason=plan.reason, to_min=lo, **fields))


def _merge_appends(actions: list[Action]) -> list[Action]:
    """Join consecutive, contiguous Appends into one (one store call, one fsync, one ack) and
    keep only the last Confirm, moved to the end: confirming later is always safe, and the core
    never confirms beyond what it has queued for writing. A Confirm that would follow the last
    Append rides on it (handed to the store once that append is acked)."""
    out: list[Action] = []
    parts: list[bytes] = []
    start = end = 0
    confirm: Confirm | None = None

    def flush() -> None:
        if parts:
            out.append(Append(start, parts[0] if len(parts) == 1 else b"".join(parts)))
            parts.clear()

    for a in actions:
        if isinstance(a, Confirm):
            confirm = a
        elif isinstance(a, Append):
            if parts and a.offset == end:
                parts.append(a.data)
            else:
                flush()
                parts.append(a.data)
                start = a.offset
            end = a.offset + len(a.data)
        else:
            flush()
            out.append(a)
    flush()
    if confirm is not None:
        last = out[-1] if out else None
        if isinstance(last, Append):
            out[-1] = Append(last.offset, last.data, confirm.offset)
        else:
            out.append(confirm)
    return out
