"""The proxy's MessagingService on the Trio side: one handler per RPC, each turning a gRPC
request into remoting calls to the NameServer and the brokers (as a client: one
`MQClientInstance`) and the answer back into a gRPC response with upstream's status codes.

One service for both modes: cluster mode (proxy.py, its own process) and local mode (local.py,
inside a broker) differ only in wiring, the transport under the client and, in local mode,
``broker_endpoints`` (each broker set's queues point at the proxy next to its master) and
``local_broker_name`` (sends go to the co-located broker when it has the topic).

Stateless in cluster mode: routes come from the NameServer, receipt handles are the brokers'
POP checkpoints and transaction ids carry their broker and offsets (receipt.py), so a restarted
proxy, or another one behind the same address, acts on what an earlier one handed out.
The one exception is auto renewal (renew.py): the messages a PushConsumer received with
``auto_renew`` are renewed by this proxy, which maps the client's original handle to the
latest; PullMessage and the offset RPCs live in offsets.py.
A consumer group whose subscription group config has consumeMessageOrderly=true (read from the
brokers, cached briefly: group_config.py) is a FIFO group: its clients are told
``subscription.fifo``, a PushConsumer is assigned each queue, and its receives are ordered
POPs (order=true, with the client's attempt id), so a message group's messages are handed out
one batch at a time, in queue order.
A request the proxy refuses gets its status code in the response (never an RPC error), and a
handler's unexpected failure becomes INTERNAL_SERVER_ERROR for that call only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import structlog

from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.simple_consumer import (
    MAX_RECEIVE,
    ReceivedMessage,
    SimpleConsumer,
    batch_ackable,
)
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.actors.observe import events
from rocketrio.actors.proxy import mapping as mp
from rocketrio.actors.proxy.ack_nowait import AckNowait, ack_results
from rocketrio.actors.proxy.auth import ProxyAuth
from rocketrio.actors.proxy.group_config import TTL_S, GroupConfigCache
from rocketrio.actors.proxy.grpc_bridge import Call
from rocketrio.actors.proxy.loop_receive import DEFAULT_INVISIBLE_MS, MAX_POLL_MS, receive_answers
from rocketrio.actors.proxy.mapping import BadRequest, Code, status
from rocketrio.actors.proxy.offsets import OffsetHandlers, sql_expression
from rocketrio.actors.proxy.receipt import TransactionId, decode_receipt, encode_receipt
from rocketrio.actors.proxy.renew import AutoRenewer, Renewal, RenewConfig, Tracked
from rocketrio.actors.proxy.send import BROKER_TIMEOUT_S, SendPath
from rocketrio.actors.proxy.telemetry import TelemetryRegistry
from rocketrio.protocol.auth_bodies import GetUserRequestHeader, UserInfo
from rocketrio.protocol.bodies import SubscriptionGroupConfig, TopicRouteData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
)
from rocketrio.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageExt,
)
from rocketrio.protocol.pop_extra_info import ExtraInfo
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_ext

log = structlog.get_logger("proxy")

MAX_BODY_SIZE = 4 * 1024 * 1024  # upstream's maxMessageSize


@attrs.define
class ProxyConfig:
    """``host`` is the address given to clients in routes (default: this host's IP);
    ``listen_host`` the one the gRPC server binds."""

    namesrv_addr: str
    grpc_port: int = 8081
    host: str = ""
    listen_host: str = "0.0.0.0"
    authentication_enabled: bool = False  # authenticationEnabled
    access_key: str | None = None  # innerClientAuthenticationCredentials: signs remoting
    secret_key: str | None = None
    max_body_size: int = MAX_BODY_SIZE
    renew: RenewConfig = attrs.Factory(RenewConfig)  # auto_renew of invisible time
    # local mode: the broker set of the co-located broker ("" in cluster mode)
    local_broker_name: str = ""
    # rocketMQClusterName: the cluster whose masters answer the proxy's metadata reads
    # (subscription group configs), as upstream's ClusterMetadataService asks one of its brokers
    rocketmq_cluster_name: str = "DefaultCluster"


# local mode: broker set name -> the endpoints of the proxy next to its master (local.py)
BrokerEndpoints = Callable[[TopicRouteData], Awaitable[Mapping[str, pb.Endpoints]]]


class ProxyService:
    def __init__(
        self,
        config: ProxyConfig,
        client: MQClientInstance,
        registry: TelemetryRegistry,
        now_ms: Callable[[], int] = wallclock_ms,
        broker_endpoints: BrokerEndpoints | None = None,
    ) -> None:
        self.config = config
        self.broker_endpoints = broker_endpoints
        self.client = client
        self.registry = registry
        self.now_ms = now_ms
        self.offsets = OffsetHandlers(client, self._route, self._master)
        # a client is online while its Telemetry stream is open (upstream: its channel)
        self.renewer = AutoRenewer(
            config.renew, self._renew, lambda cid: cid in registry.streams, now_ms
        )
        self.auth = ProxyAuth(config.authentication_enabled, self.fetch_user)
        self.sends = SendPath(client, config.local_broker_name, config.max_body_size, now_ms)
        self.acks = AckNowait(
            client, self.renewer, self._consumer, self.received, self.sends.requests
        )
        self._consumers: dict[str, SimpleConsumer] = {}
        # groups that received with auto_renew: their acks may need the renewer (a new set
        # each time, read by the gRPC loop's acks in loop_remoting.py)
        self.renewing_groups: frozenset[str] = frozenset()
        self.group_configs = GroupConfigCache(self.fetch_group_config)
        # cluster mode: (group, topic, until ms) of receives the gRPC loop may take from now
        # on (loop_receive.py), told after each receive that was an unordered POP of a set
        self.loop_receivable: Callable[[str, str, int], None] | None = None
        self._handlers: dict[str, Callable[[Call], Awaitable[Any]]] = {
            "QueryRoute": self.query_route,
            "Heartbeat": self.heartbeat,
            "SendMessage": self.send_message,
            "QueryAssignment": self.query_assignment,
            "ReceiveMessage": self.receive_message,
            "AckMessage": self.ack_message,
            "ChangeInvisibleDuration": self.change_invisible_duration,
            "EndTransaction": self.end_transaction,
            "NotifyClientTermination": self.notify_client_termination,
            "Telemetry": self.telemetry,
            "ForwardMessageToDeadLetterQueue": self.forward_to_dlq,
            "PullMessage": self.offsets.pull_message,
            "UpdateOffset": self.offsets.update_offset,
            "GetOffset": self.offsets.get_offset,
            "QueryOffset": self.offsets.query_offset,
        }

    @property
    def endpoints(self) -> pb.Endpoints:
        return mp.endpoints_of(self.config.host, self.config.grpc_port)

    # -- dispatch
    async def handle(self, call: Call) -> Any:
        handler = self._handlers.get(call.method)
        if handler is None:
            return error_response(call.method, Code.NOT_IMPLEMENTED, call.method)
        try:
            await self.auth.authenticate(call.metadata)
            return await handler(call)
        except Exception as e:
            return self.error_answer(call.method, e)

    def error_answer(self, method: str, e: BaseException) -> Any:
        """The response of a call that failed with ``e``: a refusal's code, a broker's code
        mapped, INTERNAL_SERVER_ERROR for a lost broker or a bug (logged)."""
        if isinstance(e, BadRequest):
            return error_response(method, e.code, str(e))
        if isinstance(e, MQBrokerError):
            return error_response(method, mp.code_of_remoting(e.code), str(e))
        if isinstance(e, MQClientError | RemotingError | OSError):
            return error_response(method, Code.INTERNAL_SERVER_ERROR, str(e))
        # a bug: this call fails, the proxy keeps serving
        events.emit(log, events.ProxyCallFailed(method=method, error=repr(e)))
        return error_response(method, Code.INTERNAL_SERVER_ERROR, repr(e))

    async def _route(self, topic: str) -> Any:
        if not topic:
            raise BadRequest(Code.ILLEGAL_TOPIC, "topic name is empty")
        route = self.client.routes.get(topic) or await self.client.update_route(topic)
        if route is None:
            raise BadRequest(Code.TOPIC_NOT_FOUND, f"topic {topic} not found")
        return route

    async def fetch_user(self, username: str) -> UserInfo | None:
        """A user of the brokers' ACL (AUTH_GET_USER to a master of the cluster)."""
        header = to_ext(GetUserRequestHeader(username))
        for addr in await self._masters():
            cmd = RemotingCommand(RequestCode.AUTH_GET_USER, ext_fields=header)
            resp = await self.client.remoting.invoke(addr, cmd, BROKER_TIMEOUT_S)
            if resp.code == ResponseCode.SUCCESS:
                return from_json(UserInfo, resp.body) if resp.body else None
        return None

    async def _masters(self) -> list[str]:
        """The masters of the proxy's cluster (rocketMQClusterName)."""
        info = await self.client.api.get_cluster_info()
        names = info.clusterAddrTable.get(self.config.rocketmq_cluster_name, [])
        table = info.brokerAddrTable
        return sorted(
            table[n].brokerAddrs[0] for n in names if n in table and 0 in table[n].brokerAddrs
        )

    async def fetch_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's subscription group config from the first master that has it (None:
        none has it, or it could not be read: logged, the group is then not FIFO)."""
        header = to_ext(GetSubscriptionGroupConfigRequestHeader(group))
        try:
            for addr in await self._masters():
                cmd = RemotingCommand(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, ext_fields=header)
                resp = await self.client.remoting.invoke(addr, cmd, BROKER_TIMEOUT_S)
                if resp.code == ResponseCode.SUCCESS and resp.body:
                    return from_json(SubscriptionGroupConfig, resp.body)
        except (MQClientError, MQBrokerError, RemotingError, OSError, ValueError) as e:
            events.emit(log, events.ProxyGroupConfigFailed(group=group, error=repr(e)))
        return None

    def broker_name_of(self, addr: str) -> str:
        """The broker set an address serves, from the routes seen ("" when unknown)."""
        for name, addrs in self.client.broker_addrs.items():
            if addr in addrs.values():
                return name
        return ""

    async def _master(self, broker_name: str, topic: str) -> str:
        addr = await self.client.find_master_addr_refreshing(broker_name, topic)
        if addr is None:
            raise BadRequest(Code.HA_NOT_AVAILABLE, f"broker {broker_name} has no master")
        return addr

    async def _per_broker(self, route: TopicRouteData) -> Mapping[str, pb.Endpoints]:
        """Local mode: where clients find each broker set (cluster mode: here, for all)."""
        if self.broker_endpoints is None:
            return {}
        return await self.broker_endpoints(route)

    # -- routes, heartbeats, settings
    async def query_route(self, call: Call) -> spb.QueryRouteResponse:
        req: spb.QueryRouteRequest = call.request
        route = await self._route(req.topic.name)
        per_broker = await self._per_broker(route)
        queues = mp.route_queues(route, req.topic, self.endpoints, per_broker)
        return spb.QueryRouteResponse(status=status(Code.OK), message_queues=queues)

    async def query_assignment(self, call: Call) -> spb.QueryAssignmentResponse:
        req: spb.QueryAssignmentRequest = call.request
        route = await self._route(req.topic.name)
        fifo = await self.group_configs.is_fifo(req.group.name)
        per_broker = await self._per_broker(route)
        assignments = mp.assignments(route, req.topic, self.endpoints, per_broker, fifo)
        return spb.QueryAssignmentResponse(status=status(Code.OK), assignments=assignments)

    async def heartbeat(self, call: Call) -> spb.HeartbeatResponse:
        if not call.metadata.get("x-mq-client-id"):
            raise BadRequest(Code.CLIENT_ID_REQUIRED, "x-mq-client-id is required")
        return spb.HeartbeatResponse(status=status(Code.OK))

    async def notify_client_termination(self, call: Call) -> spb.NotifyClientTerminationResponse:
        self.registry.forget(call.metadata.get("x-mq-client-id", ""))
        return spb.NotifyClientTerminationResponse(status=status(Code.OK))

    async def telemetry(self, call: Call) -> spb.TelemetryCommand:
        cmd: spb.TelemetryCommand = call.request
        kind = cmd.WhichOneof("command")
        if kind == "settings":
            client_id = call.metadata.get("x-mq-client-id")
            if not client_id:
                raise BadRequest(Code.CLIENT_ID_REQUIRED, "x-mq-client-id is required")
            if call.push is not None:
                self.registry.update(client_id, call.push, cmd.settings)
            fifo = cmd.settings.WhichOneof("pub_sub") == "subscription" and (
                await self.group_configs.is_fifo(cmd.settings.subscription.group.name)
            )
            return spb.TelemetryCommand(
                status=status(Code.OK),
                settings=mp.settings_answer(
                    cmd.settings, self.endpoints, self.config.max_body_size, fifo
                ),
            )
        if kind is None:
            raise BadRequest(Code.BAD_REQUEST, "telemetry command is empty")
        return spb.TelemetryCommand(status=status(Code.OK))

    # -- sending (send.py)
    async def send_message(self, call: Call) -> spb.SendMessageResponse:
        return await self.sends.send_message(call, self._route, self._master)  # type: ignore[no-any-return]

    def start_nowait(self, call: Call) -> bool:
        """`GrpcBridge.fast`: a SendMessage (send.py) or a one-entry AckMessage (ack_nowait.py)
        started without a Trio task when it can be, and authentication is off (it awaits user
        look-ups); False: the call takes the task path."""
        if self.config.authentication_enabled:
            return False
        if call.method == "SendMessage":
            return self.sends.send_nowait(call, self.error_answer)
        if call.method == "AckMessage":
            return self.acks.ack_nowait(call, self.error_answer)
        return False

    async def end_transaction(self, call: Call) -> spb.EndTransactionResponse:
        req: spb.EndTransactionRequest = call.request
        tx = TransactionId.decode(req.transaction_id)
        match req.resolution:
            case pb.COMMIT:
                kind = TRANSACTION_COMMIT_TYPE
            case pb.ROLLBACK:
                kind = TRANSACTION_ROLLBACK_TYPE
            case _:
                raise BadRequest(Code.BAD_REQUEST, "transaction resolution is unspecified")
        addr = await self._master(tx.broker_name, req.topic.name)
        header = EndTransactionRequestHeader(
            producerGroup=mp.PROXY_PRODUCER_GROUP,
            tranStateTableOffset=tx.tran_state_table_offset,
            commitLogOffset=tx.commit_log_offset,
            commitOrRollback=kind,
            msgId=req.message_id,
            topic=req.topic.name,
            fromTransactionCheck=req.source == pb.SOURCE_SERVER_CHECK,
            transactionId=tx.broker_transaction_id,
            bname=tx.broker_name,
        )
        cmd = RemotingCommand(code=RequestCode.END_TRANSACTION, ext_fields=to_ext(header))
        await self.client.remoting.invoke_oneway(addr, cmd)
        return spb.EndTransactionResponse(status=status(Code.OK))

    # -- consuming (POP)
    def _consumer(self, group: str) -> SimpleConsumer:
        if not group:
            raise BadRequest(Code.ILLEGAL_CONSUMER_GROUP, "consumer group is empty")
        consumer = self._consumers.get(group)
        if consumer is None:
            consumer = SimpleConsumer(group, self.config.namesrv_addr, client=self.client)
            self._consumers[group] = consumer
        return consumer

    async def receive_message(self, call: Call) -> list[spb.ReceiveMessageResponse]:
        req: spb.ReceiveMessageRequest = call.request
        topic = req.message_queue.topic.name
        await self._route(topic)
        sql = None
        if req.filter_expression.type == pb.SQL:
            sql = sql_expression(req.filter_expression)
        batch = req.batch_size or 1
        if not 0 < batch <= MAX_RECEIVE:
            raise BadRequest(Code.BAD_REQUEST, f"batch size must be 1..{MAX_RECEIVE}")
        client_id = call.metadata.get("x-mq-client-id", "")
        auto_renew = req.auto_renew and self.config.renew.enabled
        if auto_renew and client_id not in self.registry.streams:
            # upstream: renewal needs the client's channel (its Telemetry stream)
            raise BadRequest(Code.MESSAGE_NOT_FOUND, f"client {client_id!r} is disconnected")
        if auto_renew and not self.renewer.schedule.has_room(batch):
            limit = self.config.renew.max_tracked
            raise BadRequest(
                Code.TOO_MANY_REQUESTS, f"{limit} messages under auto renewal in this proxy"
            )
        if auto_renew:  # upstream: the proxy's defaultInvisibleTimeMills, then renewals
            invisible_ms = self.config.renew.default_invisible_ms
            if req.group.name not in self.renewing_groups:
                self.renewing_groups = self.renewing_groups | {req.group.name}
        elif req.HasField("invisible_duration"):
            invisible_ms = mp.ms_of_duration(req.invisible_duration)
        else:
            invisible_ms = DEFAULT_INVISIBLE_MS
        if invisible_ms <= 0:
            raise BadRequest(Code.ILLEGAL_INVISIBLE_TIME, "invisible duration must be positive")
        poll_ms = min(mp.ms_of_duration(req.long_polling_timeout), MAX_POLL_MS)
        consumer = self._consumer(req.group.name)
        consumer.subscribe(topic, req.filter_expression.expression or "*", sql=sql)
        fifo = await self.group_configs.is_fifo(req.group.name)
        broker = req.message_queue.broker.name
        if broker:  # upstream: pop from the broker set the request's queue names
            got = await consumer.receive_from(
                topic,
                broker,
                batch,
                invisible_ms / 1000,
                poll_ms / 1000,
                order=fifo,
                attempt_id=req.attempt_id or None,
            )
        else:
            got = await consumer.receive(batch, invisible_ms / 1000, poll_ms / 1000, order=fifo)
        if broker and not (fifo or auto_renew or sql) and self.loop_receivable is not None:
            self.loop_receivable(consumer.group, topic, self.now_ms() + round(TTL_S * 1000))

        def track(m: ReceivedMessage, handle: str) -> None:
            self.renewer.track(
                Tracked(
                    client_id=client_id,
                    group=consumer.group,
                    topic=topic,
                    original=handle,
                    latest=handle,
                    consume_ms=self.now_ms(),
                    visible_ms=ExtraInfo.parse(m.receipt_handle).revive_time,
                    reconsume_times=m.message.reconsume_times,
                )
            )

        on_received = track if auto_renew else None
        return receive_answers(got, topic, invisible_ms, self.now_ms(), on_received)

    def received(self, topic: str, handle: str) -> ReceivedMessage:
        receipt = decode_receipt(handle)
        extra = receipt.extra
        stub = MessageExt(topic, b"", queue_id=extra.queue_id, queue_offset=extra.queue_offset or 0)
        return ReceivedMessage(stub, topic, extra.broker_name, receipt.extra_info)

    async def ack_message(self, call: Call) -> spb.AckMessageResponse:
        """Every entry's own status. The entries the broker can take in one BATCH_ACK_MESSAGE
        (`_batchable`) go in one (upstream's proxy with enableBatchAck); when the brokers
        refuse it, and for the others, one ACK_MESSAGE per entry says which failed."""
        req: spb.AckMessageRequest = call.request
        consumer = self._consumer(req.group.name)
        statuses: list[Any] = [None] * len(req.entries)
        todo: list[tuple[int, ReceivedMessage]] = []
        for i, e in enumerate(req.entries):
            try:
                handle = await self.renewer.release(consumer.group, e.receipt_handle)
                todo.append((i, self.received(req.topic.name, handle)))
            except BadRequest as b:
                statuses[i] = status(b.code, str(b))
        batch = [r for _, r in todo if _batchable(r)]
        if len(batch) > 1:
            try:
                await consumer.ack_batch(batch)
                todo = [(i, r) for i, r in todo if not _batchable(r)]
            except MQBrokerError:
                pass  # each on its own below: the statuses name the entries that failed
        for i, received in todo:
            try:
                await consumer.ack(received)
            except BadRequest as b:
                statuses[i] = status(b.code, str(b))
            except MQBrokerError as b:
                statuses[i] = status(mp.code_of_remoting(b.code), str(b))
        return ack_results(req.entries, statuses)

    async def change_invisible_duration(self, call: Call) -> spb.ChangeInvisibleDurationResponse:
        req: spb.ChangeInvisibleDurationRequest = call.request
        duration_ms = mp.ms_of_duration(req.invisible_duration)
        if duration_ms <= 0:
            raise BadRequest(Code.ILLEGAL_INVISIBLE_TIME, "invisible duration must be positive")
        consumer = self._consumer(req.group.name)
        decode_receipt(req.receipt_handle)
        handle = await self.renewer.release(consumer.group, req.receipt_handle)
        new = await self._change(consumer, req.topic.name, handle, duration_ms)
        return spb.ChangeInvisibleDurationResponse(status=status(Code.OK), receipt_handle=new)

    async def _change(
        self, consumer: SimpleConsumer, topic: str, handle: str, duration_ms: int
    ) -> str:
        """CHANGE_MESSAGE_INVISIBLETIME for ``handle``; the new handle."""
        receipt = decode_receipt(handle)
        received = self.received(topic, handle)
        await consumer.change_invisible_duration(received, duration_ms / 1000)
        return encode_receipt(
            received.receipt_handle, received.queue_offset, receipt.commit_log_offset
        )

    async def _renew(self, r: Renewal) -> tuple[str, int]:
        """The renewer's change of invisible time: the new handle and when it is visible."""
        new = await self._change(self._consumer(r.group), r.topic, r.latest, r.invisible_ms)
        return new, decode_receipt(new).extra.revive_time

    async def forward_to_dlq(self, call: Call) -> spb.ForwardMessageToDeadLetterQueueResponse:
        """Upstream: CONSUMER_SEND_MSG_BACK at the message's commit log offset with delay
        level -1 (straight to the group's DLQ), then the ack of the popped message."""
        req: spb.ForwardMessageToDeadLetterQueueRequest = call.request
        consumer = self._consumer(req.group.name)
        decode_receipt(req.receipt_handle)
        handle = await self.renewer.release(consumer.group, req.receipt_handle)
        receipt = decode_receipt(handle)
        if receipt.commit_log_offset < 0:
            raise BadRequest(Code.INVALID_RECEIPT_HANDLE, "receipt handle has no commit offset")
        addr = await self._master(receipt.extra.broker_name, req.topic.name)
        header = ConsumerSendMsgBackRequestHeader(
            offset=receipt.commit_log_offset,
            group=consumer.group,
            delayLevel=-1,
            originMsgId=req.message_id,
            originTopic=req.topic.name,
            unitMode=False,
            maxReconsumeTimes=req.max_delivery_attempts,
        )
        await self.client.api.call(addr, RequestCode.CONSUMER_SEND_MSG_BACK, header)
        await consumer.ack(self.received(req.topic.name, handle))
        return spb.ForwardMessageToDeadLetterQueueResponse(status=status(Code.OK))


def _batchable(r: ReceivedMessage) -> bool:
    extra = ExtraInfo.parse(r.receipt_handle)
    offset = extra.queue_offset if extra.queue_offset is not None else r.queue_offset
    return batch_ackable(extra, offset)


_RESPONSES: dict[str, Any] = {
    "QueryRoute": spb.QueryRouteResponse,
    "Heartbeat": spb.HeartbeatResponse,
    "SendMessage": spb.SendMessageResponse,
    "QueryAssignment": spb.QueryAssignmentResponse,
    "AckMessage": spb.AckMessageResponse,
    "ChangeInvisibleDuration": spb.ChangeInvisibleDurationResponse,
    "ForwardMessageToDeadLetterQueue": spb.ForwardMessageToDeadLetterQueueResponse,
    "EndTransaction": spb.EndTransactionResponse,
    "NotifyClientTermination": spb.NotifyClientTerminationResponse,
    "UpdateOffset": spb.UpdateOffsetResponse,
    "GetOffset": spb.GetOffsetResponse,
    "QueryOffset": spb.QueryOffsetResponse,
}


def error_response(method: str, code: int, message: str) -> Any:
    """The response of ``method`` carrying only a status (ReceiveMessage: a one-item stream;
    Telemetry: a command with a status)."""
    st = status(code, message)
    if method == "ReceiveMessage":
        return [spb.ReceiveMessageResponse(status=st)]
    if method == "PullMessage":
        return [spb.PullMessageResponse(status=st)]
    if method == "Telemetry":
        return spb.TelemetryCommand(status=st)
    return _RESPONSES[method](status=st)


def overflow_response(method: str, _request: Any) -> Any:
    """What a call gets when the proxy's call queue is full (upstream: TOO_MANY_REQUESTS)."""
    return error_response(method, Code.TOO_MANY_REQUESTS, "proxy is busy")
