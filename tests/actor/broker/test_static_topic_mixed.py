"""A static topic is refused over a cluster that has a Java broker (issue 30 item 5; SimNetwork,
MockClock). rocketrio keeps logic offsets on the leader, Java brokers physical ones on each
generation's broker, so one static topic must not span both: the admin asks every broker of the
plan and refuses, naming the broker, before anything is sent. The Java broker is played by a
rocketrio broker whose answers carry the JAVA language code, as a Java 5.2 broker's do (the
real-Java case is not run here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.static_topic_admin import (
    remapping_static_topic,
    update_static_topic,
)
from tests.harness.clients import cluster
from tests.harness.clock import now_ms
from tests.harness.static_topic import T, leaders, route_until


def as_java(admin: Any, addr: str) -> None:
    """Answers from ``addr`` come back with language JAVA."""
    invoke = admin.remoting.invoke

    async def patched(to: str, cmd: Any, timeout: float) -> Any:
        resp = await invoke(to, cmd, timeout)
        if to == addr:
            resp.language = "JAVA"
        return resp

    admin.remoting.invoke = patched


async def test_a_static_topic_over_a_java_broker_is_refused(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        plain = admin.remoting.invoke
        as_java(admin, c.addr("broker-b"))
        with pytest.raises(MQClientError, match=r"broker-b \(answers as JAVA\)"):
            await update_static_topic(admin, T, 8, clusters="DefaultCluster", now_ms=now_ms)
        for b in c.brokers.values():  # nothing was sent
            assert b.tables.mappings.get(T) is None
        # -b broker-a alone too: the other broker sets of its cluster get the topic's (empty)
        # mapping, as upstream's completeNoTargetBrokers sends it
        with pytest.raises(MQClientError, match="cannot span rocketrio and Java brokers"):
            await update_static_topic(admin, T, 4, brokers="broker-a", now_ms=now_ms)
        for b in c.brokers.values():
            assert b.tables.mappings.get(T) is None
        # a remapping of an existing static topic onto the Java broker is refused the same way
        admin.remoting.invoke = plain
        await update_static_topic(admin, T, 4, brokers="broker-a", now_ms=now_ms)
        await route_until(admin, lambda r: len(leaders(r)) == 4)
        as_java(admin, c.addr("broker-b"))
        with pytest.raises(MQClientError, match="cannot span rocketrio and Java brokers"):
            await remapping_static_topic(admin, T, brokers="broker-b", now_ms=now_ms)
        assert set(leaders(await route_until(admin, lambda r: True)).values()) == {"broker-a"}
