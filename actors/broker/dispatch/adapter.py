"""The broker's remoting adapter: RemotingCommand <-> the processors' typed requests/outcomes.

The one place where the broker meets RocketMQ's remoting protocol. It owns:

- the request-code -> handler table and the gates in front of it: the ACL gate first (when
  authentication or authorization is on, auth_remoting.py), then an unknown code is
  REQUEST_CODE_NOT_SUPPORTED; while the broker stops, everything but a client's leaving and
  its offsets is SYSTEM_BUSY;
- decoding: extFields into the typed header classes through the cattrs converter
  (`protocol.serde`), SEND_MESSAGE_V2's short keys through the fast `parse_send_header_v2`,
  JSON bodies into body classes;
- encoding: every `Refusal` becomes its code and remark; every outcome becomes the response
  upstream sends (codes, remarks, extFields, bodies written by `protocol.fastjson` as
  upstream's fastjson writes them), e.g. `PutStatus` -> response code
  exactly like upstream's SendMessageProcessor (`put_status_code`), `PullStatus` -> the pull
  codes (`PULL_CODES`);
- the remoting side of clients: a connection is a client's channel (its born host is cached on
  it, its closing is reported to the client processor) and NOTIFY_CONSUMER_IDS_CHANGED pushes
  (`RemotingNotifier`);
- the two controller-mode calls a broker serves, NOTIFY_BROKER_ROLE_CHANGED and
  GET_BROKER_EPOCH_CACHE, handed to the ReplicasManager.

Processors never see a RemotingCommand; a later gRPC proxy adapter reuses them as they are.
Handlers run inline in the connection's reader task; a send or a held pull is answered later
through the callback / `PullReply` the adapter hands to the processor, which writes the
response to the request's connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Final, Protocol, TypeVar, assert_never

from rocketrio.actors.broker.admin.processor import AdminProcessor, QueriedMessages
from rocketrio.actors.broker.clients.processor import ClientProcessor
from rocketrio.actors.broker.dispatch.outcomes import (
    Done,
    Pulled,
    PullOutcome,
    PullStatus,
    PutFailed,
    PutStatus,
    Refusal,
    SendBackOutcome,
    SendOutcome,
    SendStored,
    SentBack,
)
from rocketrio.actors.broker.pull.processor import PullMessageProcessor, pull_status
from rocketrio.actors.broker.send.processor import (
    BornHost,
    OnSentBack,
    SendMessageProcessor,
    host_tuple,
)
from rocketrio.actors.broker.stats.consume_stats import ConsumeStatsProcessor
from rocketrio.actors.kernel.remoting import Connection, RequestContext
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import (
    HeartbeatData,
    LockBatchRequestBody,
    SubscriptionGroupConfig,
)
from rocketrio.protocol.codes import RPC_ONEWAY, RequestCode, ResponseCode, request_name
from rocketrio.protocol.controller_headers import (
    EpochEntryCache,
    NotifyBrokerRoleChangedRequestHeader,
    SyncStateSet,
)
from rocketrio.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    QueryTopicConsumeByWhoRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext, to_json
from rocketrio.storage.message_store import GetMessageStatus

H = TypeVar("H")  # a typed request header or body
R = TypeVar("R")  # a processor's outcome
Handler = Callable[[RequestContext], Awaitable[RemotingCommand | None]]
# the ACL gate (auth_remoting.AuthGate): None to serve the request, else the refusal to send
Gate = Callable[[RequestContext], RemotingCommand | None]

RC = ResponseCode
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
# while stopping, clients may still leave and save their progress (persisted last)
ALLOWED_WHILE_STOPPING: Final = frozenset(
    {
        RequestCode.UNREGISTER_CLIENT,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.HEART_BEAT,
    }
)

# upstream SendMessageProcessor.handlePutMessageResult: (response code, remark when the store
# gave none). The stored statuses answer with the SendMessageResponseHeader too.
PUT_STATUS_CODES: Final[dict[PutStatus, tuple[int, str | None]]] = {
    PutStatus.PUT_OK: (RC.SUCCESS, None),
    PutStatus.FLUSH_DISK_TIMEOUT: (RC.FLUSH_DISK_TIMEOUT, None),
    PutStatus.FLUSH_SLAVE_TIMEOUT: (RC.FLUSH_SLAVE_TIMEOUT, None),
    PutStatus.SLAVE_NOT_AVAILABLE: (RC.SLAVE_NOT_AVAILABLE, None),
    PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: (RC.SYSTEM_ERROR, "in-sync replicas not enough"),
    PutStatus.SERVICE_NOT_AVAILABLE: (
        RC.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the "
        "broker's disk is full, messages are put to the slave, message store has been shut "
        "down, etc.",
    ),
    PutStatus.MESSAGE_ILLEGAL: (
        RC.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched",
    ),
    PutStatus.OS_PAGE_CACHE_BUSY: (
        RC.SYSTEM_ERROR,
        "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    ),
    PutStatus.UNKNOWN_ERROR: (RC.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}

_PUT_OK = PutStatus.PUT_OK

PULL_CODES: Final[dict[PullStatus, int]] = {
    PullStatus.FOUND: RC.SUCCESS,
    PullStatus.NO_NEW_MSG: RC.PULL_NOT_FOUND,
    PullStatus.NO_MATCHED_MSG: RC.PULL_RETRY_IMMEDIATELY,
    PullStatus.OFFSET_ILLEGAL: RC.PULL_OFFSET_MOVED,
}


def put_status_code(status: PutStatus, remark: str | None = None) -> tuple[int, str | None]:
    """A put's response code and remark: the store's remark when it gave one, else upstream's."""
    code, default = PUT_STATUS_CODES[status]
    return code, remark if remark is not None else default


