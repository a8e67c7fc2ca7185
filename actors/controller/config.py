"""Controller configuration: upstream ControllerConfig keys and defaults (plus listenPort/logDir).

Key names are upstream's, so a controller.conf (or the controller part of a namesrv.conf with
enableControllerInNamesrv=true) reads unchanged through `rocketrio.protocol.config.load_config`.
`controllerType` names the consensus: upstream offers DLedger and jRaft; our hand-written Raft
takes DLedger's place and keeps its key names, so only "DLedger" is accepted.

The Raft group keys (controllerDLegerGroup / Peers / SelfId) are checked when the Raft settings
are built (`to_raft_config`), not when the class is built: a NameServer config may carry this
class with the embedded controller switched off. The remoting server keys (idle timeout,
connection caps, byte bounds) are inherited from `RemotingServerConfig`.
"""

from __future__ import annotations

import os
from typing import Any, Final

import attrs

from rocketrio.actors.auth.config import credentials_key, init_user_key, require_init_user
from rocketrio.actors.kernel.server_limits import RemotingServerConfig
from rocketrio.actors.observe.metrics_exporter import (
    DEFAULT_PROM_EXPORTER_PORT,
    MetricsExporterType,
)
from rocketrio.actors.raft.config import RaftConfig, parse_peers
from rocketrio.protocol.config import positive

DLEDGER_CONTROLLER: Final = "DLedger"
JRAFT_CONTROLLER: Final = "jRaft"


def _controller_type(_inst: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if value == JRAFT_CONTROLLER:
        raise ValueError(
            f"{attribute.name}={value} is not supported: rocketrio's controller runs its own "
            f"Raft under the {DLEDGER_CONTROLLER} key names; "
            f"set {attribute.name}={DLEDGER_CONTROLLER}"
        )
    if value != DLEDGER_CONTROLLER:
        raise ValueError(f"{attribute.name} must be {DLEDGER_CONTROLLER}, got {value!r}")


@attrs.define
class ControllerConfig(RemotingServerConfig):
    rocketmqHome: str = "."
    # UPDATE_CONTROLLER_CONFIG writes live changes here; `rocketrio controller -c FILE` (and
    # `rocketrio namesrv -c FILE` for an embedded controller) sets it to FILE so a restart reads
    # them; empty: not persisted (upstream would write ~/controller/controller.properties,
    # which no start reads)
    configStorePath: str = ""
    # keys UPDATE_CONTROLLER_CONFIG must refuse (';'-separated)
    configBlackList: str = "configBlackList;configStorePath"
    controllerType: str = attrs.field(default=DLEDGER_CONTROLLER, validator=_controller_type)
    controllerDLegerGroup: str = ""
    # n0-127.0.0.1:9877;n1-127.0.0.1:9878;n2-127.0.0.1:9879
    controllerDLegerPeers: str = ""
    controllerDLegerSelfId: str = ""
    # empty = upstream's default, ~/DLedgerController (see `store_path`)
    controllerStorePath: str = ""
    mappedFileSize: int = attrs.field(default=1024 * 1024 * 1024, validator=positive)
    scanNotActiveBrokerInterval: int = attrs.field(default=5000, validator=positive)
    scanInactiveMasterInterval: int = attrs.field(default=5000, validator=positive)
    # ours: also bounds how often a request is re-run after its commands lost a race (see
    # replicas_info.ControllerResult.settle)
    electMasterMaxRetryCount: int = attrs.field(default=3, validator=positive)
    enableElectUncleanMaster: bool = False
    notifyBrokerRoleChanged: bool = True
    # requests being answered at once (upstream: the controller executor's queue); one more is
    # answered SYSTEM_BUSY at once (issue 7)
    controllerRequestThreadPoolQueueCapacity: int = attrs.field(default=50_000, validator=positive)
    # standalone ControllerStartup's own remoting port (brokers use the Raft peer address)
    listenPort: int = attrs.field(default=19876, validator=positive)
    logDir: str = "logs"
    # ACL (upstream AuthConfig key names): with authenticationEnabled, electMaster,
    # cleanBrokerMetadata and updateControllerConfig need a request signed by this super user;
    # broker registration, heartbeats and reads stay open (actors/auth/gate.py). The
    # credentials sign the controller's own pushes (NOTIFY_BROKER_ROLE_CHANGED) to brokers.
    authenticationEnabled: bool = False
    initAuthenticationUser: str = attrs.field(default="", validator=init_user_key)
    innerClientAuthenticationCredentials: str = attrs.field(default="", validator=credentials_key)
    # Prometheus (upstream ControllerConfig): GET /metrics on metricsPromExporterHost (empty:
    # the host of this replica's Raft peer address) and its port. Embedded in a NameServer, the
    # NameServer's endpoint serves the controller's metrics too (one set of keys, one port).
    metricsExporterType: MetricsExporterType = MetricsExporterType.DISABLE
    metricsPromExporterHost: str = ""
    metricsPromExporterPort: int = attrs.field(
        default=DEFAULT_PROM_EXPORTER_PORT, validator=positive
    )

    def __attrs_post_init__(self) -> None:
        require_init_user(self, "controller")

    def store_path(self) -> str:
        """controllerStorePath, or upstream's default `~/<controllerType>Controller`."""
        if self.controllerStorePath:
            return self.controllerStorePath
        return os.path.join(os.path.expanduser("~"), f"{self.controllerType}Controller")

    def config_black_list(self) -> frozenset[str]:
        return frozenset(k.strip() for k in self.configBlackList.split(";") if k.strip())

    def peer_map(self) -> dict[str, str]:
        """controllerDLegerPeers as {id: "host:port"}; RaftConfigError names a bad entry."""
        return parse_peers(self.controllerDLegerPeers)

    def self_address(self) -> str:
        """This replica's Raft address (upstream getDLedgerAddress)."""
        return self.to_raft_config().peer_map()[self.controllerDLegerSelfId]

    def to_raft_config(self, **overrides: int) -> RaftConfig:
        """The Raft settings of this replica; RaftConfigError names the key that is wrong."""
        return RaftConfig.from_controller_keys(
            controllerDLegerGroup=self.controllerDLegerGroup,
            controllerDLegerPeers=self.controllerDLegerPeers,
            controllerDLegerSelfId=self.controllerDLegerSelfId,
            **overrides,
        )
