"""`rocketrio admin` commands about groups, connections and topic listings (mqadmin's names).

consumerConnection, producerConnection, producer, brokerConsumeStats, updateSubGroup,
deleteSubGroup, topicList, topicClusterList. Flags are mqadmin's (``-g`` group, ``-b`` broker
address, ``-c`` cluster, ``-t`` topic, ...); output is a readable table with dates, ``--json`` the
bodies.
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from rocketrio.actors.client.errors import NotFound, UsageError
from rocketrio.cli.admin import command, print_done, table
from rocketrio.cli.dates import format_ms
from rocketrio.protocol.bodies import SubscriptionGroupConfig
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.producer_info import ProducerTableInfo
from rocketrio.protocol.serde import from_json

RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"


# --- connections -----------------------------------------------------------------------------


def _consumer_connection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True)
    p.add_argument("-b", "--brokerAddr", dest="broker", help="ask this broker (default: a "
                   "broker of the group's retry topic)")  # fmt: skip


def _print_consumer_connection(cc: Any, a: argparse.Namespace) -> None:
    rows = [
        [i, c.clientId, c.clientAddr, c.language, c.version]
        for i, c in enumerate(sorted(cc.connectionSet, key=lambda c: c.clientId), 1)
    ]
    print(table(["#", "client id", "client address", "language", "version"], rows))
    print("\nsubscriptions:")
    subs = [[t, s.subString] for t, s in sorted(cc.subscriptionTable.items())]
    print(table(["topic", "sub expression"], subs))
    print(f"\nConsumeType: {cc.consumeType}")
    print(f"MessageModel: {cc.messageModel}")
    print(f"ConsumeFromWhere: {cc.consumeFromWhere}")


@command("consumerConnection", "online members of a consumer group and their subscriptions",
         _print_consumer_connection)(_consumer_connection_args)  # fmt: skip
async def consumer_connection(admin: Any, a: argparse.Namespace) -> Any:
    addrs = [a.broker] if a.broker else await admin._group_broker_addrs(a.group, None)
    if not addrs:
        raise NotFound(f"no broker found for consumer group {a.group}")
    return await admin.consumer_connection(a.group, addrs[0])


def _producer_connection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--producerGroup", dest="group", required=True)
    p.add_argument("-t", "--topic", required=True, help="a topic the group sends to")


def _print_producer_connection(pc: Any, a: argparse.Namespace) -> None:
    rows = [
        [i, c.clientId, c.clientAddr, c.language, c.version]
        for i, c in enumerate(pc.connectionSet, 1)
    ]
    print(table(["#", "client id", "client address", "language", "version"], rows))


@command("producerConnection", "online producers of a producer group",
         _print_producer_connection)(_producer_connection_args)  # fmt: skip
async def producer_connection(admin: Any, a: argparse.Namespace) -> Any:
    return await admin.producer_connection(a.group, a.topic)


def _producer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--broker", dest="broker", required=True, help="broker address")


def _print_producers(pt: ProducerTableInfo, a: argparse.Namespace) -> None:
    """As mqadmin's producer command prints them."""
    for group, producers in pt.data.items():
        if not producers:
            print(f"producer group ({group}) instances are empty")
        for producer in producers:
            print(f"producer group ({group}) instance : {producer}")


@command("producer", "every producer connected to a broker, by group (GET_ALL_PRODUCER_INFO)",
         _print_producers)(_producer_args)  # fmt: skip
async def producer(admin: Any, a: argparse.Namespace) -> ProducerTableInfo:
    resp = await admin.api.call(a.broker, RequestCode.GET_ALL_PRODUCER_INFO)
    return from_json(ProducerTableInfo, resp.body)


# --- consume stats of a whole broker ---------------------------------------------------------


@attrs.define
class BrokerConsumeRow:
    topic: str
    group: str
    brokerName: str
    queueId: int
    brokerOffset: int
    consumerOffset: int
    diff: int
    lastTimestamp: int


