"""The remoting handlers of the broker's statistics: GET_BROKER_RUNTIME_INFO (28),
VIEW_BROKER_STATS_DATA (315) and the consumption figures admin tools read (GET_TOPIC_STATS_INFO,
GET_CONSUME_STATS, GET_BROKER_CONSUME_STATS, QUERY_TOPIC_CONSUME_BY_WHO).

315 answers as upstream AdminBrokerProcessor.ViewBrokerStatsData: the item's minute, hour and
day windows as BrokerStatsData; an unknown stats name or an item that does not exist (no put
to that topic, no pull by that ``topic@group`` yet) is SYSTEM_ERROR with upstream's remark
``The stats <name> <key> not exist``.
"""

from __future__ import annotations

from rocketrio.actors.broker.dispatch.answers import answer_json, on_ext
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.stats.consume_stats import ConsumeStatsProcessor
from rocketrio.actors.broker.stats.items import BrokerStatsManager, StatsSnapshot
from rocketrio.actors.broker.stats.runtime_info import RuntimeInfo
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import KVTable
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext
from rocketrio.protocol.stats_bodies import (
    BrokerStatsData,
    BrokerStatsItem,
    ViewBrokerStatsDataRequestHeader,
)


def _item(s: StatsSnapshot) -> BrokerStatsItem:
    return BrokerStatsItem(s.sum, s.tps, s.avgpt)


def view_broker_stats_data(
    items: BrokerStatsManager, h: ViewBrokerStatsDataRequestHeader
) -> BrokerStatsData | None:
    """The item's windows, None when it does not exist."""
    view = items.stats_item(h.statsName, h.statsKey)
    if view is None:
        return None
    return BrokerStatsData(_item(view.minute), _item(view.hour), _item(view.day))


def stats_handlers(
    runtime: RuntimeInfo, items: BrokerStatsManager, consume: ConsumeStatsProcessor
) -> Handlers:
    """The request codes the stats package serves."""

    async def runtime_info(ctx: RequestContext) -> RemotingCommand:
        body = fastjson.encode(KVTable(runtime.table()))
        return ctx.cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def view_stats(ctx: RequestContext) -> RemotingCommand:
        h = from_ext(ViewBrokerStatsDataRequestHeader, ctx.cmd.ext_fields)
        data = view_broker_stats_data(items, h)
        if data is None:
            return ctx.cmd.make_response(
                ResponseCode.SYSTEM_ERROR, f"The stats <{h.statsName}> <{h.statsKey}> not exist"
            )
        return ctx.cmd.make_response(ResponseCode.SUCCESS, body=fastjson.encode(data))

    rc, st = RequestCode, consume
    return {
        rc.GET_BROKER_RUNTIME_INFO: runtime_info,
        rc.VIEW_BROKER_STATS_DATA: view_stats,
        rc.GET_TOPIC_STATS_INFO: on_ext(
            GetTopicStatsInfoRequestHeader, st.topic_stats, answer_json
        ),
        rc.GET_CONSUME_STATS: on_ext(GetConsumeStatsRequestHeader, st.consume_stats, answer_json),
        rc.GET_BROKER_CONSUME_STATS: on_ext(
            GetConsumeStatsInBrokerHeader, st.broker_consume_stats, answer_json
        ),
        rc.QUERY_TOPIC_CONSUME_BY_WHO: on_ext(
            QueryTopicConsumeByWhoRequestHeader, st.consumed_by_whom, answer_json
        ),
    }
