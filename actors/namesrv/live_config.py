"""UPDATE_NAMESRV_CONFIG (318): which NameServer keys change live, and how the running
NameServer hears (the decision itself is actors/kernel/live_update.py).

Live: enableAllTopicList, enableTopicList, returnOrderTopicConfigToBroker, orderMessageEnable,
notifyMinBrokerIdChangeTimeoutMillis (read from the config object at each request), and
brokerChannelExpiredTime, supportActingMaster, notifyMinBrokerIdChanged (copied into the route
table at start: `apply_namesrv_changes` sets them there; they apply from the next
registration / scan). Every other key needs a restart: the listener (listenPort, listenHost,
the remoting server limits), the scan period (a loop started at boot), the embedded controller,
the ACL keys, logDir. kvConfigPath, configStorePath, configBlackList and rocketmqHome are on
upstream's black list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from rocketrio.actors.kernel.live_update import ConfigChange, UpdatePolicy

if TYPE_CHECKING:
    from rocketrio.actors.namesrv.namesrv import NameServer

NAMESRV_POLICY: Final = UpdatePolicy(
    role="name server",
    live_keys=frozenset(
        {
            "enableAllTopicList",
            "enableTopicList",
            "returnOrderTopicConfigToBroker",
            "orderMessageEnable",
            "notifyMinBrokerIdChangeTimeoutMillis",
            "brokerChannelExpiredTime",
            "supportActingMaster",
            "notifyMinBrokerIdChanged",
        }
    ),
    # upstream DefaultRequestProcessor.initConfigBlackList
    always_black=frozenset({"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"}),
    restart_hint="change it in the name server's config file and restart it",
)


def apply_namesrv_changes(namesrv: NameServer, changes: tuple[ConfigChange, ...]) -> None:
    """Tell the route table the values it copied at start (module docstring)."""
    c, routes = namesrv.config, namesrv.routes
    keys = {ch.key for ch in changes}
    if "brokerChannelExpiredTime" in keys:
        routes.default_timeout_ms = c.brokerChannelExpiredTime
    if "supportActingMaster" in keys:
        routes.support_acting_master = c.supportActingMaster
    if "notifyMinBrokerIdChanged" in keys:
        routes.notify_min_broker_id_changed = c.notifyMinBrokerIdChanged
