"""Which brokers live in this container, and whether one more may join (pure).

The registry is the container's one table of members, keyed by `BrokerIdentity` (cluster,
brokerName, brokerId: upstream's BrokerIdentity), in the order they were added. It is what an
in-process escape (RIP-32) reads: `peek_master` is the first serving master of the container,
whatever its group (upstream BrokerContainer.peekMasterBroker), and each `Member` carries the
broker's store put entry (`StoreWriter`), its address and whether it serves now (a member that
boots or waits for its restart does not).

`check_add` decides whether a broker config may join, with one clear error per refusal
(`ContainerError`): a broker already there, a master whose id is not 0 or a slave whose id is 0
(upstream's container rule, outside controller mode), a replica count that cannot hold, a port
taken by the container or another member (or used twice by the new broker itself), a store
directory already another member's, and the local-mode proxy (not run inside a container).
"""

from __future__ import annotations

import os

import attrs

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.store.messages import StoreWriter
from rocketrio.actors.observe.metrics_exporter import MetricsExporterType

MASTER_ID = 0


class ContainerError(Exception):
    """A refused add or remove; the message is one line for the operator."""


class UnknownBroker(ContainerError):
    """REMOVE_BROKER of a broker this container does not hold (BROKER_NOT_EXIST)."""


@attrs.frozen(order=True)
class BrokerIdentity:
    cluster: str
    broker_name: str
    broker_id: int

    @classmethod
    def of(cls, config: BrokerConfig) -> BrokerIdentity:
        return cls(config.brokerClusterName, config.brokerName, config.brokerId)

    @classmethod
    def parse(cls, text: str) -> BrokerIdentity:
        """``clusterName:brokerName:brokerId`` (mqadmin removeBroker -b)."""
        parts = text.strip().split(":")
        if len(parts) != 3 or not all(p.strip() for p in parts):
            raise ContainerError(
                f"broker identity {text!r}: expected clusterName:brokerName:brokerId"
            )
        cluster, name, raw_id = (p.strip() for p in parts)
        try:
            broker_id = int(raw_id)
        except ValueError:
            raise ContainerError(
                f"broker identity {text!r}: brokerId {raw_id!r} is not a number"
            ) from None
        if broker_id < 0:
            raise ContainerError(f"broker identity {text!r}: brokerId can't be negative")
        return cls(cluster, name, broker_id)

    @property
    def canonical_name(self) -> str:
        """Upstream's BrokerIdentity.getCanonicalName: cluster_name_id."""
        return f"{self.cluster}_{self.broker_name}_{self.broker_id}"


def ports_of(config: BrokerConfig) -> dict[int, str]:
    """Every port a broker listens on -> the key it comes from."""
    out: dict[int, str] = {config.listenPort: "listenPort"}
    out.setdefault(config.ha_listen_port, "haListenPort")
    if config.metricsExporterType is MetricsExporterType.PROM:
        out.setdefault(config.metricsPromExporterPort, "metricsPromExporterPort")
    return out


def is_master_config(config: BrokerConfig) -> bool:
    return config.brokerId == MASTER_ID and config.brokerRole is not BrokerRole.SLAVE


@attrs.frozen
class Member:
    """One broker of the container: what escape and the status answer need of it."""

    identity: BrokerIdentity
    config_path: str
    config: BrokerConfig
    writer: StoreWriter  # the broker's store put entry (its one writer)
    serving: bool = True  # False while it boots or waits to be restarted after a failure

    @property
    def addr(self) -> str:
        return self.config.broker_addr

    @property
    def is_master(self) -> bool:
        return is_master_config(self.config)


