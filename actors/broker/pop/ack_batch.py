"""ACK_MESSAGE records of one scheduler turn merged into few revive-log records, one store put.

Upstream batches ACK writes through PopBufferMergeService (enablePopBufferMerge): it keeps CKs
and ACKs in memory for up to popCkStayBufferTime and answers an ACK before anything is written,
so a crash loses the ACKs (and the CKs) of that window. rocketrio has it too, off by default
(buffer_merge.py: an ACK of a CK still in memory never reaches this batcher). Without it, this
module keeps write-before-answer and batches only what is already waiting at the same moment:

- every ACK_MESSAGE that passed its checks is handed to `AckBatcher.submit` (no await, no write);
- the batcher's task wakes once per scheduler turn, takes what is queued (at most MAX_PER_PUT
  ACKs), and `merge_acks` turns them into one record per CK: ACKs of the same checkpoint (same
  revive queue and the same merge key: topic, group, queue, CK start offset, pop time,
  brokerName) become one ``bAck`` record listing their offsets, an ACK alone stays an ``ack``
  record exactly as before;
- all those records go to the store writer as ONE put; each ACK is answered SUCCESS only once
  that put is stored (in the CommitLog, flushed and replicated by the store's own rule, like any
  put: SYNC_FLUSH / SYNC_MASTER wait as they do for a send), or refused when the store refused.

So the contract is unchanged: an answered ACK is in the CommitLog before the client hears
SUCCESS (its message is not revived after a crash of the broker once it restarts from its disk),
an unanswered one may be lost with the broker, and its message then comes back after the
invisible time (at-least-once). What changes is the number of store requests and revive-log
records: 32 ACKs of one receive arriving together become one put of one record, and the revive
scan later reads one record instead of 32.

ACKs never merge across checkpoints: a record names exactly one CK (its merge key), and an
offset acknowledged in the wrong CK's record would leave the right CK's message to be revived.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import trio

from rocketrio.actors.broker.dispatch.outcomes import Done, Refusal
from rocketrio.actors.broker.store.messages import StoreWriter
from rocketrio.actors.broker.store.turn_puts import NotStored, TurnPuts
from rocketrio.protocol.pop_checkpoint import AckMsg, MergeKey
from rocketrio.storage.message_store import MessageToStore

MAX_PER_PUT = 1024  # ACKs taken into one store put; the rest waits for the next turn
MAX_QUEUED = 8192  # beyond this, `submit` refuses and the caller puts its record alone


@attrs.frozen
class MergedAck:
    """One revive-log record to write: ``ack`` for revive queue ``revive_qid``, covering the
    submitted ACKs at ``items`` (indices into the list given to `merge_acks`)."""

    revive_qid: int
    ack: AckMsg
    items: tuple[int, ...]


def merge_acks(acks: Sequence[tuple[int, MergeKey, int]]) -> list[MergedAck]:
    """(revive queue, CK merge key, acknowledged offset) triples as records, one per CK (module
    docstring), in first-seen order; offsets of a merged record ascending and distinct."""
    groups: dict[tuple[int, MergeKey], list[int]] = {}
    for i, (qid, key, _) in enumerate(acks):
        groups.setdefault((qid, key), []).append(i)
    out: list[MergedAck] = []
    for (qid, key), idx in groups.items():
        if len(idx) == 1:
            i = idx[0]
            out.append(MergedAck(qid, AckMsg.of_key(key, (acks[i][2],)), (i,)))
            continue
        offsets = tuple(sorted({acks[i][2] for i in idx}))
        out.append(MergedAck(qid, AckMsg.of_key(key, offsets, batch=True), tuple(idx)))
    return out


OnAcked = Callable[[Done | Refusal], None]
ToMessage = Callable[[AckMsg, int], MessageToStore]  # (ack, revive qid) -> its record
_DONE = Done()

# one queued ACK: (revive queue, its CK's merge key, offset, on_acked); a plain tuple, made on
# every ACK_MESSAGE (the AckMsg is made per record, in `merge_acks`)
_Queued = tuple[int, MergeKey, int, OnAcked]


def _answer(batch: list[_Queued], refusal: Refusal | None) -> None:
    outcome = _DONE if refusal is None else refusal
    for q in batch:
        q[3](outcome)


class AckBatcher:
    """Queues submitted ACKs, writes each turn's as one put of merged records (module
    docstring; the queue and its task are `TurnPuts`)."""

    def __init__(self, writer: StoreWriter, to_message: ToMessage, not_stored: NotStored) -> None:
        self.to_message = to_message
        self._puts = TurnPuts[_Queued](
            writer, self._records, _answer, not_stored,
            take=lambda q: MAX_PER_PUT, max_queued=MAX_QUEUED,
        )  # fmt: skip
        # `submit` without its own call: the queue's, given the queued tuple itself (one call
        # per ACK_MESSAGE less; `PopAckProcessor.ack_parsed`)
        self.queue: Callable[[_Queued], bool] = self._puts.submit

    @property
    def running(self) -> bool:
        return self._puts.running

    @property
    def puts(self) -> int:
        return self._puts.puts

    def submit(self, revive_qid: int, key: MergeKey, offset: int, on_acked: OnAcked) -> bool:
        """Queue the ACK of ``offset`` of the CK ``key`` names; ``on_acked`` gets `Done` once its
        record is stored, or the store's refusal. False (nothing queued) when the task is not
        running or the queue is full: the caller then writes the record itself."""
        return self._puts.submit((revive_qid, key, offset, on_acked))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._puts.run(task_status=task_status)

    def _records(self, batch: list[_Queued]) -> list[MessageToStore]:
        merged = merge_acks([q[:3] for q in batch])
        return [self.to_message(m.ack, m.revive_qid) for m in merged]
