"""Consumer-group configs (upstream SubscriptionGroupManager): subscriptionGroup.json content.

A group config says whether the group may consume, how many retry queues it gets and how many
times a message is retried before it goes to the DLQ. With autoCreateSubscriptionGroup (the
default) an unknown group gets a default config on first use (heartbeat, pull, send-back),
like upstream's findSubscriptionGroupConfig. Mutations return True when the table changed so
the broker can persist it; no I/O here.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketrio.protocol.bodies import DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper

# Groups upstream pre-creates for its own tools (MixAll.TOOLS_CONSUMER_GROUP and friends).
SYSTEM_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_RMQ_SYS_TRANS")


class SubscriptionGroupManager:
    def __init__(self, auto_create: bool, now_ms: Callable[[], int]) -> None:
        self.auto_create = auto_create
        self.now_ms = now_ms
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()

    def load(self, wrapper: SubscriptionGroupWrapper) -> None:
        self.table = dict(wrapper.subscriptionGroupTable)
        self.data_version = wrapper.dataVersion
        for name in SYSTEM_GROUPS:
            self.table.setdefault(name, SubscriptionGroupConfig(name, consumeBroadcastEnable=True))

    def snapshot(self) -> SubscriptionGroupWrapper:
        v = self.data_version
        return SubscriptionGroupWrapper(
            subscriptionGroupTable=dict(self.table),
            dataVersion=DataVersion(v.stateVersion, v.timestamp, v.counter),
        )

    def _bump(self) -> None:
        self.data_version = self.data_version.next_version(self.now_ms())

    def find(self, group: str) -> tuple[SubscriptionGroupConfig | None, bool]:
        """(config, created): auto-creates a default config when allowed."""
        sgc = self.table.get(group)
        if sgc is not None:
            return sgc, False
        if not self.auto_create:
            return None, False
        sgc = SubscriptionGroupConfig(group)
        self.table[group] = sgc
        self._bump()
        return sgc, True

    def update(self, sgc: SubscriptionGroupConfig) -> bool:
        if self.table.get(sgc.groupName) == sgc:
            return False
        self.table[sgc.groupName] = sgc
        self._bump()
        return True

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        self._bump()
        return True
