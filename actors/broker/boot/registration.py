"""The broker's presence on the NameServers (upstream BrokerController's registration tasks).

Registers at start, every registerNameServerPeriod (a live change of it: at once, then the
new period) and right after a topic, mapping or role change (`request`), with the topic table
masked by brokerPermission (live_config.py `registered_topics`) and the static-topic mappings;
a NameServer the last registration did not reach is retried sooner (outer_api.py
`retry_delay`). BROKER_HEARTBEAT goes out every brokerHeartbeatInterval. A broker whose role is
not known yet (controller mode, before the controller named one) stays off the NameServers.
Unregisters at shutdown.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from rocketrio.actors.auth.config import parse_credentials
from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.boot.live_config import registered_topics
from rocketrio.actors.broker.boot.outer_api import BrokerOuterAPI, retry_delay
from rocketrio.actors.broker.tables.broker_tables import BrokerTables
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.protocol.acl_signature import RequestSigner
from rocketrio.protocol.bodies import with_mapping


class Registration:
    """Registration and heartbeats of one broker (module docstring)."""

    def __init__(
        self, config: BrokerConfig, tables: BrokerTables, role_known: Callable[[], bool]
    ) -> None:
        self.config = config
        self.tables = tables
        self.role_known = role_known
        self.outer_api: BrokerOuterAPI | None = None
        self._now = trio.Event()

    def request(self) -> None:
        """Re-register with the NameServers now (a topic, a mapping or the role changed)."""
        self._now.set()

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        """UPDATE_BROKER_CONFIG: a new registerNameServerPeriod applies now (one registration
        at once, then the new period), not after the period in progress."""
        if "registerNameServerPeriod" in changed:
            self.request()

    async def register_all(self) -> None:
        if self.outer_api is None or not self.config.namesrv_addrs or not self.role_known():
            return
        mappings = self.tables.mappings
        wrapper = with_mapping(
            registered_topics(self.tables.topics.snapshot(), self.config.brokerPermission)
        )
        wrapper.topicQueueMappingInfoMap = mappings.mapping_infos()
        wrapper.mappingDataVersion = mappings.data_version
        await self.outer_api.register_all(wrapper)

    async def run(
        self,
        client: RemotingClient,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Register once, then keep registering and heartbeating until cancelled."""
        self.outer_api = BrokerOuterAPI(self.config, client)
        await self.register_all()
        async with trio.open_nursery() as n:
            n.start_soon(self._register_loop)
            n.start_soon(self._heartbeat_loop)
            task_status.started()

    async def _register_loop(self) -> None:
        if not self.config.namesrv_addrs:
            return
        assert self.outer_api is not None
        retry_s: float | None = None  # the last short wait while a NameServer is missing
        while True:
            # read at each period: UPDATE_BROKER_CONFIG may change it
            period_s = self.config.registerNameServerPeriod / 1000
            if not self.outer_api.all_registered():
                retry_s = retry_delay(period_s, retry_s)
            else:
                retry_s = None
            with trio.move_on_after(period_s if retry_s is None else retry_s):
                await self._now.wait()
            # a change during the registration below sets the new event: re-register
            self._now = trio.Event()
            await self.register_all()

    async def _heartbeat_loop(self) -> None:
        if not self.config.namesrv_addrs:
            return
        assert self.outer_api is not None
        period_s = self.config.brokerHeartbeatInterval / 1000
        while True:
            await trio.sleep(period_s)
            if self.role_known():
                await self.outer_api.heartbeat_all(self.tables.topics.snapshot().dataVersion)

    async def unregister(self) -> None:
        if self.outer_api is not None and self.config.namesrv_addrs and self.role_known():
            await self.outer_api.unregister_all()


def broker_client(io: BrokerIO) -> RemotingClient:
    """The broker's own calls (NameServers, controllers, other brokers), signed with
    innerClientAuthenticationCredentials when set."""
    creds = parse_credentials(io.config.innerClientAuthenticationCredentials)
    signer = None if creds is None else RequestSigner(creds)
    return RemotingClient(io.transport, request_hook=signer)
