"""`rocketrio admin queryCq` (mqadmin's: ``-t`` topic, ``-q`` queue id, ``-i`` start index,
``-c`` count (10), ``-b`` broker address (default: the first broker set of the route, its
master), ``-g`` consumer group): QUERY_CONSUME_QUEUE (321), printed as mqadmin prints it (the
group's subscription and filter data when asked for, the queue's max and min, then each entry
from the index as ``ConsumeQueueData{...}``).

An index outside the queue's [min, max) is answered without a body: mqadmin fails there on
decoding, this command prints the broker's remark and exits 1.
"""

from __future__ import annotations

import argparse
from typing import Any

from rocketrio.actors.client.errors import NotFound
from rocketrio.cli.admin import command
from rocketrio.protocol import fastjson
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.query_bodies import (
    ConsumeQueueData,
    QueryConsumeQueueRequestHeader,
    QueryConsumeQueueResponseBody,
    pretty,
)
from rocketrio.protocol.serde import from_json

RULE = "======================================"


def _java(text: str | None) -> str:
    return "null" if text is None else text


def entry_line(d: ConsumeQueueData) -> str:
    """One entry as upstream's ConsumeQueueData.toString writes it (a null field: 'null')."""
    return (
        f"ConsumeQueueData{{physicOffset={d.physicOffset}, physicSize={d.physicSize}, "
        f"tagsCode={d.tagsCode}, extendDataJson='{_java(d.extendDataJson)}', "
        f"bitMap='{_java(d.bitMap)}', eval={'true' if d.eval else 'false'}, "
        f"msg='{_java(d.msg)}'}}"
    )


def cq_lines(body: QueryConsumeQueueResponseBody, index: int) -> list[str]:
    lines = []
    if body.subscriptionData is not None:
        lines += [
            "Subscription data: ",
            pretty(fastjson.loads(fastjson.encode(body.subscriptionData))),
            RULE,
        ]
    if body.filterData is not None:
        lines += ["Filter data: ", body.filterData, RULE]
    lines += ["Queue data: ", f"max: {body.maxQueueIndex}, min: {body.minQueueIndex}", RULE]
    for i, d in enumerate(body.queueData or [], start=index):
        lines += [f"idx: {i}", entry_line(d), RULE]
    return lines


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-q", "--queue", type=int, required=True, help="queue id")
    p.add_argument("-i", "--index", type=int, required=True, help="start queue index")
    p.add_argument("-c", "--count", type=int, default=10, help="how many (10)")
    p.add_argument("-b", "--broker", help="broker address (default: the route's first)")
    p.add_argument("-g", "--consumer", help="consumer group")


def _print(lines: list[str], _a: argparse.Namespace) -> None:
    print("\n".join(lines))


@command("queryCq", "entries of one consume queue from an index", _print)(_args)
async def query_cq(admin: Any, a: argparse.Namespace) -> list[str]:
    topic = a.topic.strip()
    addr = a.broker.strip() if a.broker else None
    if not addr:
        route = await admin.topic_route(topic)
        datas = route.brokerDatas
        addr = datas[0].brokerAddrs.get(0) if datas else None
        if addr is None:
            raise NotFound("No topic route data!")
    group = a.consumer.strip() if a.consumer else None
    header = QueryConsumeQueueRequestHeader(topic, a.queue, a.index, a.count, group)
    resp = await admin.api.call(addr, RequestCode.QUERY_CONSUME_QUEUE, header)
    if not resp.body:
        raise NotFound(resp.remark or "no consume queue data")
    return cq_lines(from_json(QueryConsumeQueueResponseBody, resp.body), a.index)
