"""Static topics on a running cluster (S1/S2; SimNetwork, MockClock): updateStaticTopic over two
brokers, a remapping to a third, the mapping files on disk, restarts, refusals."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.client.admin import wait_for_route
from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.static_topic_admin import (
    examine_topic_config_all,
    remapping_static_topic,
    send_mapping,
    topic_status_with_logic,
    update_static_topic,
)
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import GetTopicConfigRequestHeader
from rocketrio.protocol.serde import from_json
from rocketrio.protocol.static_topic import TopicConfigAndQueueMapping, TopicQueueMappingDetail
from rocketrio.storage.store_lock import StoreLocked
from tests.harness.clients import Cluster, cluster
from tests.harness.clock import now_ms

T = "ST"
CLI = "10.0.9.70"


def mapping_file(c: Cluster, key: str) -> dict[str, Any]:
    """topicQueueMapping.json as it is on disk (durability is checked on the file)."""
    return json.loads((c.tmp_path / key / "config" / "topicQueueMapping.json").read_text())


def topics_file(c: Cluster, key: str) -> dict[str, Any]:
    return json.loads((c.tmp_path / key / "config" / "topics.json").read_text())["topicConfigTable"]


async def restart(c: Cluster, key: str, host: str, before_start: Any = None) -> None:
    """kill -9, then start again on the same store (once the old run let go of it)."""
    c.crash_broker(key)
    if before_start is not None:
        before_start()
    for _ in range(60):
        await trio.sleep(0.5)
        try:
            await c.start_broker(key, host)
            return
        except StoreLocked:
            continue  # the crashed run has not let go of the store yet
    raise AssertionError(f"{key} did not restart")


def hosted(file: dict[str, Any]) -> dict[int, list[tuple[int, str, int, int]]]:
    detail = file["topicQueueMappingInfoMap"][T]
    return {
        int(gid): [(i["gen"], i["bname"], i["queueId"], i["logicOffset"]) for i in items]
        for gid, items in detail["hostedQueues"].items()
    }


async def test_update_over_two_brokers_then_remap_to_a_third(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        created = await update_static_topic(admin, T, 8, clusters="DefaultCluster", now_ms=now_ms)
        assert created.writtenTo == ["broker-a", "broker-b"] and created.totalQueues == 8
        for key in ("broker-a", "broker-b"):
            on_disk = mapping_file(c, key)
            detail = on_disk["topicQueueMappingInfoMap"][T]
            assert (detail["bname"], detail["totalQueues"], detail["epoch"]) == (
                key,
                8,
                created.epoch,
            )
            queues = hosted(on_disk)
            assert len(queues) == 4 and all(
                items == [(0, key, items[0][2], 0)] for items in queues.values()
            )
            assert sorted(i[0][2] for i in queues.values()) == [0, 1, 2, 3]
            assert topics_file(c, key)[T]["writeQueueNums"] == 4
        await wait_for_route(admin, T)

        # messages on the physical queues (routes of logic queues come with S3)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            for i in range(40):
                await p.send(Message(T, f"m{i}".encode()))
        physical = {(q.brokerName, q.queueId): q.maxOffset for q in await admin.topic_status(T)}
        assert sum(physical.values()) == 40

        # updateTopic would change the queues the mapping fixes: refused
        with pytest.raises(MQBrokerError, match="static topic") as refused:
            await admin.update_topic(T, broker_addr=c.addr("broker-a"), read_queues=16)
        assert refused.value.code == ResponseCode.INVALID_PARAMETER
        assert topics_file(c, "broker-a")[T]["writeQueueNums"] == 4

        await c.start_broker("broker-c", "10.0.1.3")
        moved = await remapping_static_topic(
            admin, T, brokers="broker-a,broker-b,broker-c", now_ms=now_ms
        )
        assert moved.mapIn == ["broker-c"] and moved.mapOut == ["broker-a", "broker-b"]
        assert moved.epoch > created.epoch
        # upstream's order: in, out, (decide), in again, (out again), the rest
        assert moved.writtenTo[:3] == ["broker-c", "broker-a", "broker-b"]
        assert moved.writtenTo[3] == "broker-c"
        on_c = hosted(mapping_file(c, "broker-c"))
        assert len(on_c) == 3  # 8 queues over 3 brokers (3, 3, 2): c takes 3 from a and b
        for gid, items in on_c.items():
            (g0, old_b, old_q, old_logic), (g1, new_b, _, new_logic) = items
            assert (g0, old_logic, g1, new_b) == (0, 0, 1, "broker-c")
            # the new leader starts past everything the blocked old leader held
            assert new_logic == 10000 and physical[(old_b, old_q)] < 5000
            # the map-out broker's file knows it is no longer the leader, same logic offsets
            assert hosted(mapping_file(c, old_b))[gid] == items
            old_detail = mapping_file(c, old_b)["topicQueueMappingInfoMap"][T]
            assert old_detail["hostedQueues"][str(gid)][0]["endOffset"] == physical[(old_b, old_q)]
        # no logic offset of gen 0 changed anywhere
        for key in ("broker-a", "broker-b"):
            for items in hosted(mapping_file(c, key)).values():
                assert items[0][0] == 0 and items[0][3] == 0
        assert topics_file(c, "broker-c")[T]["writeQueueNums"] == 3

        # topicStatus: the physical queues, then the 8 logic queues
        status = await topic_status_with_logic(admin, T)
        logic = [q for q in status if q.brokerName == "__syslo__global__"]
        assert sorted(q.queueId for q in logic) == list(range(8))
        moved_ids = set(on_c)
        assert all(q.maxOffset == 10000 for q in logic if q.queueId in moved_ids)

        # a restart reloads the file: the broker answers with the same mapping
        before = (await examine_topic_config_all(admin, T, await admin.cluster_info()))["broker-c"]
        await restart(c, "broker-c", "10.0.1.3")
        after = (await examine_topic_config_all(admin, T, await admin.cluster_info()))["broker-c"]
        assert after == before and after.mappingDetail is not None
        assert after.mappingDetail.epoch == moved.epoch

        # growing it afterwards reads all three brokers' (consistent) mappings
        grown = await update_static_topic(admin, T, 9, clusters="DefaultCluster", now_ms=now_ms)
        assert grown.totalQueues == 9 and grown.epoch > moved.epoch
        assert all(
            mapping_file(c, k)["topicQueueMappingInfoMap"][T]["totalQueues"] == 9
            for k in ("broker-a", "broker-b", "broker-c")
        )


async def test_a_copied_mapping_is_refused(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await update_static_topic(admin, T, 4, clusters="DefaultCluster", now_ms=now_ms)
        configs = await examine_topic_config_all(admin, T, await admin.cluster_info())
        a_cfg = configs["broker-a"]
        # sent to the wrong broker: refused, nothing changed there
        with pytest.raises(MQBrokerError, match="belongs to broker broker-a") as refused:
            await send_mapping(admin, c.addr("broker-b"), a_cfg)
        assert refused.value.code == ResponseCode.INVALID_PARAMETER
        assert {i[0][1] for i in hosted(mapping_file(c, "broker-b")).values()} == {"broker-b"}

        # broker-a's file copied over broker-b's (the habit RIP-21 guards against)
        src = c.tmp_path / "broker-a" / "config" / "topicQueueMapping.json"
        dst = c.tmp_path / "broker-b" / "config" / "topicQueueMapping.json"
        await restart(c, "broker-b", "10.0.1.2", lambda: dst.write_bytes(src.read_bytes()))
        assert c.brokers["broker-b"].tables.mappings.table == {}  # never used
        configs = await examine_topic_config_all(admin, T, await admin.cluster_info())
        assert configs["broker-b"].mappingDetail is None
        # the admin sees a topic without its mapping and refuses to build on it
        with pytest.raises(MQClientError, match="broker-b has topic ST but no mapping"):
            await update_static_topic(admin, T, 6, clusters="DefaultCluster", now_ms=now_ms)


def _fail_writes(table: Any) -> None:
    def refuse(data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    table.file._write = refuse


async def test_the_mapping_is_written_before_the_topic_config(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a",)) as c, c.admin() as admin:
        broker = c.brokers["broker-a"]
        real_write = broker.tables.mappings.file._write
        _fail_writes(broker.tables.mappings)
        with pytest.raises(MQBrokerError, match="nothing was changed"):
            await update_static_topic(admin, T, 2, brokers="broker-a", now_ms=now_ms)
        # the source of truth could not be written: no topic config either, on disk or not
        assert T not in topics_file(c, "broker-a")
        assert broker.tables.topics.select(T) is None and not broker.tables.mappings.table

        # now the mapping is written but the topic config is not, then the broker dies
        broker.tables.mappings.file._write = real_write
        _fail_writes(broker.tables.topics)
        with pytest.raises(MQBrokerError):
            await update_static_topic(admin, T, 2, brokers="broker-a", now_ms=now_ms)
        assert hosted(mapping_file(c, "broker-a"))  # on disk
        assert T not in topics_file(c, "broker-a")
        await restart(c, "broker-a", "10.0.1.1")
        # the restart restores the topic config from the mapping
        assert topics_file(c, "broker-a")[T]["writeQueueNums"] == 2
        await wait_for_route(admin, T)
        configs = await examine_topic_config_all(admin, T, await admin.cluster_info())
        detail = configs["broker-a"].mappingDetail
        assert isinstance(detail, TopicQueueMappingDetail) and sorted(detail.hostedQueues) == [0, 1]
        # and the admin's next attempt finds a complete, consistent static topic
        grown = await update_static_topic(admin, T, 3, brokers="broker-a", now_ms=now_ms)
        assert grown.totalQueues == 3
        assert topics_file(c, "broker-a")[T]["writeQueueNums"] == 3


async def test_get_topic_config_without_lo_then_delete(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a",)) as c, c.admin() as admin:
        await update_static_topic(admin, T, 2, brokers="broker-a", now_ms=now_ms)
        resp = await admin.api.call(
            c.addr("broker-a"), RequestCode.GET_TOPIC_CONFIG, GetTopicConfigRequestHeader(T)
        )
        cfg = from_json(TopicConfigAndQueueMapping, resp.body)
        assert cfg.mappingDetail is None and cfg.writeQueueNums == 2
        assert b"mappingDetail" not in resp.body
        # deleteTopic removes the mapping with the topic; the name is free for a plain topic
        await wait_for_route(admin, T)
        await admin.delete_topic(T, cluster="DefaultCluster")
        assert mapping_file(c, "broker-a")["topicQueueMappingInfoMap"] == {}
        assert T not in topics_file(c, "broker-a")
        await admin.update_topic(T, broker_addr=c.addr("broker-a"), read_queues=5, write_queues=5)
        assert topics_file(c, "broker-a")[T]["writeQueueNums"] == 5


async def cli(capsys: pytest.CaptureFixture[str], c: Cluster, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with structlog.testing.capture_logs():  # the servers' log lines stay out of stdout
        code = await main_async(["admin", *argv, "-n", c.ns_addr], Wiring(c.net.transport(CLI)))
    out, err = capsys.readouterr()
    return code, out, err


async def test_cli_commands(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        code, out, err = await cli(
            capsys, c, "updateStaticTopic", "-t", T, "-qn", "4", "-c", "DefaultCluster",
            "--mapDir", str(tmp_path),
        )  # fmt: skip
        assert code == 0, err
        assert f"static topic {T}: 4 logic queues" in out and "leader" in out
        assert "written to broker-a, broker-b" in out
        code, out, err = await cli(
            capsys, c, "remappingStaticTopic", "-t", T, "-b", "broker-a", "--json",
            "--mapDir", str(tmp_path),
        )  # fmt: skip
        assert code == 0, err
        result = json.loads(out)
        assert result["mapIn"] == ["broker-a"] and result["mapOut"] == ["broker-b"]
        leaders = [r for r in result["mapping"] if r["leader"]]
        assert {r["bname"] for r in leaders} == {"broker-a"} and len(leaders) == 4
        assert all(r["logicOffset"] == 10000 for r in leaders if r["gen"] == 1)
        code, out, err = await cli(capsys, c, "topicStatus", "-t", T)
        assert code == 0, err
        assert out.count("__syslo__global__") == 4
        code, out, err = await cli(
            capsys, c, "updateTopic", "-t", T, "-b", c.addr("broker-a"), "-r", "16", "-w", "16"
        )
        assert code == 1 and "static topic" in err and "updateStaticTopic" in err
        code, out, err = await cli(
            capsys, c, "updateStaticTopic", "-t", T, "-qn", "2", "-b", "broker-a",
            "--mapDir", str(tmp_path),
        )  # fmt: skip
        assert code == 1 and "cannot decrease" in err


async def test_a_java_brokers_mapping_file_is_read(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """topicQueueMapping.json as upstream's fastjson writes it (bare Integer keys), with no
    topics.json entry yet: read, and the topic config restored from it."""
    java_file = (
        '{"dataVersion":{"counter":1,"stateVersion":0,"timestamp":1700000000000},'
        '"topicQueueMappingInfoMap":{"ST":{"bname":"broker-a","currIdMap":{},"dirty":false,'
        '"epoch":1700000000000,"hostedQueues":{0:[{"bname":"broker-a","endOffset":-1,"gen":0,'
        '"logicOffset":0,"queueId":0,"startOffset":0,"timeOfEnd":-1,"timeOfStart":-1}],'
        '1:[{"bname":"broker-a","endOffset":-1,"gen":0,"logicOffset":0,"queueId":1,'
        '"startOffset":0,"timeOfEnd":-1,"timeOfStart":-1}]},"scope":"__global__",'
        '"topic":"ST","totalQueues":2}}}'
    )
    async with cluster(tmp_path, ("broker-a",)) as c, c.admin() as admin:
        path = c.tmp_path / "broker-a" / "config" / "topicQueueMapping.json"
        await restart(c, "broker-a", "10.0.1.1", lambda: path.write_text(java_file))
        assert topics_file(c, "broker-a")[T]["writeQueueNums"] == 2
        configs = await examine_topic_config_all(admin, T, await admin.cluster_info())
        detail = configs["broker-a"].mappingDetail
        assert detail is not None and detail.leader_id_map() == {0: 0, 1: 1}
        grown = await update_static_topic(admin, T, 3, brokers="broker-a", now_ms=now_ms)
        assert grown.epoch >= 1700000001000  # max(old epoch + 1000, now)
        assert hosted(mapping_file(c, "broker-a"))[2] == [(0, "broker-a", 2, 0)]