def pull_code(status: GetMessageStatus, request_offset: int) -> int:
    """The response code of a pull the store answered with ``status``."""
    return PULL_CODES[pull_status(status, request_offset)]


# ---------------------------------------------------------------------------- decoding


def _opt_int(v: str | None) -> int | None:
    return None if v is None else int(v)


def _opt_bool(v: str | None) -> bool | None:
    if v is None:
        return None
    if v == "false":  # what clients send, checked first: the send hot path
        return False
    if v == "true":
        return True
    s = v.strip().lower()
    if s in ("true", "1"):
        return True
    if s in ("false", "0", ""):
        return False
    raise ValueError(v)


def parse_send_header_v2(ext: dict[str, str]) -> SendMessageRequestHeader:
    """SEND_MESSAGE_V2 extFields -> the V1 header, without cattrs on the hot path.

    Same result as ``from_ext(SendMessageRequestHeaderV2, ext).to_v1()`` (a test checks it)
    at a quarter of the cost; any missing or malformed field falls back to that call, which
    raises the HeaderError naming the field.
    """
    get = ext.get
    try:
        return SendMessageRequestHeader(
            producerGroup=ext["a"],
            topic=ext["b"],
            defaultTopic=ext["c"],
            defaultTopicQueueNums=int(ext["d"]),
            queueId=int(ext["e"]),
            sysFlag=int(ext["f"]),
            bornTimestamp=int(ext["g"]),
            flag=int(ext["h"]),
            properties=get("i"),
            reconsumeTimes=_opt_int(get("j")),
            unitMode=_opt_bool(get("k")),
            batch=_opt_bool(get("m")),
            maxReconsumeTimes=_opt_int(get("l")),
            bname=get("n"),
        )
    except (KeyError, ValueError):
        return from_ext(SendMessageRequestHeaderV2, ext).to_v1()


# ---------------------------------------------------------------------------- encoding


def refused(cmd: RemotingCommand, refusal: Refusal) -> RemotingCommand:
    return cmd.make_response(refusal.code, refusal.remark)


def send_response(cmd: RemotingCommand, outcome: SendOutcome) -> RemotingCommand:
    match outcome:
        case SendStored():
            if outcome.status is _PUT_OK:  # the common case, without the table look-up
                code, remark = RC.SUCCESS, outcome.remark
            else:
                code, remark = put_status_code(outcome.status, outcome.remark)
            header = SendMessageResponseHeader(
                outcome.msg_id, outcome.queue_id, outcome.queue_offset, outcome.uniq_key
            )
            return cmd.make_response(code, remark, to_ext(header))
        case PutFailed():
            code, remark = put_status_code(outcome.status, outcome.remark)
            return cmd.make_response(code, remark)
        case _:
            assert_never(outcome)


