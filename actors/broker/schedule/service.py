"""The schedule service (upstream ScheduleMessageService + the timer wheel's dequeue): the Trio
shell that re-puts due delay-level and timer messages. Decisions live in schedule_policy.py.

- Master only: it scans while ``is_master()`` holds and idles otherwise. The broker calls
  `role_changed` on every role change, so a promoted slave starts at once from the offsets
  slave sync copied (delayOffset.json); a demoted master stops before its next re-put.
- One pass reads each queue of SCHEDULE_TOPIC_XXXX (one per level) and of rmq_sys_wheel_timer
  from its offset, up to `BATCH` entries at a time, and re-puts the due head of the queue in
  one store put (queue order is due order, so a pass stops at the first entry not due). The
  offset moves only once the re-put is as durable as an acknowledged send
  (store/confirmed_put.py: a re-put only the master holds waits for confirmOffset, and a
  mastership that ends first leaves the offset): a crash re-puts at most what the last
  delayOffset.json write (every flushDelayOffsetInterval) had not recorded.
- Between passes it sleeps until the earliest head falls due, or until the store dispatches a
  new entry to either topic (`notify_arrivals`, from the store actor's turn): a message due in
  1 s is re-put 1 s after it was stored, not at the next tick of a fixed period.
- Acting master (RIP-32): on a classic slave standing in for its dead master, ``escape()``
  returns the `EscapeBridge` and every re-put goes to a live master of another group instead of
  the local store (which refuses writes), one entry at a time so a failure re-sends at most that
  one; a timer message not yet due leaves with its TIMER_DELIVER_MS so that master's wheel
  delivers it on time. A failed escape keeps the offset: the entry is tried again, never skipped.
- `stop` lets a running re-put finish, then returns; the broker persists delayOffset.json
  after it (graceful shutdown), so a restart re-puts nothing twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, assert_never

import structlog
import trio

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.dispatch.answers import host_tuple
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.schedule.policy import (
    WAIT_PROPERTIES,
    Deliver,
    Rehop,
    due_prefix,
    parse_message_delay_level,
    real_target,
    timer_step,
)
from rocketrio.actors.broker.store.broker_store import BrokerStore
from rocketrio.actors.broker.store.confirmed_put import ConfirmingWriter, put_confirmed
from rocketrio.actors.broker.store.escape_bridge import EscapeBridge
from rocketrio.actors.broker.store.reroute import Reroute, store_here
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.broker_tables import BrokerTables
from rocketrio.actors.broker.tables.delay_offset import DelayOffsetTable
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.message import MessageExt
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_json
from rocketrio.storage.message_store import MessageToStore
from rocketrio.storage.store_dispatch import SCHEDULE_TOPIC
from rocketrio.storage.timer_wheel import (
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    TIMER_TOPIC,
)

BATCH = 64  # entries read and re-put per store put
RETRY_MS = 100  # a refused re-put is tried again this much later
IDLE_POLL_S = 1.0  # a non-master looks at its role at least this often
_TOPICS = (SCHEDULE_TOPIC, TIMER_TOPIC)


class ScheduleService:
    """See module docstring. ``await nursery.start(service.run)``."""

    def __init__(
        self,
        *,
        levels: int,
        offsets: DelayOffsetTable,
        reader: StoreView,
        writer: ConfirmingWriter,
        is_master: Callable[[], bool],
        now_ms: Callable[[], int],
        log: Any = None,
        escape: Callable[[], EscapeBridge | None] = lambda: None,
        reroute: Reroute = store_here,
    ) -> None:
        self.reroute = reroute
        self.levels = levels
        self.offsets = offsets
        self.reader = reader
        self.writer = writer
        self.is_master = is_master
        self.now_ms = now_ms
        self.escape = escape
        self.log = log or structlog.get_logger("broker").bind(actor="schedule_service")
        self.delivered = 0  # messages re-put to their real topic
        self.rehops = 0  # timer messages stored again at a lower level
        self.active = False
        self._timer_queues: set[int] = set()
        self._wake = trio.Event()
        self._stopping = False
        self._stopped = trio.Event()
        self._running = False
        self._failing = False

    # -- told by the broker
    def notify_arrivals(self, arrived: Mapping[tuple[str, int], int]) -> None:
        """A store turn's arrivals: (topic, queue id) -> new max offset; a new entry in either
        topic wakes the loop, a timer queue's is remembered."""
        for topic, queue_id in arrived:
            if topic in _TOPICS:
                if topic == TIMER_TOPIC:
                    self._timer_queues.add(queue_id)
                self._wake.set()

    def role_changed(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        """Finish the running re-put (if any) and stop scanning."""
        self._stopping = True
        self._wake.set()
        if self._running:
            await self._stopped.wait()

    # -- the loop
    def handlers(self) -> Handlers:
        """GET_ALL_DELAY_OFFSET (45): the table as delayOffset.json holds it (slave sync reads
        it)."""
        table = self.offsets

        async def get_all(ctx: RequestContext) -> RemotingCommand:
            return ctx.cmd.make_response(ResponseCode.SUCCESS, body=to_json(table.snapshot()))

        return {RequestCode.GET_ALL_DELAY_OFFSET: get_all}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._running = True
        self._timer_queues.update(self.reader.topic_queue_ids().get(TIMER_TOPIC, []))
        task_status.started()
        try:
            while not self._stopping:
                wake = self._wake = trio.Event()
                timeout = IDLE_POLL_S
                if self.is_master():
                    self._become_active()
                    next_due = await self._pass()
                    timeout = math.inf if next_due is None else (next_due - self.now_ms()) / 1000
                else:
                    self._become_idle("not master")
                if self._stopping:
                    break
                with trio.move_on_after(max(0.0, timeout)):
                    await wake.wait()
        finally:
            self._become_idle("stopping")
            self._running = False
            self._stopped.set()

    def _become_active(self) -> None:
        if not self.active:
            self.active = True
            events.emit(self.log, events.ScheduleServiceStarted(offsets=self._offsets()))

    def _become_idle(self, reason: str) -> None:
        if self.active:
            self.active = False
            events.emit(
                self.log, events.ScheduleServiceStopped(offsets=self._offsets(), reason=reason)
            )

    def _offsets(self) -> dict[str, int]:
        out = {f"level{k}": v for k, v in sorted(self.offsets.levels.items())}
        out.update({f"timer{k}": v for k, v in sorted(self.offsets.timers.items())})
        return out

    async def _pass(self) -> int | None:
        """Re-put what is due in every queue; the earliest time a head falls due next."""
        next_due: int | None = None
        queues = [(SCHEDULE_TOPIC, q) for q in range(self.levels)]
        queues += [(TIMER_TOPIC, q) for q in sorted(self._timer_queues)]
        for topic, queue_id in queues:
            due = await self._drain(topic, queue_id)
            if due is not None and (next_due is None or due < next_due):
                next_due = due
        return next_due

    def _offset_of(self, topic: str, queue_id: int) -> int:
        if topic == SCHEDULE_TOPIC:
            return self.offsets.level_offset(queue_id + 1)
        return self.offsets.timer_offset(queue_id)

    def _set_offset(self, topic: str, queue_id: int, offset: int) -> None:
        if topic == SCHEDULE_TOPIC:
            self.offsets.update_level(queue_id + 1, offset)
        else:
            self.offsets.update_timer(queue_id, offset)

    async def _drain(self, topic: str, queue_id: int) -> int | None:
        while not self._stopping and self.is_master():
            offset = self._offset_of(topic, queue_id)
            batch = 1 if self.escape() is not None else BATCH
            first, entries = self.reader.read_queue_entries(topic, queue_id, offset, batch)
            if first != offset:  # retention removed entries below the queue's minimum
                self._set_offset(topic, queue_id, first)
            if not entries:
                return None
            now = self.now_ms()
            count, due = due_prefix([e[2] for e in entries], now)
            if count:
                if not await self._reput(topic, queue_id, first, entries[:count], now):
                    return now + RETRY_MS
                self._set_offset(topic, queue_id, first + count)
            if due is not None:
                return due
        return None

    async def _reput(
        self,
        topic: str,
        queue_id: int,
        first: int,
        entries: list[tuple[int, int, int]],
        now: int,
    ) -> bool:
        msgs: list[MessageToStore] = []
        delivered = 0
        for i, (phy, _size, _due) in enumerate(entries):
            msg = self.reader.look_message_by_offset(phy)
            step = None if msg is None else self._step(topic, msg, now)
            if msg is None or step is None:
                events.emit(
                    self.log,
                    events.ScheduleEntryMissing(
                        topic=topic, queue_id=queue_id, offset=first + i, commitlog_offset=phy
                    ),
                )
                continue
            match step:
                case Deliver(real_topic, real_qid, props):
                    msgs.append(_to_store(msg, real_topic, real_qid, props))
                    delivered += 1
                case Rehop(props) if self.escape() is not None:
                    msgs.append(_escaped_timer(msg, props))
                    delivered += 1
                case Rehop(props):
                    msgs.append(_to_store(msg, TIMER_TOPIC, 0, props))
                case _:
                    assert_never(step)
        if not msgs:
            return True
        error = await self._put(msgs)
        if error is not None:
            if not self._failing:
                self._failing = True
                events.emit(
                    self.log,
                    events.ScheduleDeliverFailed(
                        topic=topic, queue_id=queue_id, offset=first, count=len(msgs), error=error
                    ),
                )
            return False
        self._failing = False
        self.delivered += delivered
        self.rehops += len(msgs) - delivered
        return True

    def _step(self, topic: str, msg: MessageExt, now: int) -> Deliver | Rehop | None:
        props = msg.properties
        try:
            if topic == SCHEDULE_TOPIC:
                return real_target(props)
            out = props.get(PROPERTY_TIMER_OUT_MS, "")
            if not out.isdigit():
                return None
            return timer_step(props, int(out), now)
        except ValueError:
            return None

    async def _put(self, msgs: list[MessageToStore]) -> str | None:
        """Store the messages (here, or through escape while acting); None once stored, else
        why not."""
        bridge = self.escape()
        if bridge is not None:
            return await bridge.put_to_live_master(msgs)
        here = await self.reroute(msgs)  # a static topic's logic queue that moved: its leader
        if isinstance(here, str):
            return here
        if not here:
            return None
        got = await put_confirmed(self.writer, here, give_up=self._giving_up)
        return got if isinstance(got, str) else None

    def _giving_up(self) -> bool:
        return self._stopping or not self.is_master()


def _to_store(msg: MessageExt, topic: str, queue_id: int, props: dict[str, str]) -> MessageToStore:
    return MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=msg.body,
        flag=msg.flag,
        properties=props,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=host_tuple(msg.born_host),
        reconsume_times=msg.reconsume_times,
    )


