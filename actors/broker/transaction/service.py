"""Transactional messages, the Trio shell: END_TRANSACTION and the check service.

Owns the broker's transaction state: the scan offsets of the half and op queues (committed as
consumer offsets of group CID_RMQ_SYS_TRANS, persisted with consumerOffset.json like upstream)
and the `DecidedSet` of UNIQ_KEYs that makes END_TRANSACTION idempotent. Every decision is
policy.py's; half_store.py reads and writes the two queues; this module keeps the state, orders
the steps and talks to producers.

- `end_transaction` (upstream EndTransactionProcessor): commit re-puts the half to its real
  topic then writes the op; rollback writes the op only. A second END_TRANSACTION for a decided
  transaction changes nothing; one naming a half copy the check scan already passed applies to
  the pending copy (and the op names both), or is refused when none is pending.
- `check_round` (upstream TransactionalMessageServiceImpl.check), every
  transactionCheckInterval ms (a live change re-aims the sleep in progress: `check_timer`) and
  only while master: halves without an op older than transactionTimeOut (or
  CHECK_IMMUNITY_TIME_IN_SECONDS) are re-put with TRANSACTION_CHECK_TIMES + 1 and
  CHECK_TRANSACTION_STATE goes to one live producer connection of the half's PGROUP; after
  transactionCheckMax checks the half goes to TRANS_CHECK_MAX_TIME_TOPIC. Before a check, a
  half whose commit reached the real topic but whose op did not gets its op: no second commit.
- `escape_round` (RIP-32): on a classic slave acting for its dead master, every half without an
  op is escaped unchecked (as upstream) to a live master of another group as the prepared
  message its producer sent; that master stores it as its own half and checks it. The scan
  offset moves past a half only once it is written there (a failure ends the round and the
  half is tried again next round, never skipped after N failures: upstream's 10-failure skip
  loses it); copies of one transaction are escaped once. END_TRANSACTION stays refused on any
  slave (upstream): the escaped half is checked instead, so a commit cannot arrive twice.

One `trio.Lock` orders END_TRANSACTION against each step of a round. The state is rebuilt from
the store (ops from the op scan offset) whenever this broker becomes master.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Any, assert_never

import attrs
import structlog
import trio

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.clients.client_manager import ProducerManager
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.schedule.policy import parse_message_delay_level, wait_target
from rocketrio.actors.broker.store.broker_store import BrokerStore
from rocketrio.actors.broker.store.confirmed_put import ConfirmingWriter
from rocketrio.actors.broker.store.escape_bridge import EscapeBridge
from rocketrio.actors.broker.store.messages import put_and_wait
from rocketrio.actors.broker.store.reroute import Reroute, store_here
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.broker_tables import BrokerTables
from rocketrio.actors.broker.tables.consumer_offset import ConsumerOffsetManager
from rocketrio.actors.broker.tables.tables import TopicTable
from rocketrio.actors.broker.transaction.end_path import can_end_without_task, end_without_task
from rocketrio.actors.broker.transaction.half_cache import HalfCache
from rocketrio.actors.broker.transaction.half_store import TransactionQueues, host_of
from rocketrio.actors.broker.transaction.op_batch import OpBatcher
from rocketrio.actors.broker.transaction.policy import (
    CHECK_MAX_TIME_TOPIC,
    CID_SYS_RMQ_TRANS,
    HALF_QUEUE_ID,
    HALF_TOPIC,
    OP_TOPIC,
    Check,
    DecidedSet,
    Discard,
    HalfState,
    OpIndex,
    Skip,
    Wait,
    born_host_of,
    check_request,
    committed_message,
    decide,
    discarded_message,
    escaped_half,
    op_message,
    reject_late_end,
    renewed_half,
    transaction_value,
)
from rocketrio.actors.kernel.live_interval import LiveInterval
from rocketrio.actors.kernel.remoting import Connection, RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import PERM_READ, PERM_WRITE
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import EndTransactionRequestHeader
from rocketrio.protocol.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    UNIQ_KEY,
    MessageExt,
    encode_properties,
)
from rocketrio.protocol.remoting import RPC_ONEWAY, RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from rocketrio.storage.message_store import MessageToStore, PutResult

ENDS_IN_FLIGHT = 1024  # END_TRANSACTION requests handled at once, off their connections
HOURS_MS = 3_600_000


@attrs.define
class RoundReport:
    """What one check round did (for logs and tests)."""

    checked: int = 0
    discarded: int = 0
    skipped: int = 0
    repaired: int = 0  # committed before a crash, op written now
    half_offset: int = 0
    op_offset: int = 0


class TransactionService:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        writer: ConfirmingWriter,
        view: StoreView,
        offsets: ConsumerOffsetManager,
        producers: ProducerManager,
        topics: TopicTable,
        is_master: Callable[[], bool],
        now_ms: Callable[[], int],
        new_uniq_key: Callable[[], str],
        store_host: str,
        log: Any = None,
        escape: Callable[[], EscapeBridge | None] = lambda: None,
        reroute: Reroute = store_here,
        is_static: Callable[[str], bool] = lambda topic: False,
    ) -> None:
        self.reroute = reroute
        self.is_static = is_static  # a static topic: its commit may be forwarded (end_path.py)
        self.config = config
        self.escape = escape
        self.writer = writer
        self.view = view
        self.queues = TransactionQueues(writer, view)
        self.offsets = offsets
        self.producers = producers
        self.topics = topics
        self.is_master = is_master
        self.now_ms = now_ms
        self.new_uniq_key = new_uniq_key
        self.store_host = host_of(store_host)
        self.log = log or structlog.get_logger("broker").bind(actor="transaction")
        self.lock = trio.Lock()
        self.decided = DecidedSet()
        self.loaded = False  # state rebuilt since this broker last became master
        self.half_offset = 0
        self.op_offset = 0
        self._opaque = 0
        self._nursery: trio.Nursery | None = None
        self._ends = trio.Semaphore(ENDS_IN_FLIGHT)
        self.ops = OpBatcher(writer, self._op_message)
        self.halves = HalfCache()  # filled by the send path's half puts (half_cache.py)
        self._delay_text: str | None = None
        self._delay_levels = 0
        self.check_timer = LiveInterval.of_ms(config, "transactionCheckInterval")

    # ------------------------------------------------------------------ store access

    def _scan_start(self, topic: str) -> int:
        committed = self.offsets.query(CID_SYS_RMQ_TRANS, topic, HALF_QUEUE_ID)
        return max(committed, self.view.get_min_offset(topic, HALF_QUEUE_ID))

    def _commit_progress(self) -> None:
        self.offsets.commit(CID_SYS_RMQ_TRANS, HALF_TOPIC, HALF_QUEUE_ID, self.half_offset)
        self.offsets.commit(CID_SYS_RMQ_TRANS, OP_TOPIC, HALF_QUEUE_ID, self.op_offset)

    # ------------------------------------------------------------------ state

    def _load(self) -> None:
        """Rebuild the scan offsets and the decided keys from what the store holds."""
        self.half_offset = self._scan_start(HALF_TOPIC)
        self.op_offset = self._scan_start(OP_TOPIC)
        self.decided = DecidedSet()
        horizon = self.queues.half_end()
        for _, halves in self.queues.ops_from(self.op_offset):
            for h in halves:
                if h < self.half_offset:
                    continue
                half = self.queues.half_at(h)
                if half is not None:
                    self.decided.add(half.properties.get(UNIQ_KEY) or half.offset_msg_id, horizon)
        self.loaded = True

    def role_changed(self) -> None:
        """The broker's role changed: what this service knew may be stale (another master
        decided transactions meanwhile); it is rebuilt from the store before its next use; no
        half is served from the cache (a slave's CommitLog may have been truncated)."""
        self.loaded = False
        self.halves.clear()

    def _ensure_loaded(self) -> None:
        if not self.loaded:
            self._load()

    async def _decide(
        self, uniq: str, half: MessageExt, offsets: list[int], commit: bool
    ) -> Refusal | None:
        """Write the commit (when ``commit``) and, once it is stored, the op naming ``offsets``
        (with the other ops of its turn: op_batch.py). The caller has claimed ``uniq`` in
        `decided` (under the lock); a failed commit releases it."""
        self.topics.create_in_send_back(OP_TOPIC, 1, PERM_READ | PERM_WRITE)
        if commit:
            here = await self.reroute([self.final_message(half)])  # a moved logic queue
            if isinstance(here, str):
                self.decided.discard(uniq)
                return Refusal(ResponseCode.SYSTEM_ERROR, here)
            if here:  # empty: sent to the logic queue's leader, only the op is written here
                put = await put_and_wait(self.writer, here)
                if not put.stored:
                    self.decided.discard(uniq)
                    return Refusal(ResponseCode.SYSTEM_ERROR, put.remark or put.status.value)
        return await self.ops.write(offsets)

    def _op_message(self, offsets: list[int]) -> MessageToStore:
        return op_message(offsets, self.new_uniq_key(), self.now_ms(), self.store_host)

    def _max_delay_level(self) -> int:
        text = self.config.messageDelayLevel
        if text != self._delay_text:  # parsed once per value, not once per commit
            self._delay_levels = len(parse_message_delay_level(text))
            self._delay_text = text
        return self._delay_levels

    def final_message(self, half: MessageExt) -> MessageToStore:
        """The committed message; one with DELAY or a TIMER_* property waits for its time
        (upstream's put hook delays a commit like any send)."""
        msg = committed_message(half, born_host_of(half))
        wait = wait_target(
            half.properties,
            msg.topic,
            msg.queue_id,
            max_level=self._max_delay_level(),
            now_ms=self.now_ms(),
            timer_max_delay_ms=self.config.timerMaxDelaySec * 1000,
        )
        if wait is not None:
            assert isinstance(msg.properties, str)  # committed_message encodes them
            msg.topic, msg.queue_id = wait[0], wait[1]
            msg.properties += encode_properties(wait[2])
        return msg

    # ------------------------------------------------------------------ END_TRANSACTION

    async def end_transaction(
        self, h: EndTransactionRequestHeader, remark: str | None = None
    ) -> Refusal | None:
        """Apply a producer's (or a check's) decision; None: applied, or nothing to do."""
        if not self.is_master():
            return Refusal(
                ResponseCode.SLAVE_NOT_AVAILABLE,
                "Message store is slave mode, so end transaction is forbidden.",
            )
        kind = h.commitOrRollback
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            return None  # unknown state: the check will ask again (upstream answers nothing)
        if self.lock.locked():  # a check round's step holds it: after that step
            async with self.lock:
                claim = self.claim(h)
        else:  # free: claim never awaits, so taking the lock would change nothing
            claim = self.claim(h)
        if claim is None or isinstance(claim, Refusal):
            return claim
        uniq, half, offsets = claim
        return await self._decide(uniq, half, offsets, kind == TRANSACTION_COMMIT_TYPE)

    def claim(
        self, h: EndTransactionRequestHeader
    ) -> Refusal | tuple[str, MessageExt, list[int]] | None:
        """The synchronous part of END_TRANSACTION (no await: nothing interleaves with it):
        a refusal, None for nothing to do, or (uniq, half, offsets) claimed in `decided`."""
        self._ensure_loaded()
        half = self._half(h.commitLogOffset)
        refusal = self._check_prepared(h, half)
        if refusal is not None:
            return self._refused(h, refusal)
        assert half is not None
        if reject_late_end(
            half.properties,
            half.store_timestamp,
            now_ms=self.now_ms(),
            from_check=bool(h.fromTransactionCheck),
            transaction_timeout_ms=self.config.transactionTimeOut,
        ):
            return self._refused(
                h,
                Refusal(
                    ResponseCode.ILLEGAL_OPERATION,
                    "currentTimeMillis - bornTime > checkImmunityTime, wait for the check",
                ),
            )
        uniq = half.properties.get(UNIQ_KEY) or half.offset_msg_id
        if uniq in self.decided:
            return None  # a duplicate: the transaction was decided already
        offsets = [half.queue_offset]
        if half.queue_offset < self.half_offset:
            pending = self.queues.find_copy(uniq, self.half_offset)
            if pending is None or pending == half.queue_offset:
                return self._refused(
                    h,
                    Refusal(
                        ResponseCode.SYSTEM_ERROR,
                        "the transaction was already ended or discarded",
                    ),
                )
            offsets.append(pending)
        # claimed now: the writes below run outside the lock, a second END sees it decided
        self.decided.add(uniq, self.queues.half_end())
        return uniq, half, offsets

    def _half(self, offset: int) -> MessageExt | None:
        """The half at CommitLog ``offset``: recently stored (half_cache.py) or read back."""
        view = self.view
        half = self.halves.take(offset, view.commitlog_min_offset(), view.commitlog_max_offset())
        return half if half is not None else view.look_message_by_offset(offset)

    @staticmethod
    def _check_prepared(h: EndTransactionRequestHeader, half: MessageExt | None) -> Refusal | None:
        """Upstream checkPrepareMessage (the same remarks)."""
        err = ResponseCode.SYSTEM_ERROR
        if half is None or half.topic != HALF_TOPIC:
            return Refusal(err, "Find prepared transaction message failed")
        if half.properties.get(PROPERTY_PRODUCER_GROUP) != h.producerGroup:
            return Refusal(err, "The producer group wrong")
        if half.queue_offset != h.tranStateTableOffset:
            return Refusal(err, "The transaction state table offset wrong")
        if half.commitlog_offset != h.commitLogOffset:
            return Refusal(err, "The commit log offset wrong")
        return None

    def _refused(self, h: EndTransactionRequestHeader, refusal: Refusal) -> Refusal:
        events.emit(
            self.log,
            events.TransactionEndRefused(
                group=h.producerGroup, msg_id=h.msgId, remark=refusal.remark
            ),
        )
        return refusal

    # ------------------------------------------------------------------ the check

    def _committed_before(self, half: MessageExt, uniq: str) -> bool:
        """The half's commit is in its real topic already (its op was lost in a crash)."""
        if not self.config.messageIndexEnable:
            return False
        real = half.properties.get(PROPERTY_REAL_TOPIC)
        if real is None:
            return False
        return any(
            transaction_value(m.sys_flag) == TRANSACTION_COMMIT_TYPE
            for m in self.view.query_by_uniq_key(real, uniq, 4)
        )

    async def check_round(self) -> RoundReport:
        """One pass over the half queue, up to its end when the round started."""
        report = RoundReport()
        if not self.is_master():
            return report
        c = self.config
        async with self.lock:
            self._ensure_loaded()
            ops = OpIndex(self.half_offset)
            op_start = self.op_offset
            for op_offset, halves in self.queues.ops_from(op_start):
                ops.add(op_offset, halves)
        end = self.queues.half_end()
        i = self.half_offset
        while i < end:
            if not self.is_master():
                break
            async with self.lock:
                nxt = await self._step(i, ops, report, c)
                if nxt is None:
                    break
                i = self.half_offset = nxt
        async with self.lock:
            self.op_offset = ops.next_op_offset(op_start)
            self.decided.prune(self.half_offset)
            self._commit_progress()
        report.half_offset, report.op_offset = self.half_offset, self.op_offset
        return report

    async def _step(self, i: int, ops: OpIndex, report: RoundReport, c: BrokerConfig) -> int | None:
        """Handle the half at ``i``; the next offset, or None to end the round."""
        done_by_op = ops.take(i)
        if done_by_op:
            report.skipped += 1
            return i + 1
        half = self.queues.half_at(i)
        if half is None:
            return i + 1  # a hole (retention or a failed put): nothing to check there
        state = HalfState.of(half, c.transactionTimeOut)
        verdict = decide(
            state,
            now_ms=self.now_ms(),
            done_by_op=False,
            decided=state.uniq in self.decided,
            check_max=c.transactionCheckMax,
            max_age_ms=round(c.fileReservedTime * HOURS_MS),
        )
        match verdict:
            case Skip():
                report.skipped += 1
                return i + 1
            case Wait():
                return None
            case Discard():
                put = await self.queues.put(discarded_message(half, host_of(half.born_host)))
                if isinstance(put, Refusal):
                    return None
                self.topics.create_in_send_back(CHECK_MAX_TIME_TOPIC, 1, PERM_READ | PERM_WRITE)
                self.decided.add(state.uniq, self.queues.half_end())
                report.discarded += 1
                events.emit(
                    self.log,
                    events.TransactionCheckDiscarded(
                        topic=half.properties.get(PROPERTY_REAL_TOPIC, ""),
                        group=state.group,
                        msg_id=state.uniq,
                        queue_offset=i,
                        check_times=state.check_times,
                        reason=verdict.reason,
                    ),
                )
                return i + 1
            case Check():
                if self._committed_before(half, state.uniq):
                    self.decided.add(state.uniq, self.queues.half_end())
                    refusal = await self._decide(state.uniq, half, [i], commit=False)
                    if refusal is not None:
                        return None
                    report.repaired += 1
                    return i + 1
                copy = renewed_half(half, verdict.check_times, host_of(half.born_host))
                renewed = await self.queues.put(copy)
                if isinstance(renewed, Refusal):
                    return None
                self._send_check(state, half, copy, renewed)
                report.checked += 1
                return i + 1
            case _:
                assert_never(verdict)

    async def escape_round(self, bridge: EscapeBridge) -> int:
        """Escape the unresolved halves (module docstring); how many were written."""
        async with self.lock:
            self._ensure_loaded()
            ops = OpIndex(self.half_offset)
            op_start = self.op_offset
            for op_offset, halves in self.queues.ops_from(op_start):
                ops.add(op_offset, halves)
        end, escaped = self.queues.half_end(), 0
        i = self.half_offset
        while i < end and self.escape() is bridge:
            half = None if ops.take(i) else self.queues.half_at(i)
            uniq = None if half is None else half.properties.get(UNIQ_KEY) or half.offset_msg_id
            if half is not None and uniq is not None and uniq not in self.decided:
                error = await bridge.put_to_live_master([escaped_half(half, self.store_host)])
                if error is not None:
                    events.emit(
                        self.log,
                        events.EscapePutFailed(topic=HALF_TOPIC, count=1, error=error),
                    )
                    break
                self.decided.add(uniq, end)
                escaped += 1
            i = self.half_offset = i + 1
        async with self.lock:
            self.op_offset = ops.next_op_offset(op_start)
            self._commit_progress()
        return escaped

    def _producer_conn(self, group: str) -> Connection | None:
        members: dict[Hashable, Any] = self.producers.groups.get(group, {})
        for conn in members:
            if isinstance(conn, Connection) and not conn.closed:
                return conn
        return None

    def _send_check(
        self, state: HalfState, half: MessageExt, copy: MessageToStore, put: PutResult
    ) -> None:
        """CHECK_TRANSACTION_STATE (oneway) for the new copy (upstream sendCheckMessage)."""
        conn = self._producer_conn(state.group)
        if conn is None:
            events.emit(
                self.log, events.TransactionCheckNoProducer(group=state.group, msg_id=state.uniq)
            )
            return
        header, body = check_request(half, copy, put, self.config.brokerName, self.store_host)
        self._opaque += 1
        conn.send_nowait(
            RemotingCommand(
                RequestCode.CHECK_TRANSACTION_STATE,
                opaque=self._opaque,
                flag=RPC_ONEWAY,
                ext_fields=dict(to_ext(header)),
                body=body,
            )
        )

    # ------------------------------------------------------------------ the task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """A round every transactionCheckInterval ms while master; the state is rebuilt after
        every period as slave (a new master must not trust what it knew before). END_TRANSACTION
        requests run as tasks of this nursery."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.ops.run)
            task_status.started()
            try:
                while True:  # a new interval applies to the sleep in progress (live_interval.py)
                    await self.check_timer.sleep_from(trio.current_time())
                    if (bridge := self.escape()) is not None:
                        await self.escape_round(bridge)
                    elif not self.is_master():
                        self.role_changed()
                    else:
                        await self.check_round()
            finally:
                self._nursery = None

    def handlers(self) -> dict[int, Callable[[RequestContext], Any]]:
        return {RequestCode.END_TRANSACTION: self._handle_end}

    def _handle_end(
        self, ctx: RequestContext
    ) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
        """Through store callbacks when it can (end_path.py), without a coroutine; otherwise
        off the connection's reader (its next half send is not held up by this END's two
        writes), at most ENDS_IN_FLIGHT at once; beyond that inline (backpressure)."""
        h = from_ext(EndTransactionRequestHeader, ctx.cmd.ext_fields)
        if can_end_without_task(self):  # the common case (end_path.py)
            return end_without_task(self, ctx, h)
        if self._nursery is not None:
            try:
                self._ends.acquire_nowait()
            except trio.WouldBlock:
                pass
            else:
                self._nursery.start_soon(self._end_task, ctx, h)
                return None
        return self._end_inline(ctx, h)

    async def _end_inline(
        self, ctx: RequestContext, h: EndTransactionRequestHeader
    ) -> RemotingCommand | None:
        return self.end_response(ctx.cmd, await self.end_transaction(h, ctx.cmd.remark))

    async def _end_task(self, ctx: RequestContext, h: EndTransactionRequestHeader) -> None:
        try:
            ctx.respond(self.end_response(ctx.cmd, await self.end_transaction(h, ctx.cmd.remark)))
        finally:
            self._ends.release()

    @staticmethod
    def end_response(cmd: RemotingCommand, refusal: Refusal | None) -> RemotingCommand:
        if refusal is None:
            return cmd.make_response(ResponseCode.SUCCESS)
        return cmd.make_response(refusal.code, refusal.remark)


def build_transaction_service(
    io: BrokerIO,
    *,
    tables: BrokerTables,
    store: BrokerStore,
    producers: ProducerManager,
    is_master: Callable[[], bool],
    new_uniq_key: Callable[[], str],
    store_host: str,
    escape: Callable[[], EscapeBridge | None] = lambda: None,
    reroute: Reroute = store_here,
) -> TransactionService:
    """The broker's transaction service, over the half and op queues of its store."""
    return TransactionService(
        io.config,
        writer=store.actor,
        view=store.view,
        offsets=tables.offsets,
        producers=producers,
        topics=tables.topics,
        is_master=is_master,
        now_ms=io.now_ms,
        new_uniq_key=new_uniq_key,
        store_host=store_host,
        log=io.log.bind(actor="transaction"),
        escape=escape,
        reroute=reroute,
        is_static=lambda topic: tables.mappings.get(topic) is not None,
    )
