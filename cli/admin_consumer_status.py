"""`rocketrio admin consumerStatus`: what each member of a consumer group is doing, asked of the
member itself through a broker (GET_CONSUMER_RUNNING_INFO, 307), as mqadmin's consumerStatus.

``-g`` group, ``-i`` one client id, ``-s`` with the client's stacks, ``-b`` the broker to ask.
Without ``-i``: the group's members (from the broker's consumer connections), each one's running
info, and mqadmin's checks: do all members subscribe the same (topic, expression) set, and
which queues look stuck (cached messages not consumed for a minute). Unlike mqadmin, which
skips the subscription check in a consumer's first two minutes, the check is always made.
With ``-i``: that client's properties, subscriptions, per queue the process-queue figures and
per topic the pull / consume rates, followed by the broker's view of each subscribed topic's
consume time span (QUERY_CONSUME_TIME_SPAN, 303). ``--json`` prints the same as data.
"""

from __future__ import annotations

import argparse
from typing import Any

from rocketrio.actors.client.config import RETRY_GROUP_TOPIC_PREFIX
from rocketrio.actors.client.errors import MQClientError, NotFound
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.cli.admin import command, table
from rocketrio.cli.dates import format_ms
from rocketrio.protocol.codes import CURRENT_VERSION
from rocketrio.protocol.running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    ConsumerRunningInfo,
    QueueTimeSpan,
)
from rocketrio.protocol.serde import to_plain


class StatusResult(dict[str, Any]):
    """The JSON-ready answer, plus the running infos themselves (``infos``) for the printer;
    ``--json`` writes only the dict."""

    infos: dict[str, ConsumerRunningInfo]


def _result(infos: dict[str, ConsumerRunningInfo], **fields: Any) -> StatusResult:
    r = StatusResult(fields)
    r.infos = infos
    return r


STUCK_AFTER_MS = 60_000  # upstream analyzeProcessQueue: cached messages, no consumption for 1 min


def version_desc(version: int) -> str:
    return "V5_2_0" if version == CURRENT_VERSION else str(version)


def stuck_queues(client_id: str, info: ConsumerRunningInfo, now_ms: int) -> list[str]:
    """upstream analyzeProcessQueue for a concurrent push consumer."""
    if not info.is_push() or info.properties.get(PROP_CONSUME_ORDERLY) == "true":
        return []
    out = []
    for mq, pq in info.mqTable.items():
        idle = now_ms - pq.lastConsumeTimestamp
        if idle > STUCK_AFTER_MS and pq.cachedMsgCount > 0:
            out.append(
                f"{client_id} {mq.topic}:{mq.brokerName}:{mq.queueId} can't consume for a "
                f"while, maybe blocked, {idle}ms"
            )
    return out


def plain_info(info: ConsumerRunningInfo) -> dict[str, Any]:
    """JSON-ready: the queue table as a list (its keys are MessageQueues)."""
    return {
        "properties": dict(sorted(info.properties.items())),
        "subscriptionSet": [to_plain(s) for s in info.subscriptionSet],
        "mqTable": [
            {"messageQueue": to_plain(mq), **to_plain(pq)} for mq, pq in info.mqTable.items()
        ],
        "statusTable": {t: to_plain(s) for t, s in info.statusTable.items()},
        **({"jstack": info.jstack} if info.jstack is not None else {}),
    }


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True)
    p.add_argument("-i", "--clientId", dest="client_id", help="one member's client id")
    p.add_argument("-b", "--brokerAddr", dest="broker", help="the broker to ask")
    p.add_argument("-s", "--jstack", action="store_true", help="with the client's stacks")


async def _time_spans(admin: Any, group: str, info: ConsumerRunningInfo) -> list[QueueTimeSpan]:
    spans: list[QueueTimeSpan] = []
    for sub in info.subscriptionSet:
        if sub.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            continue
        try:
            spans.extend(await admin.query_consume_time_span(sub.topic, group))
        except (RemotingError, MQClientError):
            continue  # the running info is the answer; the time span is a help
    return spans


@command("consumerStatus", "what each member of a consumer group is doing (asked of the "
         "member through a broker)", lambda r, a: print_status(r, a))(_args)  # fmt: skip
