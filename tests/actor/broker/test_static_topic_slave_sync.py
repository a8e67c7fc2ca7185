"""A slave syncs its master's static-topic mappings (RIP-21 SOT) with the topics, against a
scripted master (no network): its own broker set's mappings land in its topicQueueMapping.json,
one naming another broker set is refused, a logic queue the new mapping moves away has its held
pulls released, and a late answer from a former master is not applied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.roles.slave_sync import SlaveSynchronize, SyncRefused
from rocketrio.actors.broker.tables.json_table import config_path
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.actors.broker.tables.topic_queue_mapping import MAPPING_FILE, TopicQueueMappingTable
from rocketrio.protocol.bodies import (
    ConsumerOffsetSerializeWrapper,
    DataVersion,
    SubscriptionGroupWrapper,
    TopicConfig,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.fastjson import encode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.static_topic import (
    LogicQueueMappingItem,
    TopicConfigAndMappingDetailWrapper,
    TopicQueueMappingDetail,
)

MASTER = "10.0.0.1:10911"
NOW_MS = 1_700_000_000_000


async def inline(fn: Any) -> Any:
    return fn()


def detail(topic: str, bname: str, epoch: int = 5) -> TopicQueueMappingDetail:
    items = [LogicQueueMappingItem(0, 0, bname, 0, 0, -1, -1, -1)]
    return TopicQueueMappingDetail(
        topic, totalQueues=1, bname=bname, epoch=epoch, hostedQueues={0: items}
    )


class Master:
    """GET_ALL_* answers; the topic answer carries the mapping details, as upstream's."""

    def __init__(self, details: dict[str, TopicQueueMappingDetail], version: int) -> None:
        self.answer = TopicConfigAndMappingDetailWrapper(
            {t: TopicConfig(t, 1, 1) for t in details},
            DataVersion(1, NOW_MS, version),
            topicQueueMappingDetailMap=details,
            mappingDataVersion=DataVersion(0, NOW_MS, version),
        )
        self.on_topics: Any = None

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        if cmd.code == RequestCode.GET_ALL_TOPIC_CONFIG and self.on_topics is not None:
            await self.on_topics()
        body = {
            RequestCode.GET_ALL_TOPIC_CONFIG: self.answer,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: SubscriptionGroupWrapper(),
            RequestCode.GET_ALL_CONSUMER_OFFSET: ConsumerOffsetSerializeWrapper(),
        }[cmd.code]
        return RemotingCommand(ResponseCode.SUCCESS, body=encode(body))


def slave(
    tmp_path: Path, master: list[str | None], released: list[tuple[str, list[int]]] | None = None
) -> tuple[SlaveSynchronize, TopicQueueMappingTable]:
    config = BrokerConfig(brokerName="broker-a", storePathRootDir=str(tmp_path))
    now = lambda: NOW_MS  # noqa: E731
    sink = released if released is not None else []
    mappings = TopicQueueMappingTable(config, now, run_blocking=inline)
    sync = SlaveSynchronize(
        topics=TopicTable(config, now, run_blocking=inline),
        groups=GroupTable(config, now, run_blocking=inline),
        offsets=OffsetTable(config, now, run_blocking=inline),
        master_addr=lambda: master[0],
        mappings=mappings,
        release_held=lambda topic, queues: sink.append((topic, queues)),
    )
    return sync, mappings


def on_disk(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(config_path(str(tmp_path), MAPPING_FILE)).read_text())
    return data


