"""`rocketrio admin` static-topic commands (RIP-21), mqadmin's names and options:

    updateStaticTopic     -t topic -qn totalQueueNum (-c clusters | -b brokerNames | -mf file)
    remappingStaticTopic  -t topic (-c clusters | -b brokerNames | -mf file)
    both: [-fr true|false] [--mapDir dir]

``-c`` and ``-b`` take comma-separated cluster or broker-set names (not addresses, as
mqadmin). The admin reads the current mappings from every broker, computes the new ones and
sends each broker its own (actors/client/static_topic_admin.py), after writing the mapping
before and the computed one to ``<mapDir>/<topic>-<epoch>.before`` / ``.after`` (upstream's
temp files; mapDir defaults to the system's temp directory). ``-mf FILE`` sends that file (a
reviewed or repaired plan) instead of computing one, ``-fr true`` makes the brokers replace
what they hold even with an older epoch (actors/client/static_topic_mapfile.py). The human
output is one line
per generation of each logic queue; ``--json`` gives the whole result. Registered from
cli/admin.py.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from rocketrio.actors.client.errors import MQClientError, UsageError
from rocketrio.actors.client.static_topic_admin import (
    Review,
    StaticTopicResult,
    remapping_static_topic,
    update_static_topic,
)
from rocketrio.actors.client.static_topic_mapfile import apply_mapping_file, write_review_files
from rocketrio.cli.admin import command, table
from rocketrio.protocol.static_topic_alloc import TopicRemappingDetailWrapper


def _targets(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-c", "--clusters", help="comma-separated cluster names")
    g.add_argument("-b", "--brokers", help="comma-separated broker (set) names")
    g.add_argument("-mf", "--mapFile", help="send this mapping file instead of computing one")
    p.add_argument(
        "-fr", "--forceReplace", default="false", choices=("true", "false"),
        help="brokers replace their mapping even with an older epoch",
    )  # fmt: skip
    p.add_argument(
        "--mapDir", default=tempfile.gettempdir(),
        help="where the .before / .after mapping files are written",
    )  # fmt: skip


def _update_args(p: argparse.ArgumentParser) -> None:
    _targets(p)
    p.add_argument("-qn", "--totalQueueNum", type=int, help="logic queues (not with -mf)")


def _review(a: argparse.Namespace) -> Review:
    def review(before: TopicRemappingDetailWrapper, after: TopicRemappingDetailWrapper) -> None:
        old, new = write_review_files(Path(a.mapDir), before, after)
        print(f"The old mapping data is written to file {old}", file=sys.stderr)
        print(f"The new mapping data is written to file {new}", file=sys.stderr)

    return review


async def _from_file(admin: Any, a: argparse.Namespace) -> StaticTopicResult:
    try:
        data = Path(a.mapFile).read_bytes()
    except OSError as e:
        raise MQClientError(f"cannot read the mapping file {a.mapFile}: {e.strerror}") from None
    return await apply_mapping_file(admin, a.topic, data, force=a.forceReplace == "true")


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
    if a.mapFile:
        return await _from_file(admin, a)
    if a.totalQueueNum is None:
        raise UsageError("updateStaticTopic needs -qn (or -mf)")
    return await update_static_topic(
        admin, a.topic, a.totalQueueNum, clusters=a.clusters, brokers=a.brokers,
        force=a.forceReplace == "true", review=_review(a),
    )  # fmt: skip


@command(
    "remappingStaticTopic", "move a static topic's logic queues to other brokers",
    print_static_result,
)(_targets)  # fmt: skip
async def remapping_static(admin: Any, a: argparse.Namespace) -> StaticTopicResult:
    if a.mapFile:
        return await _from_file(admin, a)
    return await remapping_static_topic(
        admin, a.topic, clusters=a.clusters, brokers=a.brokers,
        force=a.forceReplace == "true", review=_review(a),
    )  # fmt: skip
