"""The master's SyncStateSet, confirmOffset and ack policy (H4, H5, H6): a pure core.

Inputs (times are Trio-clock milliseconds handed in; nothing here reads a clock):
`on_local_max` (the master wrote up to an offset), `on_connected` / `on_disconnected` /
`on_ack` (a slave's HA connection), `on_sent` (the master shipped bytes up to its max at that
moment), `tick`, the answers to our AlterSyncStateSet proposals (`on_proposal_accepted`,
`on_proposal_refused`, `on_proposal_unknown`) and authoritative reads of the controller's set
(`on_authoritative`). Outputs: `take_proposal()` (a set to send to the controller),
`confirm_offset`, `ack_bound` and the pending-write queue (`add_pending` / `take_done`).

The rules, and the upstream failure each one prevents:

- **Who may be in the controller's set (#5663).** `applied` is the last set the controller
  confirmed. Every proposal stays *unresolved* until its success answer arrives or we observe a
  syncStateSetEpoch above the epoch it was based on (the controller fences AlterSyncStateSet by
  that epoch, so it can then never apply). ``possible = applied | members of unresolved
  proposals`` is every id that may be in the controller's set right now: a timed-out answer
  keeps its members in `possible` until resolved; a definitive refusal drops only its own.
- **Acks.** With allAckInSyncStateSet a write is acknowledged once EVERY member of `possible`
  holds it (so whoever the controller elects from its set has every acknowledged write). With
  inSyncReplicas = k, once k members of `possible` (the master counts) hold it — learners and
  slaves outside `possible` never count, unlike upstream, since they cannot be elected; nor does
  a master that is itself an asyncLearner (a cold start's first master may be one): counting
  its copy, k copies could leave a member that may be elected without the write. In that
  mode the master also needs a valid lease (`lease_valid`), else it falls back to every member
  (see role_core for the lease); the caller passes both.
- **confirmOffset (#6662, H4).** ``min(master max, ack of every other member of possible)``,
  never lowered while master. A disconnected member keeps its last ack, so an isolated master
  cannot advance confirm past what a possibly-elected slave holds. Consume queues are dispatched
  only up to it.
- **Shrink.** A member that disconnects, or has not caught up for haMaxTimeSlaveNotCatchup, is
  dropped from the desired set. "Caught up" is measured on acks: an ack >= the master's max at
  the moment the last batch was sent to that slave (or >= the master's max now) — never merely
  "the writer had nothing to send" (upstream hazard: a slave that stopped acking stayed in).
- **Expand.** A connected non-learner whose ack is >= confirmOffset, >= every write already
  acknowledged to a client, >= the start of the master's current epoch, and caught up, is added.
- **An expansion counts at once.** A member joins `possible` the moment the master decides to
  add it (its ack then covers every acknowledged write), not when the proposal goes out.
- **One proposal at a time**, built from the desired set (not from `applied`, so two quick
  removals cannot resurrect the first: upstream #9897); after an answer, the next difference
  between desired and applied is proposed.

The pending-write queue is upstream's GroupTransferService: one entry per store turn (group
commit), completed when `ack_bound` reaches its end, timed out at its deadline
(FLUSH_SLAVE_TIMEOUT), or failed when the broker stops being master.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Generic, TypeVar

import attrs

T = TypeVar("T")


@attrs.frozen(slots=True)
class AckPolicy:
    """MessageStoreConfig keys: allAckInSyncStateSet, inSyncReplicas, minInSyncReplicas, and
    whether this broker is an asyncLearner (``learner``: as master, a cold start's first, its
    own copy does not count towards inSyncReplicas; see `SyncStateCore.ack_bound`)."""

    all_ack_in_sync_state_set: bool = True
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1
    learner: bool = False


@attrs.frozen(slots=True)
class Proposal:
    """A set we asked the controller for, and the syncStateSetEpoch it was based on."""

    members: frozenset[int]
    base_epoch: int


@attrs.define(slots=True)
class ReplicaProgress:
    """What the master knows of one slave (upstream HAConnection fields)."""

    broker_id: int
    learner: bool = False
    connected: bool = False
    ack_offset: int = -1  # -1: no ack yet since it (re)connected
    caught_up_ms: int = 0
    # the master's max when the last batch was sent to it, and when
    sent_master_max: int = 0
    sent_ms: int = 0


@attrs.define(slots=True)
class _Pending(Generic[T]):
    end_offset: int
    deadline_ms: int
    token: T


class SyncStateCore(Generic[T]):
    """The master's view of its broker set (see module docstring). ``T``: pending-write tokens."""

    def __init__(
        self,
        self_id: int,
        policy: AckPolicy,
        *,
        max_time_not_catchup_ms: int,
        sync_state_set: Iterable[int],
        sync_state_set_epoch: int,
        epoch_start_offset: int,
        local_max: int,
        confirm_offset: int,
        now_ms: int,
    ) -> None:
        self.self_id = self_id
        self.policy = policy
        self.max_time_not_catchup_ms = max_time_not_catchup_ms
        self.applied: frozenset[int] = frozenset(sync_state_set) | {self_id}
        self.applied_epoch = sync_state_set_epoch
        self.unresolved: list[Proposal] = []
        self.in_flight: Proposal | None = None
        self.replicas: dict[int, ReplicaProgress] = {}
        self.epoch_start_offset = epoch_start_offset
        self.local_max = local_max
        self.confirm = confirm_offset
        self.acked_frontier = confirm_offset
        self.started_ms = now_ms
        self._pending: deque[_Pending[T]] = deque()
        self._removed: set[int] = set()  # desired removals not yet applied
        self._added: set[int] = set()  # desired additions not yet applied

    # ------------------------------------------------------------------ views

    @property
    def possible(self) -> frozenset[int]:
        """Every broker id that may be in the controller's SyncStateSet now, or will be: an
        expansion counts from the moment it is decided, before it is even proposed."""
        if not self._added and not self.unresolved and self.in_flight is None:
            return self.applied  # the usual case, and the only one of a broker with no slave
        out = self.applied | self._added
        for p in self.unresolved:
            out = out | p.members
        if self.in_flight is not None:
            out = out | self.in_flight.members
        return out

    @property
    def desired(self) -> frozenset[int]:
        return (self.applied - self._removed) | self._added | {self.self_id}

    def in_sync_replicas_nums(self) -> int:
        """Upstream inSyncReplicasNums: the size the set may have (for minInSyncReplicas)."""
        return len(self.possible)

    def admit_put(self) -> bool:
        """False: refuse the put with IN_SYNC_REPLICAS_NOT_ENOUGH before storing anything."""
        return self.in_sync_replicas_nums() >= self.policy.min_in_sync_replicas

    def _ack_of(self, broker_id: int) -> int:
        if broker_id == self.self_id:
            return self.local_max
        r = self.replicas.get(broker_id)
        return 0 if r is None or r.ack_offset < 0 else r.ack_offset

    def ack_bound(self, *, lease_valid: bool = True) -> int:
        """Writes ending at or below this offset may be acknowledged to clients now."""
        members = self.possible
        if len(members) == 1:  # the master alone (possible always holds it)
            if self.policy.all_ack_in_sync_state_set or not lease_valid:
                return self.local_max
            return self.local_max if self.policy.in_sync_replicas <= 1 else 0
        if self.policy.all_ack_in_sync_state_set or not lease_valid:
            return min(self._ack_of(m) for m in members)
        k = max(1, self.policy.in_sync_replicas)
        counted = members - {self.self_id} if self.policy.learner else members
        if k > len(counted):
            return 0
        return sorted((self._ack_of(m) for m in counted), reverse=True)[k - 1]

    @property
    def confirm_offset(self) -> int:
        return self.confirm

    def _recompute_confirm(self) -> bool:
        members = self.possible
        c = self.local_max if len(members) == 1 else min(self._ack_of(m) for m in members)
        if c > self.confirm:
            self.confirm = c
            return True
        return False

    # ------------------------------------------------------------------ inputs: local

    def on_local_max(self, offset: int) -> bool:
        """The master's CommitLog now ends at ``offset``; True when confirmOffset moved."""
        if offset > self.local_max:
            self.local_max = offset
        return self._recompute_confirm()

    def on_new_epoch(self, epoch_start_offset: int) -> None:
        self.epoch_start_offset = epoch_start_offset

    # ------------------------------------------------------------------ inputs: connections

    def on_connected(self, broker_id: int, *, learner: bool, now_ms: int) -> None:
        r = self.replicas.get(broker_id)
        if r is None:
            # a member of the set we inherited gets haMaxTimeSlaveNotCatchup from now to show up
            r = self.replicas[broker_id] = ReplicaProgress(broker_id, caught_up_ms=now_ms)
        r.learner = learner
        r.connected = True
        r.ack_offset = -1

    def on_disconnected(self, broker_id: int) -> None:
        r = self.replicas.get(broker_id)
        if r is None:
            return
        r.connected = False
        if broker_id in self.desired and broker_id != self.self_id:
            self._removed.add(broker_id)
            self._added.discard(broker_id)

    def on_sent(self, broker_id: int, now_ms: int) -> None:
        """A batch (or heartbeat) was sent to the slave while the master ended at local_max."""
        r = self.replicas.get(broker_id)
        if r is not None:
            r.sent_master_max = self.local_max
            r.sent_ms = now_ms

    def on_ack(self, broker_id: int, offset: int, now_ms: int) -> bool:
        """A slave acked ``offset`` (whole records it holds). True when confirmOffset moved."""
        r = self.replicas.get(broker_id)
        if r is None or not r.connected:
            return False
        r.ack_offset = offset
        if offset >= self.local_max:
            r.caught_up_ms = now_ms
        elif offset >= r.sent_master_max and r.sent_ms > r.caught_up_ms:
            r.caught_up_ms = r.sent_ms
        self._maybe_expand(r, now_ms)
        return self._recompute_confirm()

    def _maybe_expand(self, r: ReplicaProgress, now_ms: int) -> None:
        if r.learner or r.broker_id in self.desired:
            return
        a = r.ack_offset
        if (
            a >= self.confirm
            and a >= self.acked_frontier
            and a >= self.epoch_start_offset
            and now_ms - r.caught_up_ms <= self.max_time_not_catchup_ms
            and a >= r.sent_master_max
        ):
            self._added.add(r.broker_id)
            self._removed.discard(r.broker_id)

    def tick(self, now_ms: int) -> None:
        """checkSyncStateSetPeriod: drop members that have not caught up for too long."""
        for m in self.desired:
            if m == self.self_id:
                continue
            r = self.replicas.get(m)
            last = self.started_ms if r is None else r.caught_up_ms
            if now_ms - last > self.max_time_not_catchup_ms:
                self._removed.add(m)
                self._added.discard(m)

    # ------------------------------------------------------------------ proposals

    def take_proposal(self) -> Proposal | None:
        """The next AlterSyncStateSet to send, if the desired set differs and none is in flight."""
        if self.in_flight is not None:
            return None
        want = self.desired
        if want == self.applied:
            self._removed.clear()
            self._added.clear()
            return None
        self.in_flight = Proposal(want, self.applied_epoch)
        return self.in_flight

    def on_proposal_accepted(self, members: Iterable[int], new_epoch: int) -> bool:
        """The controller applied our in-flight proposal; True when confirmOffset moved."""
        self.in_flight = None
        return self._adopt(frozenset(members), new_epoch)

    def on_proposal_refused(self) -> None:
        """A definitive refusal: this proposal was not applied and never will be (earlier
        unresolved ones may still apply and stay possible)."""
        self.in_flight = None

    def on_proposal_unknown(self) -> None:
        """No answer (timeout, controller unreachable): it may still apply, keep it possible."""
        if self.in_flight is not None:
            self.unresolved.append(self.in_flight)
            self.in_flight = None

    def on_authoritative(self, members: Iterable[int], epoch: int) -> bool:
        """A linearizable read of the controller's set (GetReplicaInfo). True: confirm moved."""
        if epoch < self.applied_epoch:
            return False
        return self._adopt(frozenset(members), epoch)

    def _adopt(self, members: frozenset[int], epoch: int) -> bool:
        if epoch >= self.applied_epoch:
            self.applied = members | {self.self_id}
            self.applied_epoch = epoch
        # a proposal based on an older epoch can never apply now (the controller fences it)
        self.unresolved = [p for p in self.unresolved if p.base_epoch >= self.applied_epoch]
        self._removed &= self.applied
        self._added -= self.applied
        return self._recompute_confirm()

    # ------------------------------------------------------------------ pending writes

    def add_pending(self, end_offset: int, deadline_ms: int, token: T) -> None:
        """A store turn ending at ``end_offset`` waits for replication (group commit)."""
        self._pending.append(_Pending(end_offset, deadline_ms, token))

    def ack_now(self, end_offset: int, *, lease_valid: bool = True) -> bool:
        """A store turn ending at ``end_offset`` may be acknowledged at once (nothing waits
        before it and the ack bound already covers it): True, and it counts as acknowledged;
        False: `add_pending` it. A master with no slave in its set always gets True."""
        if self._pending or end_offset > self.ack_bound(lease_valid=lease_valid):
            return False
        if end_offset > self.acked_frontier:
            self.acked_frontier = end_offset
        return True

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def take_done(self, now_ms: int, *, lease_valid: bool = True) -> tuple[list[T], list[T]]:
        """(acknowledged tokens, timed-out tokens), in write order."""
        acked: list[T] = []
        timed_out: list[T] = []
        pending = self._pending
        if not pending:
            return acked, timed_out
        bound = self.ack_bound(lease_valid=lease_valid)
        while pending and pending[0].end_offset <= bound:
            p = pending.popleft()
            acked.append(p.token)
            if p.end_offset > self.acked_frontier:
                self.acked_frontier = p.end_offset
        # deadlines grow in write order (one syncFlushTimeout each): expired ones lead the queue
        while pending and pending[0].deadline_ms <= now_ms:
            timed_out.append(pending.popleft().token)
        return acked, timed_out

    def next_deadline_ms(self) -> int | None:
        return self._pending[0].deadline_ms if self._pending else None

    def fail_all_pending(self) -> list[T]:
        """The broker stopped being master: nothing pending may be acknowledged any more."""
        tokens = [p.token for p in self._pending]
        self._pending.clear()
        return tokens
