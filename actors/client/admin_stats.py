"""The admin calls behind ``clusterList``, ``brokerStatus`` and ``statsAll`` (upstream
DefaultMQAdminExt.viewBrokerStatsData; MQAdmin's runtime info, topic list and
queryTopicConsumeByWho) and the figures mqadmin's ClusterListSubCommand,
BrokerStatusSubCommand and StatsAllSubCommand derive from them.

Functions over an `MQAdmin` (actors/client/admin.py); each returns typed rows the launcher
prints. Figures are computed as mqadmin computes them:

- clusterList: in = the first number of ``putTps``, out = the first of ``getTransferredTps``
  (each with the send / pull queue size and head wait); hours of messages kept =
  (now - earliestMessageTimeStamp) / 1 h; space = commitLogDiskRatio; ``-m``: yesterday's and
  today's traffic from the day counters (TodayMorning - YesterdayMorning, TodayNow -
  TodayMorning);
- statsAll: per topic, the minute TPS of TOPIC_PUT_NUMS summed over the masters of its route
  and its 24-hour sum (the day window's sum, else the hour's, else the minute's); per
  consuming group the same of GROUP_GET_NUMS ``topic@group``, and the backlog (sum over the
  masters of brokerOffset - consumerOffset, never below 0).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

from rocketrio.actors.client.admin import MQAdmin, broker_addrs_of
from rocketrio.actors.client.config import MASTER_ID
from rocketrio.actors.client.errors import MQClientError, NotFound
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.serde import from_json
from rocketrio.protocol.stats_bodies import BrokerStatsData, ViewBrokerStatsDataRequestHeader

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"


# ------------------------------------------------------------------------------ calls


async def view_broker_stats_data(
    admin: MQAdmin, addr: str, stats_name: str, stats_key: str
) -> BrokerStatsData:
    """VIEW_BROKER_STATS_DATA (315); MQBrokerError when the item does not exist."""
    resp = await admin.api.call(
        addr,
        RequestCode.VIEW_BROKER_STATS_DATA,
        ViewBrokerStatsDataRequestHeader(stats_name, stats_key),
    )
    return from_json(BrokerStatsData, resp.body)


# ------------------------------------------------------------------------------ clusterList


@attrs.define
class BrokerFigures:
    """One clusterList row: a broker and its runtime figures (``error``: it did not answer)."""

    cluster: str
    brokerName: str
    brokerId: int
    addr: str
    version: str = ""
    inTps: float = 0.0
    sendQueueSize: str = ""
    sendQueueHeadWaitMs: str = ""
    outTps: float = 0.0
    pullQueueSize: str = ""
    pullQueueHeadWaitMs: str = ""
    timerReadBehind: int = 0
    timerOffsetBehind: int = 0
    timerCongestNum: int = 0
    timerEnqueueTps: float = 0.0
    timerDequeueTps: float = 0.0
    pageCacheLockTimeMills: str = ""
    hours: float = 0.0
    space: float = 0.0
    active: bool = False
    inTotalYesterday: int = 0
    outTotalYesterday: int = 0
    inTotalToday: int = 0
    outTotalToday: int = 0
    error: str | None = None


def _first_tps(triple: str | None) -> float:
    """mqadmin: ``Double.parseDouble(tps.split(" ")[0])`` when the text is not blank."""
    if not triple or not triple.strip():
        return 0.0
    first = triple.split(" ")[0]
    return float(first) if first else 0.0


def _int(v: str | None) -> int:
    return int(v) if v and v.lstrip("-").isdigit() else 0


def figures_of(row: BrokerFigures, kv: dict[str, str], now_ms: int) -> BrokerFigures:
    """Fill ``row`` from a GET_BROKER_RUNTIME_INFO table as mqadmin reads it."""
    row.version = kv.get("brokerVersionDesc", "")
    row.active = kv.get("brokerActive", "").lower() == "true"
    row.inTps = _first_tps(kv.get("putTps"))
    row.outTps = _first_tps(kv.get("getTransferredTps"))
    row.sendQueueSize = kv.get("sendThreadPoolQueueSize", "")
    row.sendQueueHeadWaitMs = kv.get("sendThreadPoolQueueHeadWaitTimeMills", "")
    row.pullQueueSize = kv.get("pullThreadPoolQueueSize", "")
    row.pullQueueHeadWaitMs = kv.get("pullThreadPoolQueueHeadWaitTimeMills", "")
    row.pageCacheLockTimeMills = kv.get("pageCacheLockTimeMills", "")
    row.timerReadBehind = _int(kv.get("timerReadBehind"))
    row.timerOffsetBehind = _int(kv.get("timerOffsetBehind"))
    row.timerCongestNum = _int(kv.get("timerCongestNum"))
    row.timerEnqueueTps = float(kv.get("timerEnqueueTps") or 0)
    row.timerDequeueTps = float(kv.get("timerDequeueTps") or 0)
    earliest = kv.get("earliestMessageTimeStamp")
    if earliest:
        row.hours = (now_ms - int(earliest)) / 1000.0 / 60.0 / 60.0
    ratio = kv.get("commitLogDiskRatio")
    if ratio:
        row.space = float(ratio)
    put_y, put_m, put_n = (
        _int(kv.get(f"msgPutTotal{k}")) for k in ("YesterdayMorning", "TodayMorning", "TodayNow")
    )
    get_y, get_m, get_n = (
        _int(kv.get(f"msgGetTotal{k}")) for k in ("YesterdayMorning", "TodayMorning", "TodayNow")
    )
    row.inTotalYesterday, row.inTotalToday = put_m - put_y, put_n - put_m
    row.outTotalYesterday, row.outTotalToday = get_m - get_y, get_n - get_m
    return row


async def cluster_figures(
    admin: MQAdmin, cluster: str | None, now_ms: Callable[[], int] | None = None
) -> list[BrokerFigures]:
    """Every broker (masters and slaves) of every cluster, or of ``cluster`` (NotFound naming
    the known clusters when it is unknown), in mqadmin's order: cluster, broker set, id."""
    clock = now_ms or (lambda: int(time.time() * 1000))
    info = await admin.cluster_info()
    names = [cluster] if cluster else sorted(info.clusterAddrTable)
    rows: list[BrokerFigures] = []
    for name in names:
        addrs = broker_addrs_of(info, name)  # NotFound for an unknown cluster
        by_addr = {
            addr: (bn, bid)
            for bn, bd in info.brokerAddrTable.items()
            for bid, addr in bd.brokerAddrs.items()
        }
        for addr in addrs:
            bn, bid = by_addr[addr]
            row = BrokerFigures(name, bn, bid, addr)
            try:
                kv = await admin.broker_status(addr)
            except (RemotingError, MQClientError) as e:
                row.error = str(e)
            else:
                figures_of(row, kv, clock())
            rows.append(row)
    return rows


