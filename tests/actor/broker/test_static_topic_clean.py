"""The clean-up of a static topic's old generations (S4; SimNetwork, MockClock): one logic
queue remapped three times (broker-a, b, c, then d leads) keeps its oldest generation while a
group has not read it, then loses it from every broker's topicQueueMapping.json; reads of the
current data still work and an offset below the new first generation answers
PULL_OFFSET_MOVED (upstream #5493)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.tables.json_table import config_path
from rocketrio.actors.broker.tables.topic_queue_mapping import MAPPING_FILE
from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.api import PullStatus
from rocketrio.actors.client.static_topic_admin import remapping_static_topic, update_static_topic
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    GetMinOffsetRequestHeader,
    PullMessageResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from tests.harness.clients import Cluster, cluster
from tests.harness.clock import now_ms
from tests.harness.static_topic import (
    T,
    leaders,
    offset_call,
    offset_of,
    pull_header,
    raw_send,
    route_until,
)

BROKERS = ("broker-a", "broker-b", "broker-c", "broker-d")
CLEAN_MS = 1000  # topicQueueMappingCleanInterval


def gens_on_disk(c: Cluster, key: str) -> list[int]:
    """The generations broker ``key``'s file lists for logic queue 0 of T."""
    path = Path(config_path(str(c.tmp_path / key), MAPPING_FILE))
    data: dict[str, Any] = json.loads(path.read_text())
    hosted = data["topicQueueMappingInfoMap"][T]["hostedQueues"]
    return [item["gen"] for item in hosted.get("0", [])]


async def send_five(c: Cluster, admin: MQAdmin, key: str, tag: str) -> None:
    for _ in range(5):
        resp = await raw_send(admin, c.addr(key), 0)
        assert resp.code == ResponseCode.SUCCESS, (tag, resp.code, resp.remark)


async def commit(admin: MQAdmin, addr: str, offset: int) -> None:
    h = UpdateConsumerOffsetRequestHeader("cg", T, 0, offset)
    r = await offset_call(admin, addr, RequestCode.UPDATE_CONSUMER_OFFSET, h)
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)


async def test_the_oldest_generation_is_cleaned_from_every_broker_once_read(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c, c.admin() as admin:
        for i, name in enumerate(BROKERS):
            await c.start_broker(name, f"10.0.1.{i + 1}", topicQueueMappingCleanInterval=CLEAN_MS)
        await update_static_topic(admin, T, 1, brokers="broker-a", now_ms=now_ms)
        await route_until(admin, lambda r: leaders(r) == {0: "broker-a"})
        await send_five(c, admin, "broker-a", "gen 0")
        await commit(admin, c.addr("broker-a"), 2)  # cg has read 2 of gen 0's 5 messages
        for gen, name in enumerate(BROKERS[1:], start=1):
            await remapping_static_topic(admin, T, brokers=name, now_ms=now_ms)
            await route_until(admin, lambda r, n=name: leaders(r) == {0: n})
            await send_five(c, admin, name, f"gen {gen}")
        assert gens_on_disk(c, "broker-d") == [0, 1, 2, 3]

        # cg's offset, stored on broker-a while it led (Double-Check-Read), is inside gen 0
        await trio.sleep(5 * CLEAN_MS / 1000)
        assert gens_on_disk(c, "broker-d") == [0, 1, 2, 3]
        assert gens_on_disk(c, "broker-c") == [0, 1, 2, 3]
        # broker-a and broker-b are more than one generation behind: their lists go
        assert gens_on_disk(c, "broker-a") == []
        assert gens_on_disk(c, "broker-b") == []

        # cg has read gen 0 (its position is now on the leader): gen 0 goes everywhere
        d = c.addr("broker-d")
        await commit(admin, d, 10002)
        await trio.sleep(5 * CLEAN_MS / 1000)
        assert {k: gens_on_disk(c, k) for k in BROKERS} == {
            "broker-a": [],
            "broker-b": [],
            "broker-c": [1, 2, 3],
            "broker-d": [1, 2, 3],
        }
        assert c.brokers["broker-d"].tables.mappings.table[T].epoch == (
            c.brokers["broker-c"].tables.mappings.table[T].epoch
        )

        # reads of current data still work, across the three generations left
        offset, got = 10000, []
        for _ in range(20):
            res = await admin.api.pull(d, pull_header(0, offset), 5)
            if res.status is PullStatus.NO_NEW_MSG:
                break
            assert res.status is PullStatus.FOUND, res.status
            got += [m.queue_offset for m in res.messages()]
            offset = res.next_begin_offset
        assert got == [g * 10000 + i for g in (1, 2, 3) for i in range(5)]
        # an offset below the new first generation: moved to it, cleanly (#5493)
        cmd = RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=to_ext(pull_header(0, 3)))
        resp = await admin.api.remoting.invoke(d, cmd, 5)
        assert resp.code == ResponseCode.PULL_OFFSET_MOVED
        assert from_ext(PullMessageResponseHeader, resp.ext_fields).nextBeginOffset == 10000
        min_h = GetMinOffsetRequestHeader(T, 0)
        assert offset_of(await offset_call(admin, d, RequestCode.GET_MIN_OFFSET, min_h)) == 10000
