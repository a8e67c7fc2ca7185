"""The NameServer: a remoting shell around the pure `RouteInfoManager` (SPEC N1-N4).

Owns the listening `RemotingServer`, the processor table (request code -> handler; the embedded
controller adds its codes with `register_processor`), the scanNotActiveBroker task, the pushes
the routing core asks for (NOTIFY_MIN_BROKER_ID_CHANGE) and, with metricsExporterType=PROM, the
/metrics endpoint (rocketmq_rpc_latency of this server, and of an embedded controller with its
own metrics). Every routing decision is made in `route_info`; handlers only decode, call the
core, log and encode. The KV config table, its file and its four requests are kv_config.py's
(`KVConfigManager`, ``self.kv``).

Handlers run inline in the connection reader and touch the core without awaiting in between, so
Trio's single thread gives the NameServer exclusive ownership of its tables without an inbox hop
(the only await inside a handler is the KV file write, done after the table change). Several
NameServers are independent: brokers register to each; there is nothing to sync between them.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable
from typing import Any

import structlog
import trio
from prometheus_client.registry import Collector

from rocketrio.actors.auth.config import parse_init_user
from rocketrio.actors.auth.gate import check_admin_write, server_users
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.kernel.live_update_service import ConfigUpdater
from rocketrio.actors.kernel.remoting import (
    Connection,
    Processor,
    RemotingClient,
    RemotingError,
    RemotingServer,
    RequestContext,
)
from rocketrio.actors.kernel.runtime import IoRunner, every
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.kv_config import KVConfigManager
from rocketrio.actors.namesrv.live_config import NAMESRV_POLICY, apply_namesrv_changes
from rocketrio.actors.namesrv.route_info import MinBrokerIdChange, RouteInfoManager
from rocketrio.actors.observe import events
from rocketrio.actors.observe.metrics_exporter import (
    MetricsExporterType,
    exporter_addr,
    host_of,
    serve_metrics,
)
from rocketrio.actors.observe.rpc_metrics import RpcLatency, RpcLatencyCollector
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import (
    DataVersion,
    GetBrokerMemberGroupResponseBody,
    KVTable,
    RegisterBrokerBody,
    TopicRouteData,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode, not_supported_remark, request_name
from rocketrio.protocol.config import dump_config
from rocketrio.protocol.headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    BrokerHeartbeatRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetBrokerMemberGroupRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    NotifyMinBrokerIdChangeRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    RegisterTopicRequestHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext, to_json
from rocketrio.storage.fs import OS_FS, FileSystem

# NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG: per-topic order config, returned to brokers
ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"
# MixAll.ZONE_NAME: a broker's zone rides as a plain extField of REGISTER_BROKER
ZONE_NAME_EXT_FIELD = "__ZONE_NAME"
_SUCCESS = ResponseCode.SUCCESS


# --- the NameServer ----------------------------------------------------------------------------


class NameServer:
    """One NameServer: state (`routes`, `kv`), processor table, periodic scan, pushes."""

    def __init__(
        self,
        config: NamesrvConfig,
        transport: Transport,
        *,
        fs: FileSystem = OS_FS,
        io_runner: IoRunner | None = None,
    ) -> None:
        self.config = config
        self.transport = transport
        self.fs = fs  # where kvConfigPath lives (a simulated disk in simulations)
        # runs the kvConfig file calls: a worker thread, or inline under a MockClock (a thread
        # the clock cannot see would let it jump past a request's timeout)
        self._io: IoRunner = io_runner or trio.to_thread.run_sync
        self.routes = RouteInfoManager(
            default_timeout_ms=config.brokerChannelExpiredTime,
            support_acting_master=config.supportActingMaster,
            notify_min_broker_id_changed=config.notifyMinBrokerIdChanged,
        )
        self.log = structlog.get_logger("namesrv").bind(actor="namesrv")
        self.kv = KVConfigManager(config, io_runner=self._io, fs=fs, log=self.log)
        self.addr = f"{config.listenHost}:{config.listenPort}"
        self.bound_addr: str | None = None
        # metricsExporterType=PROM: rocketmq_rpc_latency at /metrics, plus what an embedded
        # controller adds (`add_metrics`) before `run`
        self.rpc_latency = (
            RpcLatency() if config.metricsExporterType is MetricsExporterType.PROM else None
        )
        self.rpc_sources: list[tuple[dict[str, str], RpcLatency]] = []
        if self.rpc_latency is not None:
            node = {"node_type": "nameserver", "node_id": self.addr}
            self.rpc_sources.append((node, self.rpc_latency))
        self.metrics_collectors: list[Collector] = []
        self.metrics_addr = ""  # where /metrics is served, once it is
        self.server = RemotingServer(
            transport,
            self.addr,
            self.process,
            on_connect=self._on_connect,
            limits=config.server_limits(),
            rpc_latency=self.rpc_latency,
        )
        self._processors: dict[int, Processor] = {
            int(code): handler for code, handler in self._builtin_processors().items()
        }
        self._admin_users = (
            server_users(parse_init_user(config.initAuthenticationUser))
            if config.authenticationEnabled
            else None
        )
        # UPDATE_NAMESRV_CONFIG: live keys only, written to configStorePath (live_config.py)
        self.config_updater = ConfigUpdater(
            config,
            NAMESRV_POLICY,
            config_path=lambda: self.config.configStorePath or None,
            apply=lambda changes: apply_namesrv_changes(self, changes),
            io_runner=self._io,
            fs=fs,
            log=self.log,
        )
        self._nursery: trio.Nursery | None = None
        self._client: RemotingClient | None = None

    def _builtin_processors(self) -> dict[int, Processor]:
        rc = RequestCode
        return {
            **self.kv.handlers(),
            rc.QUERY_DATA_VERSION: self.handle_query_data_version,
            rc.REGISTER_BROKER: self.handle_register_broker,
            rc.UNREGISTER_BROKER: self.handle_unregister_broker,
            rc.BROKER_HEARTBEAT: self.handle_broker_heartbeat,
            rc.GET_BROKER_MEMBER_GROUP: self.handle_get_broker_member_group,
            rc.GET_ROUTEINFO_BY_TOPIC: self.handle_get_route_info_by_topic,
            rc.GET_BROKER_CLUSTER_INFO: self.handle_get_broker_cluster_info,
            rc.WIPE_WRITE_PERM_OF_BROKER: self.handle_wipe_write_perm_of_broker,
            rc.ADD_WRITE_PERM_OF_BROKER: self.handle_add_write_perm_of_broker,
            rc.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.handle_get_all_topic_list,
            rc.DELETE_TOPIC_IN_NAMESRV: self.handle_delete_topic_in_namesrv,
            rc.REGISTER_TOPIC_IN_NAMESRV: self.handle_register_topic_in_namesrv,
            rc.GET_TOPICS_BY_CLUSTER: self.handle_get_topics_by_cluster,
            rc.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.handle_get_system_topic_list,
            rc.GET_NAMESRV_CONFIG: self.handle_get_namesrv_config,
            rc.UPDATE_NAMESRV_CONFIG: self.handle_update_namesrv_config,
        }

    def add_metrics(
        self, rpc_source: tuple[dict[str, str], RpcLatency], collectors: Iterable[Collector]
    ) -> None:
        """Serve another server's metrics of this process (an embedded controller's) at this
        NameServer's /metrics; call before `run`."""
        self.rpc_sources.append(rpc_source)
        self.metrics_collectors.extend(collectors)

    def register_processor(
        self, codes: Iterable[int], processor: Processor
    ) -> dict[int, Processor]:
        """Route ``codes`` to ``processor``; returns the processors it replaced, so a caller
        taking over a code (the embedded controller and BROKER_HEARTBEAT, say) can still chain
        to the NameServer's own handler."""
        replaced: dict[int, Processor] = {}
        for code in codes:
            old = self._processors.get(int(code))
            if old is not None:
                replaced[int(code)] = old
            self._processors[int(code)] = processor
        return replaced

    async def process(self, ctx: RequestContext) -> RemotingCommand | None:
        """The server's one processor: dispatch by request code."""
        if self._admin_users is not None:  # authenticationEnabled: admin writes need a super user
            denied = check_admin_write(ctx.cmd, self._admin_users)
            if denied is not None:
                events.emit(
                    self.log,
                    events.AuthRefused(code=request_name(ctx.cmd.code), remark=denied.remark),
                )
                return ctx.cmd.make_response(ResponseCode.NO_PERMISSION, denied.remark)
        handler = self._processors.get(ctx.cmd.code)
        if handler is None:
            return ctx.cmd.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                not_supported_remark(ctx.cmd.code, "the name server"),
            )
        return await handler(ctx)

    # -- lifecycle ------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; ``task_status.started(bound address)``."""
        await self.kv.load()
        try:
            async with RemotingClient(self.transport) as client, trio.open_nursery() as nursery:
                self._client, self._nursery = client, nursery
                self.bound_addr = await nursery.start(self.server.run)
                if self.rpc_latency is not None:
                    cfg = self.config
                    self.metrics_addr = await nursery.start(
                        serve_metrics,
                        self.transport,
                        exporter_addr(
                            cfg.metricsPromExporterHost,
                            cfg.metricsPromExporterPort,
                            host_of(self.bound_addr),
                        ),
                        [RpcLatencyCollector(self.rpc_sources), *self.metrics_collectors],
                        self.log,
                    )
                nursery.start_soon(
                    every, self.config.scanNotActiveBrokerInterval / 1000, self._scan_task
                )
                print(
                    f"The Name Server boot success. serializeType=JSON, address {self.bound_addr}",
                    flush=True,
                )
                events.emit(self.log, events.NamesrvBoot(addr=self.bound_addr))
                task_status.started(self.bound_addr)
        finally:
            self._nursery = self._client = None

    async def _scan_task(self) -> None:
        self.scan_not_active_broker(monotonic_ms())

    def scan_not_active_broker(self, now_ms: int) -> None:
        """Unregister brokers silent past their timeout and close their connections."""
        for b in self.routes.scan_not_active(now_ms):
            events.emit(
                self.log,
                events.BrokerExpired(
                    cluster=b.cluster_name,
                    broker=b.broker_name,
                    broker_id=b.broker_id,
                    addr=b.broker_addr,
                    silent_ms=b.silent_ms,
                    timeout_ms=b.timeout_ms,
                ),
            )
            self._log_unregistered(b.broker_name, b.broker_id, b.broker_addr, "expired")
            if isinstance(b.channel, Connection) and not b.channel.closed and self._nursery:
                # a hung broker must reconnect (and so re-register), like upstream's closeChannel
                self._nursery.start_soon(b.channel.stream.aclose)
        self._send_notifications()

    def _on_connect(self, conn: Connection) -> None:
        conn.on_close.append(self._on_connection_closed)

    def _on_connection_closed(self, conn: Connection) -> None:
        if trio.current_effective_deadline() == -math.inf:
            # we are being cancelled: the NameServer is stopping and its tables go with it
            return
        for b in self.routes.on_channel_destroy(conn):
            self._log_unregistered(
                b.broker_name, b.broker_id, b.broker_addr, "connection_closed", conn.close_reason
            )
        self._send_notifications()

    def _log_unregistered(
        self,
        broker: str | None,
        broker_id: int | None,
        addr: str,
        reason: str,
        detail: str | None = None,
    ) -> None:
        events.emit(
            self.log,
            events.BrokerUnregistered(
                broker_id=broker_id,
                addr=addr,
                reason=reason,
                **({"detail": detail} if detail else {}),
            ),
            broker=broker,
        )

    def _send_notifications(self) -> None:
        changes = self.routes.take_notifications()
        if not changes or self._nursery is None:
            return
        for change in changes:
            events.emit(
                self.log,
                events.MinBrokerIdChanged(
                    min_broker_id=change.min_broker_id,
                    min_broker_addr=change.min_broker_addr,
                    offline_addr=change.offline_broker_addr,
                    notify=list(change.notify_addrs),
                ),
                broker=change.broker_name,
            )
            for addr in change.notify_addrs:
                self._nursery.start_soon(self._notify_min_broker_id_change, addr, change)

    async def _notify_min_broker_id_change(self, addr: str, change: MinBrokerIdChange) -> None:
        assert self._client is not None
        header = NotifyMinBrokerIdChangeRequestHeader(
            minBrokerId=change.min_broker_id,
            brokerName=change.broker_name,
            minBrokerAddr=change.min_broker_addr,
            offlineBrokerAddr=change.offline_broker_addr,
            haBrokerAddr=change.ha_broker_addr,
        )
        cmd = RemotingCommand(
            code=RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, ext_fields=to_ext(header)
        )
        error = "timed out"
        with trio.move_on_after(self.config.notifyMinBrokerIdChangeTimeoutMillis / 1000):
            try:
                await self._client.invoke_oneway(addr, cmd)
                return
            except RemotingError as e:
                error = str(e)
        events.emit(self.log, events.NotifyMinBrokerIdChangeFailed(addr=addr, error=error))

    # -- broker registration and liveness -------------------------------------------------------

    async def handle_register_broker(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(RegisterBrokerRequestHeader, cmd.ext_fields)
        if h.compressed:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"broker {h.brokerName}@{h.brokerAddr} sent a compressed REGISTER_BROKER body; "
                "rocketrio reads only the JSON body: set compressedRegister=false on the broker",
            )
        if h.bodyCrc32 and zlib.crc32(cmd.body) & 0x7FFFFFFF != h.bodyCrc32:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        body = from_json(RegisterBrokerBody, cmd.body) if cmd.body else RegisterBrokerBody()
        result = self.routes.register_broker(
            cluster_name=h.clusterName,
            broker_addr=h.brokerAddr,
            broker_name=h.brokerName,
            broker_id=h.brokerId,
            ha_server_addr=h.haServerAddr,
            topic_config_wrapper=body.topicConfigSerializeWrapper,
            now_ms=monotonic_ms(),
            timeout_ms=h.heartbeatTimeoutMillis,
            enable_acting_master=h.enableActingMaster,
            zone_name=cmd.ext_fields.get(ZONE_NAME_EXT_FIELD),
            filter_server_list=body.filterServerList,
            channel=ctx.conn,
        )
        if result is None:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"register broker failed: {h.brokerName}[{h.brokerId}] {h.brokerAddr} sent one "
                "topic before registering all its topics",
            )
        if result.ignored:
            events.emit(
                self.log,
                events.BrokerRegistrationIgnored(
                    broker_id=h.brokerId, addr=h.brokerAddr, reason=result.ignored
                ),
                broker=h.brokerName,
            )
        elif result.new_broker:
            events.emit(
                self.log,
                events.BrokerRegistered(
                    cluster=h.clusterName, broker_id=h.brokerId, addr=h.brokerAddr
                ),
                broker=h.brokerName,
            )
        self._send_notifications()
        out = b""
        if self.config.returnOrderTopicConfigToBroker:
            order = self.kv.table.namespace(ORDER_TOPIC_CONFIG_NAMESPACE) or {}
            out = to_json(KVTable(table=order))
        header = RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr)
        return cmd.make_response(_SUCCESS, None, to_ext(header), out)

    async def handle_unregister_broker(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(UnRegisterBrokerRequestHeader, ctx.cmd.ext_fields)
        self.routes.unregister_broker(h.clusterName, h.brokerAddr, h.brokerName, h.brokerId)
        self._log_unregistered(h.brokerName, h.brokerId, h.brokerAddr, "request")
        self._send_notifications()
        return ctx.cmd.make_response(_SUCCESS)

    async def handle_broker_heartbeat(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(BrokerHeartbeatRequestHeader, ctx.cmd.ext_fields)
        if self.routes.heartbeat(h.clusterName, h.brokerAddr, monotonic_ms()):
            return ctx.cmd.make_response(_SUCCESS)
        # upstream answers SUCCESS too; the remark tells an operator why routes lack the broker
        return ctx.cmd.make_response(
            _SUCCESS, f"broker {h.brokerName} {h.brokerAddr} is not registered in this name server"
        )

    async def handle_query_data_version(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(QueryDataVersionRequestHeader, ctx.cmd.ext_fields)
        if not ctx.cmd.body:
            return ctx.cmd.make_response(
                ResponseCode.INVALID_PARAMETER,
                "QUERY_DATA_VERSION needs the broker's DataVersion JSON as its body",
            )
        version = from_json(DataVersion, ctx.cmd.body)
        changed, ours = self.routes.query_data_version(
            h.clusterName, h.brokerAddr, version, monotonic_ms()
        )
        ext = to_ext(QueryDataVersionResponseHeader(changed=changed))
        return ctx.cmd.make_response(_SUCCESS, None, ext, to_json(ours) if ours else b"")

    async def handle_get_broker_member_group(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(GetBrokerMemberGroupRequestHeader, ctx.cmd.ext_fields)
        group = self.routes.broker_member_group(h.clusterName, h.brokerName)
        body = fastjson.encode(GetBrokerMemberGroupResponseBody(brokerMemberGroup=group))
        return ctx.cmd.make_response(_SUCCESS, body=body)

    # -- routes and topics ----------------------------------------------------------------------

    async def handle_get_route_info_by_topic(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(GetRouteInfoRequestHeader, ctx.cmd.ext_fields)
        route = self.routes.get_route(h.topic)
        if route is None:
            return ctx.cmd.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {h.topic}",
            )
        if self.config.orderMessageEnable:
            route.orderTopicConf = self.kv.table.get(ORDER_TOPIC_CONFIG_NAMESPACE, h.topic)
        # json.dumps quotes the integer brokerId keys: standard JSON for every client version
        return ctx.cmd.make_response(_SUCCESS, body=to_json(route))

    async def handle_get_broker_cluster_info(self, ctx: RequestContext) -> RemotingCommand:
        return ctx.cmd.make_response(_SUCCESS, body=fastjson.encode(self.routes.cluster_info()))

    async def handle_wipe_write_perm_of_broker(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(WipeWritePermOfBrokerRequestHeader, ctx.cmd.ext_fields)
        count = self.routes.wipe_write_perm(h.brokerName)
        events.emit(
            self.log, events.WritePermWiped(topic_count=count, by=ctx.remote), broker=h.brokerName
        )
        ext = to_ext(WipeWritePermOfBrokerResponseHeader(wipeTopicCount=count))
        return ctx.cmd.make_response(_SUCCESS, None, ext)

    async def handle_add_write_perm_of_broker(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(AddWritePermOfBrokerRequestHeader, ctx.cmd.ext_fields)
        count = self.routes.add_write_perm(h.brokerName)
        events.emit(
            self.log, events.WritePermAdded(topic_count=count, by=ctx.remote), broker=h.brokerName
        )
        ext = to_ext(AddWritePermOfBrokerResponseHeader(addTopicCount=count))
        return ctx.cmd.make_response(_SUCCESS, None, ext)

    async def handle_get_all_topic_list(self, ctx: RequestContext) -> RemotingCommand:
        if not self.config.enableAllTopicList:
            return ctx.cmd.make_response(ResponseCode.SYSTEM_ERROR, "disable")
        return ctx.cmd.make_response(_SUCCESS, body=fastjson.encode(self.routes.all_topics()))

    async def handle_get_topics_by_cluster(self, ctx: RequestContext) -> RemotingCommand:
        if not self.config.enableTopicList:
            return ctx.cmd.make_response(ResponseCode.SYSTEM_ERROR, "disable")
        h = from_ext(GetTopicsByClusterRequestHeader, ctx.cmd.ext_fields)
        return ctx.cmd.make_response(
            _SUCCESS, body=fastjson.encode(self.routes.topics_by_cluster(h.cluster))
        )

    async def handle_get_system_topic_list(self, ctx: RequestContext) -> RemotingCommand:
        return ctx.cmd.make_response(_SUCCESS, body=fastjson.encode(self.routes.system_topics()))

    async def handle_delete_topic_in_namesrv(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(DeleteTopicFromNamesrvRequestHeader, ctx.cmd.ext_fields)
        if self.routes.delete_topic(h.topic, h.clusterName):
            events.emit(self.log, events.TopicDeleted(topic=h.topic, cluster=h.clusterName))
        return ctx.cmd.make_response(_SUCCESS)

    async def handle_register_topic_in_namesrv(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(RegisterTopicRequestHeader, ctx.cmd.ext_fields)
        route = from_json(TopicRouteData, ctx.cmd.body) if ctx.cmd.body else TopicRouteData()
        if self.routes.register_topic(h.topic, route.queueDatas):
            return ctx.cmd.make_response(_SUCCESS)
        # upstream answers SUCCESS and only logs; the remark says nothing changed and why
        return ctx.cmd.make_response(
            _SUCCESS,
            f"topic {h.topic} not registered: it already has a route, or the body names no "
            "queueDatas, or a queueData names a broker this name server does not know",
        )

    # -- namesrv config -------------------------------------------------------------------------

    async def handle_get_namesrv_config(self, ctx: RequestContext) -> RemotingCommand:
        return ctx.cmd.make_response(_SUCCESS, body=dump_config(self.config).encode())

    async def handle_update_namesrv_config(self, ctx: RequestContext) -> RemotingCommand:
        return await self.config_updater.handle(ctx)


async def run_namesrv(
    config: NamesrvConfig,
    transport: Transport,
    *,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Start a NameServer and serve until cancelled; ``task_status.started(bound address)``."""
    await NameServer(config, transport).run(task_status=task_status)
