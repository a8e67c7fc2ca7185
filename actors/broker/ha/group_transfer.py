"""GroupTransferService: the master's replication gate, the shell of `SyncStateCore` (H4-H6).

Owns one `SyncStateCore` for one mastership (a new one per masterEpoch). The store actor hands
it every stored turn (`submit`: one entry covers every send of a group commit); the HA master
service feeds it connections and acks; it answers the sends (`AckOutcome`) as the ack policy
allows, tells the store actor where confirmOffset is (`on_confirm`), and sends SyncStateSet
changes to the controller through the `alter` function the ReplicasManager gives it — one at a
time, applying them to the core only as the controller answers.

Classic master/slave (no controller, H7): there is no `alter`; a proposal is applied locally at
once, so the set is "the master plus the slaves that caught up and stayed connected". A classic
SYNC_MASTER needs one in-sync slave (inSyncReplicas 2) and answers SLAVE_NOT_AVAILABLE at once
when none is connected, like upstream; an ASYNC_MASTER never waits (no service at all).

Timers (Trio's clock): a pending write times out after syncFlushTimeout (FLUSH_SLAVE_TIMEOUT:
stored on the master, maybe not elsewhere, so NOT acknowledged), and the core's time rule runs
every checkSyncStateSetPeriod. The timer task sleeps until the earlier of the two; a `submit`
wakes it only when its write's deadline comes before that (`_timer_wake_ms`): a write's
deadline is never earlier than the ones already pending, and with the defaults (both 5 s) never
earlier than the next check, so a replicated turn costs no timer wake-up (a task's wake and a
cancel scope's exit per turn, 4% of a master's busy samples under batched sends before).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import structlog
import trio

from rocketrio.actors.broker.ha.sync_state import Proposal, SyncStateCore
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.observe import events

CONFIRM_LOG_INTERVAL_MS = 1000
ALTER_TIMEOUT_S = 3.0


class AckOutcome(enum.Enum):
    ACKED = "ACKED"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    NOT_MASTER = "NOT_MASTER"  # the broker stopped being master before the copies were in


Completion = Callable[[AckOutcome], None]


@attrs.frozen(slots=True)
class AlterAccepted:
    members: frozenset[int]
    epoch: int


@attrs.frozen(slots=True)
class AlterRefused:
    reason: str
    fenced: bool  # the controller's syncStateSetEpoch moved: re-read it


@attrs.frozen(slots=True)
class AlterUnknown:
    reason: str


AlterResult = AlterAccepted | AlterRefused | AlterUnknown
AlterFn = Callable[[frozenset[int], int], Awaitable[AlterResult]]


class GroupTransferService:
    """See module docstring. Run with ``await nursery.start(service.run)``."""

    def __init__(
        self,
        core: SyncStateCore[Completion],
        *,
        sync_timeout_ms: int,
        check_period_ms: int,
        alter: AlterFn | None,
        on_confirm: Callable[[int], None],
        lease_valid: Callable[[int], bool] = lambda _now: True,
        on_refresh_needed: Callable[[], None] = lambda: None,
        classic_min_copies: int = 0,
        log: Any = None,
    ) -> None:
        self.core = core
        self.sync_timeout_ms = sync_timeout_ms
        self.check_period_ms = check_period_ms
        self.alter = alter
        self.on_confirm = on_confirm
        self.lease_valid = lease_valid
        self.on_refresh_needed = on_refresh_needed
        self.classic_min_copies = classic_min_copies
        self.log = log or structlog.get_logger("ha").bind(actor="group_transfer")
        self.closed = False
        self._closed = trio.Event()
        self._timer_kick = trio.Event()
        self._timer_wake_ms = 0  # when the sleeping timer task wakes (0: it is not asleep)
        self.timer_wakes = 0  # the timer task's wake-ups (tests)
        self._propose = trio.Event()
        self._next_confirm_log_ms = 0
        self.acked_total = 0
        self.not_acked_total = 0

    # ------------------------------------------------------------------ from the store actor

    def admit_put(self) -> bool:
        """False: refuse with IN_SYNC_REPLICAS_NOT_ENOUGH before anything is stored."""
        return not self.closed and self.core.admit_put()

    def not_enough_remark(self) -> str:
        """Why `admit_put` refused: the SyncStateSet's size against minInSyncReplicas."""
        core = self.core
        return (
            f"in-sync replicas not enough: the SyncStateSet may hold "
            f"{core.in_sync_replicas_nums()} replicas, minInSyncReplicas is "
            f"{core.policy.min_in_sync_replicas}"
        )

    def has_replicas(self) -> bool:
        """A slave may be in the SyncStateSet (a write may wait for a copy)."""
        return not self.closed and len(self.core.possible) > 1

    def applied_members(self) -> frozenset[int]:
        """The SyncStateSet the controller applied (empty once this gate closed)."""
        return frozenset() if self.closed else self.core.applied

    def caught_up_ms(self) -> dict[int, int]:
        """When each slave was last caught up (Trio ms; the gate's start for one never caught
        up); empty once this gate closed."""
        if self.closed:
            return {}
        core = self.core
        return {b: r.caught_up_ms or core.started_ms for b, r in core.replicas.items()}

    def stored(self, end_offset: int) -> bool:
        """A stored turn ends at ``end_offset`` (the master's log end now). True: it is
        acknowledged already (nothing waits before it and every copy the ack policy needs
        holds it: always so for a master with no slave in its set), and the caller answers
        it at once, without `submit`: so the gate costs a lone master one clock read and a
        few attribute reads per turn, not a pending entry, a completion and a timer wake-up.
        False: `submit` it."""
        core = self.core
        now = monotonic_ms()
        if core.on_local_max(end_offset):
            self._confirm_moved(now)
        if self.closed or self.classic_min_copies:
            return False  # closed: NOT_MASTER; a classic SYNC_MASTER: the slave check in submit
        lease = core.policy.all_ack_in_sync_state_set or self.lease_valid(now)
        if not core.ack_now(end_offset, lease_valid=lease):
            return False
        self.acked_total += 1
        return True

    def submit(self, end_offset: int, done: Completion) -> None:
        """A stored turn ending at ``end_offset`` waits for its copies (answered via ``done``)."""
        if self.closed:
            done(AckOutcome.NOT_MASTER)
            return
        if self.classic_min_copies and len(self.core.possible) < self.classic_min_copies:
            done(AckOutcome.SLAVE_NOT_AVAILABLE)
            return
        now = monotonic_ms()
        deadline = now + self.sync_timeout_ms
        self.core.add_pending(end_offset, deadline, done)
        self._complete(now)
        if deadline < self._timer_wake_ms:
            self._timer_kick.set()  # the timer task sleeps past this write's deadline

    def on_local_max(self, offset: int) -> None:
        if self.core.on_local_max(offset):
            self._confirm_moved(monotonic_ms())

    def on_new_epoch(self, start_offset: int) -> None:
        self.core.on_new_epoch(start_offset)

    # ------------------------------------------------------------------ from the HA connections

    def on_connected(self, broker_id: int, *, learner: bool) -> None:
        self.core.on_connected(broker_id, learner=learner, now_ms=monotonic_ms())

    def on_disconnected(self, broker_id: int) -> None:
        self.core.on_disconnected(broker_id)
        self._propose.set()

    def on_sent(self, broker_id: int) -> None:
        self.core.on_sent(broker_id, monotonic_ms())

    def on_ack(self, broker_id: int, offset: int) -> None:
        now = monotonic_ms()
        if self.core.on_ack(broker_id, offset, now):
            self._confirm_moved(now)
        self._complete(now)
        if self.core.desired != self.core.applied:
            self._propose.set()

    # ------------------------------------------------------------------ from the controller

    def on_authoritative(self, members: frozenset[int], epoch: int) -> None:
        """GetReplicaInfo (linearizable) says the controller's set is ``members`` at ``epoch``."""
        if self.core.on_authoritative(members, epoch):
            self._confirm_moved(monotonic_ms())
        self._complete(monotonic_ms())
        self._propose.set()

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """The broker stops being master: fail what waits (it was never acknowledged)."""
        if self.closed:
            return
        self.closed = True
        failed = self.core.fail_all_pending()
        self.not_acked_total += len(failed)
        for done in failed:
            done(AckOutcome.NOT_MASTER)
        self._closed.set()
        self._timer_kick.set()
        self._propose.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._timers)
            nursery.start_soon(self._proposer)
            task_status.started()
            await self._closed.wait()
            nursery.cancel_scope.cancel()

    async def _timers(self) -> None:
        next_check = monotonic_ms() + self.check_period_ms
        while not self.closed:
            deadline = self.core.next_deadline_ms()
            wake_ms = next_check if deadline is None else min(next_check, deadline)
            self._timer_kick = trio.Event()
            self._timer_wake_ms = wake_ms
            with trio.move_on_at(wake_ms / 1000):
                await self._timer_kick.wait()
            self._timer_wake_ms = 0  # awake: it reads the next deadline before it sleeps again
            self.timer_wakes += 1
            now = monotonic_ms()
            if now >= next_check:
                self.core.tick(now)
                next_check = now + self.check_period_ms
                if self.core.desired != self.core.applied:
                    self._propose.set()
            self._complete(now)

    async def _proposer(self) -> None:
        while not self.closed:
            proposal = self.core.take_proposal()
            if proposal is None:
                self._propose = trio.Event()
                await self._propose.wait()
                continue
            await self._send(proposal)

    async def _send(self, p: Proposal) -> None:
        applied = self.core.applied
        change = "expand" if p.members > applied else "shrink" if p.members < applied else "change"
        events.emit(
            self.log,
            events.SyncStateSetProposed(
                change=change,
                proposed=sorted(p.members),
                applied=sorted(applied),
                possible=sorted(self.core.possible),
                epoch=p.base_epoch,
            ),
        )
        if self.alter is None:  # classic master/slave: the master decides alone
            result: AlterResult = AlterAccepted(p.members, p.base_epoch + 1)
        else:
            result = AlterUnknown(f"no answer within {ALTER_TIMEOUT_S}s")
            with trio.move_on_after(ALTER_TIMEOUT_S):
                result = await self.alter(p.members, p.base_epoch)
        if self.closed:
            return
        match result:
            case AlterAccepted():
                moved = self.core.on_proposal_accepted(result.members, result.epoch)
                events.emit(
                    self.log,
                    events.SyncStateSetAccepted(
                        sync_state_set=sorted(result.members), epoch=result.epoch
                    ),
                )
                if moved:
                    self._confirm_moved(monotonic_ms())
            case AlterRefused():
                self.core.on_proposal_refused()
                events.emit(
                    self.log,
                    events.SyncStateSetRefused(proposed=sorted(p.members), remark=result.reason),
                )
                if result.fenced:
                    self.on_refresh_needed()
                await trio.sleep(0.5)  # the state moved under us: let the refresh land first
            case AlterUnknown():
                self.core.on_proposal_unknown()
                events.emit(
                    self.log,
                    events.SyncStateSetRefused(
                        proposed=sorted(p.members), remark=f"outcome unknown: {result.reason}"
                    ),
                )
                self.on_refresh_needed()
                await trio.sleep(0.5)
        self._complete(monotonic_ms())

    # ------------------------------------------------------------------ helpers

    def _complete(self, now: int) -> None:
        if self.closed:
            return
        acked, timed_out = self.core.take_done(now, lease_valid=self.lease_valid(now))
        for done in acked:
            done(AckOutcome.ACKED)
        for done in timed_out:
            done(AckOutcome.FLUSH_SLAVE_TIMEOUT)
        self.acked_total += len(acked)
        self.not_acked_total += len(timed_out)

    def _confirm_moved(self, now_ms: int) -> None:
        offset = self.core.confirm_offset
        self.on_confirm(offset)
        if now_ms >= self._next_confirm_log_ms:
            self._next_confirm_log_ms = now_ms + CONFIRM_LOG_INTERVAL_MS
            events.emit(self.log, events.ConfirmOffsetMoved(offset=offset, side="master"))