@attrs.define
class BrokerConsumeView:
    brokerAddr: str
    rows: list[BrokerConsumeRow]
    totalDiff: int


def _broker_consume_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker", required=True)
    p.add_argument("-l", "--level", type=int, default=0, help="only queues with diff >= level")
    p.add_argument("-o", "--order", type=_bool, default=False, help="only ordered topics")


def _print_broker_consume(view: Any, a: argparse.Namespace) -> None:
    rows = [
        [
            r.topic,
            r.group,
            r.brokerName,
            r.queueId,
            r.brokerOffset,
            r.consumerOffset,
            r.diff,
            format_ms(r.lastTimestamp),
        ]
        for r in view.rows
    ]
    headers = ["topic", "group", "broker", "queue", "broker offset", "consumer offset", "diff"]
    print(table([*headers, "last time"], rows))
    print(f"\nDiff Total: {view.totalDiff}")


@command("brokerConsumeStats", "consume progress of every group on one broker",
         _print_broker_consume)(_broker_consume_args)  # fmt: skip
async def broker_consume_stats(admin: Any, a: argparse.Namespace) -> Any:
    body = await admin.broker_consume_stats(a.broker, order_only=a.order)
    rows = []
    for per_group in body.consumeStatsList:
        for group, stats_list in per_group.items():
            for stats in stats_list:
                for mq, w in stats.offsetTable.items():
                    diff = w.brokerOffset - w.consumerOffset
                    if diff >= a.level:
                        rows.append(BrokerConsumeRow(mq.topic, group, mq.brokerName, mq.queueId,
                                                     w.brokerOffset, w.consumerOffset, diff,
                                                     w.lastTimestamp))  # fmt: skip
    rows.sort(key=lambda r: (r.topic, r.group, r.brokerName, r.queueId))
    return BrokerConsumeView(body.brokerAddr or a.broker, rows, body.totalDiff)


# --- subscription groups ---------------------------------------------------------------------


def _bool(text: str) -> bool:
    v = text.strip().lower()
    if v not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return v == "true"


def _target_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker", help="this broker address")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every master of this cluster")
    p.add_argument("-g", "--groupName", dest="group", required=True)


def _update_sub_group_args(p: argparse.ArgumentParser) -> None:
    _target_args(p)
    for short, name in (("-s", "consumeEnable"), ("-m", "consumeFromMinEnable"),
                        ("-d", "consumeBroadcastEnable"), ("-o", "consumeMessageOrderly"),
                        ("-a", "notifyConsumerIdsChanged")):  # fmt: skip
        p.add_argument(short, f"--{name}", dest=name, type=_bool)
    p.add_argument("-q", "--retryQueueNums", type=int)
    p.add_argument("-r", "--retryMaxTimes", type=int)
    p.add_argument("-i", "--brokerId", type=int)
    p.add_argument("-w", "--whichBrokerWhenConsumeSlowly", type=int)
    p.add_argument("--attributes", help="+key=value,+key2=value2,-key3 (as mqadmin)")


def parse_attributes(text: str | None) -> dict[str, str]:
    """mqadmin's ``+a=b,+c=d,-e`` as upstream's AttributeParser sends it: the keys keep their
    ``+``/``-`` sign (the broker applies them to the group's attributes), a removal's value
    is empty."""
    out: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in (text or "").split(","))):
        if item[0] == "+" and "=" in item and len(item.partition("=")[0]) > 1:
            key, _, value = item.partition("=")
            out[key] = value
        elif item[0] == "-" and "=" not in item and len(item) > 1:
            out[item] = ""
        else:
            raise UsageError(f"attribute {item!r} must be +key=value or -key")
    return out


async def _masters_or_broker(admin: Any, a: argparse.Namespace) -> list[str]:
    if a.broker:
        return [a.broker]
    return list(await admin.masters_of_cluster(a.cluster))  # NotFound names known clusters


