"""Running `rocketrio admin ...` in-process against a simulated controller-mode cluster and
capturing its output (`admin`), plus the small helpers the admin-command tests share.
"""

from __future__ import annotations

from typing import Any

import pytest
import structlog.testing

from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.config import ClientConfig
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from tests.harness.replication import Cluster, wait_until

Capture = pytest.CaptureFixture[str]


HOST = "10.0.9.7"


ISO_DATE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d"


async def admin(capsys: Capture, c: Cluster, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with structlog.testing.capture_logs():  # the servers' log lines stay out of stdout
        code = await main_async(["admin", *argv], Wiring(c.net.transport(HOST)))
    out, err = capsys.readouterr()
    return code, out, err


async def start_broker_node(c: Cluster) -> Any:
    """Start one broker node of the cluster and wait until the NameServer lists it."""
    node = await (await c.node().start()).wait_role()

    async def registered() -> bool:
        return bool(await c.namesrv_ids())

    await wait_until(registered, "broker registered")
    return node


def client_kwargs(c: Any, ip: str, name: str) -> dict[str, Any]:
    """The keyword arguments of a client on host `ip` of the simulated network."""
    return {
        "transport": c.net.transport(ip),
        "client_config": ClientConfig(clientIP=ip, instanceName=name),
    }


async def make_topic(c: Any, topic: str, queues: int) -> None:
    """Create `topic` on the cluster with `queues` queues and wait for its route."""
    async with MQAdmin(c.namesrv_addr, c.net.transport(HOST)) as mq:
        await mq.update_topic(
            topic, cluster="DefaultCluster", read_queues=queues, write_queues=queues
        )
        await wait_for_route(mq, topic)
