"""The client core shared by the producers and consumers of one `MQClientInstance`
(upstream MQClientInstance).

It owns the `RemotingClient` (one connection per broker / name server), the topic route cache,
the broker-name -> addresses table built from the routes, and the heartbeats: every
``heartbeatBrokerInterval`` and at once when a producer or consumer registers, a HeartbeatData
naming every group of this client goes to every broker (masters only when there are no
consumers); a broker address that first appears in a route (a new master) gets one at once.
Server pushes arrive at its processor: NOTIFY_CONSUMER_IDS_CHANGED makes the named consumer
group rebalance now; GET_CONSUMER_RUNNING_INFO (forwarded by a broker for mqadmin
consumerStatus) is answered by `running_info_reply.answer`, GET_CONSUMER_STATUS_FROM_CLIENT
(mqadmin getConsumerStatus) by `consumer_status_reply.answer`; PUSH_REPLY_MESSAGE_TO_CLIENT by the
client's `RequestFutures` (request_reply.py), ``reply_waiters``.

Routes are polled every ``pollNameServerInterval`` (30 s), but a master change is noticed at once
through on-demand refreshes (`request_route_refresh` / `refresh_route`, shared and rate limited
by `RouteRefresher`: one query per topic per 100 ms). They are asked for by a failed send or
pull, by a broker connection that closes (every topic routed through that address), and, every
``DEGRADED_ROUTE_POLL_S``, for each watched topic whose route is degraded: a broker set without
a master or a route the NameServer no longer knows (for as long as that lasts), or a broker set
that left the route (for one ``pollNameServerInterval``, after which the regular poll would
have seen its return anyway), or a consumer's subscribed topic without a route at its first
heartbeat (until it has one, at most one ``pollNameServerInterval``: that heartbeat creates the
group's %RETRY% topic, whose route follows a moment later). So a new or returning master is
seen within a second even by a producer that has another broker set to send to, or a consumer
whose pulls are held at a slave.

Client id: ``<ip>@<instanceName>``; the default instance name ``<pid>#<n>`` is unique per
instance in the process, so two consumers of one group in one process are two members.
"""

from __future__ import annotations

