"""`rocketrio admin popProgress -g GROUP [-t TOPIC]`: a POP consumer group's per-queue broker
offset, pop offset, lag and in-flight (popped, not yet acknowledged) messages
(actors/client/pop_admin.py)."""

from __future__ import annotations

import argparse
from typing import Any

from rocketrio.actors.client.pop_admin import PopProgress, pop_progress
from rocketrio.cli.admin import command, table


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="consumer group")
    p.add_argument("-t", "--topic", default=None, help="only this topic")


def _print(prog: PopProgress, _args: argparse.Namespace) -> None:
    rows = [
        [q.topic, q.brokerName, q.queueId, q.brokerOffset, q.consumerOffset, q.lag, q.inflight]
        for q in sorted(prog.queues, key=lambda q: (q.topic, q.brokerName, q.queueId))
    ]
    headers = ["topic", "broker", "queue", "broker offset", "pop offset", "lag", "inflight"]
    print(table(headers, rows))
    print(f"total lag: {prog.total_lag}   total inflight: {prog.total_inflight}")
    for name in prog.revive_not_running:
        print(f"  {name}: revive service not running (not master): in-flight unknown")


@command("popProgress", "POP consumer group: offsets, lag and in-flight messages", _print)(_args)
async def pop_progress_cmd(admin: Any, a: argparse.Namespace) -> Any:
    return await pop_progress(admin, a.group, a.topic)
