"""NameServer configuration: upstream NamesrvConfig keys and defaults (plus listenPort), and the
remoting server keys (`RemotingServerConfig`: idle timeout, connection caps, byte bounds)."""

from __future__ import annotations

import attrs

from rocketrio.actors.auth.config import init_user_key, require_init_user
from rocketrio.actors.kernel.server_limits import RemotingServerConfig
from rocketrio.actors.observe.metrics_exporter import (
    DEFAULT_PROM_EXPORTER_PORT,
    MetricsExporterType,
)
from rocketrio.protocol.config import positive


@attrs.define
class NamesrvConfig(RemotingServerConfig):
    listenPort: int = attrs.field(default=9876, validator=positive)
    listenHost: str = "127.0.0.1"
    rocketmqHome: str = "."
    # UPDATE_NAMESRV_CONFIG writes live changes here; `rocketrio namesrv -c FILE` sets it to
    # FILE as upstream's NamesrvStartup does; empty: changes are not persisted
    configStorePath: str = ""
    # keys UPDATE_NAMESRV_CONFIG refuses (';'-separated); configBlackList, configStorePath,
    # kvConfigPath and rocketmqHome are refused whatever it says (upstream)
    configBlackList: str = "configBlackList;configStorePath;kvConfigPath"
    # where the process writes its JSON log lines (<logDir>/<node>.jsonl)
    logDir: str = "logs"
    scanNotActiveBrokerInterval: int = attrs.field(default=5000, validator=positive)
    # used when a broker does not send heartbeatTimeoutMillis (upstream RouteInfoManager: 120 s)
    brokerChannelExpiredTime: int = attrs.field(default=120_000, validator=positive)
    supportActingMaster: bool = False
    orderMessageEnable: bool = False
    clusterTest: bool = False
    # controller embedded in the NameServer (issue 3)
    enableControllerInNamesrv: bool = False
    # kvConfig.json (PUT/GET/DELETE_KV_CONFIG); empty keeps the KV table in memory only.
    # Upstream's default is ~/namesrv/kvConfig.json; deploy configs set it explicitly.
    kvConfigPath: str = ""
    # REGISTER_BROKER answers with the ORDER_TOPIC_CONFIG namespace of the KV table
    returnOrderTopicConfigToBroker: bool = True
    # GET_ALL_TOPIC_LIST_FROM_NAMESERVER / GET_TOPICS_BY_CLUSTER answer "disable" when false
    enableAllTopicList: bool = True
    enableTopicList: bool = True
    # push NOTIFY_MIN_BROKER_ID_CHANGE to a group's brokers when its smallest brokerId changes
    notifyMinBrokerIdChanged: bool = False
    notifyMinBrokerIdChangeTimeoutMillis: int = attrs.field(default=3000, validator=positive)
    # ACL (upstream AuthConfig key names): with authenticationEnabled, the admin writes
    # (deleteTopicInNamesrv, KV config, broker write perms ...) need a request signed by this
    # super user; routes, registrations and heartbeats stay open (actors/auth/gate.py)
    authenticationEnabled: bool = False
    initAuthenticationUser: str = attrs.field(default="", validator=init_user_key)
    # Prometheus (the broker's and controller's key names; upstream's NamesrvConfig has none):
    # GET /metrics on metricsPromExporterHost (empty: listenHost) and its port
    metricsExporterType: MetricsExporterType = MetricsExporterType.DISABLE
    metricsPromExporterHost: str = ""
    metricsPromExporterPort: int = attrs.field(
        default=DEFAULT_PROM_EXPORTER_PORT, validator=positive
    )

    def __attrs_post_init__(self) -> None:
        require_init_user(self, "name server")
