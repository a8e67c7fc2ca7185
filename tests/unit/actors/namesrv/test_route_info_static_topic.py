"""Static-topic routes (S3, N5; pure): registration carries TopicQueueMappingInfo, the NameServer
keeps it per broker and puts it in TopicRouteData.topicQueueMappingByBroker, clients turn it into
logic queues (holes point at the "not exist" broker)."""

from __future__ import annotations

import json

from rocketrio.actors.client.queue_select import TopicPublishInfo, subscribe_queues
from rocketrio.actors.namesrv.route_info import RouteInfoManager
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import (
    BrokerData,
    DataVersion,
    MessageQueue,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigAndMappingSerializeWrapper,
    TopicQueueMappingInfo,
    TopicRouteData,
)
from rocketrio.protocol.serde import from_json, to_json
from rocketrio.protocol.static_topic import (
    LOGICAL_QUEUE_MOCK_BROKER_NAME_NOT_EXIST,
    LogicQueueMappingItem,
    TopicQueueMappingDetail,
    logic_queue_endpoints,
)

T = "ST"
LQ = "__syslo__global__"  # upstream getMockBrokerName(METADATA_SCOPE_GLOBAL)


def info(bname: str, ids: dict[int, int], epoch: int = 1, total: int = 8) -> TopicQueueMappingInfo:
    return TopicQueueMappingInfo(T, totalQueues=total, bname=bname, epoch=epoch, currIdMap=ids)


def test_a_detail_registers_only_the_queues_it_leads() -> None:
    d = TopicQueueMappingDetail(
        T,
        totalQueues=4,
        bname="b",
        epoch=7,
        hostedQueues={
            0: [
                LogicQueueMappingItem(0, 0, "a", 0, 0, 10),
                LogicQueueMappingItem(1, 2, "b", 10000),
            ],
            1: [LogicQueueMappingItem(0, 1, "b", 0), LogicQueueMappingItem(1, 0, "c", 10000)],
            3: [LogicQueueMappingItem(0, 0, "b", 0)],
        },
    )
    assert d.to_info() == TopicQueueMappingInfo(T, "__global__", 4, "b", 7, False, {0: 2, 3: 0})


def test_logic_queue_endpoints_every_queue_once_holes_to_the_none_broker() -> None:
    ends = logic_queue_endpoints(
        T, {"a": info("a", {0: 0, 2: 1, 4: 2}), "b": info("b", {1: 0, 3: 1, 5: 2, 7: 3})}
    )
    assert sorted(mq.queueId for mq in ends) == list(range(8))
    assert {mq.brokerName for mq in ends} == {LQ}
    assert ends[MessageQueue(T, LQ, 0)] == "a" and ends[MessageQueue(T, LQ, 7)] == "b"
    assert ends[MessageQueue(T, LQ, 6)] == LOGICAL_QUEUE_MOCK_BROKER_NAME_NOT_EXIST


def test_during_a_remapping_the_newer_epoch_leads() -> None:
    # the new leader registered epoch 2 while the old one still claims queue 0 at epoch 1
    ends = logic_queue_endpoints(
        T, {"a": info("a", {0: 0, 1: 1}, epoch=1, total=2), "c": info("c", {0: 0}, epoch=2)}
    )
    assert ends[MessageQueue(T, LQ, 0)] == "c" and ends[MessageQueue(T, LQ, 1)] == "a"
    assert len(ends) == 8  # totalQueues: the largest any info names
    # an epoch beyond 2**31 apart compares directly (upstream's (int)(a - b) would wrap)
    ends = logic_queue_endpoints(
        T, {"a": info("a", {0: 0}, epoch=2**40), "c": info("c", {0: 1}, epoch=1)}
    )
    assert ends[MessageQueue(T, LQ, 0)] == "a"


def static_route() -> TopicRouteData:
    return TopicRouteData(
        queueDatas=[QueueData("a", 4, 4, 6), QueueData("b", 4, 4, 6)],
        brokerDatas=[BrokerData("C", "a", {0: "1:1"}), BrokerData("C", "b", {0: "2:2"})],
        topicQueueMappingByBroker={"a": info("a", {0: 0, 1: 1}), "b": info("b", {2: 0, 3: 1})},
    )


def test_clients_see_the_logic_queues_of_a_static_topic() -> None:
    route = static_route()
    pub = TopicPublishInfo.from_route(T, route)
    assert pub.queues == [MessageQueue(T, LQ, i) for i in range(8)]
    assert subscribe_queues(T, route) == {MessageQueue(T, LQ, i) for i in range(8)}
    # the same route without the mapping: physical queues, as before
    route.topicQueueMappingByBroker = None
    assert len(TopicPublishInfo.from_route(T, route).queues) == 8
    assert {mq.brokerName for mq in subscribe_queues(T, route)} == {"a", "b"}


def test_the_route_json_is_upstreams() -> None:
    body = fastjson.encode(static_route())
    assert b'"topicQueueMappingByBroker":{"a":{"bname":"a","currIdMap":{0:0,1:1}' in body
    again = from_json(TopicRouteData, body)
    assert again.topicQueueMappingByBroker == static_route().topicQueueMappingByBroker
    plain = json.loads(to_json(TopicRouteData()))
    assert "topicQueueMappingByBroker" not in plain  # null is not written, as fastjson


def reg_wrapper(infos: dict[str, TopicQueueMappingInfo], counter: int = 1) -> RegisterBrokerBody:
    w = TopicConfigAndMappingSerializeWrapper(
        {T: TopicConfig(T, 4, 4), "Other": TopicConfig("Other", 4, 4)},
        DataVersion(0, 1, counter),
        topicQueueMappingInfoMap=infos,
    )
    # through the wire, as the NameServer reads it
    return from_json(RegisterBrokerBody, to_json(RegisterBrokerBody(w)))


def register(rim: RouteInfoManager, name: str, addr: str, body: RegisterBrokerBody) -> None:
    rim.register_broker(
        cluster_name="C",
        broker_addr=addr,
        broker_name=name,
        broker_id=0,
        ha_server_addr=addr,
        topic_config_wrapper=body.topicConfigSerializeWrapper,
        now_ms=0,
        enable_acting_master=False,
    )


def test_namesrv_keeps_each_brokers_mapping_info_and_routes_it() -> None:
    rim = RouteInfoManager()
    register(rim, "a", "1:1", reg_wrapper({T: info("a", {0: 0, 1: 1})}))
    register(rim, "b", "2:2", reg_wrapper({T: info("b", {2: 0, 3: 1})}))
    route = rim.get_route(T)
    assert route is not None and route.topicQueueMappingByBroker is not None
    assert route.topicQueueMappingByBroker["a"].currIdMap == {0: 0, 1: 1}
    assert sorted(route.topicQueueMappingByBroker) == ["a", "b"]
    other = rim.get_route("Other")
    assert other is not None and other.topicQueueMappingByBroker is None
    # a copy: changing the route does not change the table
    route.topicQueueMappingByBroker["a"].currIdMap[5] = 5
    assert 5 not in rim.topic_queue_mapping_info_table[T]["a"].currIdMap
    # b re-registers without the topic's mapping (deleted): its entry goes
    register(rim, "b", "2:2", reg_wrapper({}, counter=2))
    route = rim.get_route(T)
    assert route is not None and sorted(route.topicQueueMappingByBroker or {}) == ["a"]
    # a leaves: nothing of it stays
    rim.unregister_broker("C", "1:1", "a", 0)
    assert T not in rim.topic_queue_mapping_info_table
