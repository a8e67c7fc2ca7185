"""`rocketrio admin` static-topic commands (RIP-21), mqadmin's names and options:

    updateStaticTopic     -t topic -qn totalQueueNum (-c clusters | -b brokerNames)
    remappingStaticTopic  -t topic (-c clusters | -b brokerNames)

``-c`` and ``-b`` take comma-separated cluster or broker-set names (not addresses, as
mqadmin). The admin reads the current mappings from every broker, computes the new ones and
sends each broker its own (actors/client/static_topic_admin.py). The human output is one line
per generation of each logic queue; ``--json`` gives the whole result. Registered from
cli/admin.py.
"""

from __future__ import annotations

import argparse
from typing import Any

from rocketrio.actors.client.static_topic_admin import (
    StaticTopicResult,
    remapping_static_topic,
    update_static_topic,
)
from rocketrio.cli.admin import command, table


def _targets(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-c", "--clusters", help="comma-separated cluster names")
    g.add_argument("-b", "--brokers", help="comma-separated broker (set) names")


def _update_args(p: argparse.ArgumentParser) -> None:
    _targets(p)
    p.add_argument("-qn", "--totalQueueNum", type=int, required=True, help="logic queues")


def print_static_result(result: StaticTopicResult, a: argparse.Namespace) -> None:
    print(
        f"static topic {result.topic}: {result.totalQueues} logic queues, epoch {result.epoch}, "
        f"written to {', '.join(result.writtenTo)}"
    )
    if result.mapIn or result.mapOut:
        print(f"mapped in: {', '.join(result.mapIn)}; mapped out: {', '.join(result.mapOut)}")
    rows = [
        [
            r.globalId,
            r.gen,
            r.bname,
            r.queueId,
            r.logicOffset,
            "" if r.endOffset < 0 else r.endOffset,
            "leader" if r.leader else "",
        ]
        for r in result.mapping
    ]
    print(
        table(
            ["logic queue", "gen", "broker", "physical queue", "logic offset", "end", "role"],
            rows,
        )
    )


@command(
    "updateStaticTopic", "create or grow a static topic (fixed logic queues)", print_static_result
)(_update_args)
async def update_static(admin: Any, a: argparse.Namespace) -> StaticTopicResult:
    return await update_static_topic(
        admin, a.topic, a.totalQueueNum, clusters=a.clusters, brokers=a.brokers
    )


@command(
    "remappingStaticTopic", "move a static topic's logic queues to other brokers",
    print_static_result,
)(_targets)  # fmt: skip
async def remapping_static(admin: Any, a: argparse.Namespace) -> StaticTopicResult:
    return await remapping_static_topic(admin, a.topic, clusters=a.clusters, brokers=a.brokers)
