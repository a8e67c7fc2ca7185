"""What the push and the lite pull consumer share: subscriptions, lifecycle, rebalance, one
long-polling pull loop per owned queue, and offset persistence (upstream RebalanceImpl,
PullAPIWrapper and the pull half of DefaultMQPushConsumerImpl).

Rebalance runs every ``rebalanceInterval`` and at once when asked (start, subscription change,
NOTIFY_CONSUMER_IDS_CHANGED, a route whose readable queues changed). For each topic it computes
the wanted queues (clustering: `allocate` over the group's members as the broker lists them;
broadcasting: every readable queue; a subclass may decide otherwise), stops the queues no longer
wanted (pull cancelled, `ProcessQueue` dropped, offset persisted, then forgotten) and starts the
new ones at the stored offset or per ``consumeFromWhere`` (`start_offset`).

A pull loop asks its broker with PULL_MESSAGE (SUSPEND | SUBSCRIPTION, plus COMMIT_OFFSET for
the push consumer when it pulls from the master) and hands found messages to ``_deliver`` after
the client-side tag check. Flow control (``_flow_controlled``) pauses pulling for 50 ms. Which
replica a queue is pulled from, the header, the processing of an answer and the retry delays
are pull_api.py's (upstream PullAPIWrapper). A pull that fails because the broker is gone asks
for a fresh route at once and retries soon (`pull_retry_delay`); other errors pause the queue
for 3 s. When a route update changes where a queue should be pulled from (its master is back,
or moved), the pull in flight at the old address (perhaps held there for 15 s, or parked at a
hung master: stuck_pulls.py asks for the route) is abandoned and pulled at once from the new one.
"""

from __future__ import annotations

import abc
from typing import Any

import structlog

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.api import PullResult, PullStatus
from rocketrio.actors.client.backend import monotonic_ms
from rocketrio.actors.client.config import (
    MASTER_ID,
    RETRY_GROUP_TOPIC_PREFIX,
    ClientConfig,
    ConsumerSettings,
    MessageModel,
    retry_topic,
)
from rocketrio.actors.client.consumer_stats import ConsumerStatsManager
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    RemoteBrokerOffsetStore,
    RunBlocking,
    default_offsets_path,
    run_in_thread,
)
from rocketrio.actors.client.process_queue import ProcessQueue
from rocketrio.actors.client.pull_api import (
    CALL_ERRORS,
    PULL_DELAY_WHEN_EXCEPTION_S,
    PULL_DELAY_WHEN_FLOW_CONTROL_S,
    QueueState,
    broker_gone,
    found_messages,
    pull_broker,
    pull_header,
    pull_retry_delay,
)
from rocketrio.actors.client.queue_select import subscribe_queues
from rocketrio.actors.client.rebalance import (
    StartKind,
    allocate,
    default_consume_timestamp,
    diff_assignment,
    parse_consume_timestamp,
    sort_queues,
    start_offset,
)
from rocketrio.actors.client.remoting import ClientTransport as Transport
from rocketrio.actors.client.running_info_reply import consumer_running_info
from rocketrio.actors.client.sql_subscription import check_client_in_broker, subscription_of
from rocketrio.actors.client.stuck_pulls import watch_stuck_pulls
from rocketrio.actors.client.subscription import build_subscription
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import ConsumerData, MessageQueue, SubscriptionData, TopicRouteData
from rocketrio.protocol.headers import PullMessageRequestHeader
from rocketrio.protocol.message import MessageExt
from rocketrio.protocol.running_info import ConsumerRunningInfo

log = structlog.get_logger("consumer")

STATS_TICK_S = 10.0  # the stats' minute list samples every 10 s


