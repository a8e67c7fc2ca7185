"""`rocketrio admin setConsumeMode` (mqadmin's: ``-b``/``-c``, ``-t``, ``-g``, ``-m PULL|POP``,
``-q popShareQueueNum``): SET_MESSAGE_REQUEST_MODE (401) to one broker or to every master of a
cluster, printing mqadmin's lines; and `getConsumeMode` (rocketrio's; upstream's tools have no
reader): GET_ALL_MESSAGE_REQUEST_MODE (402) from a broker or every master of a cluster, as a
table of (broker, topic, group, mode, popShareQueueNum).

With ``-c``, a master that refuses or does not answer is reported and the others are still
set (as mqadmin goes on); the exit status is then 1.
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.cli.admin import Incomplete, command, table
from rocketrio.cli.failure import one_line
from rocketrio.protocol import fastjson
from rocketrio.protocol.assignment import (
    REQUEST_MODES,
    MessageRequestModeSerializeWrapper,
    SetMessageRequestModeRequestBody,
)
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.serde import from_json


def _target_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker", help="this broker address")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every master of this cluster")


def _set_args(p: argparse.ArgumentParser) -> None:
    _target_args(p)
    p.add_argument("-t", "--topicName", dest="topic", required=True)
    p.add_argument("-g", "--groupName", dest="group", required=True)
    p.add_argument("-m", "--mode", required=True, choices=REQUEST_MODES, help="PULL or POP")
    p.add_argument("-q", "--popShareQueueNum", dest="share", type=int, default=0,
                   help="POP mode: how many other consumers' queues each one shares")  # fmt: skip


async def _addrs(admin: Any, a: argparse.Namespace) -> list[str]:
    return [a.broker] if a.broker else list(await admin.masters_of_cluster(a.cluster))


@attrs.frozen
class ModeSet:
    lines: list[str]


def _print_set(result: ModeSet, _a: argparse.Namespace) -> None:
    print("\n".join(result.lines))


@command("setConsumeMode", "set a group's consume mode on a topic: PULL or POP", _print_set)(
    _set_args
)
async def set_consume_mode(admin: Any, a: argparse.Namespace) -> ModeSet | Incomplete:
    body = fastjson.encode(
        SetMessageRequestModeRequestBody(a.topic.strip(), a.group.strip(), a.mode, a.share)
    )
    lines, failed = [], []
    for addr in await _addrs(admin, a):
        try:
            await admin.api.call(addr, RequestCode.SET_MESSAGE_REQUEST_MODE, body=body)
        except (MQClientError, RemotingError) as e:
            if a.broker:
                raise
            failed.append(f"{addr}: {one_line(str(e))}")
            continue
        lines.append(f"set consume mode to {addr} success.")
    lines.append(
        f"topic[{a.topic.strip()}] group[{a.group.strip()}] consume mode[{a.mode}] "
        f"popShareQueueNum[{a.share}]"
    )
    if failed:
        return Incomplete(ModeSet(lines), "failed on " + "; ".join(failed))
    return ModeSet(lines)


@attrs.frozen
class BrokerModes:
    broker: str
    modes: MessageRequestModeSerializeWrapper


def _print_modes(result: list[BrokerModes], _a: argparse.Namespace) -> None:
    rows = [
        [b.broker, topic, group, m.mode, m.popShareQueueNum]
        for b in result
        for topic, groups in sorted(b.modes.messageRequestModeMap.items())
        for group, m in sorted(groups.items())
    ]
    print(table(["broker", "topic", "group", "mode", "popShareQueueNum"], rows))


@command("getConsumeMode", "the consume modes (PULL/POP) set on a broker", _print_modes)(
    _target_args
)
async def get_consume_mode(admin: Any, a: argparse.Namespace) -> list[BrokerModes]:
    out = []
    for addr in await _addrs(admin, a):
        resp = await admin.api.call(addr, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE)
        out.append(BrokerModes(addr, from_json(MessageRequestModeSerializeWrapper, resp.body)))
    return out
