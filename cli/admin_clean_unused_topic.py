"""`rocketrio admin cleanUnusedTopic (-b host:port | -c cluster)` (mqadmin's): CLEAN_UNUSED_TOPIC
(316) to one broker or to every master of a cluster (a slave refuses it: its topic table is a
copy, docs/admin.md). Prints mqadmin's ``success``; with ``-c``, a master that refuses or does
not answer is reported and the others are still asked (exit status 1).
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.cli.admin import Incomplete, command
from rocketrio.cli.failure import one_line
from rocketrio.protocol.codes import RequestCode


def _args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker", help="this broker address")
    g.add_argument("-c", "--cluster", dest="cluster", help="every master of this cluster")


@attrs.frozen
class Cleaned:
    brokers: list[str]


def _print(_result: Cleaned, _a: argparse.Namespace) -> None:
    print("success")


@command("cleanUnusedTopic", "drop the ConsumeQueues of topics a broker has no config for", _print)(
    _args
)
async def clean_unused_topic(admin: Any, a: argparse.Namespace) -> Cleaned | Incomplete:
    addrs = [a.broker.strip()] if a.broker else list(await admin.masters_of_cluster(a.cluster))
    done, failed = [], []
    for addr in addrs:
        try:
            await admin.api.call(addr, RequestCode.CLEAN_UNUSED_TOPIC)
        except (MQClientError, RemotingError) as e:
            if a.broker:
                raise
            failed.append(f"{addr}: {one_line(str(e))}")
            continue
        done.append(addr)
    if failed:
        return Incomplete(Cleaned(done), "failed on " + "; ".join(failed))
    return Cleaned(done)
