"""The console's pure parts: the websocket protocol (typed, versioned, refusals with reasons),
the view (what changed, TPS, replication lag in bytes and time, never-negative consumer lag,
the events a failover produces), the hub's bounded per-viewer backlog, the token comparison and
the typed action arguments, and the Origin rule."""

from __future__ import annotations

from collections import deque

import orjson
import pytest

from rocketrio.actors.console.actions import ActionRefused, parse_args, token_matches
from rocketrio.actors.console.hub import FEED, Hub
from rocketrio.actors.console.model import (
    BrokerSetStatus,
    ControllerStatus,
    NamesrvStatus,
    Poll,
    ReplicaStatus,
    queue_lag,
)
from rocketrio.actors.console.protocol import (
    SECTIONS,
    FeedItem,
    Hello,
    ProtocolError,
    Sample,
    decode_client,
)
from rocketrio.actors.console.server import origin_allowed
from rocketrio.actors.console.view import ConsoleView, lag_ms


def action(**over: object) -> str:
    msg = {"v": 1, "type": "action", "id": "1", "action": "updateTopic", "args": {}, "token": "t"}
    msg.update(over)
    return orjson.dumps(msg).decode()


def test_client_messages_are_typed_and_versioned() -> None:
    ok = decode_client(action(args={"topic": "T", "cluster": "C"}))
    assert ok.action == "updateTopic" and ok.args == {"topic": "T", "cluster": "C"}
    bad = [
        ("not json", "not JSON"),
        ("[1]", "a JSON object"),
        (action(v=2), "unsupported protocol version 2"),
        (action(v=None), "unsupported protocol version None"),
        (action(type="hello"), "unknown message type 'hello'"),
        (action(action="dropAll"), "unknown action 'dropAll'"),
        (action(extra=1), "extra"),
        (action(args=[1]), "args"),
        (action(id="x" * 65), "at most 64"),
    ]
    for text, why in bad:
        with pytest.raises(ProtocolError, match=why):
            decode_client(text)


def test_action_arguments_are_typed_and_checked() -> None:
    a = parse_args("updateTopic", {"topic": "Orders", "cluster": "C", "readQueueNums": 4})
    assert (a.topic, a.readQueueNums, a.writeQueueNums, a.perm) == ("Orders", 4, 8, 6)
    for action, args, why in [
        ("updateTopic", {"topic": "bad topic!", "cluster": "C"}, "illegal characters"),
        ("updateTopic", {"topic": "T", "cluster": "C", "readQueueNums": 0}, "1..1024"),
        ("updateTopic", {"topic": "T", "cluster": "C", "perm": 7}, "perm must be"),
        ("updateTopic", {"topic": "T"}, "cluster"),
        ("updateTopic", {"topic": "T", "cluster": "C", "bogus": 1}, "bogus"),
        ("resetOffset", {"group": "G", "topic": "T", "timestamp": "yesterday"}, "timestamp"),
        ("electMaster", {"cluster": "C", "brokerName": "b"}, "brokerId"),
        ("nope", {}, "unknown action"),
    ]:
        with pytest.raises(ActionRefused, match=why):
            parse_args(action, args)


def test_tokens_are_compared_whole_and_never_match_without_one() -> None:
    secret = "0123456789abcdef-secret"
    assert token_matches(secret, secret)
    assert not token_matches(secret, secret[:-1])
    assert not token_matches(secret, secret + "x")
    assert not token_matches(secret, "")
    assert not token_matches(None, "")
    assert not token_matches(None, secret)


def test_origin_rule() -> None:
    none: frozenset[str] = frozenset()
    assert origin_allowed(None, "127.0.0.1:8080", none)  # not a browser page
    assert origin_allowed("http://127.0.0.1:8080", "127.0.0.1:8080", none)
    assert origin_allowed("http://LOCALHOST:8080", "localhost:8080", none)
    assert not origin_allowed("http://evil.example", "127.0.0.1:8080", none)
    assert not origin_allowed("http://127.0.0.1:8081", "127.0.0.1:8080", none)
    assert not origin_allowed("null", "127.0.0.1:8080", none)
    assert not origin_allowed("file://", "127.0.0.1:8080", none)
    assert origin_allowed(
        "https://ops.example", "127.0.0.1:8080", frozenset({"https://ops.example"})
    )