def send_back_response(cmd: RemotingCommand, outcome: SendBackOutcome) -> RemotingCommand:
    match outcome:
        case SentBack():
            return cmd.make_response(RC.SUCCESS)
        case PutFailed():
            # upstream answers a failed send-back SYSTEM_ERROR whatever the store said
            return cmd.make_response(RC.SYSTEM_ERROR, outcome.remark)
        case _:
            assert_never(outcome)


def pull_response(cmd: RemotingCommand, outcome: PullOutcome) -> RemotingCommand:
    match outcome:
        case Pulled(status=status, result=result, suggest_broker_id=suggest):
            header = PullMessageResponseHeader(
                suggestWhichBrokerId=suggest,
                nextBeginOffset=result.next_begin_offset,
                minOffset=result.min_offset,
                maxOffset=result.max_offset,
            )
            if status is PullStatus.FOUND:
                code, body = RC.SUCCESS, b"".join(result.buffers)
            else:
                code, body = PULL_CODES[status], b""
            return cmd.make_response(code, result.status.value, to_ext(header), body)
        case Refusal():
            return refused(cmd, outcome)
        case _:
            assert_never(outcome)


def _done(cmd: RemotingCommand, outcome: Done | Refusal) -> RemotingCommand:
    match outcome:
        case Done():
            return cmd.make_response(RC.SUCCESS)
        case Refusal():
            return refused(cmd, outcome)
        case _:
            assert_never(outcome)


def _json(cmd: RemotingCommand, outcome: Any) -> RemotingCommand:
    """A body class (or a Refusal): SUCCESS with the body as upstream's fastjson writes it."""
    if isinstance(outcome, Refusal):
        return refused(cmd, outcome)
    return cmd.make_response(RC.SUCCESS, body=fastjson.encode(outcome))


def _offset(cmd: RemotingCommand, outcome: int | Refusal) -> RemotingCommand:
    match outcome:
        case Refusal():
            return refused(cmd, outcome)
        case int():
            return cmd.make_response(RC.SUCCESS, ext_fields=to_ext(OffsetResponseHeader(outcome)))
        case _:
            assert_never(outcome)


def _store_time(cmd: RemotingCommand, outcome: int | Refusal) -> RemotingCommand:
    match outcome:
        case Refusal():
            return refused(cmd, outcome)
        case int():
            header = GetEarliestMsgStoretimeResponseHeader(outcome)
            return cmd.make_response(RC.SUCCESS, ext_fields=to_ext(header))
        case _:
            assert_never(outcome)


def _record(cmd: RemotingCommand, outcome: bytes | Refusal) -> RemotingCommand:
    match outcome:
        case Refusal():
            return refused(cmd, outcome)
        case bytes():
            return cmd.make_response(RC.SUCCESS, body=outcome)
        case _:
            assert_never(outcome)


def _text(cmd: RemotingCommand, text: str) -> RemotingCommand:
    return cmd.make_response(RC.SUCCESS, body=text.encode())


# handlers built from (how to decode the request, the processor call, how to encode the answer)
Answer = Callable[[RemotingCommand, R], RemotingCommand]


def _ext(cls: type[H], call: Callable[[H], R], answer: Answer[R]) -> Handler:
    async def handle(ctx: RequestContext) -> RemotingCommand:
        return answer(ctx.cmd, call(from_ext(cls, ctx.cmd.ext_fields)))

    return handle


def _ext_awaited(cls: type[H], call: Callable[[H], Awaitable[R]], answer: Answer[R]) -> Handler:
    async def handle(ctx: RequestContext) -> RemotingCommand:
        return answer(ctx.cmd, await call(from_ext(cls, ctx.cmd.ext_fields)))

    return handle


def _body(cls: type[H], call: Callable[[H], R], answer: Answer[R]) -> Handler:
    async def handle(ctx: RequestContext) -> RemotingCommand:
        return answer(ctx.cmd, call(from_json(cls, ctx.cmd.body)))

    return handle


def _body_awaited(cls: type[H], call: Callable[[H], Awaitable[R]], answer: Answer[R]) -> Handler:
    async def handle(ctx: RequestContext) -> RemotingCommand:
        return answer(ctx.cmd, await call(from_json(cls, ctx.cmd.body)))

    return handle


