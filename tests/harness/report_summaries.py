"""A representative incident summary (the shape `analysis.incidents.run` returns)."""

from __future__ import annotations

from typing import Any

T = 1_795_476_025_000


def failover(**over: Any) -> dict[str, Any]:
    f: dict[str, Any] = {
        "broker": "broker-a",
        "epoch": 2,
        "term": 3,
        "old_master_id": 1,
        "new_master_id": 2,
        "reason": "master_channel_closed",
        "candidates": [2],
        "lost_ms": T + 862,
        "lost_signal": "ha_connection_closed",
        "elected_ms": T + 866,
        "writable_ms": T + 873,
        "first_write_ms": T + 972,
        "old_back_ms": T + 2408,
        "old_truncated_bytes": 4096,
        "write_gap_ms": 114,
        "acked_lost": 0,
    }
    f.update(over)
    f["headline"] = (
        f"{f['broker']}: master {f['old_master_id']} lost at 23:20:25.862, new master "
        f"{f['new_master_id']} writable at 23:20:25.873, 11 ms, {f['acked_lost']} acked lost"
    )
    return f


def summary(**over: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "inputs": ["/var/log/rocketrio"],
        "generated_at_ms": T + 60_000,
        "took_s": 9.5,
        "lines": {
            "files": 5,
            "read": 1200,
            "parsed": 1197,
            "skipped": {"malformed": 1, "unknown_event": 1, "bad_field": 1, "empty_files": 0},
            "skipped_examples": [
                {"file": "broker-a-0.jsonl", "line": '{"ts":"2026-', "why": "malformed"},
            ],
        },
        "failovers": [failover()],
        "windows": [
            {
                "op": "send",
                "broker": "broker-a",
                "topic": None,
                "start_ms": T + 850,
                "end_ms": T + 964,
                "length_ms": 114,
            }
        ],
        "raft_leaders": [{"term": 3, "leader": "n0", "at_ms": T - 5000}],
        "raft_churn": {"elections": 1, "terms": 1, "role_changes": 3},
        "sync_state_set_changes": [
            {"broker": "broker-a", "epoch": 2, "members": [2], "at_ms": T + 870, "change": "shrink"}
        ],
        "truncations": [
            {
                "node": "broker-a-1",
                "broker": "broker-a",
                "broker_id": 1,
                "epoch": 1,
                "from_offset": 9000,
                "to_offset": 4904,
                "bytes": 4096,
                "kind": "ha_truncated",
                "at_ms": T + 2414,
            }
        ],
        "acked": 3000,
        "consumed": 3001,
        "traced": True,
        "lost": [],
        "duplicates": [{"group": "g", "msg_id": "AC1", "count": 2}],
    }
    s.update(over)
    return s
