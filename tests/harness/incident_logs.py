"""Hand-written cluster logs for the analysis tests: JSON lines as observe/logs.py writes them."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

T0 = 1_795_000_000_000  # 2026-11-18T...Z, a round ms


def iso(ms: int) -> str:
    t = datetime.fromtimestamp(ms / 1000, UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


class Logs:
    """Lines per node file; ``skew_ms`` per node shifts what that host's clock wrote."""

    def __init__(self, skew_ms: dict[str, int] | None = None) -> None:
        self.files: dict[str, list[str]] = {}
        self.skew = skew_ms or {}

    def add(self, node: str, role: str, at: int, event: str, **fields: Any) -> None:
        line = {
            "ts": iso(T0 + at + self.skew.get(node, 0)),
            "level": "info",
            "node": node,
            "role": role,
            "actor": "test",
            "event": event,
            **fields,
        }
        self.files.setdefault(node, []).append(json.dumps(line))

    def raw(self, node: str, text: str) -> None:
        self.files.setdefault(node, []).append(text)

    def write(self, d: str) -> str:
        for node, lines in self.files.items():
            host = os.path.join(d, f"host-{node}")
            os.makedirs(host, exist_ok=True)
            with open(os.path.join(host, f"{node}.jsonl"), "w") as f:
                f.write("\n".join(lines) + ("\n" if lines else ""))
        return d


def failover_logs(skew_new_master_ms: int = 800) -> Logs:
    """broker-a: master 1 (epoch 1) dies at ~1000 ms, 2 is elected (epoch 2, term 3) by the
    controller leader n0 (n1 logs the same election, reason unknown), becomes writable and
    takes its first write; 1 comes back as a slave and truncates 100 bytes. The new master's
    host clock runs ``skew_new_master_ms`` ahead. A producer acks m1..m5 every 100 ms, then
    m6..m8 after the failover; the consumer sees all but m3 and m5 twice."""
    lg = Logs({"b-2": skew_new_master_ms})
    ctl, brk, cli = "namesrv", "broker", "client"
    lg.add("n0", ctl, -5000, "raft_role_changed", term=3, raft_role="LEADER", leader="n0")
    lg.add("n0", ctl, -5000, "raft_leader_elected", term=3, leader="n0", last_index=7)
    lg.add("n1", ctl, -4990, "raft_role_changed", term=3, raft_role="FOLLOWER", leader="n0")
    lg.add(
        "n0",
        ctl,
        0,
        "elect_master",
        broker="broker-a",
        master_id=1,
        master_addr="h1:1",
        epoch=1,
        sync_state_set=[1],
        reason="first_register",
        term=3,
        candidates=[1, 2],
    )
    lg.add("n0", ctl, 2, "sync_state_set_changed", broker="broker-a", sync_state_set=[1], epoch=1)
    lg.add(
        "n0", ctl, 50, "sync_state_set_changed", broker="broker-a", sync_state_set=[2, 1], epoch=2
    )
    for node, bid, role in (("b-1", 1, "SYNC_MASTER"), ("b-2", 2, "SLAVE")):
        lg.add(
            node,
            brk,
            5,
            "broker_role_changed",
            broker="broker-a",
            broker_id=bid,
            broker_role=role,
            epoch=1,
            master_id=1,
            master_addr="h1:1",
            sync_state_set=[1],
        )
    lg.add("b-1", brk, 10, "master_first_write", epoch=1, offset=0)
    for i in range(1, 6):
        lg.add(
            "p",
            cli,
            100 * i,
            "trace_send_acked",
            msg_id=f"m{i}",
            topic="T",
            broker="broker-a",
            queue_id=i % 2,
            queue_offset=i,
            producer_group="pg",
            client_id="c1",
            latency_ms=3,
        )
    lg.add(
        "n0",
        ctl,
        1020,
        "broker_heartbeat_timeout",
        cluster="C",
        broker="broker-a",
        broker_id=1,
        addr="h1:1",
        silent_ms=20,
        reason="channel_closed",
    )
    lg.add(
        "n0",
        ctl,
        1030,
        "elect_master",
        broker="broker-a",
        master_id=2,
        master_addr="h2:1",
        epoch=2,
        sync_state_set=[2],
        reason="master_channel_closed",
        term=3,
        candidates=[2],
    )
    lg.add(
        "n1",
        ctl,
        1033,
        "elect_master",
        broker="broker-a",
        master_id=2,
        master_addr="h2:1",
        epoch=2,
        sync_state_set=[2],
        reason="unknown",
        term=3,
    )
    lg.add(
        "n0", ctl, 1031, "sync_state_set_changed", broker="broker-a", sync_state_set=[2], epoch=3
    )
    lg.add(
        "b-2",
        brk,
        1040,
        "broker_role_changed",
        broker="broker-a",
        broker_id=2,
        broker_role="SYNC_MASTER",
        epoch=2,
        master_id=2,
        master_addr="h2:1",
        sync_state_set=[2],
    )
    lg.add("b-2", brk, 1100, "master_first_write", epoch=2, offset=500)
    for i in range(6, 9):
        lg.add(
            "p",
            cli,
            1100 + 200 * i - 600,
            "trace_send_acked",
            msg_id=f"m{i}",
            topic="T",
            broker="broker-a",
            queue_id=0,
            queue_offset=i,
            producer_group="pg",
            client_id="c1",
            # m6 was sent at 450, before m5's ack, and waited through the failover
            latency_ms=1250 if i == 6 else 4,
        )
    lg.add(
        "b-1",
        brk,
        3000,
        "broker_role_changed",
        broker="broker-a",
        broker_id=1,
        broker_role="SLAVE",
        epoch=2,
        master_id=2,
        master_addr="h2:1",
        sync_state_set=[2],
    )
    lg.add(
        "b-1",
        brk,
        3010,
        "ha_truncated",
        broker="broker-a",
        from_offset=600,
        to_offset=500,
        matched_epoch=1,
        master_max=900,
        master_epochs=["1-0", "2-500"],
        epochs_now=["1-0"],
    )
    for i in (1, 2, 4, 5, 5, 6, 7, 8):
        lg.add(
            "c",
            cli,
            3100 + i,
            "trace_consumed",
            msg_id=f"m{i}",
            topic="T",
            broker="broker-a",
            queue_id=0,
            queue_offset=i,
            group="g1",
            client_id="c2",
            reconsume_times=0,
        )
    return lg