def test_queue_lag_is_never_negative_or_minus_one() -> None:
    assert queue_lag(100, 40) == 60
    assert queue_lag(100, -1) == 100  # nothing committed yet: everything is behind
    assert queue_lag(100, 120) == 0  # a committed offset past the end (after a truncation)
    assert queue_lag(0, -1) == 0


def test_replication_lag_time_is_since_the_master_first_had_the_missing_bytes() -> None:
    hist = deque([(1000, 100), (1500, 200), (2000, 300), (2500, 300)])
    assert lag_ms(hist, 300, 2500) == 0
    assert lag_ms(hist, 200, 2500) == 500  # byte 200.. appeared at t=2000
    assert lag_ms(hist, 150, 2500) == 1000
    assert lag_ms(hist, 0, 2500) == 1500  # older than the history: its first sample
    assert lag_ms(deque(), 0, 2500) == 0


def replica(bid: int, addr: str, **kw: object) -> ReplicaStatus:
    base: dict[str, object] = {"ok": True, "role": "SLAVE", "inSync": True, "masterEpoch": 1}
    base.update(kw)
    return ReplicaStatus(brokerId=bid, addr=addr, **base)  # type: ignore[arg-type]


def bset(master: int | None, epoch: int, sss: list[int], *reps: ReplicaStatus) -> BrokerSetStatus:
    return BrokerSetStatus(
        cluster="C",
        brokerName="broker-a",
        masterId=master,
        masterAddr="" if master is None else f"h{master}:1",
        masterEpoch=epoch,
        syncStateSet=sss,
        syncStateSetEpoch=epoch,
        controllerMode=True,
        replicas=list(reps),
    )


def poll(t: int, *sets: BrokerSetStatus, leader: str = "n0") -> Poll:
    return Poll(
        t=t,
        namesrvs=[NamesrvStatus(addr="ns:1", ok=True, clusters=1, brokers=2)],
        controllers=[
            ControllerStatus(addr="c:1", ok=True, selfId="n0", role="leader", leaderAddr="c:1")
            if leader == "n0"
            else ControllerStatus(addr="c:1", ok=True, selfId="n0", role="follower")
        ],
        brokerSets=list(sets),
    )


def test_view_rates_lags_and_only_changed_sections() -> None:
    view = ConsoleView()
    first = view.update(
        poll(
            0,
            bset(
                1,
                1,
                [1, 2],
                replica(1, "h1:1", role="SYNC_MASTER", maxOffset=1000, putTotal=10),
                replica(2, "h2:1", maxOffset=1000),
            ),
        )
    )
    assert set(first.sections) == {"namesrvs", "controllers", "brokerSets"}
    assert first.feed_items == []
    second = view.update(
        poll(
            500,
            bset(
                1,
                1,
                [1, 2],
                replica(1, "h1:1", role="SYNC_MASTER", maxOffset=5000, putTotal=110),
                replica(2, "h2:1", maxOffset=3000),
            ),
        )
    )
    assert set(second.sections) == {"brokerSets"}  # the rest did not change
    m, s = second.sections["brokerSets"][0]["replicas"]
    assert m["putTps"] == 200.0 and m["lagBytes"] == 0
    assert s["lagBytes"] == 2000 and s["lagMs"] == 0  # the master had byte 3000 only now
    assert second.sample.putTps == 200.0 and second.sample.replicationLagBytes == 2000
    # a counter that restarts (broker restart, midnight) gives 0, not a negative rate
    third = view.update(
        poll(
            1000,
            bset(
                1,
                1,
                [1, 2],
                replica(1, "h1:1", role="SYNC_MASTER", maxOffset=5000, putTotal=3),
                replica(2, "h2:1", maxOffset=3000),
            ),
        )
    )
    m, s = third.sections["brokerSets"][0]["replicas"]
    assert m["putTps"] == 0.0 and s["lagMs"] == 500
    assert view.snapshot().keys() <= set(SECTIONS)