def _no_args(call: Callable[[], R], answer: Answer[R]) -> Handler:
    async def handle(ctx: RequestContext) -> RemotingCommand:
        return answer(ctx.cmd, call())

    return handle


class _PullReply:
    """A held pull's way back to its connection."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: RequestContext) -> None:
        self.ctx = ctx

    @property
    def gone(self) -> bool:
        return self.ctx.conn.closed

    @property
    def owner(self) -> Hashable:
        return self.ctx.conn

    def deliver(self, outcome: PullOutcome) -> None:
        self.ctx.respond(pull_response(self.ctx.cmd, outcome))


class SendAnswer:
    """A send's way back to its connection (one slots object per send, no closure)."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: RequestContext) -> None:
        self.ctx = ctx

    def __call__(self, outcome: SendOutcome) -> None:
        ctx = self.ctx
        ctx.respond(send_response(ctx.cmd, outcome))


def _sent_back(ctx: RequestContext) -> OnSentBack:
    def on_done(outcome: SendBackOutcome) -> None:
        ctx.respond(send_back_response(ctx.cmd, outcome))

    return on_done


# ---------------------------------------------------------------------------- pushes


class RemotingNotifier:
    """NOTIFY_CONSUMER_IDS_CHANGED (oneway) to a group's members (their connections)."""

    def __init__(self) -> None:
        self._opaque = 0

    def consumer_ids_changed(self, group: str, channels: list[Hashable]) -> None:
        ext = to_ext(NotifyConsumerIdsChangedRequestHeader(group))
        for conn in channels:
            assert isinstance(conn, Connection)
            self._opaque += 1
            cmd = RemotingCommand(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                opaque=self._opaque,
                flag=RPC_ONEWAY,
                ext_fields=dict(ext),
            )
            conn.send_nowait(cmd)


class ReplicasCalls(Protocol):
    """What the adapter hands to the ReplicasManager (controller mode)."""

    def on_role_change_notified(
        self, h: NotifyBrokerRoleChangedRequestHeader, sync: SyncStateSet | None
    ) -> None: ...

    def epoch_entry_cache(self) -> EpochEntryCache: ...


# ---------------------------------------------------------------------------- the adapter


