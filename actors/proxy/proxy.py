"""The proxy role: `run_proxy` starts a client of the NameServer and brokers
(`MQClientInstance`), the gRPC server (`GrpcBridge`) and the Trio tasks that answer its calls
(`serve_calls` with `ProxyService.handle`) and the auto renewal of invisible time
(`AutoRenewer`); it holds no state of its own besides caches and the messages under renewal.
Cluster mode runs it alone (`rocketrio proxy`); local mode (local.py) runs it inside a broker
with an in-process transport and per-broker endpoints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
import trio

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.mq_client import MQClientInstance, local_ip
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.actors.proxy.grpc_bridge import GrpcBridge, serve_calls
from rocketrio.actors.proxy.loop_remoting import LoopCalls, RouteView
from rocketrio.actors.proxy.mapping import PROXY_PRODUCER_GROUP
from rocketrio.actors.proxy.service import (
    BrokerEndpoints,
    ProxyConfig,
    ProxyService,
    overflow_response,
)
from rocketrio.actors.proxy.telemetry import TelemetryRegistry
from rocketrio.actors.proxy.transaction_check import TransactionCheckRelay
from rocketrio.protocol.bodies import TopicRouteData

log = structlog.get_logger("proxy")

EndpointsFactory = Callable[[MQClientInstance, ProxyConfig], BrokerEndpoints]


async def run_proxy(
    config: ProxyConfig,
    *,
    transport: Transport | None = None,
    endpoints_for: EndpointsFactory | None = None,
    client_ip: str = "",
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve gRPC until cancelled; ``task_status.started(grpc_port)``. ``transport`` carries
    the remoting client (default TCP); ``endpoints_for`` (local mode) makes, from the client and
    the config with its bound port, where routes send clients for each broker set."""
    client_config = ClientConfig(
        instanceName=f"proxy-{config.grpc_port}",
        accessKey=config.access_key or "",
        secretKey=config.secret_key or "",
    )
    if client_ip:
        client_config.clientIP = client_ip
    registry = TelemetryRegistry()
    async with (
        MQClientInstance(config.namesrv_addr, transport=transport, config=client_config) as client,
        GrpcBridge(
            config.listen_host,
            config.grpc_port,
            overflow_response,
            on_stream_closed=registry.closed,
        ) as bridge,
    ):
        config.grpc_port = bridge.port
        if not config.host:
            config.host = local_ip()
        per_broker = endpoints_for(client, config) if endpoints_for is not None else None
        service = ProxyService(config, client, registry, broker_endpoints=per_broker)
        # brokers send transaction checks of half messages sent through the proxy to it
        relay = TransactionCheckRelay(registry, service.broker_name_of)
        client.transaction_checkers[PROXY_PRODUCER_GROUP] = relay.on_check
        await client.register_producer(PROXY_PRODUCER_GROUP)
        events.emit(
            log,
            events.ProxyStarted(grpc=f"{config.host}:{bridge.port}", namesrv=config.namesrv_addr),
        )
        bridge.fast = service.start_nowait
        if transport is None and client.remoting.request_hook is None:
            # cluster mode without ACL signing: sends and acks answered on the gRPC loop
            bridge.on_loop = loop_calls(service, client)
        task_status.started(bridge.port)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service.renewer.run)
            nursery.start_soon(service.sends.expire_late)
            await serve_calls(bridge.calls, service.handle)
            nursery.cancel_scope.cancel()


def loop_calls(service: ProxyService, client: MQClientInstance) -> LoopCalls | None:
    """The sends and acks answered on the gRPC loop (loop_remoting.py), fed with every route
    the client learns; None when authentication is on (its user look-ups are the Trio path's)."""
    if service.config.authentication_enabled:
        return None
    token = trio.lowlevel.current_trio_token()

    def refresh(topic: str) -> None:  # from the gRPC loop's thread
        try:
            token.run_sync_soon(client.request_route_refresh, topic)
        except trio.RunFinishedError:
            pass

    sends = LoopCalls(service.sends, service.error_answer, lambda: service.renewing_groups, refresh)

    def publish(topic: str, route: TopicRouteData) -> None:
        names = (bd.brokerName for bd in route.brokerDatas)
        masters = {n: a for n in names if (a := client.find_master_addr(n)) is not None}
        sends.publish(topic, RouteView(route, masters))

    client.route_listeners.append(publish)
    service.loop_receivable = sends.receives.allow
    return sends
