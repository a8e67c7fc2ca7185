"""`rocketrio admin` commands that move a consumer group's offsets, mqadmin's names and options:

    resetOffsetByTime       -g group -t topic -s now|<epoch ms>|yyyy-MM-dd#HH:mm:ss:SSS
                            [-f true|false] [-c] [-b broker -q queueId [-o offset]]
    skipAccumulatedMessage  -g group -t topic [-f true|false]
    cloneGroupOffset        -s srcGroup -d destGroup -t topic [-o true|false]

A running group is moved without a restart: the brokers commit the new offsets and tell every
online member, which drops what it holds and pulls from there. A broker with no member online
is reset from here (the "old" way, as mqadmin falls back). ``-f false`` only moves offsets back.
``-c`` asks for the list-form body C++ clients read. ``-b``/``-q`` (with ``-o``, or the offset
found for ``-s``) set one queue of one broker. Registered from cli/admin.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from rocketrio.actors.client.errors import UsageError
from rocketrio.actors.client.offset_admin import (
    SKIP_ACCUMULATED,
    QueueReset,
    ResetResult,
    clone_group_offset,
    reset_offset_by_timestamp,
    reset_queue_offset,
)
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.cli.admin import command, table
from rocketrio.cli.dates import format_ms

DATE_FORMAT = "%Y-%m-%d#%H:%M:%S:%f"  # upstream UtilAll.YYYY_MM_DD_HH_MM_SS_SSS


def parse_timestamp(text: str, now_ms: int, tz: dt.tzinfo | None = None) -> int:
    """mqadmin's -s: ``now``, epoch milliseconds, or ``yyyy-MM-dd#HH:mm:ss:SSS`` in local
    time (``tz`` overrides the local zone)."""
    text = text.strip()
    if text == "now":
        return now_ms
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = dt.datetime.strptime(text, DATE_FORMAT)
    except ValueError:
        raise UsageError(
            f"timestamp {text!r} is not now, epoch milliseconds or yyyy-MM-dd#HH:mm:ss:SSS"
        ) from None
    if tz is not None:
        when = when.replace(tzinfo=tz)
    return int(when.timestamp() * 1000)


def parse_bool(text: str | None, name: str, default: bool) -> bool:
    if text is None:
        return default
    v = text.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise UsageError(f"{name} must be true or false, got {text!r}")


def _print_reset(r: ResetResult, a: argparse.Namespace) -> None:
    when = (
        "max offset (skip accumulated)"
        if r.timestamp == SKIP_ACCUMULATED
        else format_ms(r.timestamp)
    )
    print(
        f"reset consumer offset: group[{r.group}] topic[{r.topic}] force[{str(r.force).lower()}]"
        f" timestamp[{r.timestamp}] ({when})"
    )
    if r.offsets:
        rows = [[q.brokerName, q.queueId, q.offset] for q in r.offsets]
        print(table(["#brokerName", "#queueId", "#offset"], rows))
    if r.rollback:
        brokers = ", ".join(sorted({s.brokerName for s in r.rollback}))
        print(f"no consumer online at {brokers}: offsets set from here (old way)")
        rows = [
            [
                s.brokerName,
                s.queueId,
                s.brokerOffset,
                s.consumerOffset,
                s.timestampOffset,
                s.rollbackOffset,
            ]
            for s in r.rollback
        ]
        headers = ["#brokerName", "#queueId", "#brokerOffset", "#consumerOffset"]
        print(table([*headers, "#timestampOffset", "#rollbackOffset"], rows))
    if not r.offsets and not r.rollback:
        print("no queue to reset")


def _reset_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument(
        "-s", "--timestamp", required=True, help="now | epoch ms | yyyy-MM-dd#HH:mm:ss:SSS"
    )
    p.add_argument("-f", "--force", help="true (default): also move forward; false: only back")
    p.add_argument("-c", "--cplus", action="store_true", help="members are C++ clients")
    p.add_argument("-b", "--broker", help="with -q: the broker address of the queue")
    p.add_argument("-q", "--queue", type=int, help="with -b: only this queue id")
    p.add_argument("-o", "--offset", type=int, help="with -b and -q: this offset")


@command(
    "resetOffsetByTime",
    "move a consumer group's offsets to a time (without client restart)",
    _print_reset,
)(_reset_args)
async def reset_offset_by_time(admin: Any, a: argparse.Namespace) -> ResetResult:
    timestamp = parse_timestamp(a.timestamp, wallclock_ms())
    force = parse_bool(a.force, "-f/--force", True)
    if a.queue is not None or a.offset is not None:
        if a.broker is None or a.queue is None:
            raise UsageError("-q/--queue and -o/--offset need -b/--broker and -q/--queue")
        one = await reset_queue_offset(
            admin, a.broker, a.group, a.topic, a.queue, a.offset, timestamp
        )
        return ResetResult(a.group, a.topic, timestamp, True, offsets=[one])
    return await reset_offset_by_timestamp(admin, a.group, a.topic, timestamp, force, for_c=a.cplus)


def _skip_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-f", "--force", help="true (default) | false")


@command(
    "skipAccumulatedMessage",
    "move a consumer group's offsets to the end: skip what is not consumed yet",
    _print_reset,
)(_skip_args)
async def skip_accumulated_message(admin: Any, a: argparse.Namespace) -> ResetResult:
    force = parse_bool(a.force, "-f/--force", True)
    return await reset_offset_by_timestamp(admin, a.group, a.topic, SKIP_ACCUMULATED, force)


def _clone_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--srcGroup", dest="src", required=True)
    p.add_argument("-d", "--destGroup", dest="dest", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-o", "--offline", help="true: copy even if srcGroup does not subscribe now")


def _print_clone(rows: list[QueueReset], a: argparse.Namespace) -> None:
    print(f"clone group offset success. srcGroup[{a.src}], destGroup[{a.dest}], topic[{a.topic}]")
    print(
        table(
            ["#brokerName", "#queueId", "#offset"],
            [[q.brokerName, q.queueId, q.offset] for q in rows],
        )
    )


@command("cloneGroupOffset", "copy one group's committed offsets to another", _print_clone)(
    _clone_args
)
async def clone_group_offset_cmd(admin: Any, a: argparse.Namespace) -> list[QueueReset]:
    offline = parse_bool(a.offline, "-o/--offline", False)
    return await clone_group_offset(admin, a.src, a.dest, a.topic, offline)
