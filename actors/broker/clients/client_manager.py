"""Live producers and consumers (upstream ProducerManager / ConsumerManager), no I/O.

Clients announce themselves with HEART_BEAT. A client is identified by its connection (like
upstream's channel-keyed tables) and carries its clientID. A consumer group remembers its
members, consume type, message model and the subscriptions of the last heartbeat. Members
leave on UNREGISTER_CLIENT, when their connection closes, or when silent for
CHANNEL_EXPIRED_TIMEOUT_S (120 s, upstream ClientHousekeepingService). Every method that
changes a group's member set says so in its return value, so the broker can push
NOTIFY_CONSUMER_IDS_CHANGED to the group's members. Time (``now_s``) is passed in.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import attrs

from rocketrio.protocol.bodies import SubscriptionData

CHANNEL_EXPIRED_TIMEOUT_S = 120.0


@attrs.define(slots=True, eq=False)
class ClientChannelInfo:
    conn: Hashable
    client_id: str
    language: str
    version: int
    last_update_s: float
    addr: str = ""  # the client's remote address, as admin bodies show it


@attrs.define(slots=True, eq=False)
class ConsumerGroupInfo:
    group_name: str
    consume_type: str
    message_model: str
    consume_from_where: str
    channels: dict[Hashable, ClientChannelInfo] = attrs.field(factory=dict)
    subscriptions: dict[str, SubscriptionData] = attrs.field(factory=dict)

    def client_ids(self) -> list[str]:
        """Distinct client ids in join order (one client may hold two connections)."""
        return list(dict.fromkeys(c.client_id for c in self.channels.values()))

    def find_subscription(self, topic: str) -> SubscriptionData | None:
        return self.subscriptions.get(topic)

    def update_subscriptions(self, subs: Iterable[SubscriptionData]) -> bool:
        """Adopt the heartbeat's subscriptions; a newer subVersion wins. True if changed."""
        changed = False
        seen = set()
        for sub in subs:
            seen.add(sub.topic)
            old = self.subscriptions.get(sub.topic)
            if old is None or old.subVersion < sub.subVersion or old.subString != sub.subString:
                self.subscriptions[sub.topic] = sub
                changed = True
        for topic in [t for t in self.subscriptions if t not in seen]:
            del self.subscriptions[topic]
            changed = True
        return changed


class ConsumerManager:
    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        """The member's channel (upstream findChannel), None when it is not online."""
        g = self.groups.get(group)
        if g is None:
            return None
        return next((c for c in g.channels.values() if c.client_id == client_id), None)

    def register(
        self,
        group: str,
        info: ClientChannelInfo,
        consume_type: str,
        message_model: str,
        consume_from_where: str,
        subs: Iterable[SubscriptionData],
    ) -> bool:
        """Heartbeat of one consumer; True when the group's member set changed."""
        g = self.groups.get(group)
        if g is None:
            g = self.groups[group] = ConsumerGroupInfo(
                group, consume_type, message_model, consume_from_where
            )
        g.consume_type, g.message_model = consume_type, message_model
        g.consume_from_where = consume_from_where
        old = g.channels.get(info.conn)
        members_changed = old is None or old.client_id != info.client_id
        if old is None or members_changed:
            g.channels[info.conn] = info
        else:
            old.last_update_s = info.last_update_s
        g.update_subscriptions(subs)
        return members_changed

    def unregister(self, group: str, conn: Hashable) -> bool:
        g = self.groups.get(group)
        if g is None or g.channels.pop(conn, None) is None:
            return False
        if not g.channels:
            del self.groups[group]
        return True

    def connection_closed(self, conn: Hashable) -> list[str]:
        """Drop the connection from every group; returns the groups that lost a member."""
        return [name for name in list(self.groups) if self.unregister(name, conn)]

    def scan_expired(
        self, now_s: float, timeout_s: float = CHANNEL_EXPIRED_TIMEOUT_S
    ) -> list[tuple[str, ClientChannelInfo]]:
        """Remove members silent for longer than timeout_s; returns (group, member) removed."""
        gone: list[tuple[str, ClientChannelInfo]] = []
        for name, g in list(self.groups.items()):
            for conn, info in list(g.channels.items()):
                if now_s - info.last_update_s > timeout_s:
                    del g.channels[conn]
                    gone.append((name, info))
            if not g.channels:
                del self.groups[name]
        return gone


class ProducerManager:
    def __init__(self) -> None:
        self.groups: dict[str, dict[Hashable, ClientChannelInfo]] = {}

    def register(self, group: str, info: ClientChannelInfo) -> None:
        members = self.groups.setdefault(group, {})
        old = members.get(info.conn)
        if old is None or old.client_id != info.client_id:
            members[info.conn] = info
        else:
            old.last_update_s = info.last_update_s

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        """A live producer connection of this client id (upstream findChannel: request-reply
        pushes the reply there), the most recently heard one when it has several."""
        found = [c for m in self.groups.values() for c in m.values() if c.client_id == client_id]
        return max(found, key=lambda c: c.last_update_s) if found else None

    def unregister(self, group: str, conn: Hashable) -> bool:
        members = self.groups.get(group)
        if members is None or members.pop(conn, None) is None:
            return False
        if not members:
            del self.groups[group]
        return True

    def connection_closed(self, conn: Hashable) -> None:
        for name in list(self.groups):
            self.unregister(name, conn)

    def scan_expired(self, now_s: float, timeout_s: float = CHANNEL_EXPIRED_TIMEOUT_S) -> int:
        removed = 0
        for name, members in list(self.groups.items()):
            for conn, info in list(members.items()):
                if now_s - info.last_update_s > timeout_s:
                    del members[conn]
                    removed += 1
            if not members:
                del self.groups[name]
        return removed