# ------------------------------------------------------------------------------ brokerStatus


async def broker_status_of_cluster(admin: MQAdmin, cluster: str) -> dict[str, dict[str, str]]:
    """brokerStatus -c: every broker's runtime table by address; a broker that does not
    answer gets ``{"error": ...}``."""
    out: dict[str, dict[str, str]] = {}
    for addr in broker_addrs_of(await admin.cluster_info(), cluster):
        try:
            out[addr] = await admin.broker_status(addr)
        except (RemotingError, MQClientError) as e:
            out[addr] = {"error": str(e)}
    return out


# ------------------------------------------------------------------------------ statsAll


@attrs.define
class TopicGroupStats:
    """One statsAll row (``group`` None: the topic has no consumer group: NO_CONSUMER)."""

    topic: str
    group: str | None
    accumulation: int
    inTps: float
    outTps: float
    inMsg24Hour: int
    outMsg24Hour: int


def sum_24_hours(data: BrokerStatsData) -> int:
    """mqadmin compute24HourSum: the day's sum, else the hour's, else the minute's."""
    for window in (data.statsDay, data.statsHour, data.statsMinute):
        if window.sum != 0:
            return window.sum
    return 0


async def _item(admin: MQAdmin, masters: list[str], name: str, key: str) -> tuple[float, int]:
    """(minute tps, 24-hour sum) of one stats item summed over the masters; a master without
    the item (nothing counted yet) or not answering adds nothing, as in mqadmin."""
    tps, total = 0.0, 0
    for addr in masters:
        try:
            data = await view_broker_stats_data(admin, addr, name, key)
        except (RemotingError, MQClientError):
            continue
        tps += data.statsMinute.tps
        total += sum_24_hours(data)
    return tps, total


async def _accumulation(admin: MQAdmin, masters: list[str], group: str, topic: str) -> int:
    diff = 0
    for addr in masters:
        try:
            stats = await admin.consume_stats(addr, group, topic)
        except (RemotingError, MQClientError):
            continue
        diff += sum(w.brokerOffset - w.consumerOffset for w in stats.offsetTable.values())
    return max(0, diff)


async def topic_stats(admin: MQAdmin, topic: str, active_only: bool) -> list[TopicGroupStats]:
    """statsAll's rows of one topic (mqadmin printTopicDetail)."""
    route = await admin.topic_route(topic)
    masters = [a for bd in route.brokerDatas if (a := bd.brokerAddrs.get(MASTER_ID)) is not None]
    try:  # QUERY_TOPIC_CONSUME_BY_WHO (300) on the route's brokers
        groups = await admin.query_topic_consume_by_who(topic)
    except (RemotingError, MQClientError):
        groups = []
    in_tps, in_24h = await _item(admin, masters, TOPIC_PUT_NUMS, topic)
    if not groups:
        if active_only and in_24h <= 0:
            return []
        return [TopicGroupStats(topic, None, 0, in_tps, 0.0, in_24h, 0)]
    rows = []
    for group in groups:
        out_tps, out_24h = await _item(admin, masters, GROUP_GET_NUMS, f"{topic}@{group}")
        backlog = await _accumulation(admin, masters, group, topic)
        if not active_only or in_24h > 0 or out_24h > 0:
            rows.append(TopicGroupStats(topic, group, backlog, in_tps, out_tps, in_24h, out_24h))
    return rows


async def stats_all(
    admin: MQAdmin, topic: str | None = None, active_only: bool = False
) -> list[TopicGroupStats]:
    """statsAll: every topic but retry and DLQ topics (or only ``topic``: NotFound when the
    name server does not know it)."""
    topics = await admin.topic_list()
    if topic:
        if topic not in topics:
            raise NotFound(f"topic {topic} is unknown to the name server")
        topics = [topic]
    rows: list[TopicGroupStats] = []
    for t in topics:
        if t.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            continue
        try:
            rows.extend(await topic_stats(admin, t, active_only))
        except (RemotingError, MQClientError):
            continue  # mqadmin skips a topic it cannot read (a route gone meanwhile)
    return rows
