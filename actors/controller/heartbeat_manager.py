"""Broker liveness inside the controller: a pure table keyed by (cluster, brokerName, brokerId).

Fed by BROKER_HEARTBEAT (direct when the controller is standalone, forwarded by the NameServer
when embedded) and by channel closes; asked by the election code (`is_alive`, `live_info`).
Time comes in as `now_ms` on every call; nothing here reads a clock.

Rules (upstream DefaultBrokerHeartbeatManager, with the fixes noted):
- A broker is alive while `last_update_ms + heartbeat_timeout_ms >= now_ms`; the timeout is the
  one the broker sends (`heartbeatTimeoutMills`), else 10 s (DEFAULT_BROKER_CHANNEL_EXPIRED_TIME,
  the broker's controllerHeartBeatTimeoutMills default).
- `scan_not_active` removes the expired entries and returns them, so each death is reported
  exactly once (upstream #9717 was a scan that never ran; the actor calls this every
  scanNotActiveBrokerInterval and tests pin the behaviour).
- `on_channel_closed(address)` is immediate death, like upstream's onBrokerChannelClose, but only
  for entries still at that address: a broker that restarted elsewhere and heartbeats from its new
  address is not killed by the close of its old connection.
- `electable` (rocketrio's ``notElectable`` heartbeat and registration field): False while the
  broker's catch-up fence holds (docs/hardening.md). A heartbeat without the field (a
  NameServer-path heartbeat in embedded mode, an upstream broker) keeps what the entry said.
- epoch / maxOffset / confirmOffset are replaced by every heartbeat. Upstream keeps the old values
  unless (epoch, maxOffset) grows, so a broker that came back with a shorter log (unflushed tail
  lost, or truncated on handshake) would still look most advanced to the election.
- A table means something only after it has listened for one timeout: a new leader, or a
  replica that just started, has heard nobody yet. `reset(now_ms)` (call it when the replica
  starts and when it becomes leader) clears the table and opens a grace window; until
  `liveness_settled(now_ms)` the leader must not depose masters for silence (#8380-style wrong
  elections after a controller switch). The window is one *broker* heartbeat timeout, not a
  fixed 10 s (issue 26): the longest `heartbeatTimeoutMills` this replica has heard from any
  broker (remembered across resets; one heard during the window lengthens it), the default
  only while it has heard none. Brokers of one cluster share controllerHeartBeatTimeoutMills;
  a broker this replica never heard that uses a longer timeout than every broker it heard is
  judged by the shorter one (docs/failover.md).
- `verdict` is this replica's answer when the leader asks a peer to confirm a master's death
  (upstream #4800, see failover.py): ALIVE while alive; DEAD when expired, or absent (never
  heard, or removed when its connection closed) from a settled table; UNKNOWN when absent while
  the table is still in its grace window (a replica that just started cannot tell).
- `on_address_heartbeat`: a NameServer heartbeat that names no controller identity (a master
  heartbeats its NameServers as brokerId 0) still proves the process at that address lives, so
  it refreshes the one entry of that broker set at that address (none, or an ambiguous two: no
  change). An embedded replica thus uses both paths it has: its own port and its NameServer's.
"""

from __future__ import annotations

from typing import Final

import attrs

from rocketrio.protocol.controller_headers import BrokerAliveVerdict

DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS: Final = 10_000
# upstream brokerElectionPriority default (Integer.MAX_VALUE): lower values are preferred
DEFAULT_ELECTION_PRIORITY: Final = 2**31 - 1


@attrs.frozen(slots=True)
class BrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_id: int


