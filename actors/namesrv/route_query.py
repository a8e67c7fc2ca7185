"""Route assembly (pure, read-only): the answers the NameServer builds from `RouteInfoManager`'s
tables: TopicRouteData for GET_ROUTEINFO_BY_TOPIC (copies; a masterless acting-master group
shows its smallest-id slave as brokerId 0, RIP-32; a static topic carries the mapping infos of
the brokers still known, RIP-21), ClusterInfo, the topic lists and BrokerMemberGroup.

Each function reads the tables of the manager it is given and never changes them; the manager's
methods of the same job (``get_route`` ...) call these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from rocketrio.actors.namesrv.route_records import (
    MASTER_ID,
    SYNC_BROKER_MEMBER_GROUP_PREFIX,
    BrokerAddrInfo,
    copy_broker_data,
    copy_queue_data,
)
from rocketrio.protocol.bodies import (
    PERM_WRITE,
    BrokerData,
    BrokerMemberGroup,
    ClusterInfo,
    TopicList,
    TopicQueueMappingInfo,
    TopicRouteData,
)

if TYPE_CHECKING:
    from rocketrio.actors.namesrv.route_info import RouteInfoManager


def topic_route(rim: RouteInfoManager, topic: str) -> TopicRouteData | None:
    """TopicRouteData of ``topic`` (copies), or None when no live broker serves it."""
    qmap = rim.topic_queue_table.get(topic)
    if not qmap:
        return None
    broker_datas: list[BrokerData] = []
    filter_servers: dict[str, list[str]] = {}
    for name in sorted(qmap):
        bd = rim.broker_addr_table.get(name)
        if bd is None:
            continue
        clone = copy_broker_data(bd)
        broker_datas.append(clone)
        if rim.filter_server_table:
            for addr in clone.brokerAddrs.values():
                servers = rim.filter_server_table.get(BrokerAddrInfo(clone.cluster, addr))
                if servers:
                    filter_servers[addr] = list(servers)
    if not broker_datas:
        return None
    route = TopicRouteData(
        queueDatas=[copy_queue_data(qmap[n]) for n in sorted(qmap)],
        brokerDatas=broker_datas,
        filterServerTable=filter_servers,
        topicQueueMappingByBroker=_mapping_infos(rim, topic),
    )
    if rim.support_acting_master and not topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX):
        _publish_acting_masters(route)
    return route


def _mapping_infos(rim: RouteInfoManager, topic: str) -> dict[str, TopicQueueMappingInfo] | None:
    """Copies of the static topic's mapping infos of the brokers still known (N5)."""
    by_broker = rim.topic_queue_mapping_info_table.get(topic)
    if not by_broker:
        return None
    return {
        name: attrs.evolve(info, currIdMap=dict(info.currIdMap))
        for name, info in sorted(by_broker.items())
        if name in rim.broker_addr_table
    } or None


def _publish_acting_masters(route: TopicRouteData) -> None:
    """A masterless acting-master group whose queues are read-only shows its smallest-id
    slave as brokerId 0, so master-only calls (offsets, locks) reach it (RIP-32)."""
    perms = {qd.brokerName: qd.perm for qd in route.queueDatas}
    for bd in route.brokerDatas:
        addrs = bd.brokerAddrs
        if not addrs or MASTER_ID in addrs or not bd.enableActingMaster:
            continue
        perm = perms.get(bd.brokerName)
        if perm is not None and not perm & PERM_WRITE:
            acting = addrs.pop(min(addrs))
            bd.brokerAddrs = {MASTER_ID: acting, **addrs}


def cluster_info(rim: RouteInfoManager) -> ClusterInfo:
    return ClusterInfo(
        brokerAddrTable={
            name: copy_broker_data(rim.broker_addr_table[name])
            for name in sorted(rim.broker_addr_table)
        },
        clusterAddrTable={c: sorted(names) for c, names in sorted(rim.cluster_addr_table.items())},
    )


def topics_by_cluster(rim: RouteInfoManager, cluster_name: str) -> TopicList:
    names = rim.cluster_addr_table.get(cluster_name, set())
    return TopicList(
        topicList=sorted(
            topic for topic, qmap in rim.topic_queue_table.items() if not names.isdisjoint(qmap)
        )
    )


def system_topics(rim: RouteInfoManager) -> TopicList:
    """GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names are topics too (upstream)."""
    topics: list[str] = []
    for cluster, names in sorted(rim.cluster_addr_table.items()):
        topics.append(cluster)
        topics.extend(sorted(names))
    any_addr = next(
        (
            bd.brokerAddrs[min(bd.brokerAddrs)]
            for bd in rim.broker_addr_table.values()
            if bd.brokerAddrs
        ),
        None,
    )
    return TopicList(topicList=topics, brokerAddr=any_addr)


def broker_member_group(
    rim: RouteInfoManager, cluster_name: str, broker_name: str
) -> BrokerMemberGroup:
    bd = rim.broker_addr_table.get(broker_name)
    addrs = {bid: bd.brokerAddrs[bid] for bid in sorted(bd.brokerAddrs)} if bd else {}
    return BrokerMemberGroup(cluster=cluster_name, brokerName=broker_name, brokerAddrs=addrs)
