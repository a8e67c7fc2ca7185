"""Who acts as master in a classic broker group (RIP-32, SPEC A1/A2/N3), pure: no I/O, no clock.

Fed by the two ways a broker learns its group (upstream BrokerController.updateMinBroker /
onMinBrokerChange):

- `on_members`: the live members the NameServer lists (GET_BROKER_MEMBER_GROUP 901, or in
  compatibleWithOldNameSrv mode the route of ``rmq_sys_SYNC_BROKER_MEMBER_<brokerName>``), polled
  every syncBrokerMemberGroupPeriod. A larger minimum than before means the old minimum went
  offline.
- `on_notify`: NOTIFY_MIN_BROKER_ID_CHANGE (905) pushed by a NameServer with
  notifyMinBrokerIdChanged; it names the offline broker itself.

Both return a `MinBrokerChange` (or None when the minimum did not move) that the shell carries
out: start or stop the special services, forget a master that went offline, follow a master
that came back. Rules:

- only a slave with enableSlaveActingMaster acts; a master (id 0) never consults this;
- the broker acts as master exactly while its own id is the smallest live id of its group
  (the NameServer routes the same broker as id 0 with the write bit cleared);
- the minimum is the NameServer's, as upstream: a slave missing from the list (its registration
  expired) does not act, since the route names the next one and two acting slaves would both
  escape the same messages; it still counts itself in `alive_replicas`;
- an empty member list (NameServer unreachable or not yet registered) changes nothing: losing
  contact with the NameServers is not evidence that the master died;
- a returning master in pre-online announces itself (EXCHANGE_BROKER_HA_INFO push):
  `hold_for_master` stops the acting at once, so the offsets the master is about to read stop
  moving and the two never run the special services together; the hold ends when the
  NameServer lists id 0 again, or lapses (`tick`) if the master dies before it got online.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

MASTER_ID = 0


@attrs.frozen
class MinBrokerChange:
    """The group's smallest live id moved (upstream onMinBrokerChange's arguments + outcome)."""

    min_broker_id: int
    min_broker_addr: str | None
    offline_broker_addr: str | None  # the broker that went away, when known
    master_ha_addr: str | None  # the returning master's HA address (905 carries it)
    acting_before: bool
    acting_now: bool

    @property
    def master_online(self) -> bool:
        return self.min_broker_id == MASTER_ID and self.min_broker_addr is not None


class ActingCore:
    """The member-group view of one slave and the acting-master decision (module docstring)."""

    def __init__(self, my_id: int, *, enabled: bool) -> None:
        self.my_id = my_id
        self.enabled = enabled and my_id != MASTER_ID
        self.min_broker_id: int | None = None  # None: never heard of the group yet
        self.min_broker_addr: str | None = None
        self.members: dict[int, str] = {}
        self.alive_replicas = 0  # upstream aliveReplicaNumInGroup
        self.hold_until_s: float | None = None  # a returning master announced itself

    @property
    def acting(self) -> bool:
        """This slave acts as master now."""
        return self.enabled and self.min_broker_id == self.my_id and self.hold_until_s is None

    def hold_for_master(self, until_s: float) -> bool:
        """A returning master announced itself: stop acting until it is listed, or until
        ``until_s``; True when this stopped the acting."""
        before = self.acting
        self.hold_until_s = until_s if self.enabled else None
        return before and not self.acting

    def tick(self, now_s: float) -> bool:
        """The hold lapsed (the master never got online): True when acting resumes."""
        if self.hold_until_s is None or now_s < self.hold_until_s:
            return False
        self.hold_until_s = None
        return self.acting

    def master_listed(self) -> bool:
        """The NameServers list a master (id 0) for the group now."""
        return self.min_broker_id == MASTER_ID

    def master_addr(self) -> str | None:
        """The master's address, while the group has one."""
        return self.min_broker_addr if self.min_broker_id == MASTER_ID else None

    def on_members(self, addrs: Mapping[int, str]) -> MinBrokerChange | None:
        """A member list polled from a NameServer."""
        if not addrs:
            return None
        self.members = dict(addrs)
        self.alive_replicas = len(addrs) + (0 if self.my_id in addrs else 1)
        if not self.enabled:
            return None
        new_min = min(addrs)
        if new_min == self.min_broker_id:
            return None
        offline = None
        if self.min_broker_id is not None and new_min > self.min_broker_id:
            offline = self.min_broker_addr
        return self._move(new_min, addrs.get(new_min), offline, None)

    def on_notify(
        self,
        min_broker_id: int | None,
        min_broker_addr: str | None,
        offline_broker_addr: str | None,
        ha_broker_addr: str | None,
    ) -> MinBrokerChange | None:
        """NOTIFY_MIN_BROKER_ID_CHANGE from a NameServer (every field nullable on the wire)."""
        if not self.enabled or min_broker_id is None or min_broker_id == self.min_broker_id:
            return None
        return self._move(min_broker_id, min_broker_addr, offline_broker_addr, ha_broker_addr)

    def _move(
        self, new_min: int, addr: str | None, offline: str | None, ha_addr: str | None
    ) -> MinBrokerChange:
        before = self.acting
        self.min_broker_id, self.min_broker_addr = new_min, addr
        if new_min == MASTER_ID:
            self.hold_until_s = None
        return MinBrokerChange(new_min, addr, offline, ha_addr, before, self.acting)
