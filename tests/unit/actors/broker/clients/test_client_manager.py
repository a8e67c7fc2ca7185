"""Consumer membership and subscriptions (actors/broker/clients/client_manager.py)."""

from __future__ import annotations

from rocketrio.actors.broker.clients.client_manager import ClientChannelInfo, ConsumerManager
from rocketrio.protocol.bodies import SubscriptionData


def test_consumer_membership() -> None:
    mgr = ConsumerManager()
    subs = [SubscriptionData("T", "a")]

    def member(conn: str, client: str, now: float) -> ClientChannelInfo:
        return ClientChannelInfo(conn, client, "JAVA", 1, now)

    assert mgr.register("G", member("c1", "id1", 0), "PUSH", "CLUSTERING", "LAST", subs)
    assert not mgr.register("G", member("c1", "id1", 50), "PUSH", "CLUSTERING", "LAST", subs)
    assert mgr.register("G", member("c2", "id2", 60), "PUSH", "CLUSTERING", "LAST", subs)
    assert mgr.get("G").client_ids() == ["id1", "id2"]  # type: ignore[union-attr]
    assert mgr.connection_closed("c2") == ["G"]
    assert mgr.scan_expired(now_s=169) == []  # id1's last heartbeat was at 50
    gone = mgr.scan_expired(now_s=171)
    assert [(g, m.client_id) for g, m in gone] == [("G", "id1")]
    assert mgr.get("G") is None


def test_subscriptions_follow_the_latest_heartbeat() -> None:
    mgr = ConsumerManager()
    info = ClientChannelInfo("c", "id", "JAVA", 1, 0)
    mgr.register(
        "G", info, "PUSH", "CLUSTERING", "LAST", [SubscriptionData("T", "a", subVersion=5)]
    )
    mgr.register("G", info, "PUSH", "CLUSTERING", "LAST", [SubscriptionData("U", "*")])
    group = mgr.get("G")
    assert group is not None and list(group.subscriptions) == ["U"]
