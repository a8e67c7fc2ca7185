"""Local mode: the gRPC proxy inside a broker process (`rocketrio broker --enable-proxy`, or
``enableProxy=true`` in broker.conf), in the broker's Trio run. `run_broker_with_proxy` owns
the wiring: the broker starts first; the proxy (the same `run_proxy` and `ProxyService` as
cluster mode) then gets an `InProcessTransport` that hands connections to this broker's
remoting address to its connection handler (no socket), while the NameServers and other brokers
are reached over the network. The two stop together: a cancelled process stops the proxy, then
the broker (gracefully, as alone), and a broker that stops by itself takes the proxy down.

Routes (`LocalProxyEndpoints`): each broker set's queues point at the proxy next to its master,
at the master's host and that proxy's gRPC port (upstream's ProxyTopicRouteData: broker host +
grpcServerPort). A master's port is read from its config (GET_BROKER_CONFIG: enableProxy,
grpcServerPort; cached for PORT_TTL_S), so brokers of one host may use different ports. A
master that runs no proxy, or does not answer, keeps this proxy's endpoints: a call for a
queue of another broker is forwarded over remoting, as cluster mode does for all of them.
Sends without a message group go to the co-located broker when it has the topic's queues.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog
import trio

from rocketrio.actors.auth.config import parse_credentials
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.actors.proxy import mapping as mp
from rocketrio.actors.proxy.in_process import InProcessTransport
from rocketrio.actors.proxy.proxy import run_proxy
from rocketrio.actors.proxy.service import BROKER_TIMEOUT_S, ProxyConfig
from rocketrio.protocol.bodies import TopicRouteData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.config import parse_properties
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.remoting import RemotingCommand

log = structlog.get_logger("proxy")

PORT_TTL_S = 30.0  # how long a master's proxy port (or its absence) is trusted

FetchConfig = Callable[[str], Awaitable[Mapping[str, str]]]


def proxy_config_of(config: BrokerConfig) -> ProxyConfig:
    """The local proxy's settings from its broker's: the broker's NameServers, grpcServerPort,
    brokerIP1 as the host in routes, and the broker's ACL switches (the proxy authenticates
    SDK calls against the same users and signs its remoting calls with the broker's
    innerClientAuthenticationCredentials)."""
    creds = parse_credentials(config.innerClientAuthenticationCredentials)
    return ProxyConfig(
        namesrv_addr=config.namesrvAddr,
        grpc_port=config.grpcServerPort,
        host=config.brokerIP1,
        authentication_enabled=config.authenticationEnabled,
        access_key=creds.access_key if creds else None,
        secret_key=creds.secret_key if creds else None,
        local_broker_name=config.brokerName,
        rocketmq_cluster_name=config.brokerClusterName,
    )


class LocalProxyEndpoints:
    """Local mode's `BrokerEndpoints`: broker set -> the endpoints of the proxy next to its
    master (module docstring). ``own_addr`` is the co-located broker's remoting address, whose
    proxy is this one (``config.grpc_port``, no lookup)."""

    def __init__(
        self,
        own_addr: str,
        config: ProxyConfig,
        fetch_config: FetchConfig,
        ttl_s: float = PORT_TTL_S,
    ) -> None:
        self.own_addr = own_addr
        self.config = config
        self._fetch = fetch_config
        self._ttl_s = ttl_s
        self._ports: dict[str, tuple[float, int | None]] = {}  # addr -> (until, port)

    async def __call__(self, route: TopicRouteData) -> Mapping[str, pb.Endpoints]:
        masters = sorted(set(mp.master_addrs(route).values()))
        return mp.local_endpoints(route, {addr: await self.port_of(addr) for addr in masters})

    async def port_of(self, addr: str) -> int | None:
        """The gRPC port of the proxy in the broker at ``addr`` (None: it runs none, or it
        did not say)."""
        if addr == self.own_addr:
            return self.config.grpc_port
        now = trio.current_time()
        cached = self._ports.get(addr)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            with trio.fail_after(BROKER_TIMEOUT_S):
                port = mp.local_proxy_port(await self._fetch(addr))
        except (RemotingError, MQClientError, OSError, trio.TooSlowError) as e:
            events.emit(log, events.ProxyEndpointLookupFailed(addr=addr, error=str(e) or repr(e)))
            return None
        self._ports[addr] = (now + self._ttl_s, port)
        return port


def broker_config_fetcher(client: MQClientInstance) -> FetchConfig:
    """GET_BROKER_CONFIG through the proxy's client, as key -> value."""

    async def fetch(addr: str) -> Mapping[str, str]:
        cmd = RemotingCommand(RequestCode.GET_BROKER_CONFIG)
        resp = await client.remoting.invoke(addr, cmd, BROKER_TIMEOUT_S)
        if resp.code != ResponseCode.SUCCESS:
            raise RemotingError(f"GET_BROKER_CONFIG from {addr}: {resp.remark}")
        return parse_properties((resp.body or b"").decode("utf-8", errors="replace"), addr)

    return fetch


async def run_local_proxy(
    broker: Broker,
    inner: Transport,
    connections: trio.Nursery,
    *,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The proxy of a running ``broker`` (its config's enableProxy keys), until cancelled;
    ``task_status.started(transport)`` with the `InProcessTransport` it uses, whose broker-side
    connection tasks run in ``connections`` (the broker's: they end with the broker, not
    before it)."""
    config = proxy_config_of(broker.config)
    transport = InProcessTransport(
        inner, {broker.addr, broker.config.broker_addr}, broker.server.accept, connections
    )

    def endpoints_for(client: MQClientInstance, cfg: ProxyConfig) -> LocalProxyEndpoints:
        return LocalProxyEndpoints(broker.addr, cfg, broker_config_fetcher(client))

    async with trio.open_nursery() as n:
        serve = functools.partial(
            run_proxy,
            config,
            transport=transport,
            endpoints_for=endpoints_for,
            client_ip=broker.config.brokerIP1,
        )
        port = await n.start(serve)
        events.emit(log, events.ProxyLocalStarted(grpc=f"{config.host}:{port}", addr=broker.addr))
        task_status.started(transport)


async def run_broker_with_proxy(
    config: BrokerConfig,
    transport: Transport,
    *,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    now_ms: Callable[[], int] = wallclock_ms,
) -> None:
    """A broker and its local proxy in one Trio run; ``task_status.started(broker)`` once
    both serve. A cancel stops the proxy first (it takes no more gRPC calls), then the broker
    shuts down gracefully as it does alone; a broker that stops by itself stops the proxy."""
    broker = Broker(config, transport, now_ms=now_ms)
    broker_scope = trio.CancelScope(shield=True)  # cancelled once the proxy is down
    async with trio.open_nursery() as n:

        async def broker_task(*, task_status: trio.TaskStatus[trio.Nursery]) -> None:
            with broker_scope:
                async with trio.open_nursery() as connections:

                    async def run(*, task_status: trio.TaskStatus[Any]) -> None:
                        await broker.run(task_status=task_status)
                        connections.cancel_scope.cancel()  # its in-process connections end

                    await connections.start(run)
                    task_status.started(connections)
            n.cancel_scope.cancel()  # the broker stopped by itself: its proxy goes with it

        connections = await n.start(broker_task)
        try:
            async with trio.open_nursery() as proxy:
                await proxy.start(run_local_proxy, broker, transport, connections)
                task_status.started(broker)
        finally:
            broker_scope.cancel()
