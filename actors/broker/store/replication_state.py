"""What the store actor's role allows, and what replication needs of the store (H1-H6).

`ReplicationState` is owned by the store actor (actor.py) and changed only from its turns:

- the `StoreRole`: STANDALONE (no replication: dispatch at put time), FENCED (a replicated
  broker whose role is not known yet, or that stepped down: nothing is written), MASTER (puts),
  SLAVE (only what the master sent);
- a master's `GroupTransferService` (the ack gate of its mastership) and epoch: the epoch is
  recorded in the epoch file before any write of it, and the first write of each mastership is
  logged (master_first_write);
- the `written` watermark the HA master's connections wait on, and the confirmOffset target
  the actor applies at the end of a turn. A turn's write moves `written` as soon as it is in
  the page cache, before a SYNC_FLUSH fsync: the slaves copy it while the master syncs
  (upstream runs the flush and the replication side by side too). Safe because neither the
  acknowledgement nor confirmOffset counts the master's copy before its fsync (the gate hears
  of the turn only after it), and a slave holding bytes the master then loses in a crash is
  the state an ASYNC_FLUSH master's slave is in anyway: those bytes were never acknowledged;
- a slave's truncations (`truncate`, `reset_log_at`) and epoch records: each cut is durable
  before anything after it is acknowledged (the store's rule), and the confirm target and the
  watermark follow the cut;
- how many put bytes one turn takes (`turn_budget`): a master whose set holds a slave about
  `REPLICATED_TURN_BYTES`, so its HA connections ship one turn to the slaves while it writes
  the next and their work overlaps the master's (group commit would otherwise gather a
  client's whole window into one turn: the slave would idle while the master writes it, the
  master while the slave copies it); anyone else, no limit;
- `ship_first`: a master with a slave in its set wrote a turn. The actor then yields before it
  dispatches up to confirmOffset, so an HA writer woken by `written` (what the turn's inline
  send did not ship) ships the turn first: dispatch builds ConsumeQueue entries, which no
  replica waits for. The yields also let the client connections' readers queue the next turn's
  puts: a turn shipped inline that skipped them measured smaller turns (48-51 single sends a
  turn against 73-74, i28-repl6), so they stay for every replicated turn. A master alone in its
  set never yields (it pays nothing for replication). The slave's side of the same rule is the
  HA client's: it acks an append before it asks for that append's dispatch (slave_client.py).
"""

from __future__ import annotations

from typing import Any

import trio

from rocketrio.actors.broker.ha.group_transfer import GroupTransferService
from rocketrio.actors.broker.ha.ports import Watermark
from rocketrio.actors.broker.ha.truncation import DiscardAll, TruncateTo, TruncationPlan
from rocketrio.actors.broker.store.messages import (
    PutBatchBody,
    PutMessages,
    StagedPuts,
    StoreMsg,
    StoreRole,
)
from rocketrio.actors.observe import events
from rocketrio.storage.epoch_file import EpochRecord
from rocketrio.storage.message_store import MessageStore

REPLICATED_TURN_BYTES = 256 * 1024
UNBOUNDED = 1 << 62


def put_bytes(msg: StoreMsg) -> int:
    """A queued message's put bytes (bodies; 0 for what is not a put)."""
    if isinstance(msg, PutBatchBody):
        return len(msg.body)
    if isinstance(msg, PutMessages):
        return sum(len(m.body) for m in msg.messages)
    if isinstance(msg, StagedPuts):
        return sum(len(m.body) for p in msg.puts for m in p.messages)
    return 0


