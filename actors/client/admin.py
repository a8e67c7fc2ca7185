"""The admin API behind ``rocketrio admin`` (upstream DefaultMQAdminExt, the calls mqadmin uses).

``async with MQAdmin("127.0.0.1:9876") as admin: await admin.topic_route("Orders")``.
Every method returns typed values (protocol bodies or the small result classes here); the
launcher formats them. Topics are created on every master of a cluster (brokers then register
the change with the name servers themselves); a topic is deleted on the brokers first and then
on every name server, like mqadmin.
"""

from __future__ import annotations

from typing import Any

import attrs

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.api import MQClientAPI
from rocketrio.actors.client.config import DEFAULT_TOPIC, MASTER_ID, retry_topic
from rocketrio.actors.client.errors import (
    MQBrokerError,
    MQClientError,
    NotFound,
    TopicRouteNotFound,
    UsageError,
)
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError, RequestHook
from rocketrio.actors.kernel.transport import TcpTransport, Transport
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import (
    ClusterInfo,
    Connection,
    ConsumerConnection,
    ConsumeStats,
    ConsumeStatsList,
    GroupList,
    KVTable,
    MessageQueue,
    OffsetWrapper,
    ProducerConnection,
    SubscriptionGroupConfig,
    TopicList,
    TopicRouteData,
    TopicStatsTable,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.config import parse_properties
from rocketrio.protocol.ha_bodies import HARuntimeInfo
from rocketrio.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicsByClusterRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryMessageRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ViewMessageRequestHeader,
)
from rocketrio.protocol.message import (
    MessageDecodeError,
    MessageExt,
    decode_stored,
    iter_stored,
    parse_offset_msg_id,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.running_info import (
    ConsumerRunningInfo,
    GetConsumerRunningInfoRequestHeader,
    QueryConsumeTimeSpanBody,
    QueryConsumeTimeSpanRequestHeader,
    QueueTimeSpan,
)
from rocketrio.protocol.serde import from_json, to_ext

# turns QUERY_MESSAGE into a lookup by UNIQ_KEY (upstream MixAll.UNIQUE_MSG_QUERY_FLAG)
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
MAX_TIMESTAMP = 2**63 - 1
# 307 waits for the broker, which waits up to 10 s for the client: longer than that
CONSUMER_CALL_TIMEOUT_S = 15.0


@attrs.define
class QueueStatus:
    """topicStatus: one queue of a topic (a TopicStatsTable entry, flattened for tables)."""

    brokerName: str
    queueId: int
    minOffset: int
    maxOffset: int
    lastUpdateTimestamp: int


@attrs.define
class QueueProgress:
    """consumerProgress: one queue of a group (a ConsumeStats entry, flattened for tables)."""

    topic: str
    brokerName: str
    queueId: int
    brokerOffset: int
    consumerOffset: int
    pullOffset: int
    lastTimestamp: int

    @property
    def lag(self) -> int:
        return max(0, self.brokerOffset - max(self.consumerOffset, 0))

    @classmethod
    def of(cls, mq: MessageQueue, w: OffsetWrapper) -> QueueProgress:
        return cls(
            mq.topic,
            mq.brokerName,
            mq.queueId,
            w.brokerOffset,
            w.consumerOffset,
            w.pullOffset,
            w.lastTimestamp,
        )


@attrs.define
class ConsumerProgress:
    """consumerProgress: per queue broker offset, consumer offset and lag, plus the members."""

    group: str
    offsets: list[QueueProgress]
    clients: list[str]
    total_lag: int
    consume_tps: float = 0.0


def broker_names_of(info: ClusterInfo, cluster: str) -> list[str]:
    """The broker sets of ``cluster``, sorted; NotFound, naming the known clusters, if none."""
    names = info.clusterAddrTable.get(cluster)
    if names is None:
        known = ", ".join(sorted(info.clusterAddrTable)) or "none"
        raise NotFound(f"cluster {cluster} is unknown to the name server (known: {known})")
    return sorted(names)


def broker_addrs_of(info: ClusterInfo, cluster: str) -> list[str]:
    """Every broker of ``cluster``: each brokerId of each set, masters and slaves."""
    return [
        addr
        for name in broker_names_of(info, cluster)
        if (bd := info.brokerAddrTable.get(name)) is not None
        for _, addr in sorted(bd.brokerAddrs.items())
    ]


class MQAdmin:
    def __init__(
        self,
        namesrv_addr: str | list[str],
        transport: Transport | None = None,
        *,
        request_hook: RequestHook | None = None,
        timeout: float = 3.0,
    ) -> None:
        addrs = namesrv_addr if isinstance(namesrv_addr, list) else namesrv_addr.split(";")
        self.namesrv_addrs = [a.strip() for a in addrs if a.strip()]
        self.remoting = RemotingClient(transport or TcpTransport(), request_hook=request_hook)
        self.api = MQClientAPI(self.remoting, self.namesrv_addrs, timeout)

    async def __aenter__(self) -> MQAdmin:
        await self.remoting.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.remoting.__aexit__(None, None, None)

    # -- cluster
    async def cluster_info(self) -> ClusterInfo:
        return await self.api.get_cluster_info()

    async def masters_of_cluster(self, cluster: str) -> list[str]:
        info = await self.cluster_info()
        addrs = []
        for name in broker_names_of(info, cluster):
            bd = info.brokerAddrTable.get(name)
            if bd is not None and MASTER_ID in bd.brokerAddrs:
                addrs.append(bd.brokerAddrs[MASTER_ID])
        if not addrs:
            raise MQClientError(f"cluster {cluster} has no live master")
        return addrs

    async def cluster_list(self) -> list[dict[str, Any]]:
        """One row per broker (cluster, brokerName, brokerId, addr) with its runtime figures,
        or an ``error`` entry when the broker does not answer."""
        info = await self.cluster_info()
        rows: list[dict[str, Any]] = []
        for cluster, names in sorted(info.clusterAddrTable.items()):
            for name in sorted(names):
                bd = info.brokerAddrTable.get(name)
                if bd is None:
                    continue
                for bid, addr in sorted(bd.brokerAddrs.items()):
                    row: dict[str, Any] = {}
                    try:
                        runtime = await self.broker_status(addr)
                    except (RemotingError, MQClientError) as e:
                        row["error"] = str(e)
                    else:
                        row.update(runtime)
                        row["version"] = runtime.get("brokerVersionDesc", "")
                    # identity from the name server wins over what the broker reports
                    row.update(cluster=cluster, brokerName=name, brokerId=bid, addr=addr)
                    rows.append(row)
        return rows

    async def broker_status(self, addr: str) -> dict[str, str]:
        resp = await self.api.call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return from_json(KVTable, resp.body).table

    async def get_broker_config(self, addr: str) -> dict[str, str]:
        resp = await self.api.call(addr, RequestCode.GET_BROKER_CONFIG)
        return parse_properties(resp.body.decode(), f"config of broker {addr}")

    async def broker_ha_status(self, addr: str) -> HARuntimeInfo:
        """GET_BROKER_HA_STATUS (907): the broker's replication status."""
        resp = await self.api.call(addr, RequestCode.GET_BROKER_HA_STATUS)
        return from_json(HARuntimeInfo, resp.body)

    # -- topics
    async def update_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        read_queues: int = 8,
        write_queues: int = 8,
        perm: int = 6,
        order: bool = False,
    ) -> list[str]:
        """Create or update the topic on one broker or every master of a cluster; returns the
        broker addresses it was written to."""
        if (cluster is None) == (broker_addr is None):
            raise UsageError("give exactly one of cluster or broker_addr")
        addrs = [broker_addr] if broker_addr else await self.masters_of_cluster(cluster or "")
        header = CreateTopicRequestHeader(
            topic=topic,
            defaultTopic=DEFAULT_TOPIC,
            readQueueNums=read_queues,
            writeQueueNums=write_queues,
            perm=perm,
            topicFilterType="SINGLE_TAG",
            topicSysFlag=0,
            order=order,
        )
        for addr in addrs:
            await self.api.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
        return addrs

    async def delete_topic(self, topic: str, *, cluster: str = "DefaultCluster") -> list[str]:
        """Delete on every broker (masters and slaves) of the cluster, then on every name
        server; returns the broker addresses."""
        addrs = broker_addrs_of(await self.cluster_info(), cluster)
        for addr in addrs:
            await self.api.call(
                addr, RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic)
            )
        for ns in self.namesrv_addrs:
            await self.api.call_namesrv(
                RequestCode.DELETE_TOPIC_IN_NAMESRV,
                DeleteTopicFromNamesrvRequestHeader(topic, cluster),
                addr=ns,
            )
        return addrs

    async def topic_route(self, topic: str) -> TopicRouteData:
        return await self.api.get_route(topic)

    async def topic_stats(self, addr: str, topic: str) -> TopicStatsTable:
        resp = await self.api.call(
            addr, RequestCode.GET_TOPIC_STATS_INFO, GetTopicStatsInfoRequestHeader(topic)
        )
        return from_json(TopicStatsTable, resp.body)

    async def route_addrs(self, topic: str) -> list[str]:
        """One address per broker set of ``topic``'s route (the master when there is one),
        in broker-name order."""
        route = await self.topic_route(topic)
        return [
            a
            for bd in sorted(route.brokerDatas, key=lambda b: b.brokerName)
            if (a := bd.select_broker_addr()) is not None
        ]

    async def topic_status(self, topic: str) -> list[QueueStatus]:
        """Min / max offset and last store time of every queue of the topic."""
        out: list[QueueStatus] = []
        for addr in await self.route_addrs(topic):
            table = await self.topic_stats(addr, topic)
            out.extend(
                QueueStatus(
                    mq.brokerName, mq.queueId, o.minOffset, o.maxOffset, o.lastUpdateTimestamp
                )
                for mq, o in table.offsetTable.items()
            )
        out.sort(key=lambda q: (q.brokerName, q.queueId))
        return out

    # -- consumers
    async def _group_broker_addrs(self, group: str, topic: str | None) -> list[str]:
        try:
            route = await self.topic_route(topic or retry_topic(group))
        except TopicRouteNotFound:
            if topic is not None:
                raise
            info = await self.cluster_info()
            return sorted(
                bd.brokerAddrs[MASTER_ID]
                for bd in info.brokerAddrTable.values()
                if MASTER_ID in bd.brokerAddrs
            )
        return [a for bd in route.brokerDatas if (a := bd.select_broker_addr()) is not None]

    async def consumer_progress(self, group: str, topic: str | None = None) -> ConsumerProgress:
        addrs = await self._group_broker_addrs(group, topic)
        offsets: list[QueueProgress] = []
        tps = 0.0
        for addr in addrs:
            stats = await self.consume_stats(addr, group, topic)
            offsets.extend(QueueProgress.of(mq, w) for mq, w in stats.offsetTable.items())
            tps += stats.consumeTps
        offsets.sort(key=lambda o: (o.topic, o.brokerName, o.queueId))
        clients = await self._online_clients(group, addrs)
        committed = any(o.consumerOffset > 0 for o in offsets)
        if not clients and not committed and not await self._group_exists(group, addrs):
            where = ", ".join(addrs) or "no broker found"
            raise NotFound(
                f"consumer group {group} is unknown: no broker ({where}) has a subscription "
                "group, a committed offset or an online member for it"
            )
        return ConsumerProgress(group, offsets, clients, sum(o.lag for o in offsets), tps)

    async def consume_stats(self, addr: str, group: str, topic: str | None) -> ConsumeStats:
        resp = await self.api.call(
            addr, RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader(group, topic)
        )
        return from_json(ConsumeStats, resp.body)

    async def _group_exists(self, group: str, addrs: list[str]) -> bool:
        """Some broker has the subscription group's config (created by updateSubGroup or
        automatically when a member first connects)."""
        for addr in addrs:
            resp = await self.api.call(
                addr,
                RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                GetSubscriptionGroupConfigRequestHeader(group),
                ok=(ResponseCode.SUCCESS, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
            )
            if resp.code == ResponseCode.SUCCESS:
                return True
        return False

    async def _online_clients(self, group: str, addrs: list[str]) -> list[str]:
        for addr in addrs:
            try:
                conn = await self.consumer_connection(group, addr)
            except MQBrokerError as e:
                if e.code == ResponseCode.CONSUMER_NOT_ONLINE:
                    return []
                raise
            return conn.client_ids()
        return []

    async def consumer_connection(self, group: str, addr: str) -> ConsumerConnection:
        resp = await self.api.call(
            addr,
            RequestCode.GET_CONSUMER_CONNECTION_LIST,
            GetConsumerConnectionListRequestHeader(group),
        )
        return from_json(ConsumerConnection, resp.body)

    async def consumer_running_info(
        self, group: str, client_id: str, *, jstack: bool = False, addr: str | None = None
    ) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO (307) through a broker of the group (``addr``, else the
        first of the group's retry topic route), which asks the client itself."""
        if addr is None:
            addrs = await self._group_broker_addrs(group, None)
            if not addrs:
                raise NotFound(f"no broker found for consumer group {group}")
            addr = addrs[0]
        resp = await self.api.call(
            addr,
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            GetConsumerRunningInfoRequestHeader(group, client_id, jstack),
            timeout_s=CONSUMER_CALL_TIMEOUT_S,
        )
        return from_json(ConsumerRunningInfo, resp.body)

    async def query_consume_time_span(self, topic: str, group: str) -> list[QueueTimeSpan]:
        """QUERY_CONSUME_TIME_SPAN (303) of every broker of ``topic``'s route."""
        spans: list[QueueTimeSpan] = []
        for addr in await self.route_addrs(topic):
            resp = await self.api.call(
                addr,
                RequestCode.QUERY_CONSUME_TIME_SPAN,
                QueryConsumeTimeSpanRequestHeader(topic, group),
            )
            spans.extend(from_json(QueryConsumeTimeSpanBody, resp.body).consumeTimeSpanSet)
        return spans

    async def producer_connection(self, group: str, topic: str) -> ProducerConnection:
        """The producers of ``group`` as the brokers of ``topic``'s route see them (merged by
        client id); NotFound when no broker knows the group."""
        seen: dict[str, Connection] = {}
        for addr in await self.route_addrs(topic):
            resp = await self.api.call(
                addr,
                RequestCode.GET_PRODUCER_CONNECTION_LIST,
                GetProducerConnectionListRequestHeader(group),
                ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
            )
            if resp.code == ResponseCode.SUCCESS:
                for c in from_json(ProducerConnection, resp.body).connectionSet:
                    seen.setdefault(c.clientId, c)
        if not seen:
            raise NotFound(f"producer group {group} has no producer online for topic {topic}")
        return ProducerConnection(sorted(seen.values(), key=lambda c: c.clientId))

    async def query_topic_consume_by_who(self, topic: str) -> list[str]:
        """The groups consuming ``topic``: subscribed members or committed offsets on any
        broker of its route (QUERY_TOPIC_CONSUME_BY_WHO, 300)."""
        groups: set[str] = set()
        for addr in await self.route_addrs(topic):
            resp = await self.api.call(
                addr,
                RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                QueryTopicConsumeByWhoRequestHeader(topic),
            )
            groups.update(from_json(GroupList, resp.body).groupList)
        return sorted(groups)

    async def broker_consume_stats(
        self, addr: str, *, order_only: bool = False
    ) -> ConsumeStatsList:
        resp = await self.api.call(
            addr,
            RequestCode.GET_BROKER_CONSUME_STATS,
            GetConsumeStatsInBrokerHeader(order_only),
            timeout_s=max(self.api.timeout_s, 10.0),
        )
        return from_json(ConsumeStatsList, resp.body)

    async def topic_list(self) -> list[str]:
        resp = await self.api.call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted(from_json(TopicList, resp.body).topicList)

    async def topics_of_cluster(self, cluster: str) -> list[str]:
        resp = await self.api.call_namesrv(
            RequestCode.GET_TOPICS_BY_CLUSTER, GetTopicsByClusterRequestHeader(cluster)
        )
        return sorted(from_json(TopicList, resp.body).topicList)

    async def update_sub_group(self, config: SubscriptionGroupConfig, addrs: list[str]) -> None:
        body = fastjson.encode(config)
        for addr in addrs:
            await self.api.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)

    async def delete_sub_group(self, group: str, addrs: list[str], *, clean_offset: bool) -> None:
        header = DeleteSubscriptionGroupRequestHeader(group, clean_offset)
        for addr in addrs:
            await self.api.call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header)

    # -- messages
    async def query_msg_by_id(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """By offset message id (store host + commitlog offset), or by UNIQ_KEY when the id
        does not name a known broker (a UNIQ_KEY lookup needs the topic)."""
        broker = await self._broker_of_offset_id(msg_id)
        if broker is not None:
            addr, offset = broker
            resp = await self.api.call(
                addr, RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset)
            )
            return decode_stored(resp.body, decompress_body=True)[0]
        if topic is None:
            raise MQClientError(
                f"{msg_id} is not an offset message id of a known broker; "
                "give the topic to look it up as a client message id (UNIQ_KEY)"
            )
        found = await self._query(topic, msg_id, 32, 0, MAX_TIMESTAMP, unique=True)
        for m in found:
            if m.msg_id == msg_id:
                return m
        raise NotFound(f"no message with id {msg_id} in topic {topic}")

    async def _broker_of_offset_id(self, msg_id: str) -> tuple[str, int] | None:
        try:
            ip, port, offset = parse_offset_msg_id(msg_id)
        except MessageDecodeError:
            return None
        addr = f"{ip}:{port}"
        info = await self.cluster_info()
        known = {a for bd in info.brokerAddrTable.values() for a in bd.brokerAddrs.values()}
        return (addr, offset) if addr in known else None

    async def query_msg_by_key(
        self,
        topic: str,
        key: str,
        max_num: int = 64,
        begin_ms: int = 0,
        end_ms: int = MAX_TIMESTAMP,
    ) -> list[MessageExt]:
        """Messages of the topic whose KEYS contain ``key``, oldest first."""
        found = await self._query(topic, key, max_num, begin_ms, end_ms, unique=False)
        return [m for m in found if key in m.keys][:max_num]

    async def _query(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int, *, unique: bool
    ) -> list[MessageExt]:
        route = await self.topic_route(topic)
        header = QueryMessageRequestHeader(topic, key, max_num, begin_ms, end_ms)
        ext = to_ext(header)
        if unique:
            ext[UNIQUE_KEY_QUERY] = "true"
        out: list[MessageExt] = []
        for bd in route.brokerDatas:
            addr = bd.select_broker_addr()
            if addr is None:
                continue
            cmd = RemotingCommand(code=RequestCode.QUERY_MESSAGE, ext_fields=dict(ext))
            resp = await self.remoting.invoke(addr, cmd, self.api.timeout_s)
            if resp.code == ResponseCode.QUERY_NOT_FOUND:
                continue
            if resp.code != ResponseCode.SUCCESS:
                raise MQBrokerError(resp.code, resp.remark, addr)
            out.extend(iter_stored(resp.body, decompress_body=True))
        out.sort(key=lambda m: (m.store_timestamp, m.commitlog_offset))
        return out


async def wait_for_route(
    admin: MQAdmin, topic: str, *, timeout: float = 10.0, poll: float = 0.2
) -> TopicRouteData:
    """Poll the name server until the topic has a route (brokers register asynchronously)."""
    with aio.fail_after(timeout):
        while True:
            try:
                return await admin.topic_route(topic)
            except TopicRouteNotFound:
                await aio.sleep(poll)