@attrs.frozen(slots=True)
class BrokerLiveInfo:
    """The last heartbeat of one broker. -1 means "not reported"."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    last_update_ms: int
    heartbeat_timeout_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS
    epoch: int = -1
    max_offset: int = -1
    confirm_offset: int = -1
    election_priority: int = DEFAULT_ELECTION_PRIORITY
    # False while the broker says it may not be master (its catch-up fence after a lost page)
    electable: bool = True

    @property
    def identity(self) -> BrokerIdentity:
        return BrokerIdentity(self.cluster_name, self.broker_name, self.broker_id)

    def is_alive(self, now_ms: int) -> bool:
        return self.last_update_ms + self.heartbeat_timeout_ms >= now_ms

    @property
    def dead_from_ms(self) -> int:
        """The first `now_ms` at which `is_alive` is False without a new heartbeat."""
        return self.last_update_ms + self.heartbeat_timeout_ms + 1


class BrokerHeartbeatManager:
    """The liveness table. Not thread-safe by design: one actor owns it."""

    def __init__(self, default_timeout_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS) -> None:
        if default_timeout_ms <= 0:
            raise ValueError(f"default_timeout_ms must be > 0, got {default_timeout_ms}")
        self._default_timeout_ms = default_timeout_ms
        self._table: dict[BrokerIdentity, BrokerLiveInfo] = {}
        self._reset_at_ms: int | None = None
        # the last heartbeat timeout each broker sent (kept across resets): the grace window
        self._timeouts: dict[BrokerIdentity, int] = {}
        # brokers this replica heard and then saw die (closed connection, expired heartbeat),
        # until heard again: "dead" is then a fact, even inside the grace window
        self._seen_dead: set[BrokerIdentity] = set()
        self._last_tick_ms: int | None = None  # the last `tick` (stall detection)

    def tick(self, now_ms: int, period_ms: int) -> int:
        """Called by every scan (at least every ``period_ms``). When this replica itself did not
        run for longer than a period (its process stopped, starved, or paused by a GC-like
        stall), the heartbeats sent meanwhile may still sit unread in its sockets: the silence
        it saw is its own, not the brokers'. Every entry's silence is then shortened by the
        stall (its ``last_update_ms`` moves forward by it, never past now), so a short timeout
        (deploy/controller: 1 s) deposes no master for a pause of the controller. Returns the
        stall in ms (0: none)."""
        last, self._last_tick_ms = self._last_tick_ms, now_ms
        stall = 0 if last is None else now_ms - last - period_ms
        if stall <= period_ms:  # late by less than a period: ordinary scheduling jitter
            return 0
        for key, info in self._table.items():
            moved = min(info.last_update_ms + stall, now_ms)  # never past now
            self._table[key] = attrs.evolve(info, last_update_ms=max(moved, info.last_update_ms))
        return stall

    def reset(self, now_ms: int) -> None:
        """Forget who is alive and listen for one broker heartbeat timeout (`grace_ms`)
        before judging silence."""
        self._table.clear()
        self._seen_dead.clear()
        self._reset_at_ms = now_ms

    def grace_ms(self) -> int:
        """How long a reset table listens: the longest heartbeat timeout heard from a broker,
        the default while none was heard."""
        return max(self._timeouts.values(), default=self._default_timeout_ms)

    def liveness_settled(self, now_ms: int) -> bool:
        """False during the grace window after `reset`: silence does not yet mean death."""
        return self._reset_at_ms is None or now_ms >= self._reset_at_ms + self.grace_ms()

    def on_heartbeat(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        now_ms: int,
        *,
        timeout_ms: int | None = None,
        epoch: int | None = None,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        election_priority: int | None = None,
        not_electable: bool | None = None,
    ) -> bool:
        """Record a heartbeat; True when the broker was unknown or had expired (came alive).
        ``not_electable`` None: the heartbeat does not say (keep what the entry said, else
        electable)."""
        key = BrokerIdentity(cluster_name, broker_name, broker_id)
        prev = self._table.get(key)
        self._seen_dead.discard(key)
        timeout = (
            timeout_ms if timeout_ms is not None and timeout_ms > 0 else self._default_timeout_ms
        )
        self._timeouts[key] = timeout
        self._table[key] = BrokerLiveInfo(
            cluster_name=cluster_name,
            broker_name=broker_name,
            broker_id=broker_id,
            broker_addr=broker_addr,
            last_update_ms=now_ms,
            heartbeat_timeout_ms=timeout,
            epoch=-1 if epoch is None else epoch,
            max_offset=-1 if max_offset is None else max_offset,
            confirm_offset=-1 if confirm_offset is None else confirm_offset,
            election_priority=(
                DEFAULT_ELECTION_PRIORITY if election_priority is None else election_priority
            ),
            electable=(prev is None or prev.electable)
            if not_electable is None
            else not not_electable,
        )
        return prev is None or not prev.is_alive(now_ms)

    def on_address_heartbeat(
        self, cluster_name: str, broker_name: str, broker_addr: str, now_ms: int
    ) -> bool:
        """A heartbeat without a controller identity from `broker_addr`: refresh the single
        entry of (cluster, brokerName) at that address. True if one was refreshed."""
        found = [
            info
            for info in self._table.values()
            if info.broker_addr == broker_addr
            and info.broker_name == broker_name
            and info.cluster_name == cluster_name
        ]
        if len(found) != 1:
            return False
        info = found[0]
        self._table[info.identity] = attrs.evolve(info, last_update_ms=now_ms)
        return True

    def on_channel_closed(self, broker_addr: str) -> list[BrokerLiveInfo]:
        """The connection from `broker_addr` closed: those brokers are dead now (returned)."""
        dead = [info for info in self._table.values() if info.broker_addr == broker_addr]
        for info in dead:
            del self._table[info.identity]
            self._seen_dead.add(info.identity)
        return dead

    def scan_not_active(self, now_ms: int) -> list[BrokerLiveInfo]:
        """Remove and return the brokers whose heartbeat expired (each reported once)."""
        dead = [info for info in self._table.values() if not info.is_alive(now_ms)]
        for info in dead:
            del self._table[info.identity]
            self._seen_dead.add(info.identity)
        return dead

    def is_alive(self, cluster_name: str, broker_name: str, broker_id: int, now_ms: int) -> bool:
        info = self._table.get(BrokerIdentity(cluster_name, broker_name, broker_id))
        return info is not None and info.is_alive(now_ms)

    def verdict(
        self, cluster_name: str, broker_name: str, broker_id: int, now_ms: int
    ) -> BrokerAliveVerdict:
        """What this replica can say about one broker (the answer to a peer's death check)."""
        info = self._table.get(BrokerIdentity(cluster_name, broker_name, broker_id))
        if info is not None:
            return BrokerAliveVerdict.ALIVE if info.is_alive(now_ms) else BrokerAliveVerdict.DEAD
        if BrokerIdentity(cluster_name, broker_name, broker_id) in self._seen_dead:
            return BrokerAliveVerdict.DEAD  # heard, then seen to die (not just never heard)
        if self.liveness_settled(now_ms):
            return BrokerAliveVerdict.DEAD  # listened a full timeout and heard nothing
        return BrokerAliveVerdict.UNKNOWN

    def live_info(
        self, cluster_name: str, broker_name: str, broker_id: int
    ) -> BrokerLiveInfo | None:
        """The last heartbeat of that broker (expired or not), None if never heard or removed."""
        return self._table.get(BrokerIdentity(cluster_name, broker_name, broker_id))

    def alive_brokers(self, now_ms: int) -> list[BrokerLiveInfo]:
        """Live entries in a stable order (cluster, brokerName, brokerId), for admin views."""
        alive = [info for info in self._table.values() if info.is_alive(now_ms)]
        alive.sort(key=lambda i: (i.cluster_name, i.broker_name, i.broker_id))
        return alive

    def active_brokers_num(self, now_ms: int) -> dict[str, dict[str, int]]:
        """cluster -> brokerName -> number of live replicas (upstream getActiveBrokersNum)."""
        out: dict[str, dict[str, int]] = {}
        for info in self.alive_brokers(now_ms):
            per_cluster = out.setdefault(info.cluster_name, {})
            per_cluster[info.broker_name] = per_cluster.get(info.broker_name, 0) + 1
        return out