class ConsumerCore(abc.ABC):
    consume_type = "CONSUME_PASSIVELY"
    consume_orderly = False  # running info's PROP_CONSUME_ORDERLY
    commit_offset_in_pull = True  # the push consumer lets the broker commit with each pull
    subscribe_retry_topic = True

    def __init__(
        self,
        settings: ConsumerSettings,
        namesrv_addr: str | list[str],
        *,
        transport: Transport | None,
        client_config: ClientConfig | None,
        client: MQClientInstance | None,
        run_blocking: RunBlocking = run_in_thread,
    ) -> None:
        self.settings = settings
        self.run_blocking = run_blocking
        self.group = settings.consumerGroup
        self._own_client = client is None
        self.client = client or MQClientInstance(
            namesrv_addr, transport=transport, config=client_config
        )
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.queues: dict[MessageQueue, QueueState] = {}
        self.offset_store: OffsetStore | None = None
        self._rebalance_event = aio.new_event()
        self._route_queues: dict[str, set[MessageQueue]] = {}
        self._nursery: aio.TaskGroup | None = None
        self._nursery_cm: Any = None
        self._consume_from_ms = 0
        self.stats = ConsumerStatsManager()  # pull and consume figures (running info)
        self.start_timestamp_ms = 0

    @property
    def clustering(self) -> bool:
        return self.settings.messageModel is MessageModel.CLUSTERING

    @property
    def started(self) -> bool:
        return self._nursery is not None

    # -- subscriptions
    def subscribe(self, topic: str, expr: str = "*", *, sql: str | None = None) -> None:
        """Subscribe by tags (``expr``: "*" or "a || b") or by a SQL92 selector (``sql``)."""
        self.subscriptions[topic] = subscription_of(topic, expr, sql, wallclock_ms())
        if self.started:
            self.client.watch_topic(topic)
            self.request_rebalance()

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        if self.started:
            self.request_rebalance()

    # -- ConsumerInner (called by the client core)
    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            groupName=self.group,
            consumeType=self.consume_type,
            messageModel=self.settings.messageModel.value,
            consumeFromWhere=self.settings.consumeFromWhere.value,
            subscriptionDataSet=list(self.subscriptions.values()),
        )

    def subscribed_topics(self) -> set[str]:
        return set(self.subscriptions)

    def request_rebalance(self) -> None:
        self._rebalance_event.set()

    def assigned_queues(self) -> set[MessageQueue]:
        return set(self.queues)

    def consumer_running_info(self) -> ConsumerRunningInfo:
        return consumer_running_info(self)

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET from a broker: restart the owned queues it lists
        (`restart_queues_at`). Runs in the consumer's nursery: persisting the offsets is a call
        to the broker whose push is being served."""
        if self._nursery is None:
            return
        owned = {mq: o for mq, o in offsets.items() if mq.topic == topic and mq in self.queues}
        if owned:
            self._nursery.start_soon(self.restart_queues_at, owned)

    async def restart_queues_at(self, offsets: dict[MessageQueue, int]) -> None:
        """Continue each queue at the given offset, without a restart (upstream
        MQClientInstance.resetOffset): its ProcessQueue is dropped (what was pulled is
        forgotten, and consumption still running for it can no longer commit), its pull is
        cancelled, the offset store holds the new offset and persists it, and a new pull loop
        starts there."""
        assert self.offset_store is not None
        restarted: dict[MessageQueue, int] = {}
        for mq, offset in offsets.items():
            st = self.queues.get(mq)
            if st is None or offset < 0:
                continue
            st.pq.dropped = True
            st.cancel.cancel()
            new = QueueState(mq=mq, sub=st.sub, next_offset=offset, pq=self._new_process_queue())
            self.queues[mq] = new
            self.offset_store.table.update(mq, offset, increase_only=False)
            self.nursery.start_soon(self._pull_loop, new)
            restarted[mq] = offset
        if not restarted:
            return
        events.emit(
            log,
            events.OffsetResetApplied(
                group=self.group,
                offsets={f"{mq.brokerName}:{mq.queueId}": o for mq, o in restarted.items()},
            ),
            client_id=self.client.client_id,
        )
        await self.offset_store.persist(list(restarted))

    # -- lifecycle
    async def __aenter__(self) -> Any:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.shutdown()

    def _check_startable(self) -> None:
        if not self.subscriptions:
            raise MQClientError("subscribe to at least one topic before starting the consumer")

    async def start(self) -> None:
        """Start (call `shutdown` from the same task); prefer ``async with``."""
        self._check_startable()
        if self.clustering and self.subscribe_retry_topic:
            rt = retry_topic(self.group)
            self.subscriptions.setdefault(rt, build_subscription(rt, "*", wallclock_ms()))
        stamp = self.settings.consumeTimestamp or default_consume_timestamp(wallclock_ms())
        self._consume_from_ms = parse_consume_timestamp(stamp)
        self.start_timestamp_ms = wallclock_ms()
        if self._own_client:
            await self.client.__aenter__()
        try:
            await self._start_services()
        except BaseException:
            await self._stop_services()
            raise

    async def _start_services(self) -> None:
        if self.clustering:
            self.offset_store = RemoteBrokerOffsetStore(self.client, self.group)
        else:
            path = self.settings.offsetStorePath or default_offsets_path(
                self.client.client_id, self.group
            )
            self.offset_store = LocalFileOffsetStore(path, self.run_blocking)
        await self.offset_store.load()
        self._nursery_cm = aio.create_task_group()
        self._nursery = nursery = await self._nursery_cm.__aenter__()
        self.client.route_listeners.append(self._on_route)
        self._start_workers(nursery)
        nursery.start_soon(self._rebalance_loop)
        nursery.start_soon(self._stats_loop)
        nursery.start_soon(watch_stuck_pulls, self)  # pulls parked at a hung master
        interval = self._persist_interval_s()
        if interval is not None:
            nursery.start_soon(self._persist_loop, interval)
        await self.client.register_consumer(self)
        await check_client_in_broker(self.client, self.group, self.subscriptions.values())
        self.request_rebalance()

    @abc.abstractmethod
    def _start_workers(self, nursery: aio.TaskGroup) -> None:
        """Start the consumption side (tasks, channels) before the first rebalance."""

    def _persist_interval_s(self) -> float | None:
        return self.client.config.persistConsumerOffsetInterval / 1000

    @abc.abstractmethod
    async def _before_persist_on_stop(self) -> None:
        """Let work in progress finish before the final offset persist on shutdown."""

    async def shutdown(self) -> None:
        """Stop pulling, persist offsets, leave the group (the broker tells the others)."""
        await self._stop_services()

    async def _stop_services(self) -> None:
        try:
            if self._nursery is not None:
                for st in self.queues.values():
                    st.cancel.cancel()
                await self._before_persist_on_stop()
                if self.offset_store is not None:
                    await self.offset_store.persist(list(self.queues))
                await self.client.unregister_consumer(self.group, self)
                self._nursery.cancel_scope.cancel()
        finally:
            if self._on_route in self.client.route_listeners:
                self.client.route_listeners.remove(self._on_route)
            try:
                if self._nursery_cm is not None:
                    cm, self._nursery_cm, self._nursery = self._nursery_cm, None, None
                    # raises when an outer scope is cancelled: the client (entered before
                    # this nursery) must still be exited, or Trio's nursery stack breaks
                    await cm.__aexit__(None, None, None)
            finally:
                self.queues.clear()
                if self._own_client:
                    await self.client.__aexit__(None, None, None)

    @property
    def nursery(self) -> aio.TaskGroup:
        if self._nursery is None:
            raise MQClientError("the consumer is not started")
        return self._nursery

    # -- rebalance
    async def _rebalance_loop(self) -> None:
        interval = self.settings.rebalanceInterval / 1000
        while True:
            with aio.move_on_after(interval):
                await self._rebalance_event.wait()
            self._rebalance_event = aio.new_event()
            await self.rebalance_now()

    async def rebalance_now(self) -> None:
        topics = set(self._rebalance_topics()) | {mq.topic for mq in self.queues}
        for topic in sorted(topics):
            try:
                await self._rebalance_topic(topic)
            except CALL_ERRORS as e:
                events.emit(
                    log, events.RebalanceFailed(group=self.group, topic=topic, error=str(e))
                )

    def _rebalance_topics(self) -> list[str]:
        return list(self.subscriptions)

    async def _topic_queues(self, topic: str) -> set[MessageQueue] | None:
        route = self.client.routes.get(topic)
        if route is None:
            route = await self.client.update_route(topic)
        if route is None:
            return None
        return subscribe_queues(topic, route)

    async def _consumer_ids(self, topic: str) -> list[str]:
        route = self.client.routes.get(topic)
        if route is None:
            return []
        for bd in route.brokerDatas:
            addr = bd.select_broker_addr()
            if addr is None:
                continue
            try:
                return await self.client.api.get_consumer_id_list(addr, self.group)
            except CALL_ERRORS as e:
                events.emit(
                    log, events.GetConsumerIdsFailed(group=self.group, error=str(e)), broker=addr
                )
        return []

    async def _wanted_queues(self, topic: str) -> list[MessageQueue] | None:
        """The queues this member should own; None means "cannot tell now, change nothing"."""
        if topic not in self.subscriptions:
            return []
        mq_all = await self._topic_queues(topic)
        if mq_all is None:
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                events.emit(log, events.RebalanceNoRoute(group=self.group, topic=topic))
            return None
        if not self.clustering:
            return sort_queues(mq_all)
        cids = await self._consumer_ids(topic)
        if not cids:
            return None
        return allocate(self.client.client_id, mq_all, cids)

    async def _rebalance_topic(self, topic: str) -> None:
        wanted = await self._wanted_queues(topic)
        if wanted is None:
            return
        diff = diff_assignment([mq for mq in self.queues if mq.topic == topic], wanted)
        for mq in sort_queues(diff.removed):
            await self._remove_queue(mq)
        added = [mq for mq in diff.added if await self._add_queue(mq)]
        if diff.removed or added:
            owned = sort_queues(mq for mq in self.queues if mq.topic == topic)
            events.emit(
                log,
                events.Rebalance(
                    group=self.group,
                    topic=topic,
                    queues=[f"{mq.brokerName}:{mq.queueId}" for mq in owned],
                ),
                client_id=self.client.client_id,
            )

    async def _remove_queue(self, mq: MessageQueue) -> None:
        st = self.queues.pop(mq)
        st.pq.dropped = True
        st.cancel.cancel()
        assert self.offset_store is not None
        await self.offset_store.persist([mq])
        self.offset_store.forget(mq)

    def _new_process_queue(self) -> ProcessQueue:
        """The per-queue consumption state a newly owned queue starts with."""
        return ProcessQueue()

    def _subscription_for(self, mq: MessageQueue) -> SubscriptionData:
        sub = self.subscriptions.get(mq.topic)
        return sub if sub is not None else build_subscription(mq.topic, "*", 0)

    async def _add_queue(self, mq: MessageQueue) -> bool:
        offset = await self._compute_start_offset(mq)
        if offset < 0:
            return False
        st = QueueState(
            mq=mq,
            sub=self._subscription_for(mq),
            next_offset=offset,
            pq=self._new_process_queue(),
        )
        self.queues[mq] = st
        self.nursery.start_soon(self._pull_loop, st)
        return True

    async def _compute_start_offset(self, mq: MessageQueue) -> int:
        """upstream computePullFromWhere; -1 means try again at the next rebalance."""
        assert self.offset_store is not None
        stored = await self.offset_store.read_from_store(mq)
        decision = start_offset(self.settings.consumeFromWhere, stored, mq.topic)
        if decision.kind is StartKind.OFFSET:
            return decision.offset
        if decision.kind is StartKind.RETRY_LATER:
            return -1
        try:
            addr = await self.client.find_broker_addr_refreshing(
                self.client.broker_name_of(mq), mq.topic
            )
            if addr is None:
                return -1
            if decision.kind is StartKind.MAX_OFFSET:
                return await self.client.api.get_max_offset(addr, mq)
            return await self.client.api.search_offset(addr, mq, self._consume_from_ms)
        except CALL_ERRORS as e:
            events.emit(log, events.StartOffsetFailed(group=self.group, mq=str(mq), error=str(e)))
            return -1

    # -- pulling
    def _pull_header(self, st: QueueState, from_master: bool) -> PullMessageRequestHeader:
        commit = -1
        # a slave does not take commits with pulls (upstream clears the flag): offsets read
        # from a slave reach it through the periodic persist (UPDATE_CONSUMER_OFFSET)
        if (
            from_master
            and self.commit_offset_in_pull
            and self.clustering
            and self.offset_store is not None
        ):
            commit = self.offset_store.table.read(st.mq)
        return pull_header(st, self.group, self.settings, commit)

    def _flow_controlled(self, st: QueueState) -> bool:
        return False

    @abc.abstractmethod
    async def _deliver(self, st: QueueState, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Hand pulled messages to consumption. It may wait (a full bounded channel: this
        queue's pulling pauses until the application catches up), never for this queue's own
        next pull. Messages not consumed before this returns must be tracked in ``pq``
        (`ProcessQueue.put`), so the committed offset cannot pass them."""

    def _pull_interval_s(self) -> float:
        return 0.0

    async def _pull_loop(self, st: QueueState) -> None:
        # One scope spans many pulls (a scope per pull costs about as much as the rest of this
        # loop's own work). `_on_route` cancels it only while a pull is in flight (``pull_addr``
        # set): that pull is abandoned and the next one goes to the queue's new address.
        with st.cancel:
            while not st.pq.dropped:
                late: PullResult | None = None
                with aio.CancelScope() as scope:
                    st.pull_scope = scope
                    late = await self._pull_until_moved(st, scope)
                st.pull_addr = st.pull_scope = None
                if late is not None:  # answered just before the route moved: still good
                    await self._on_pull_result(st, late)

    async def _pull_until_moved(self, st: QueueState, scope: aio.CancelScope) -> PullResult | None:
        """Pull until the queue is dropped or the route moves it. A pull whose answer arrived
        before the move was noticed is returned unprocessed: the caller handles it outside the
        cancelled ``scope``."""
        timeout_s = self.settings.consumerTimeoutMillisWhenSuspend / 1000
        while not st.pq.dropped:
            if self._flow_controlled(st):
                await aio.sleep(PULL_DELAY_WHEN_FLOW_CONTROL_S)
                continue
            try:
                addr, broker_id = pull_broker(self.client, st)
                header = self._pull_header(st, broker_id == MASTER_ID)
                st.pull_addr = addr
                st.pull_started = aio.current_time()
                st.pq.last_pull_at = wallclock_ms()
                result = await self.client.api.pull(addr, header, timeout_s)
                st.pull_addr = None
            except CALL_ERRORS as e:
                st.pull_addr = None
                if scope.cancel_called:  # moved while failing: pull at the new address now
                    return None
                events.emit(log, events.PullFailed(group=self.group, mq=str(st.mq), error=str(e)))
                if broker_gone(e):
                    st.pull_failures += 1
                    await self._after_broker_gone(st, st.pull_failures)
                else:
                    await aio.sleep(PULL_DELAY_WHEN_EXCEPTION_S)
                continue
            st.pull_failures = 0
            if scope.cancel_called:
                return result
            await self._on_pull_result(st, result)
            interval = self._pull_interval_s()
            if interval:
                await aio.sleep(interval)
        return None

    async def _after_broker_gone(self, st: QueueState, failures: int) -> None:
        """Refresh the route at once (shared with every queue of the topic), then retry soon."""
        retry_at = aio.current_time() + pull_retry_delay(failures)
        done = self.client.request_route_refresh(st.mq.topic)
        with aio.move_on_after(PULL_DELAY_WHEN_EXCEPTION_S):
            await done.wait()
        await aio.sleep_until(retry_at)

    def _on_route(self, topic: str, route: TopicRouteData) -> None:
        """A route changed. Its readable queues changed (a broker set left or came back):
        rebalance now, not at the next rebalanceInterval. And (the broker-name table is shared
        by every topic) abandon pulls in flight at an address that is no longer where their
        queue should be pulled from."""
        queues = subscribe_queues(topic, route)
        # a first route too: a topic appearing after start (a first heartbeat's %RETRY%) is owned
        if self._route_queues.get(topic) != queues and topic in self._rebalance_topics():
            self.request_rebalance()
        self._route_queues[topic] = queues
        for st in self.queues.values():
            if st.pull_addr is None or st.pull_scope is None:
                continue
            found = self.client.find_broker_in_subscribe(
                self.client.broker_name_of(st.mq), st.broker_id
            )
            if found is not None and found[0] != st.pull_addr:
                events.emit(
                    log,
                    events.PullMoved(
                        group=self.group, mq=str(st.mq), old=st.pull_addr, new=found[0]
                    ),
                )
                st.pull_scope.cancel()

    async def _on_pull_result(self, st: QueueState, res: PullResult) -> None:
        if st.pq.dropped:
            return  # answered after the queue was dropped or restarted elsewhere
        st.broker_id = res.suggest_which_broker_id
        if res.status is PullStatus.OFFSET_ILLEGAL:
            await self._offset_illegal(st, res.next_begin_offset)
            return
        st.next_offset = res.next_begin_offset
        msgs: list[MessageExt] = []
        if res.status is PullStatus.FOUND:
            msgs = found_messages(st, res, self.group)
            rt_ms = int((aio.current_time() - st.pull_started) * 1000)
            self.stats.on_pull(st.mq.topic, len(msgs), rt_ms)
        if not msgs:
            self._correct_tags_offset(st)
            return
        await self._deliver(st, st.pq, msgs)

    def _correct_tags_offset(self, st: QueueState) -> None:
        """Nothing in flight: the pull position itself may be committed (upstream
        correctTagsOffset), so filtered-out messages are not pulled again after a restart."""
        if st.pq.msg_count == 0 and self.offset_store is not None:
            self.offset_store.table.update(st.mq, st.next_offset, increase_only=True)

    async def _offset_illegal(self, st: QueueState, next_offset: int) -> None:
        events.emit(
            log,
            events.PullOffsetIllegal(
                group=self.group, mq=str(st.mq), offset=st.next_offset, next_offset=next_offset
            ),
        )
        st.pq.dropped = True  # results of messages handed out before are ignored
        st.pq = self._new_process_queue()
        st.next_offset = next_offset
        assert self.offset_store is not None
        self.offset_store.table.update(st.mq, next_offset, increase_only=False)
        await self.offset_store.persist([st.mq])

    async def _stats_loop(self) -> None:
        """Sample the stats (its schedule decides which windows are due)."""
        while True:
            self.stats.tick(monotonic_ms())
            await aio.sleep(STATS_TICK_S)

    # -- offsets
    async def _persist_loop(self, interval_s: float) -> None:
        while True:
            await aio.sleep(interval_s)
            if self.offset_store is not None:
                await self.offset_store.persist(list(self.queues))