async def consumer_status(admin: Any, a: argparse.Namespace) -> StatusResult:
    from rocketrio.actors.kernel.clock import wallclock_ms

    addr = a.broker
    if addr is None:
        addrs = await admin._group_broker_addrs(a.group, None)
        if not addrs:
            raise NotFound(f"no broker found for consumer group {a.group}")
        addr = addrs[0]
    if a.client_id:
        info = await admin.consumer_running_info(a.group, a.client_id, jstack=a.jstack, addr=addr)
        spans = await _time_spans(admin, a.group, info)
        return _result(
            {a.client_id: info},
            group=a.group,
            clientId=a.client_id,
            runningInfo=plain_info(info),
            consumeTimeSpan=[to_plain(s) for s in spans],
        )
    cc = await admin.consumer_connection(a.group, addr)
    members = []
    infos: dict[str, ConsumerRunningInfo] = {}
    for conn in sorted(cc.connectionSet, key=lambda c: c.clientId):
        try:
            info = await admin.consumer_running_info(
                a.group, conn.clientId, jstack=a.jstack, addr=addr
            )
        except (RemotingError, MQClientError) as e:
            members.append({"clientId": conn.clientId, "version": conn.version, "error": str(e)})
            continue
        infos[conn.clientId] = info
        members.append(
            {"clientId": conn.clientId, "version": conn.version, "runningInfo": plain_info(info)}
        )
    same = len({i.subscription_keys() for i in infos.values()}) <= 1
    now = wallclock_ms()
    warnings = [w for cid, i in infos.items() for w in stuck_queues(cid, i, now)] if same else []
    return _result(infos, group=a.group, members=members, sameSubscription=same, warnings=warnings)


def _print_info(info: ConsumerRunningInfo) -> None:
    print("#Consumer Properties#")
    for k, v in sorted(info.properties.items()):
        shown = f"{v} ({format_ms(v)})" if k == PROP_CONSUMER_START_TIMESTAMP else v
        print(f"  {k:<40}: {shown}")
    print("\n#Consumer Subscription#")
    subs = [[i, s.topic, s.subString] for i, s in enumerate(info.subscriptionSet, 1)]
    print(table(["#", "topic", "sub expression"], subs))
    print("\n#Consumer MQ Detail#")
    rows = [
        [
            mq.topic, mq.brokerName, mq.queueId, pq.commitOffset, pq.cachedMsgCount,
            f"{pq.cachedMsgMinOffset}-{pq.cachedMsgMaxOffset}" if pq.cachedMsgCount else "-",
            pq.cachedMsgSizeInMiB, "yes" if pq.droped else "no",
            format_ms(pq.lastPullTimestamp), format_ms(pq.lastConsumeTimestamp),
        ]
        for mq, pq in info.mqTable.items()
    ]  # fmt: skip
    head = ["topic", "broker", "queue", "commit offset", "cached msgs", "cached offsets",
            "cached MiB", "dropped", "last pull", "last consume"]  # fmt: skip
    if info.properties.get(PROP_CONSUME_ORDERLY) == "true":  # the broker queue locks it holds
        head += ["locked", "last lock"]
        for row, pq in zip(rows, info.mqTable.values(), strict=True):
            row += ["yes" if pq.locked else "no", format_ms(pq.lastLockTimestamp)]
    print(table(head, rows))
    print("\n#Consumer RT&TPS# (last minute; failed messages: last hour)")
    rates = [
        [t, f"{s.pullRT:.2f}", f"{s.pullTPS:.2f}", f"{s.consumeRT:.2f}", f"{s.consumeOKTPS:.2f}",
         f"{s.consumeFailedTPS:.2f}", s.consumeFailedMsgs]
        for t, s in info.statusTable.items()
    ]  # fmt: skip
    print(table(["topic", "pull RT ms", "pull TPS", "consume RT ms", "consume OK TPS",
                 "consume failed TPS", "failed msgs"], rates))  # fmt: skip
    if info.jstack is not None:
        print("\n#Consumer jstack#")
        print(info.jstack)


def print_status(r: StatusResult, a: argparse.Namespace) -> None:
    if "clientId" in r:
        info = r.infos[r["clientId"]]
        print(f"consumer group {r['group']}, client {r['clientId']} "
              f"({info.properties.get(PROP_CONSUME_TYPE, '?')})\n")  # fmt: skip
        _print_info(info)
        if r["consumeTimeSpan"]:
            print("\n#Consume Time Span# (broker's view)")
            spans = [
                [s["messageQueue"]["topic"], s["messageQueue"]["brokerName"],
                 s["messageQueue"]["queueId"], format_ms(s["minTimeStamp"]),
                 format_ms(s["maxTimeStamp"]), format_ms(s["consumeTimeStamp"]),
                 s["delayTime"]]
                for s in r["consumeTimeSpan"]
            ]  # fmt: skip
            print(table(["topic", "broker", "queue", "first message", "last message",
                         "last consumed", "delay ms"], spans))  # fmt: skip
        return
    rows = [
        [i, m["clientId"], version_desc(m["version"]), m.get("error", "ok")]
        for i, m in enumerate(r["members"], 1)
    ]
    print(table(["#", "client id", "version", "running info"], rows))
    if not r.infos:
        return
    if r["sameSubscription"]:
        print("\nSame subscription in the same group of consumer")
        print("\nRebalance OK")
        for w in r["warnings"]:
            print(w)
    else:
        print("\nWARN: Different subscription in the same group of consumer!!!")
    for cid, info in r.infos.items():
        print(f"\n===== {cid} =====")
        _print_info(info)