def test_a_failover_and_a_truncation_become_feed_items() -> None:
    view = ConsoleView()
    view.update(
        poll(
            0,
            bset(
                1,
                1,
                [1, 2],
                replica(1, "h1:1", role="SYNC_MASTER", maxOffset=900),
                replica(2, "h2:1", maxOffset=800),
            ),
        )
    )
    failover = view.update(
        poll(
            500,
            bset(
                2,
                2,
                [2],
                replica(1, "h1:1", ok=False, alive=False, error="refused"),
                replica(2, "h2:1", role="SYNC_MASTER", maxOffset=800, masterEpoch=2),
            ),
        )
    )
    kinds = [(e.kind, e.epoch) for e in failover.feed_items]
    assert ("election", 2) in kinds
    assert ("syncStateSetChange", 2) in kinds
    assert ("brokerDown", 0) in kinds
    assert ("roleChange", 2) in kinds  # brokerId 2 now SYNC_MASTER
    election = next(e for e in failover.feed_items if e.kind == "election")
    assert "masterEpoch 2: brokerId 2 at h2:1" in election.text
    back = view.update(
        poll(
            1000,
            bset(
                2,
                2,
                [2],
                replica(1, "h1:1", maxOffset=800, masterEpoch=2),
                replica(2, "h2:1", role="SYNC_MASTER", maxOffset=800, masterEpoch=2),
            ),
        )
    )
    assert [e.kind for e in back.feed_items] == ["brokerUp"]
    # the returning replica had 900 before it went down and now 800: seen as it answers
    # again only if it was seen in between; a replica seen shrinking while up is a truncation
    cut = view.update(
        poll(
            1500,
            bset(
                2,
                2,
                [2],
                replica(1, "h1:1", maxOffset=700, masterEpoch=2),
                replica(2, "h2:1", role="SYNC_MASTER", maxOffset=800, masterEpoch=2),
            ),
        )
    )
    assert [(e.kind, e.text) for e in cut.feed_items] == [
        ("truncation", "broker-a: brokerId 1 cut its CommitLog from 800 to 700")
    ]
    lead = view.update(poll(2000, *[], leader="none"))
    assert lead.feed_items == []
    again = view.update(poll(2500, leader="n0"))
    assert [e.kind for e in again.feed_items] == ["controllerLeader"]


def test_a_slow_viewer_keeps_only_the_newest_of_each_section() -> None:
    hub = Hub(Hello(actions=False, intervalMs=500, historySeconds=300), max_viewers=2)
    v = hub.join("p1")
    assert v is not None
    for i in range(1000):  # many polls while the viewer reads nothing
        for name in SECTIONS:
            hub.publish_section(name, {"i": i, "pad": "x" * 100})
        hub.publish_point(Sample(t=i, putTps=0, getTps=0, consumerLag=0, replicationLagBytes=0))
        hub.publish_feed_items([FeedItem(t=i, kind="election", text=str(i))])
    assert len(v.sections) == len(SECTIONS)
    assert len(v.feed) == FEED and v.dropped == 1000 - FEED
    assert v.backlog() <= 1 + len(SECTIONS) + 2 + 16
    texts = v.take()
    sections = [orjson.loads(t) for t in texts if '"type":"section"' in t]
    assert {s["data"]["i"] for s in sections} == {999}  # stale versions were dropped
    feed = next(orjson.loads(t) for t in texts if '"type":"feed"' in t)
    assert feed["dropped"] == 1000 - FEED and feed["items"][-1]["text"] == "999"
    assert v.backlog() == 0 and v.take() == []
    # a newcomer gets hello + every section at once; the cap refuses a third viewer
    w = hub.join("p2")
    assert w is not None and orjson.loads(w.take()[0])["type"] == "hello"
    assert hub.join("p3") is None
    hub.leave(w)
    assert hub.join("p3") is not None
