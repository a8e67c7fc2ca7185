"""What the Prometheus exporters of the broker, the controller and the NameServer share.

- `MetricsExporterType`, the value of upstream's ``metricsExporterType`` key (BrokerConfig and
  ControllerConfig; the NameServer takes the same keys, which upstream's NamesrvConfig lacks);
- `serve_metrics`, the service that registers a role's collectors, serves them at
  ``metricsPromExporterHost:metricsPromExporterPort`` (metrics_http.py) and logs
  ``metrics_listening``;
- `exporter_addr`, where that is, with the role's own host when metricsPromExporterHost is empty
  (upstream binds 0.0.0.0 then; we keep to the address the role already listens on, as every
  server here binds one address unless told otherwise).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.actors.observe.metrics_http import MetricsServer

DEFAULT_PROM_EXPORTER_PORT = 5557  # upstream's default, for brokers and controllers alike


class MetricsExporterType(enum.Enum):
    """upstream's MetricsExporterType values rocketrio implements (OTLP_GRPC and LOG are not)."""

    DISABLE = "DISABLE"
    PROM = "PROM"


def exporter_addr(host: str, port: int, role_host: str) -> str:
    """``host:port`` of the endpoint; an empty ``host`` means the role's own ``role_host``."""
    return f"{host or role_host}:{port}"


def host_of(addr: str) -> str:
    """The host part of ``host:port``."""
    return addr.rsplit(":", 1)[0]


async def serve_metrics(
    transport: Transport,
    addr: str,
    collectors: Iterable[Collector],
    log: Any,
    *,
    task_status: trio.TaskStatus[str],
) -> None:
    """Serve ``collectors`` at GET ``addr``/metrics until cancelled; started with the bound
    address."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    server = MetricsServer(registry, transport)
    async with trio.open_nursery() as n:
        bound: str = await n.start(server.run, addr)
        events.emit(log, events.MetricsListening(addr=bound))
        task_status.started(bound)