class ReplicationState:
    def __init__(self, store: MessageStore, role: StoreRole, log: Any) -> None:
        self.store = store
        self.log = log
        self.role = role
        self.gate: GroupTransferService | None = None
        self.epoch = -1
        self.first_write_epoch: int | None = None  # log the first write of each mastership
        self.written = Watermark(store.get_commitlog_max_offset())
        self.confirm_target = 0
        self.segment_size = store.config.mappedFileSizeCommitLog
        self.ship_first = False  # module doc; the actor takes it at the end of a turn

    def drain(
        self, first: StoreMsg, recv: trio.MemoryReceiveChannel[StoreMsg], most: int
    ) -> list[StoreMsg]:
        """One turn's messages: ``first`` and what the inbox holds now, up to ``most`` messages
        and, on a master with a slave in its set, about `REPLICATED_TURN_BYTES` of puts."""
        batch = [first]
        budget = self.turn_budget(first)  # put bytes, after ``first``
        while len(batch) < most and budget > 0:
            try:
                msg = recv.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            batch.append(msg)
            if budget < UNBOUNDED:
                budget -= put_bytes(msg)
        return batch

    def turn_budget(self, first: StoreMsg) -> int:
        """The put bytes a turn that starts with ``first`` may take after it (module doc)."""
        gate = self.gate
        if gate is None or not gate.has_replicas():
            return UNBOUNDED
        return REPLICATED_TURN_BYTES - put_bytes(first)

    def require(self, role: StoreRole) -> None:
        if self.role is not role:
            raise ValueError(f"the store is {self.role.value}, not {role.value}")

    def become_master(self, epoch: int, gate: GroupTransferService) -> int:
        """Take writes as master of ``epoch``; returns the epoch's start offset (the actor then
        applies the confirm target)."""
        if self.gate is not None and self.gate is not gate:
            self.gate.close()
        self.role = StoreRole.MASTER
        self.gate = gate
        self.epoch = epoch
        store = self.store
        start = store.begin_epoch(epoch)
        events.emit(
            self.log, events.EpochRecorded(epoch=epoch, start_offset=start, source="master")
        )
        gate.on_new_epoch(start)
        gate.on_local_max(store.get_commitlog_max_offset())
        self.written.kick()
        return start

    def set_role(self, role: StoreRole) -> None:
        """SLAVE or FENCED: what waits for replicas is answered as not acknowledged."""
        self.role = role
        if self.gate is not None:
            self.gate.close()
            self.gate = None
        self.confirm_target = 0
        self.epoch = -1
        self.written.kick()

    async def let_replicas_ship(self) -> None:
        """The turn's write goes to the replicas before its dispatch (module doc): the HA
        writers woke before this task yields; trio runs each batch of woken tasks in either
        order, so this yields twice (cancel-shielded: the turn ends as it would have)."""
        self.ship_first = False
        await trio.lowlevel.cancel_shielded_checkpoint()
        await trio.lowlevel.cancel_shielded_checkpoint()

    def note_write(self, end: int, replicated: bool) -> None:
        """A master's turn was written up to ``end``: log the first write of the mastership;
        ``replicated``: a slave is in the set (`ship_first`)."""
        self.ship_first = replicated
        if self.first_write_epoch != self.epoch:
            self.first_write_epoch = self.epoch
            events.emit(self.log, events.MasterFirstWrite(epoch=self.epoch, offset=end))

    def truncate(self, plan: TruncationPlan) -> tuple[int, int, EpochRecord | None]:
        """A slave cuts what it holds past its master's log (or everything)."""
        self.require(StoreRole.SLAVE)
        store = self.store
        match plan:
            case TruncateTo():
                if plan.offset < store.confirm_offset:
                    events.emit(
                        self.log,
                        events.TruncatingBelowConfirmOffset(
                            offset=plan.offset,
                            confirm_offset=store.confirm_offset,
                            reason="only an unclean election can make a slave cut confirmed data",
                        ),
                    )
                store.truncate_to(plan.offset)
            case DiscardAll():
                store.reset_to(store.get_commitlog_min_offset())
        self.after_cut(store.get_commitlog_max_offset())
        records = store.epoch_records()
        return (
            store.get_commitlog_min_offset(),
            store.get_commitlog_max_offset(),
            records[-1] if records else None,
        )

    def reset_log_at(self, offset: int) -> None:
        """A slave starts its log over where its master's oldest data begins."""
        self.require(StoreRole.SLAVE)
        if offset % self.segment_size:
            raise ValueError(f"the master starts at {offset}, not a segment boundary")
        self.store.reset_to(offset)
        self.confirm_target = offset
        self.written.reset(offset)

    def record_epoch(self, epoch: int, start_offset: int) -> None:
        self.require(StoreRole.SLAVE)
        self.store.record_epoch(epoch, start_offset)

    def after_cut(self, end: int) -> None:
        """The log now ends at ``end`` (a truncation or a repair's cut may have lowered it)."""
        self.confirm_target = min(self.confirm_target, end)
        self.written.reset(end)
