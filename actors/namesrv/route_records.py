"""What `RouteInfoManager` (route_info.py) keys its tables by and hands back (pure records).

The live table's key and value (`BrokerAddrInfo`: upstream keys liveness by cluster and address;
`BrokerLiveInfo`), the outcomes of a registration, an unregistration and an expiry that the
NameServer shell answers and logs, the NOTIFY_MIN_BROKER_ID_CHANGE push it carries out
(`MinBrokerIdChange`), upstream's constants, and the copies a route answer is made of (a
caller must never hold a table's own BrokerData or QueueData).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import NamedTuple

import attrs

from rocketrio.protocol.bodies import BrokerData, DataVersion, QueueData

MASTER_ID = 0
# upstream RouteInfoManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME: used when a broker sends no timeout
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000
# TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX: these routes must show the real members
SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


class BrokerAddrInfo(NamedTuple):
    """Key of the live table: upstream keys liveness by (cluster, address), not by name/id."""

    cluster_name: str
    broker_addr: str


@attrs.define(slots=True)
class BrokerLiveInfo:
    last_update_timestamp: int
    heartbeat_timeout_millis: int
    data_version: DataVersion
    ha_server_addr: str
    channel: Hashable | None = None


@attrs.frozen
class RegisterBrokerResult:
    """What REGISTER_BROKER answers, plus facts the shell logs.

    ``master_addr`` / ``ha_server_addr`` are set for a slave whose master is live. ``new_broker``
    is true when this (cluster, address) was not live before or now holds a different brokerId.
    ``ignored`` names why the registration changed nothing (a newer broker holds the id); upstream
    still answers SUCCESS then, with no master address.
    """

    master_addr: str | None = None
    ha_server_addr: str | None = None
    new_broker: bool = False
    ignored: str | None = None


@attrs.frozen
class UnregisterRequest:
    cluster_name: str
    broker_addr: str
    broker_name: str | None
    broker_id: int | None = None


@attrs.frozen
class UnregisteredBroker:
    """One address removed from the tables. ``group_removed``: it was the group's last member."""

    cluster_name: str
    broker_addr: str
    broker_name: str | None
    broker_id: int | None
    group_removed: bool
    was_live: bool


@attrs.frozen
class ExpiredBroker:
    """A broker silent for longer than its heartbeat timeout; already unregistered."""

    cluster_name: str
    broker_addr: str
    broker_name: str | None
    broker_id: int | None
    silent_ms: int
    timeout_ms: int
    channel: Hashable | None


@attrs.frozen
class MinBrokerIdChange:
    """NOTIFY_MIN_BROKER_ID_CHANGE to push (oneway) to every address in ``notify_addrs``."""

    broker_name: str
    min_broker_id: int
    min_broker_addr: str
    offline_broker_addr: str | None
    ha_broker_addr: str | None
    notify_addrs: tuple[str, ...]


def copy_broker_data(bd: BrokerData) -> BrokerData:
    return BrokerData(
        cluster=bd.cluster,
        brokerName=bd.brokerName,
        brokerAddrs={bid: bd.brokerAddrs[bid] for bid in sorted(bd.brokerAddrs)},
        zoneName=bd.zoneName,
        enableActingMaster=bd.enableActingMaster,
    )


def copy_queue_data(qd: QueueData) -> QueueData:
    return QueueData(qd.brokerName, qd.readQueueNums, qd.writeQueueNums, qd.perm, qd.topicSysFlag)