@command("updateSubGroup", "create or update a subscription group", print_done)(
    _update_sub_group_args
)
async def update_sub_group(admin: Any, a: argparse.Namespace) -> str:
    config = SubscriptionGroupConfig(a.group)
    for field, value in (
        ("consumeEnable", a.consumeEnable),
        ("consumeFromMinEnable", a.consumeFromMinEnable),
        ("consumeBroadcastEnable", a.consumeBroadcastEnable),
        ("consumeMessageOrderly", a.consumeMessageOrderly),
        ("notifyConsumerIdsChangedEnable", a.notifyConsumerIdsChanged),
        ("retryQueueNums", a.retryQueueNums),
        ("retryMaxTimes", a.retryMaxTimes),
        ("brokerId", a.brokerId),
        ("whichBrokerWhenConsumeSlowly", a.whichBrokerWhenConsumeSlowly),
    ):
        if value is not None:
            setattr(config, field, value)
    config.attributes = parse_attributes(a.attributes)
    addrs = await _masters_or_broker(admin, a)
    await admin.update_sub_group(config, addrs)
    return "\n".join(f"create subscription group to {addr} success." for addr in addrs)


def _delete_sub_group_args(p: argparse.ArgumentParser) -> None:
    _target_args(p)
    p.add_argument("-r", "--removeOffset", dest="remove_offset", type=_bool, default=False,
                   help="also remove the group's consumer offsets")  # fmt: skip


@command("deleteSubGroup", "delete a subscription group", print_done)(_delete_sub_group_args)
async def delete_sub_group(admin: Any, a: argparse.Namespace) -> str:
    addrs = await _masters_or_broker(admin, a)
    await admin.delete_sub_group(a.group, addrs, clean_offset=a.remove_offset)
    where = f" in cluster [{a.cluster}]" if a.cluster else ""
    lines = [f"delete subscription group [{a.group}] from broker [{x}]{where} success."
             for x in addrs]  # fmt: skip
    if a.cluster:  # as mqadmin: the group's retry and dead-letter topics go too
        for topic in (RETRY_PREFIX + a.group, DLQ_PREFIX + a.group):
            await admin.delete_topic(topic, cluster=a.cluster)
            lines.append(f"delete topic [{topic}] from cluster [{a.cluster}] success.")
    return "\n".join(lines)


# --- topic listings --------------------------------------------------------------------------


@attrs.define
class TopicGroupRow:
    cluster: str
    topic: str
    group: str


def _topic_list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterModel", dest="with_groups", action="store_true",
                   help="per topic its cluster and consumer groups")  # fmt: skip


def _print_topic_list(result: Any, a: argparse.Namespace) -> None:
    if not a.with_groups:
        print("\n".join(result))
        return
    print(table(["cluster", "topic", "consumer group"],
                [[r.cluster, r.topic, r.group] for r in result]))  # fmt: skip


@command("topicList", "every topic the name servers know", _print_topic_list)(_topic_list_args)
async def topic_list(admin: Any, a: argparse.Namespace) -> Any:
    topics: list[str] = await admin.topic_list()
    if not a.with_groups:
        return topics
    info = await admin.cluster_info()
    cluster_of = {name: c for c, names in info.clusterAddrTable.items() for name in names}
    rows = []
    for topic in topics:
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            continue
        try:
            route = await admin.topic_route(topic)
        except NotFound:
            continue
        clusters = sorted({cluster_of.get(bd.brokerName, "") for bd in route.brokerDatas})
        groups = await admin.query_topic_consume_by_who(topic)
        for cluster in clusters:
            rows.extend(TopicGroupRow(cluster, topic, g) for g in groups or [""])
    return rows


@command("topicClusterList", "the clusters a topic is on", print_done)(
    lambda p: p.add_argument("-t", "--topic", required=True)
)
async def topic_cluster_list(admin: Any, a: argparse.Namespace) -> str:
    route = await admin.topic_route(a.topic)
    info = await admin.cluster_info()
    names = {bd.brokerName for bd in route.brokerDatas}
    clusters = sorted(c for c, members in info.clusterAddrTable.items() if names & set(members))
    return "\n".join(clusters)
