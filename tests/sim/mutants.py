"""Mutants: known-wrong versions of the product, as monkeypatches, to prove the cluster
simulation's checker has teeth (no product source is edited).

Each `Mutant` breaks one rule the design depends on; `applied(name)` patches it in for the
duration of a ``with`` block. Run them with ``python -m tests.sim.run_mutants`` (one JSON line
per mutant) or ``pytest tests/sim/test_cluster_sim.py --mutant NAME --seeds N``. They are not
part of the default CI run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import trio

from rocketrio.actors.broker.ha.slave_core import SlaveCore, Truncate
from rocketrio.actors.broker.ha.sync_state import SyncStateCore
from rocketrio.actors.broker.roles.slave_sync import SlaveSynchronize
from rocketrio.actors.broker.send.processor import SENT_BACK, SendMessageProcessor
from rocketrio.actors.broker.tables.meta_journal import MetaJournal
from rocketrio.actors.broker.tables.tables import TopicTable
from rocketrio.actors.client.message import SendResult, SendStatus
from rocketrio.actors.client.orderly import OrderlyProcessQueue
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.actors.client.stuck_sends import MasterChanged, StuckSendWatch
from rocketrio.actors.controller.heartbeat_manager import BrokerLiveInfo
from rocketrio.actors.raft.replication import ReplicationMixin
from rocketrio.protocol.bodies import TopicConfig
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.message_format import offset_msg_id, parse_host
from rocketrio.storage.commitlog.segments import SegmentFiles
from rocketrio.storage.message_store import MessageStore
from rocketrio.storage.raft_log import RaftLog
from tests.sim.acting_mutants import ACTING_MUTANTS

Patch = Callable[[Any, str, Any], None]  # setattr that is undone afterwards


@attrs.frozen
class Mutant:
    name: str
    doc: str
    apply: Callable[[Patch], None]


def _stuck_send_never_resent(patch: Patch) -> None:
    def check(self: StuckSendWatch) -> None:
        pass  # MUTANT: an unanswered send waits out its timeout whatever the route says

    patch(StuckSendWatch, "check", check)


def _stuck_send_acked_on_master_change(patch: Patch) -> None:
    send_to = Producer._send_to

    async def _send_to(self: Producer, mq: Any, addr: str | None, *a: Any, **kw: Any) -> Any:
        try:
            return await send_to(self, mq, addr, *a, **kw)
        except MasterChanged:  # MUTANT: reported stored although no broker answered
            ip, port = parse_host(addr or "0.0.0.0:0")
            return SendResult(SendStatus.SEND_OK, "", offset_msg_id(ip, port, 0), mq, -1)

    patch(Producer, "_send_to", _send_to)


def _liveness_half_the_timeout(patch: Patch) -> None:
    def is_alive(self: BrokerLiveInfo, now_ms: int) -> bool:
        return self.last_update_ms + self.heartbeat_timeout_ms // 2 >= now_ms  # MUTANT

    patch(BrokerLiveInfo, "is_alive", is_alive)


def _commitlog_flush_without_fsync(patch: Patch) -> None:
    def sync(self: SegmentFiles, fds: Sequence[int], directory: bool) -> None:
        pass  # MUTANT: the segments' fdatasync and directory fsync are skipped

    patch(SegmentFiles, "sync", sync)


def _raft_sync_without_fsync(patch: Patch) -> None:
    def sync(self: RaftLog) -> None:
        self._unsynced = False
        self._dir_unsynced = False

    patch(RaftLog, "sync", sync)


def _raft_leader_counts_unsynced_entries(patch: Patch) -> None:
    def _maybe_commit(self: Any) -> None:
        matches = [pr.match_index for pr in self._progress.values()]
        matches.append(self.last_index)  # MUTANT: its own entries before they are fsynced
        matches.sort(reverse=True)
        candidate = matches[len(self.peers) // 2]
        if candidate > self.commit_index and self.term_at(candidate) == self.term:
            self.commit_index = candidate

    patch(ReplicationMixin, "_maybe_commit", _maybe_commit)


def _raft_commits_earlier_term_by_count(patch: Patch) -> None:
    def _maybe_commit(self: Any) -> None:
        matches = [pr.match_index for pr in self._progress.values()]
        matches.append(self._stable_index)
        matches.sort(reverse=True)
        candidate = matches[len(self.peers) // 2]
        if candidate > self.commit_index:  # MUTANT: no "of the current term" rule (Figure 8)
            self.commit_index = candidate

    patch(ReplicationMixin, "_maybe_commit", _maybe_commit)


def _slave_truncation_not_durable(patch: Patch) -> None:
    def truncate(self: SegmentFiles, offset: int) -> None:
        pass  # MUTANT: only the in-memory end moves (upstream #10666); acks follow at once

    patch(SegmentFiles, "truncate", truncate)


def _slave_acks_before_truncating(patch: Patch) -> None:
    real = SlaveCore._on_handshake

    def _on_handshake(self: SlaveCore, h: Any, epochs: Any, lo: int, hi: int) -> list[Any]:
        out = real(self, h, epochs, lo, hi)
        if out and isinstance(out[0], Truncate):
            # MUTANT: report the log end before cutting the divergent tail
            return [self._ack(hi, self.last_read_ms), *out]
        return out

    patch(SlaveCore, "_on_handshake", _on_handshake)


def _confirm_over_connected_replicas(patch: Patch) -> None:
    def _recompute_confirm(self: SyncStateCore[Any]) -> bool:
        # MUTANT: min over the replicas connected now, not over every possible member of the
        # SyncStateSet (an isolated master and its slave advance confirm alone, #6662)
        acks = [
            r.ack_offset
            for r in self.replicas.values()
            if r.connected and not r.learner and r.ack_offset >= 0
        ]
        c = min([self.local_max, *acks])
        if c > self.confirm:
            self.confirm = c
            return True
        return False

    patch(SyncStateCore, "_recompute_confirm", _recompute_confirm)


def _dispatch_past_confirm(patch: Patch) -> None:
    real_init = MessageStore.__init__

    def __init__(self: MessageStore, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        self._gate.gated = False  # MUTANT: ConsumeQueues at put time and on recovery (#6609)

    patch(MessageStore, "__init__", __init__)


def _ack_before_sync_state_set_holds_it(patch: Patch) -> None:
    def ack_bound(self: SyncStateCore[Any], *, lease_valid: bool = True) -> int:
        # MUTANT: acknowledge once the master alone has written it (upstream's default
        # allAckInSyncStateSet=false with inSyncReplicas=1, without any lease)
        return self.local_max

    patch(SyncStateCore, "ack_bound", ack_bound)


def _adopt_with_default_queues(patch: Patch) -> None:
    def record(self: MetaJournal, change: Any) -> None:
        pass  # MUTANT: no metadata journal (the product before issue 26)

    def replay(self: MetaJournal, view: Any, topics: Any, groups: Any, queues: Any) -> None:
        # MUTANT: a new master adopts every queue range it does not know with
        # max(queues seen, defaultTopicQueueNums), and widens known topics to their records
        for topic, n in queues.items():
            have = topics.select(topic)
            if have is None:
                q = max(n, topics.config.defaultTopicQueueNums)
                topics.update(TopicConfig(topic, q, q))
            elif have.readQueueNums < n or have.writeQueueNums < n:
                w = max(have.writeQueueNums, n)
                topics.update(TopicConfig(topic, max(have.readQueueNums, n), w, have.perm))

    patch(MetaJournal, "record", record)
    patch(MetaJournal, "replay", replay)


def _topic_delete_not_persisted(patch: Patch) -> None:
    def delete(self: TopicTable, topic: str) -> bool:
        # MUTANT: gone from memory only: neither topics.json nor the journal hears of it
        return self.table.pop(topic, None) is not None

    patch(TopicTable, "delete", delete)


def _send_accepts_any_queue_id(patch: Patch) -> None:
    real = SendMessageProcessor._check

    def _check(self: SendMessageProcessor, h: Any, producer: str) -> Any:
        qid = h.queueId
        h.queueId = 0  # MUTANT: the queue id is not checked against the topic's queues
        try:
            return real(self, h, producer)
        finally:
            h.queueId = qid

    patch(SendMessageProcessor, "_check", _check)


def _slave_sync_skips_offsets(patch: Patch) -> None:
    real = SlaveSynchronize._get

    async def _get(self: SlaveSynchronize, client: Any, addr: str, code: int) -> bytes:
        body = await real(self, client, addr, code)
        if code == RequestCode.GET_ALL_CONSUMER_OFFSET:
            return b'{"offsetTable": {}}'  # MUTANT: a slave never copies consumer offsets
        return body

    patch(SlaveSynchronize, "_get", _get)


def _slave_sync_offsets_behind_the_round(patch: Patch) -> None:
    async def run(self: SlaveSynchronize, client: Any) -> None:
        real = self.sync_metadata

        async def whole_round(client: Any, addr: str) -> None:
            await real(client, addr)
            await self.sync_offsets(client, addr)  # MUTANT: offsets wait for the whole round

        self.sync_metadata = whole_round  # type: ignore[method-assign]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch)
            await self._metadata_loop(client)  # MUTANT: no loop of their own

    patch(SlaveSynchronize, "run", run)


def _learner_joins_the_sync_state_set(patch: Patch) -> None:
    real = SyncStateCore.on_connected

    def on_connected(
        self: SyncStateCore[Any], broker_id: int, *, learner: bool, now_ms: int
    ) -> Any:
        # MUTANT: an asyncLearner is treated as an ordinary slave (joins the set, can be elected)
        return real(self, broker_id, learner=False, now_ms=now_ms)

    patch(SyncStateCore, "on_connected", on_connected)


def _push_failure_committed(patch: Patch) -> None:
    real = PushConsumer._consume_inline

    def _consume_inline(self: PushConsumer, st: Any, pq: Any, msgs: Any) -> Any:
        req = real(self, st, pq, msgs)
        if req is not None:  # MUTANT: a failed consumption is committed, never sent back
            self._commit(st, pq, pq.remove(req.msgs))
        return None

    patch(PushConsumer, "_consume_inline", _consume_inline)


def _send_back_answered_not_stored(patch: Patch) -> None:
    async def send_back(self: SendMessageProcessor, h: Any, on_done: Any) -> Any:
        return SENT_BACK  # MUTANT: CONSUMER_SEND_MSG_BACK answers success, stores no retry

    patch(SendMessageProcessor, "send_back", send_back)


def _orderly_takes_newest_first(patch: Patch) -> None:
    def take_messages(self: OrderlyProcessQueue, n: int) -> list[Any]:
        taken: list[Any] = []
        tree = self._tree
        while tree and len(taken) < n:
            off = max(tree)  # MUTANT: the newest waiting message first
            m = tree.pop(off)
            self._consuming[off] = m
            taken.append(m)
        return taken

    patch(OrderlyProcessQueue, "take_messages", take_messages)


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant(
            "commitlog_flush_without_fsync",
            "CommitLog.flush (and the fenced-range rewrite) moves the flushed offset without "
            "fdatasync (SYNC_FLUSH acks data that a power cut loses)",
            _commitlog_flush_without_fsync,
        ),
        Mutant(
            "raft_sync_without_fsync",
            "RaftLog.sync does not fsync appended entries (a controller acknowledges "
            "entries a power cut loses)",
            _raft_sync_without_fsync,
        ),
        Mutant(
            "raft_leader_counts_unsynced",
            "a Raft leader counts its own not-yet-fsynced entries toward the commit majority",
            _raft_leader_counts_unsynced_entries,
        ),
        Mutant(
            "raft_commit_earlier_term",
            "a Raft leader commits an entry of an earlier term by counting replicas (Raft "
            "paper Figure 8)",
            _raft_commits_earlier_term_by_count,
        ),
        Mutant(
            "slave_truncation_not_durable",
            "a slave's CommitLog truncation only moves the in-memory end; it acks and "
            "continues before the cut is on disk (upstream #10666)",
            _slave_truncation_not_durable,
        ),
        Mutant(
            "slave_acks_before_truncating",
            "a slave acks its log end at the handshake, before cutting its divergent tail "
            "(the master counts bytes the slave is about to drop)",
            _slave_acks_before_truncating,
        ),
        Mutant(
            "confirm_over_connected_replicas",
            "the master computes confirmOffset over the replicas connected now instead of "
            "every possible SyncStateSet member (#6662)",
            _confirm_over_connected_replicas,
        ),
        Mutant(
            "dispatch_past_confirm",
            "ConsumeQueues are dispatched at put time and on recovery, past confirmOffset "
            "(#6609 / read-uncommitted)",
            _dispatch_past_confirm,
        ),
        Mutant(
            "ack_before_replicas",
            "the master acknowledges a write before the SyncStateSet holds it",
            _ack_before_sync_state_set_holds_it,
        ),
        Mutant(
            "adopt_with_default_queues",
            "no metadata journal: a promoted slave adopts a topic it has records of but no "
            "config for with max(queues seen, defaultTopicQueueNums) (issue 26)",
            _adopt_with_default_queues,
        ),
        Mutant(
            "topic_delete_not_persisted",
            "a topic delete drops the topic from memory only (topics.json and the metadata "
            "journal never hear of it)",
            _topic_delete_not_persisted,
        ),
        Mutant(
            "send_accepts_any_queue_id",
            "the send path stores a message in any queue id, whatever the topic's queue count",
            _send_accepts_any_queue_id,
        ),
        Mutant(
            "learner_joins_the_sync_state_set",
            "a master treats an asyncLearner like an ordinary slave (it joins the "
            "SyncStateSet and can be elected)",
            _learner_joins_the_sync_state_set,
        ),
        Mutant(
            "stuck_send_never_resent",
            "the producer never gives up an unanswered send whose broker set changed master "
            "(a hung master costs the whole send timeout)",
            _stuck_send_never_resent,
        ),
        Mutant(
            "stuck_send_acked_on_master_change",
            "a send abandoned because its master changed is reported SEND_OK without a re-send",
            _stuck_send_acked_on_master_change,
        ),
        Mutant(
            "liveness_half_the_timeout",
            "the controller judges a broker dead after half its controllerHeartBeatTimeoutMills "
            "(a pause shorter than the timeout deposes the master)",
            _liveness_half_the_timeout,
        ),
        Mutant(
            "slave_sync_skips_offsets",
            "a slave's SlaveSynchronize never copies its master's consumer offsets",
            _slave_sync_skips_offsets,
        ),
        Mutant(
            "slave_sync_offsets_behind_the_round",
            "a slave copies its master's consumer offsets only at the end of each whole "
            "SlaveSynchronize round (topics, groups, delay offsets, ACLs), not in their own loop",
            _slave_sync_offsets_behind_the_round,
        ),
        Mutant(
            "push_failure_committed",
            "the PushConsumer commits the offset of a message its listener failed (RECONSUME_LATER)"
            " and never sends it back: the group never consumes it",
            _push_failure_committed,
        ),
        Mutant(
            "send_back_answered_not_stored",
            "the broker answers CONSUMER_SEND_MSG_BACK with success but stores no retry message",
            _send_back_answered_not_stored,
        ),
        Mutant(
            "orderly_takes_newest_first",
            "the orderly consumer hands a queue's newest waiting message to the listener first",
            _orderly_takes_newest_first,
        ),
        *(Mutant(name, doc, apply) for name, doc, apply in ACTING_MUTANTS),  # acting_mutants.py
    )
}


@contextlib.contextmanager
def applied(name: str) -> Iterator[Mutant]:
    """Patch mutant ``name`` in for the block (KeyError names the known ones)."""
    if name not in MUTANTS:
        raise KeyError(f"unknown mutant {name!r}; known: {', '.join(sorted(MUTANTS))}")
    undo: list[tuple[Any, str, Any]] = []

    def patch(obj: Any, attr: str, value: Any) -> None:
        undo.append((obj, attr, obj.__dict__[attr]))
        setattr(obj, attr, value)

    try:
        MUTANTS[name].apply(patch)
        yield MUTANTS[name]
    finally:
        for obj, attr, old in reversed(undo):
            setattr(obj, attr, old)