class ContainerRegistry:
    """The members of one container (module docstring)."""

    def __init__(self, container_port: int) -> None:
        self.container_port = container_port
        self._members: dict[BrokerIdentity, Member] = {}

    def members(self) -> list[Member]:
        return list(self._members.values())

    def get(self, identity: BrokerIdentity) -> Member | None:
        return self._members.get(identity)

    def peek_master(self) -> Member | None:
        """The container's first serving master (upstream peekMasterBroker): the in-process
        escape target, whatever its group."""
        return next((m for m in self._members.values() if m.is_master and m.serving), None)

    def config_paths(self) -> list[str]:
        return [m.config_path for m in self._members.values()]

    def check_add(self, config: BrokerConfig, config_path: str) -> BrokerIdentity:
        """The identity ``config`` would join as; ContainerError naming what is wrong."""
        identity = BrokerIdentity.of(config)
        if (other := self._members.get(identity)) is not None:
            raise ContainerError(
                f"{identity.canonical_name} has already been added to this container "
                f"(from {other.config_path})"
            )
        _check_role(config, identity)
        _check_replicas(config)
        if config.enableProxy:
            raise ContainerError(
                f"{config_path}: enableProxy (local-mode proxy) is not run inside a container; "
                "run `rocketrio proxy` (cluster mode) instead"
            )
        self._check_ports(config, identity)
        self._check_store(config, identity)
        return identity

    def _check_ports(self, config: BrokerConfig, identity: BrokerIdentity) -> None:
        mine: dict[int, str] = {}
        for key, port in (
            ("listenPort", config.listenPort),
            ("haListenPort", config.ha_listen_port),
        ):
            if port in mine:
                raise ContainerError(
                    f"{identity.canonical_name}: {key} {port} is also its {mine[port]}"
                )
            mine[port] = key
        mine.update({p: k for p, k in ports_of(config).items() if p not in mine})
        for port, key in mine.items():
            if port == self.container_port:
                raise ContainerError(
                    f"{identity.canonical_name}: {key} {port} is the container's listenPort"
                )
            for m in self._members.values():
                taken = ports_of(m.config).get(port)
                if taken is not None:
                    raise ContainerError(
                        f"{identity.canonical_name}: {key} {port} is already "
                        f"{m.identity.canonical_name}'s {taken}"
                    )

    def _check_store(self, config: BrokerConfig, identity: BrokerIdentity) -> None:
        root = os.path.normpath(os.path.abspath(config.storePathRootDir))
        for m in self._members.values():
            if os.path.normpath(os.path.abspath(m.config.storePathRootDir)) == root:
                raise ContainerError(
                    f"{identity.canonical_name}: storePathRootDir {config.storePathRootDir} is "
                    f"already {m.identity.canonical_name}'s store"
                )

    def add(self, member: Member) -> None:
        """Add (after `check_add`) or replace a restarted member's entry (a new writer)."""
        self._members[member.identity] = member

    def remove(self, identity: BrokerIdentity) -> Member:
        member = self._members.pop(identity, None)
        if member is None:
            raise UnknownBroker(f"broker {identity.canonical_name} is not in this container")
        return member


def _check_role(config: BrokerConfig, identity: BrokerIdentity) -> None:
    """Upstream's container rule outside controller mode: a master has id 0, a slave id > 0."""
    if config.enableControllerMode:
        return  # the controller assigns roles (and ids may be persisted BrokerIds)
    name = identity.canonical_name
    if config.brokerRole is BrokerRole.SLAVE and config.brokerId == MASTER_ID:
        raise ContainerError(f"{name}: slave broker id must be > 0")
    if config.brokerRole is not BrokerRole.SLAVE and config.brokerId != MASTER_ID:
        raise ContainerError(
            f"{name}: brokerRole={config.brokerRole.name} needs brokerId=0 "
            f"(got {config.brokerId}); a broker with another id must be SLAVE"
        )


def _check_replicas(config: BrokerConfig) -> None:
    total = getattr(config, "totalReplicas", None)
    in_sync, min_in_sync = config.inSyncReplicas, config.minInSyncReplicas
    if in_sync < min_in_sync or (total is not None and total < in_sync):
        raise ContainerError(
            f"{config.brokerName}: invalid replicas number (totalReplicas {total}, "
            f"inSyncReplicas {in_sync}, minInSyncReplicas {min_in_sync})"
        )
