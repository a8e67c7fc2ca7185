"""The proxy's rocketMQClusterName (upstream ProxyConfig): its metadata reads go to the masters of
that cluster only. Against a real broker of DefaultCluster on SimNetwork + MockClock (ProxyService
called directly): a proxy of DefaultCluster reads an orderly group's config and treats the group
as FIFO; a proxy configured for another cluster finds no broker to ask, so the same group is not
FIFO there. The key is read from the proxy's file (default DefaultCluster, blank refused) and a
local proxy takes its broker's brokerClusterName."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.proxy.local import proxy_config_of
from rocketrio.actors.proxy.service import ProxyConfig, ProxyService
from rocketrio.actors.proxy.telemetry import TelemetryRegistry
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import build_parser, main_async, proxy_config
from rocketrio.protocol.config import ConfigError
from tests.harness.broker import BrokerHarness, harness

HOST = "10.0.0.61"  # the admin's


@asynccontextmanager
async def proxy(h: BrokerHarness, host: str, cluster: str) -> AsyncIterator[ProxyService]:
    config = ClientConfig(clientIP=host, instanceName=f"proxy-{cluster}")
    transport = h.net.transport(host)
    async with MQClientInstance(h.namesrv_addr, transport=transport, config=config) as client:
        proxy_config = ProxyConfig(h.namesrv_addr, host=host, rocketmq_cluster_name=cluster)
        yield ProxyService(proxy_config, client, TelemetryRegistry())


async def test_metadata_reads_go_to_the_proxys_cluster_only(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with (
        harness(tmp_path) as h,
        proxy(h, "10.0.0.60", "DefaultCluster") as ours,
        proxy(h, "10.0.0.62", "OtherCluster") as other,
    ):
        argv = ["admin", "updateSubGroup", "-c", "DefaultCluster", "-g", "FifoG", "-o", "true"]
        with structlog.testing.capture_logs():
            code = await main_async([*argv, "-n", h.namesrv_addr], Wiring(h.net.transport(HOST)))
        assert code == 0
        config = await ours.fetch_group_config("FifoG")
        assert config is not None and config.consumeMessageOrderly
        assert await ours.group_configs.is_fifo("FifoG")
        assert await other.fetch_group_config("FifoG") is None  # no master of OtherCluster
        assert not await other.group_configs.is_fifo("FifoG")


def _proxy_config(tmp_path: Path, text: str) -> ProxyConfig:
    conf = tmp_path / "proxy.conf"
    conf.write_text("namesrvAddr=n:1\n" + text)
    cfg, _ = proxy_config(build_parser().parse_args(["proxy", "-c", str(conf)]))
    assert isinstance(cfg, ProxyConfig)
    return cfg


def test_the_key_is_read_from_the_proxy_file(tmp_path: Path) -> None:
    assert _proxy_config(tmp_path, "").rocketmq_cluster_name == "DefaultCluster"
    cfg = _proxy_config(tmp_path, "rocketMQClusterName=Orders\n")
    assert cfg.rocketmq_cluster_name == "Orders"
    with pytest.raises(ConfigError, match="rocketMQClusterName"):
        _proxy_config(tmp_path, "rocketMQClusterName=\n")
    local = proxy_config_of(BrokerConfig(brokerClusterName="C1", namesrvAddr="n:1"))
    assert local.rocketmq_cluster_name == "C1"