def _escaped_timer(msg: MessageExt, props: dict[str, str]) -> MessageToStore:
    """A timer message not due yet, handed to another group's master: its real topic with the
    deliver time, so that master's timer wheel keeps it until then."""
    deliver = props.get(PROPERTY_TIMER_OUT_MS, "0")
    target = real_target(props)
    kept = {k: v for k, v in target.properties.items() if k not in WAIT_PROPERTIES}
    kept.pop(PROPERTY_TIMER_OUT_MS, None)
    kept[PROPERTY_TIMER_DELIVER_MS] = deliver
    return _to_store(msg, target.topic, target.queue_id, kept)


def build_schedule_service(
    io: BrokerIO,
    *,
    tables: BrokerTables,
    store: BrokerStore,
    is_master: Callable[[], bool],
    escape: Callable[[], EscapeBridge | None] = lambda: None,
    reroute: Reroute = store_here,
) -> ScheduleService:
    """The broker's schedule service, over delayOffset.json and the store."""
    return ScheduleService(
        levels=len(parse_message_delay_level(io.config.messageDelayLevel)),
        offsets=tables.delay_offsets.table,
        reader=store.view,
        writer=store.actor,
        is_master=is_master,
        now_ms=io.now_ms,
        log=io.log.bind(actor="schedule_service"),
        escape=escape,
        reroute=reroute,
    )