class RemotingAdapter:
    """Serves a RemotingServer: `process` is its processor, `on_connect` its connect hook."""

    def __init__(
        self,
        broker_name: str,
        *,
        send: SendMessageProcessor,
        pull: PullMessageProcessor,
        clients: ClientProcessor,
        admin: AdminProcessor,
        stats: ConsumeStatsProcessor,
        replicas: ReplicasCalls | None = None,
        gate: Gate | None = None,
        extra_handlers: dict[int, Handler] | None = None,
    ) -> None:
        self.broker_name = broker_name
        self.gate = gate
        self.send = send
        self.pull = pull
        self.clients = clients
        self.admin = admin
        self.stats = stats
        self.replicas = replicas
        self.stopping = False
        self.handlers: dict[int, Handler] = self._handler_table()
        self.handlers.update(extra_handlers or {})

    def stop_taking_requests(self) -> None:
        """Shutdown: from now on only ALLOWED_WHILE_STOPPING requests are served."""
        self.stopping = True

    async def process(self, ctx: RequestContext) -> RemotingCommand | None:
        if self.gate is not None:  # ACL 2.0: before anything else, as upstream's pipeline
            refused_by_gate = self.gate(ctx)
            if refused_by_gate is not None:
                return refused_by_gate
        code = ctx.cmd.code
        handler = self.handlers.get(code)
        if handler is None:
            return ctx.cmd.make_response(
                RC.REQUEST_CODE_NOT_SUPPORTED,
                f"request type {code} ({request_name(code)}) not supported "
                f"by broker {self.broker_name}",
            )
        if self.stopping and code not in ALLOWED_WHILE_STOPPING:
            return ctx.cmd.make_response(
                RC.SYSTEM_BUSY, f"broker {self.broker_name} is shutting down"
            )
        return await handler(ctx)

    def on_connect(self, conn: Connection) -> None:
        conn.on_close.append(self.clients.channel_closed)

    @staticmethod
    def born_host(conn: Connection) -> BornHost:
        host: BornHost | None = conn.attrs.get("born_host")
        if host is None:
            host = conn.attrs["born_host"] = host_tuple(conn.remote)
        return host

    def _handler_table(self) -> dict[int, Handler]:
        rc, c, a, st = RequestCode, self.clients, self.admin, self.stats
        return {
            rc.SEND_MESSAGE: self._send,
            rc.SEND_MESSAGE_V2: self._send,
            rc.SEND_BATCH_MESSAGE: self._send,
            rc.CONSUMER_SEND_MSG_BACK: self._send_back,
            rc.PULL_MESSAGE: self._pull,
            rc.HEART_BEAT: self._heartbeat,
            rc.UNREGISTER_CLIENT: self._unregister_client,
            rc.GET_CONSUMER_LIST_BY_GROUP: _ext(
                GetConsumerListByGroupRequestHeader, c.consumer_list, _json
            ),
            rc.GET_CONSUMER_CONNECTION_LIST: _ext(
                GetConsumerConnectionListRequestHeader, c.consumer_connections, _json
            ),
            rc.GET_PRODUCER_CONNECTION_LIST: _ext(
                GetProducerConnectionListRequestHeader, c.producer_connections, _json
            ),
            rc.LOCK_BATCH_MQ: _body(LockBatchRequestBody, c.lock_batch, _json),
            rc.UNLOCK_BATCH_MQ: _body(LockBatchRequestBody, c.unlock_batch, _done),
            rc.QUERY_CONSUMER_OFFSET: _ext(
                QueryConsumerOffsetRequestHeader, c.query_offset, _offset
            ),
            rc.UPDATE_CONSUMER_OFFSET: _ext(
                UpdateConsumerOffsetRequestHeader, c.update_offset, _done
            ),
            rc.GET_ALL_CONSUMER_OFFSET: _no_args(c.all_offsets, _json),
            # UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER and GET_TOPIC_CONFIG are the
            # static-topic processor's (static_topic_processor.py): it knows the mappings
            rc.GET_ALL_TOPIC_CONFIG: _no_args(a.all_topic_config, _json),
            rc.GET_TOPIC_STATS_INFO: _ext(GetTopicStatsInfoRequestHeader, st.topic_stats, _json),
            rc.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: _body_awaited(
                SubscriptionGroupConfig, a.update_group, _done
            ),
            rc.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: _no_args(a.all_groups, _json),
            rc.GET_SUBSCRIPTIONGROUP_CONFIG: _ext(
                GetSubscriptionGroupConfigRequestHeader, a.group_config, _json
            ),
            rc.DELETE_SUBSCRIPTIONGROUP: _ext_awaited(
                DeleteSubscriptionGroupRequestHeader, a.delete_group, _done
            ),
            rc.GET_CONSUME_STATS: _ext(GetConsumeStatsRequestHeader, st.consume_stats, _json),
            rc.GET_BROKER_CONSUME_STATS: _ext(
                GetConsumeStatsInBrokerHeader, st.broker_consume_stats, _json
            ),
            rc.QUERY_TOPIC_CONSUME_BY_WHO: _ext(
                QueryTopicConsumeByWhoRequestHeader, st.consumed_by_whom, _json
            ),
            rc.GET_BROKER_CONFIG: _no_args(a.broker_config, _text),
            rc.GET_MAX_OFFSET: _ext(GetMaxOffsetRequestHeader, a.max_offset, _offset),
            rc.GET_MIN_OFFSET: _ext(GetMinOffsetRequestHeader, a.min_offset, _offset),
            rc.SEARCH_OFFSET_BY_TIMESTAMP: _ext(
                SearchOffsetRequestHeader, a.search_offset, _offset
            ),
            rc.GET_EARLIEST_MSG_STORETIME: _ext(
                GetEarliestMsgStoretimeRequestHeader, a.earliest_store_time, _store_time
            ),
            rc.VIEW_MESSAGE_BY_ID: _ext(ViewMessageRequestHeader, a.view_message, _record),
            rc.QUERY_MESSAGE: self._query_message,
            rc.NOTIFY_BROKER_ROLE_CHANGED: self._role_change_notified,
            rc.GET_BROKER_EPOCH_CACHE: self._broker_epoch_cache,
        }

    # ------------------------------------------------------------------ messages

    async def _send(self, ctx: RequestContext) -> RemotingCommand | None:
        cmd, conn = ctx.cmd, ctx.conn
        code = cmd.code
        if code == RequestCode.SEND_MESSAGE:
            h = from_ext(SendMessageRequestHeader, cmd.ext_fields)
        else:
            h = parse_send_header_v2(cmd.ext_fields)
        born = conn.attrs.get("born_host") or self.born_host(conn)
        if h.batch or code == RequestCode.SEND_BATCH_MESSAGE:
            refusal = await self.send.send_batch(h, cmd.body, born, conn.remote, SendAnswer(ctx))
        else:
            refusal = await self.send.send(h, cmd.body, born, conn.remote, SendAnswer(ctx))
        return None if refusal is None else refused(cmd, refusal)

    async def _send_back(self, ctx: RequestContext) -> RemotingCommand | None:
        cmd = ctx.cmd
        h = from_ext(ConsumerSendMsgBackRequestHeader, cmd.ext_fields)
        outcome = await self.send.send_back(h, _sent_back(ctx))
        match outcome:
            case None:
                return None
            case SentBack():
                return send_back_response(cmd, outcome)
            case Refusal():
                return refused(cmd, outcome)
            case _:
                assert_never(outcome)

    async def _pull(self, ctx: RequestContext) -> RemotingCommand | None:
        h = from_ext(PullMessageRequestHeader, ctx.cmd.ext_fields)
        outcome = await self.pull.pull(h, _PullReply(ctx))
        return None if outcome is None else pull_response(ctx.cmd, outcome)

    # ------------------------------------------------------------------ clients, queries

    async def _heartbeat(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        data = from_json(HeartbeatData, cmd.body)
        outcome = self.clients.heartbeat(data, ctx.conn, cmd.language, cmd.version, ctx.conn.remote)
        if isinstance(outcome, Done):
            ctx.conn.attrs["client_id"] = data.clientID
        return _done(cmd, outcome)

    async def _unregister_client(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(UnregisterClientRequestHeader, ctx.cmd.ext_fields)
        return _done(ctx.cmd, self.clients.unregister_client(h, ctx.conn))

    async def _query_message(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(QueryMessageRequestHeader, cmd.ext_fields)
        by_uniq_key = cmd.ext_fields.get(UNIQUE_KEY_QUERY, "").lower() == "true"
        outcome = self.admin.query_message(h, by_uniq_key=by_uniq_key)
        match outcome:
            case Refusal():
                return refused(cmd, outcome)
            case QueriedMessages():
                header = to_ext(
                    QueryMessageResponseHeader(
                        indexLastUpdateTimestamp=outcome.index_last_update_timestamp,
                        indexLastUpdatePhyoffset=outcome.index_last_update_phy_offset,
                    )
                )
                if not outcome.records:
                    return cmd.make_response(
                        RC.QUERY_NOT_FOUND,
                        f"can not find message of topic {h.topic} with key {h.key}, "
                        "maybe time range not correct",
                        header,
                    )
                return cmd.make_response(
                    RC.SUCCESS, ext_fields=header, body=b"".join(outcome.records)
                )
            case _:
                assert_never(outcome)

    # ------------------------------------------------------------------ controller mode

    async def _role_change_notified(self, ctx: RequestContext) -> RemotingCommand:
        """NOTIFY_BROKER_ROLE_CHANGED (1008), a oneway push from the controller leader."""
        cmd = ctx.cmd
        h = from_ext(NotifyBrokerRoleChangedRequestHeader, cmd.ext_fields)
        if self.replicas is None:
            return cmd.make_response(
                RC.SYSTEM_ERROR, f"broker {self.broker_name} is not in controller mode"
            )
        sync = from_json(SyncStateSet, cmd.body) if cmd.body else None
        self.replicas.on_role_change_notified(h, sync)
        return cmd.make_response(RC.SUCCESS)

    async def _broker_epoch_cache(self, ctx: RequestContext) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE (1007): the epoch file, for mqadmin getBrokerEpoch."""
        if self.replicas is None:
            return ctx.cmd.make_response(
                RC.SYSTEM_ERROR,
                f"broker {self.broker_name} is not in controller mode "
                f"(enableControllerMode=false): it keeps no epoch file",
            )
        return ctx.cmd.make_response(RC.SUCCESS, body=to_json(self.replicas.epoch_entry_cache()))
