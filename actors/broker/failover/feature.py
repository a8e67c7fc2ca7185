"""One broker's RIP-32 wiring (slave acting master): its pre-online service, where an acting
slave's re-puts go (the escape path, chosen once the broker has its client), its own entry for
the in-process escape of a container's other brokers, and the strict lock quorum wrapped around
LOCK_BATCH_MQ, and the POP records of an acting slave (pop_escape: pinned to one master of
another group) with the read-back a pinned master's revive needs.

The policies live beside it (acting_core, escape, pre_online, lock_quorum); this class only
builds them from the broker's collaborators and picks the escape path:
- in a container: the container's masters of other groups first (`use_local_escape`), then a
  remote master when ``enableRemoteEscape``;
- otherwise a remote master when ``enableRemoteEscape``, else none (the special services then
  keep what falls due until a master takes it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.failover.escape import (
    LocalEscape,
    LocalTarget,
    RemoteEscape,
    TopicLookup,
)
from rocketrio.actors.broker.failover.lock_quorum import LocalLocks, QuorumLocker
from rocketrio.actors.broker.failover.pop_escape import (
    Call,
    ForeignReader,
    PinnedOnly,
    PopEscaper,
)
from rocketrio.actors.broker.failover.pre_online import HALinks, PreOnlineService
from rocketrio.actors.broker.store.escape_bridge import (
    EscapeBridge,
    ForeignRead,
    PopRecordEscape,
)
from rocketrio.actors.broker.store.messages import StoreWriter
from rocketrio.actors.broker.tables.consumer_offset import ConsumerOffsetManager
from rocketrio.actors.broker.tables.delay_offset import DelayOffsetTable
from rocketrio.actors.kernel.remoting import RemotingClient


class FailoverFeature:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        offsets: ConsumerOffsetManager,
        delay: DelayOffsetTable,
        max_offset: Callable[[], Awaitable[int]],
        ha_links: HALinks,
        addr: Callable[[], str],
        topics: TopicLookup,
        writer: StoreWriter,
        acting: Callable[[], bool],
        log: Any = None,
    ) -> None:
        self.config = config
        self.log = log
        self.pop_escape: PopEscaper | None = None  # POP records of an acting slave
        self.pre_online = PreOnlineService(
            config,
            offsets=offsets,
            delay=delay,
            max_offset=max_offset,
            ha_links=ha_links,
            addr=addr,
        )
        self.escape_target = LocalTarget(config.brokerName, topics, writer)
        self.bridge: EscapeBridge | None = None
        self._acting = acting
        self._local_masters: Callable[[], list[LocalTarget]] | None = None
        self._client: RemotingClient | None = None

    def use_local_escape(self, masters: Callable[[], list[LocalTarget]]) -> None:
        """In a container: escape to its masters of other groups first."""
        self._local_masters = masters

    def escape_if_acting(self) -> EscapeBridge | None:
        """The escape path while this slave acts as master; None otherwise."""
        return self.bridge if self._acting() else None

    def pop_escape_if_acting(self) -> PopRecordEscape | None:
        """Where this slave's POP records go while it acts as master; after, while it still
        holds pins, the ACKs of what it popped (pop_escape.PinnedOnly); None otherwise."""
        escaper = self.pop_escape
        if escaper is None:
            return None
        if self._acting():
            return escaper
        return PinnedOnly(escaper) if len(escaper.pins) else None

    def connect(self, client: RemotingClient) -> None:
        """The broker has its client: choose the escape path (module docstring)."""
        self._client = client
        c = self.config
        remote = RemoteEscape(c, client) if c.enableRemoteEscape else None
        if self._local_masters is not None:
            self.bridge = LocalEscape(c.brokerName, self._local_masters, remote)
        elif self.bridge is None:
            self.bridge = remote
        if c.enableSlaveActingMaster and (remote is not None or self._local_masters is not None):
            log = None if self.log is None else self.log.bind(actor="pop_escape")
            self.pop_escape = PopEscaper(
                c.brokerName, local=self._local_masters, remote=remote, log=log
            )

    def foreign_reader(self, call: Call) -> ForeignRead | None:
        """How this broker's revive reads the messages of a CK another group's acting slave
        escaped here (with enableSlaveActingMaster: the cluster uses RIP-32)."""
        if not self.config.enableSlaveActingMaster:
            return None
        return ForeignReader(self.config.brokerClusterName, call).read

    async def run_pop_escape(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The background writer of an acting slave's ACK records (failover/pop_escape.py)."""
        if self.pop_escape is None:
            task_status.started()
            await trio.sleep_forever()
        await self.pop_escape.run(task_status=task_status)

    def lock_wrapper(
        self, locks: LocalLocks, members: Callable[[], dict[int, str]]
    ) -> Callable[[Handlers], Handlers]:
        """The dispatch wrapper of LOCK_BATCH_MQ under ``lockInStrictMode``."""
        locker = QuorumLocker(self.config, locks, members=members, client=lambda: self._client)
        return locker.wrap
