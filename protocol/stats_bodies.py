"""VIEW_BROKER_STATS_DATA (315): the request header and the body (upstream
remoting/protocol/header/ViewBrokerStatsDataRequestHeader.java, remoting/protocol/body/
BrokerStatsData.java and BrokerStatsItem.java).

The body is written by `protocol.fastjson` (fields alphabetical: ``statsDay, statsHour,
statsMinute`` and ``avgpt, sum, tps``; doubles as Java prints them, ``0.0`` when idle).
"""

from __future__ import annotations

import attrs


@attrs.define(slots=True)
class ViewBrokerStatsDataRequestHeader:
    statsName: str
    statsKey: str


@attrs.define(slots=True)
class BrokerStatsItem:
    """One window: messages (or bytes) in it, per second, per request ("average per time")."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


@attrs.define(slots=True)
class BrokerStatsData:
    statsMinute: BrokerStatsItem = attrs.field(factory=BrokerStatsItem)
    statsHour: BrokerStatsItem = attrs.field(factory=BrokerStatsItem)
    statsDay: BrokerStatsItem = attrs.field(factory=BrokerStatsItem)
