"""`rocketrio admin getConsumerStatus` (upstream GetConsumerStatusCommand's options: ``-g``
group, ``-t`` topic, ``-i`` one client id): INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) to a
broker of the topic's first broker set (its master when there is one), which asks each member
of the group for its offsets of the topic (GET_CONSUMER_STATUS_FROM_CLIENT, 221). Printed as
that command prints it (5.2.0's mqadmin does not register it): a title line, a header, then
one padded row per (client, queue) with the client's in-memory offset.
"""

from __future__ import annotations

import argparse
from typing import Any

from rocketrio.cli.admin import command
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.consumer_status import (
    GetConsumerStatusBody,
    GetConsumerStatusRequestHeader,
)
from rocketrio.protocol.serde import from_json


def status_lines(
    body: GetConsumerStatusBody | None, group: str, topic: str, origin: str
) -> list[str]:
    lines = [
        f"get consumer status from client. group={group}, topic={topic}, originClientId={origin}",
        f"{'#clientId':<50}  {'#brokerName':<15}  {'#queueId':<15}  {'#offset':<20}",
    ]
    for client_id, table in (body.consumerTable if body else {}).items():
        for mq, offset in table.items():
            lines.append(
                f"{client_id[:50]:<50}  {mq.brokerName:<15}  {mq.queueId:<15}  {offset:<20}"
            )
    return lines


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="the consumer group")
    p.add_argument("-t", "--topic", required=True, help="the topic")
    p.add_argument("-i", "--originClientId", dest="origin", default="", help="one client id")


def _print(lines: list[str], _a: argparse.Namespace) -> None:
    print("\n".join(lines))


@command("getConsumerStatus", "each member's in-memory offsets of a topic", _print)(_args)
async def get_consumer_status(admin: Any, a: argparse.Namespace) -> list[str]:
    group, topic, origin = a.group.strip(), a.topic.strip(), a.origin.strip()
    route = await admin.topic_route(topic)
    addr = route.brokerDatas[0].select_broker_addr() if route.brokerDatas else None
    body = None
    if addr is not None:
        header = GetConsumerStatusRequestHeader(topic, group, origin)
        resp = await admin.api.call(addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, header)
        body = from_json(GetConsumerStatusBody, resp.body)
    return status_lines(body, group, topic, origin)