async def test_the_slave_writes_its_sets_mappings_and_refuses_another_sets(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    sync, mappings = slave(tmp_path, [MASTER])
    master = Master({"ST": detail("ST", "broker-a"), "COPY": detail("COPY", "broker-b")}, 3)
    with structlog.testing.capture_logs() as logs:
        await sync.sync_all(master, MASTER)  # type: ignore[arg-type]
    # the master and the slave share the brokerName: the slave's copy is its own set's
    assert sorted(mappings.table) == ["ST"]
    assert mappings.data_version == DataVersion(0, NOW_MS, 3)
    data = on_disk(tmp_path)
    assert sorted(data["topicQueueMappingInfoMap"]) == ["ST"]
    assert data["topicQueueMappingInfoMap"]["ST"]["bname"] == "broker-a"
    assert data["topicQueueMappingInfoMap"]["ST"]["epoch"] == 5
    refused = [e for e in logs if e["event"] == "static_topic_mapping_refused"]
    assert [(e["topic"], e["mapping_bname"]) for e in refused] == [("COPY", "broker-b")]
    synced = [e for e in logs if e["event"] == "static_topic_mapping_synced"]
    assert synced and synced[0]["topics"] == ["ST"] and synced[0]["refused"] == 1
    # the file is read back at the slave's next start with the same content
    again = TopicQueueMappingTable(
        BrokerConfig(brokerName="broker-a", storePathRootDir=str(tmp_path)),
        lambda: NOW_MS,
        run_blocking=inline,
    )
    await again.load_file()
    assert again.table == mappings.table

    # a newer epoch on the master reaches the slave; an unchanged version is not rewritten
    master.answer.topicQueueMappingDetailMap = {"ST": detail("ST", "broker-a", epoch=9)}
    master.answer.mappingDataVersion = DataVersion(0, NOW_MS, 4)
    await sync.sync_all(master, MASTER)  # type: ignore[arg-type]
    assert on_disk(tmp_path)["topicQueueMappingInfoMap"]["ST"]["epoch"] == 9


async def test_a_logic_queue_moved_away_releases_its_held_pulls(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    released: list[tuple[str, list[int]]] = []
    sync, mappings = slave(tmp_path, [MASTER], released)
    two = detail("ST", "broker-a")
    two.hostedQueues[1] = [LogicQueueMappingItem(0, 1, "broker-a", 0, 0, -1, -1, -1)]
    two.totalQueues = 2
    master = Master({"ST": two}, 3)
    await sync.sync_all(master, MASTER)  # type: ignore[arg-type]
    assert mappings.table["ST"].leader_id_map() == {0: 0, 1: 1} and released == []
    # a remapping moved logic queue 1 to broker-b: its newest item is broker-b's
    moved = two.copy()
    moved.epoch = 9
    moved.hostedQueues[1] = [
        LogicQueueMappingItem(0, 1, "broker-a", 0, 0, 10, 0, 10),
        LogicQueueMappingItem(1, 0, "broker-b", 10_000, 0, -1, -1, -1),
    ]
    master.answer.topicQueueMappingDetailMap = {"ST": moved}
    master.answer.mappingDataVersion = DataVersion(0, NOW_MS, 4)
    await sync.sync_all(master, MASTER)  # type: ignore[arg-type]
    assert mappings.table["ST"].leader_id_map() == {0: 0}
    assert released == [("ST", [1])]  # the physical queue it led here
    await sync.sync_all(master, MASTER)  # type: ignore[arg-type]
    assert released == [("ST", [1])]  # an unchanged mapping releases nothing again


async def test_a_late_answer_from_a_former_master_leaves_the_mappings_alone(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    following: list[str | None] = [MASTER]
    sync, mappings = slave(tmp_path, following)
    await sync.sync_all(Master({"ST": detail("ST", "broker-a", epoch=9)}, 4), MASTER)  # type: ignore[arg-type]
    old = Master({"ST": detail("ST", "broker-a", epoch=2)}, 2)

    async def promoted_meanwhile() -> None:
        following[0] = None  # this broker became master while the request was out
        await trio.sleep(0)

    old.on_topics = promoted_meanwhile
    with pytest.raises(SyncRefused, match="no longer"):
        await sync.sync_all(old, MASTER)  # type: ignore[arg-type]
    assert mappings.table["ST"].epoch == 9
    assert on_disk(tmp_path)["topicQueueMappingInfoMap"]["ST"]["epoch"] == 9