import itertools
import math
import os
import socket
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client import consumer_status_reply, running_info_reply
from rocketrio.actors.client.api import MQClientAPI
from rocketrio.actors.client.backend import every
from rocketrio.actors.client.config import MASTER_ID, ClientConfig
from rocketrio.actors.client.errors import MQClientError, TopicRouteNotFound
from rocketrio.actors.client.remoting import ClientConnection as Connection
from rocketrio.actors.client.remoting import ClientRemoting as PoolRemoting
from rocketrio.actors.client.remoting import ClientRequestContext as RequestContext
from rocketrio.actors.client.remoting import (
    ClientTransport,
    Processor,
    RemotingError,
    RequestHook,
    TcpClientTransport,
)
from rocketrio.actors.client.route_refresh import RouteRefresher
from rocketrio.actors.client.stuck_sends import RequestWatch
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import (
    ConsumerData,
    HeartbeatData,
    MessageQueue,
    ProducerData,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    TopicRouteData,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode, not_supported_remark
from rocketrio.protocol.headers import (
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.running_info import ConsumerRunningInfo
from rocketrio.protocol.serde import HeaderError, from_ext, from_json
from rocketrio.protocol.static_topic import (
    LOGICAL_QUEUE_MOCK_BROKER_NAME_NOT_EXIST,
    is_logic_broker_name,
    logic_queue_endpoints,
)

log = structlog.get_logger("client")

_instance_seq = itertools.count()

# how often a degraded route (a broker set without master, or gone) is asked for again
DEGRADED_ROUTE_POLL_S = 1.0
ROUTE_ERRORS = (RemotingError, MQClientError, HeaderError)


class ConsumerInner(Protocol):
    """What the client core needs from a consumer (upstream MQConsumerInner)."""

    group: str

    def consumer_data(self) -> ConsumerData: ...

    def subscribed_topics(self) -> set[str]: ...

    def request_rebalance(self) -> None: ...

    consume_type: str

    def consumer_running_info(self) -> ConsumerRunningInfo: ...

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...


def decode_reset_offsets(body: bytes) -> dict[MessageQueue, int]:
    """A RESET_CONSUMER_CLIENT_OFFSET body: the MessageQueue-keyed map, or the C++ list."""
    if not body:
        return {}
    try:
        return from_json(ResetOffsetBody, body).offsetTable
    except HeaderError:
        return from_json(ResetOffsetBodyForC, body).to_body().offsetTable


def local_ip() -> str:
    """This host's outgoing IPv4 address (no packet is sent), 127.0.0.1 if there is none."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


RouteListener = Callable[[str, TopicRouteData], None]
# (broker address, CHECK_TRANSACTION_STATE request) -> whether this producer took it
TransactionChecker = Callable[[str, RemotingCommand], bool]
_WATCHED = "mq_client_watched"


class ClientRemoting(PoolRemoting):
    """A `PoolRemoting` that tells ``on_closed(addr)`` when a connection it opened closes."""

    def __init__(
        self,
        transport: ClientTransport,
        *,
        processor: Processor | None = None,
        on_closed: Callable[[str], None],
        request_hook: RequestHook | None = None,
    ) -> None:
        super().__init__(transport, processor=processor, request_hook=request_hook)
        self._on_closed = on_closed

    async def get_connection(self, addr: str) -> Connection:
        conn = await super().get_connection(addr)
        if _WATCHED not in conn.attrs:
            conn.attrs[_WATCHED] = True
            conn.on_close.append(lambda _c: self._on_closed(addr))
        return conn


def route_degraded(route: TopicRouteData) -> bool:
    """A broker set of the route has no master (dead in classic mode, or mid-failover)."""
    masters = {bd.brokerName for bd in route.brokerDatas if MASTER_ID in bd.brokerAddrs}
    return any(qd.brokerName not in masters for qd in route.queueDatas)


class MQClientInstance:
    """Use as ``async with MQClientInstance(...) as client:``; producers and consumers do this
    for you unless they are handed a running instance."""

    def __init__(
        self,
        namesrv_addr: str | list[str],
        *,
        transport: ClientTransport | None = None,
        config: ClientConfig | None = None,
    ) -> None:
        addrs = namesrv_addr if isinstance(namesrv_addr, list) else namesrv_addr.split(";")
        self.config = config or ClientConfig()
        self.config.namesrvAddr = ";".join(a.strip() for a in addrs if a.strip())
        ip = self.config.clientIP or local_ip()
        instance = self.config.instanceName or f"{os.getpid()}#{next(_instance_seq)}"
        self.client_ip = ip
        self.client_id = f"{ip}@{instance}"
        self.transport = transport or TcpClientTransport()
        self.remoting = ClientRemoting(
            self.transport,
            processor=self._process,
            on_closed=self._on_connection_closed,
            request_hook=self.config.request_signer(),
        )
        self.api = MQClientAPI(
            self.remoting, self.config.namesrv_addrs, self.config.mqClientApiTimeout / 1000
        )
        self.routes: dict[str, TopicRouteData] = {}
        # static topics: topic -> logic queue -> the broker set leading it (RIP-21)
        self.topic_end_points: dict[str, dict[MessageQueue, str]] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.producer_groups: set[str] = set()
        self.consumers: dict[str, ConsumerInner] = {}
        self.route_listeners: list[RouteListener] = []
        # CHECK_TRANSACTION_STATE pushed by a broker, by producer group (transaction_producer.py)
        self.transaction_checkers: dict[str, TransactionChecker] = {}
        # requests waiting for their replies (request_reply.RequestFutures), made on first use
        self.reply_waiters: Any = None
        self._watched: set[str] = set()
        # topic -> until when it is polled every DEGRADED_ROUTE_POLL_S (inf: while degraded)
        self._degraded: dict[str, float] = {}
        self.refresher = RouteRefresher(self._refresh_fetch)
        self._nursery: aio.TaskGroup | None = None
        self._nursery_cm: Any = None
        self._request_watch: RequestWatch | None = None  # made on first use, per start
        self.log = log.bind(client_id=self.client_id)

    # -- lifecycle
    async def __aenter__(self) -> MQClientInstance:
        await self.remoting.__aenter__()
        try:
            self._nursery_cm = aio.create_task_group()
            self._nursery = await self._nursery_cm.__aenter__()
        except BaseException:
            await self.remoting.__aexit__(None, None, None)
            raise
        poll_s = self.config.pollNameServerInterval / 1000
        hb_s = self.config.heartbeatBrokerInterval / 1000
        self._nursery.start_soon(every, poll_s, self._poll_routes)
        self._nursery.start_soon(every, hb_s, self.send_heartbeat_to_all)
        self._nursery.start_soon(every, DEGRADED_ROUTE_POLL_S, self._poll_degraded_routes)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        # The body's exception is not passed into our nurseries: it propagates unchanged
        # (not wrapped in an ExceptionGroup) once the background tasks are cancelled.
        assert self._nursery is not None and self._nursery_cm is not None
        try:
            with aio.CancelScope(shield=True), aio.move_on_after(self.api.timeout_s):
                await self._unregister_all()
        finally:
            # nothing new starts in it from here on: a connection that closes while it winds
            # down (a cancelled client) must not ask it for a route refresh
            nursery, self._nursery = self._nursery, None
            self._request_watch = None
            nursery.cancel_scope.cancel()
            try:
                await self._nursery_cm.__aexit__(None, None, None)
            finally:
                await self.remoting.__aexit__(None, None, None)

    def request_watch(self) -> RequestWatch | None:
        """The watch of this client's SimpleConsumer requests (`stuck_sends.RequestWatch`), its
        loop in the client's task group; None while the client is not started."""
        if self._nursery is None:
            return None
        if self._request_watch is None:
            self._request_watch = RequestWatch(
                self.find_master_addr, self.request_route_refresh, self._nursery.start_soon
            )
        return self._request_watch

    @property
    def nursery(self) -> aio.TaskGroup:
        if self._nursery is None:
            raise MQClientError("client is not started: use it as an async context manager")
        return self._nursery

    # -- registration
    async def register_producer(self, group: str) -> None:
        self.producer_groups.add(group)
        await self.send_heartbeat_to_all()

    async def unregister_producer(self, group: str) -> None:
        if group in self.producer_groups:
            self.producer_groups.discard(group)
            await self._unregister_on_brokers(group, None)

    async def register_consumer(self, consumer: ConsumerInner) -> None:
        if consumer.group in self.consumers:
            raise MQClientError(
                f"consumer group {consumer.group} is already registered in client {self.client_id}"
            )
        self.consumers[consumer.group] = consumer
        for topic in sorted(consumer.subscribed_topics()):  # the same order in every process
            self.watch_topic(topic)
            try:
                await self.update_route(topic)
            except ROUTE_ERRORS as e:
                # not fatal: the route poll and the rebalance ask again
                events.emit(self.log, events.RouteUpdateFailed(topic=topic, error=str(e)))
        await self.send_heartbeat_to_all()
        # the heartbeat may just have created a topic (the group's %RETRY% topic): its route
        # reaches the NameServer a moment later; ask every DEGRADED_ROUTE_POLL_S for one
        # pollNameServerInterval, not only at the next regular poll
        until = aio.current_time() + self.config.pollNameServerInterval / 1000
        for topic in sorted(consumer.subscribed_topics() - self.routes.keys()):
            self._degraded.setdefault(topic, until)

    async def unregister_consumer(self, group: str, consumer: ConsumerInner | None = None) -> None:
        """Forget the group (only if it is ``consumer``'s, when given) and tell the brokers."""
        if consumer is not None and self.consumers.get(group) is not consumer:
            return
        if self.consumers.pop(group, None) is not None:
            await self._unregister_on_brokers(None, group)

    async def _unregister_all(self) -> None:
        for g in list(self.producer_groups):
            await self.unregister_producer(g)
        for g in list(self.consumers):
            await self.unregister_consumer(g)

    async def _unregister_on_brokers(self, producer: str | None, consumer: str | None) -> None:
        for addr in self.all_broker_addrs():
            try:
                await self.api.unregister_client(addr, self.client_id, producer, consumer)
            except (RemotingError, MQClientError) as e:
                events.emit(self.log, events.UnregisterClientFailed(error=str(e)), broker=addr)

    # -- routes
    def watch_topic(self, topic: str) -> None:
        """Keep this topic's route fresh (polled every pollNameServerInterval)."""
        self._watched.add(topic)

    async def update_route(self, topic: str) -> TopicRouteData | None:
        """Fetch the topic's route now; None when no name server knows the topic (the cached
        route, if any, is kept: the topic's only broker set may be between two masters)."""
        try:
            route = await self.api.get_route(topic)
        except TopicRouteNotFound:
            if topic in self.routes:
                self._degraded[topic] = math.inf
            return None
        old = self.routes.get(topic)
        self.routes[topic] = route
        self.topic_end_points[topic] = logic_queue_endpoints(topic, route.topicQueueMappingByBroker)
        self._note_degraded(topic, old, route)
        if old == route:
            return route
        known = {a for addrs in self.broker_addrs.values() for a in addrs.values()}
        for bd in route.brokerDatas:
            self.broker_addrs[bd.brokerName] = dict(bd.brokerAddrs)
        self._heartbeat_new_brokers(route, known)
        for listener in self.route_listeners:
            listener(topic, route)
        return route

    def _note_degraded(self, topic: str, old: TopicRouteData | None, route: TopicRouteData) -> None:
        if route_degraded(route):
            self._degraded[topic] = math.inf
            return
        names = {bd.brokerName for bd in route.brokerDatas}
        if old is not None and any(bd.brokerName not in names for bd in old.brokerDatas):
            # a broker set left: watch for its return a little longer than usual
            poll_s = self.config.pollNameServerInterval / 1000
            self._degraded[topic] = aio.current_time() + poll_s
        elif self._degraded.get(topic) == math.inf or old is None:
            # healthy again, or a first route found (the close watch after a consumer's
            # first heartbeat ends)
            self._degraded.pop(topic, None)

    def request_route_refresh(self, topic: str) -> aio.Event:
        """Ask the NameServer for the topic's route soon (shared and rate limited, see
        `RouteRefresher`); the event is set once a query started from now on has ended."""
        if self._nursery is None:
            done = aio.new_event()
            done.set()
            return done
        return self.refresher.request(topic, self._nursery)

    async def refresh_route(self, topic: str, deadline: float = math.inf) -> TopicRouteData | None:
        """`request_route_refresh` and wait for it (at most until ``deadline``); the cached
        route afterwards."""
        done = self.request_route_refresh(topic)
        with aio.move_on_at(deadline):
            await done.wait()
        return self.routes.get(topic)

    async def _refresh_fetch(self, topic: str) -> None:
        try:
            await self.update_route(topic)
        except ROUTE_ERRORS as e:
            events.emit(self.log, events.RouteUpdateFailed(topic=topic, error=str(e)))

    def _on_connection_closed(self, addr: str) -> None:
        """A broker connection closed: refresh every topic routed through that address."""
        if self._nursery is None:
            return
        topics = [
            topic
            for topic, route in self.routes.items()
            if any(addr in bd.brokerAddrs.values() for bd in route.brokerDatas)
        ]
        if topics:
            events.emit(self.log, events.BrokerConnectionClosed(topics=sorted(topics)), broker=addr)
        for topic in topics:
            self.request_route_refresh(topic)

    def _topics_to_poll(self) -> set[str]:
        topics = set(self._watched)
        for c in self.consumers.values():
            topics |= c.subscribed_topics()
        return topics

    async def _poll_routes(self) -> None:
        for topic in sorted(self._topics_to_poll()):
            try:
                await self.update_route(topic)
            except ROUTE_ERRORS as e:
                events.emit(self.log, events.RouteUpdateFailed(topic=topic, error=str(e)))

    async def _poll_degraded_routes(self) -> None:
        now = aio.current_time()
        for topic in [t for t, until in self._degraded.items() if until <= now]:
            del self._degraded[topic]
        for topic in sorted(self._degraded.keys() & self._topics_to_poll()):
            self.request_route_refresh(topic)

    def find_broker_addr(
        self, broker_name: str, broker_id: int = MASTER_ID, *, only_this: bool = False
    ) -> str | None:
        """Address of ``broker_id`` in the group; with only_this=False the master, else any
        replica, when that one is unknown (upstream findBrokerAddressInSubscribe; with the
        default id it is findBrokerAddressInAdmin: offsets go to a slave while the master is
        down)."""
        addrs = self.broker_addrs.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        if addr is not None or only_this:
            return addr
        if MASTER_ID in addrs:
            return addrs[MASTER_ID]
        return addrs[min(addrs)]

    def find_broker_in_subscribe(self, broker_name: str, broker_id: int) -> tuple[str, int] | None:
        """(address, its brokerId) to pull from: ``broker_id`` if in the route, else the master,
        else the slave with the smallest id."""
        addrs = self.broker_addrs.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        if addr is not None:
            return addr, broker_id
        bid = MASTER_ID if MASTER_ID in addrs else min(addrs)
        return addrs[bid], bid

    def broker_name_of(self, mq: MessageQueue) -> str:
        """The broker set serving ``mq``: its own name, or for a static topic's logic queue
        the broker leading it in the latest route (upstream getBrokerNameFromMessageQueue);
        a logic queue the route does not know maps to the no-address "not exist" name."""
        if not is_logic_broker_name(mq.brokerName):
            return mq.brokerName
        return self.topic_end_points.get(mq.topic, {}).get(
            mq, LOGICAL_QUEUE_MOCK_BROKER_NAME_NOT_EXIST
        )

    def find_master_addr(self, broker_name: str) -> str | None:
        return self.find_broker_addr(broker_name, MASTER_ID, only_this=True)

    async def find_master_addr_refreshing(self, broker_name: str, topic: str) -> str | None:
        """The master's address; when the route has none, after a (rate-limited) refresh."""
        addr = self.find_master_addr(broker_name)
        if addr is None:
            await self.refresh_route(topic)
            addr = self.find_master_addr(broker_name)
        return addr

    async def find_broker_addr_refreshing(self, broker_name: str, topic: str) -> str | None:
        """The master's address, else a slave's (findBrokerAddressInAdmin); refreshes the route
        (rate limited) when the broker set has no address at all."""
        addr = self.find_broker_addr(broker_name)
        if addr is None:
            await self.refresh_route(topic)
            addr = self.find_broker_addr(broker_name)
        return addr

    def all_broker_addrs(self, masters_only: bool = False) -> list[str]:
        out: list[str] = []
        for addrs in self.broker_addrs.values():
            for bid, addr in sorted(addrs.items()):
                if (not masters_only or bid == MASTER_ID) and addr not in out:
                    out.append(addr)
        return out

    # -- heartbeats
    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(
            clientID=self.client_id,
            producerDataSet=[ProducerData(g) for g in sorted(self.producer_groups)],
            consumerDataSet=[c.consumer_data() for c in self.consumers.values()],
        )

    def _heartbeat_new_brokers(self, route: TopicRouteData, known: set[str]) -> None:
        """Brokers this client has not heard of (a new master) learn its groups at once."""
        if self._nursery is None or not (self.producer_groups or self.consumers):
            return
        for bd in route.brokerDatas:
            for bid, addr in bd.brokerAddrs.items():
                if addr not in known and (self.consumers or bid == MASTER_ID):
                    known.add(addr)
                    self._nursery.start_soon(self._heartbeat_one, addr)

    async def _heartbeat_one(self, addr: str) -> None:
        try:
            await self.api.send_heartbeat(addr, self.heartbeat_data())
        except (RemotingError, MQClientError) as e:
            events.emit(self.log, events.HeartbeatFailed(error=str(e)), broker=addr)

    async def send_heartbeat_to_all(self) -> None:
        if not self.producer_groups and not self.consumers:
            return
        data = self.heartbeat_data()
        for addr in self.all_broker_addrs(masters_only=not self.consumers):
            try:
                await self.api.send_heartbeat(addr, data)
            except (RemotingError, MQClientError) as e:
                events.emit(self.log, events.HeartbeatFailed(error=str(e)), broker=addr)

    # -- server pushes
    def _reset_offset(self, cmd: RemotingCommand) -> RemotingCommand:
        """RESET_CONSUMER_CLIENT_OFFSET (220, oneway): the named consumer restarts the listed
        queues it owns at the given offsets (upstream ClientRemotingProcessor.resetOffset). The
        body is a ResetOffsetBody, or the list form a reset asked for C++ clients carries."""
        try:
            h = from_ext(ResetOffsetRequestHeader, cmd.ext_fields)
            offsets = decode_reset_offsets(cmd.body)
        except HeaderError as e:
            events.emit(self.log, events.ResetOffsetBadRequest(error=str(e)))
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"bad reset request: {e}")
        consumer = self.consumers.get(h.group)
        if consumer is None:
            events.emit(self.log, events.ResetOffsetNoConsumer(group=h.group, topic=h.topic))
        else:
            consumer.reset_offset(h.topic, offsets)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def _process(self, ctx: RequestContext) -> RemotingCommand | None:
        cmd = ctx.cmd
        if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            header = from_ext(NotifyConsumerIdsChangedRequestHeader, cmd.ext_fields)
            consumer = self.consumers.get(header.consumerGroup)
            if consumer is not None:
                events.emit(self.log, events.ConsumerIdsChanged(group=header.consumerGroup))
                consumer.request_rebalance()
            return cmd.make_response(ResponseCode.SUCCESS)
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return running_info_reply.answer(self, cmd)
        if cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            return self._reset_offset(cmd)
        if cmd.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
            return consumer_status_reply.answer(self, cmd)
        if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            from rocketrio.actors.client import consume_directly  # imports the consumers

            if self._nursery is None:
                return cmd.make_response(ResponseCode.SYSTEM_ERROR, "the client is not started")
            self._nursery.start_soon(consume_directly.serve, self, ctx)
            return None
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            # upstream ClientRemotingProcessor.checkTransactionState: the producer of the
            # message's PGROUP answers with a oneway END_TRANSACTION; nothing goes back here
            for checker in self.transaction_checkers.values():
                if checker(ctx.conn.remote, cmd):
                    break
            return None
        if cmd.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT:
            from rocketrio.actors.client.request_reply import RequestFutures  # imports producer

            return RequestFutures.of(self)(cmd)
        return cmd.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            not_supported_remark(cmd.code, f"client {self.client_id}"),
        )
