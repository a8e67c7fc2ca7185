"""Consumer-group configs (upstream SubscriptionGroupManager): subscriptionGroup.json content.

A group config says whether the group may consume, how many retry queues it gets and how many
times a message is retried before it goes to the DLQ. With autoCreateSubscriptionGroup (the
default) an unknown group gets a default config on first use (heartbeat, pull, send-back),
like upstream's findSubscriptionGroupConfig. Mutations return True when the table changed so
the broker can persist it; no I/O here.

It also keeps upstream's forbidden table (UPDATE_AND_GET_GROUP_FORBIDDEN, mqadmin
updateAndGetGroupReadForbidden): group -> topic -> forbidden bits, bit PERM_INDEX_READ meaning
"this group may not pull this topic". It travels in subscriptionGroup.json's ``forbiddenTable``
like upstream's. Clearing a group's last bit for one topic drops the group's whole entry, as
upstream's updateForbiddenValue does (with one bit in use, a clear for topic A also clears B).
"""

from __future__ import annotations

from collections.abc import Callable

from rocketrio.protocol.bodies import DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper

PERM_INDEX_READ = 2
"""Upstream PermName.INDEX_PERM_READ: the bit index of "read" in a forbidden value."""

# Groups upstream pre-creates for its own tools (MixAll.TOOLS_CONSUMER_GROUP and friends).
SYSTEM_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_RMQ_SYS_TRANS")


class SubscriptionGroupManager:
    def __init__(self, auto_create: bool, now_ms: Callable[[], int]) -> None:
        self.auto_create = auto_create
        self.now_ms = now_ms
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()
        self.forbidden: dict[str, dict[str, int]] = {}

    def load(self, wrapper: SubscriptionGroupWrapper) -> None:
        self.table = dict(wrapper.subscriptionGroupTable)
        self.data_version = wrapper.dataVersion
        self.forbidden = {g: dict(topics) for g, topics in wrapper.forbiddenTable.items()}
        for name in SYSTEM_GROUPS:
            self.table.setdefault(name, SubscriptionGroupConfig(name, consumeBroadcastEnable=True))

    def snapshot(self) -> SubscriptionGroupWrapper:
        v = self.data_version
        return SubscriptionGroupWrapper(
            subscriptionGroupTable=dict(self.table),
            dataVersion=DataVersion(v.stateVersion, v.timestamp, v.counter),
            forbiddenTable={g: dict(topics) for g, topics in self.forbidden.items()},
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
        """Drop the group's config and its forbidden bits (upstream); True when either existed
        (so a group with only forbidden bits is persisted without them too)."""
        had_bits = self.forbidden.pop(group, None) is not None
        if self.table.pop(group, None) is None and not had_bits:
            return False
        self._bump()
        return True

    # ------------------------------------------------------------------ forbidden bits

    def forbidden_bits(self, group: str, topic: str) -> int:
        """The group's forbidden bits on the topic (0: nothing forbidden; negatives count as 0)."""
        return max(self.forbidden.get(group, {}).get(topic, 0), 0)

    def is_forbidden(self, group: str, topic: str, index: int) -> bool:
        bit = 1 << index
        return self.forbidden_bits(group, topic) & bit == bit

    def update_forbidden(self, group: str, topic: str, index: int, forbid: bool) -> bool:
        """Set (forbid) or clear bit ``index`` of the group's value on the topic; True when the
        table changed. A value that drops to 0 removes the group's whole entry (upstream)."""
        bits = self.forbidden_bits(group, topic)
        bits = bits | (1 << index) if forbid else bits & ~(1 << index)
        if bits <= 0:
            if self.forbidden.pop(group, None) is None:
                return False
        elif self.forbidden.get(group, {}).get(topic) == bits:
            return False
        else:
            self.forbidden.setdefault(group, {})[topic] = bits
        self._bump()
        return True
