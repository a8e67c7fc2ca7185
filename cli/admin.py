"""`rocketrio admin <command>`: mqadmin-style cluster administration.

Each command calls `MQAdmin` (the async admin API in actors/client/admin.py) and prints a human
table, or JSON with ``--json`` for scripts. Option letters follow mqadmin (``-n`` name servers,
``-t`` topic, ``-c`` cluster, ``-b`` broker address, ``-g`` group, ``-r``/``-w`` queue numbers,
``-p`` perm). Errors print one line and exit with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from rocketrio.protocol.bodies import perm_to_string
from rocketrio.protocol.serde import to_plain

Command = Callable[[Any, argparse.Namespace], Awaitable[Any]]
_COMMANDS: dict[
    str, tuple[str, Callable[[argparse.ArgumentParser], None], Command, Callable[..., None]]
] = {}


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[("" if c is None else str(c)) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def command(
    name: str, help_: str, printer: Callable[..., None]
) -> Callable[[Callable[[argparse.ArgumentParser], None]], Callable[[Command], Command]]:
    def with_args(
        add_args: Callable[[argparse.ArgumentParser], None],
    ) -> Callable[[Command], Command]:
        def register(fn: Command) -> Command:
            _COMMANDS[name] = (help_, add_args, fn, printer)
            return fn

        return register

    return with_args


# --- topic commands --------------------------------------------------------------------------


def _print_done(result: Any, args: argparse.Namespace) -> None:
    print(result if isinstance(result, str) else json.dumps(to_plain(result), indent=2))


def _topic_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    g = p.add_mutually_exclusive_group()
    g.add_argument("-c", "--cluster", help="create on every master of this cluster")
    g.add_argument("-b", "--broker", help="create on this broker address only")
    p.add_argument("-r", "--read-queues", type=int, default=8)
    p.add_argument("-w", "--write-queues", type=int, default=8)
    p.add_argument("-p", "--perm", type=int, default=6, help="2 write, 4 read, 6 read+write")
    p.add_argument("-o", "--order", action="store_true", help="ordered topic")


@command("updateTopic", "create or update a topic", _print_done)(_topic_args)
async def update_topic(admin: Any, a: argparse.Namespace) -> str:
    if not a.cluster and not a.broker:
        a.cluster = "DefaultCluster"
    brokers = await admin.update_topic(
        a.topic,
        cluster=a.cluster,
        broker_addr=a.broker,
        read_queues=a.read_queues,
        write_queues=a.write_queues,
        perm=a.perm,
        order=a.order,
    )
    return f"topic {a.topic} updated on {', '.join(brokers)}"


def _delete_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-c", "--cluster", default="DefaultCluster")


@command("deleteTopic", "delete a topic from brokers and name servers", _print_done)(_delete_args)
async def delete_topic(admin: Any, a: argparse.Namespace) -> str:
    await admin.delete_topic(a.topic, cluster=a.cluster)
    return f"topic {a.topic} deleted from cluster {a.cluster}"


def _topic_only(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)


def _print_route(route: Any, a: argparse.Namespace) -> None:
    rows = []
    addrs = {bd.brokerName: bd for bd in route.brokerDatas}
    for qd in route.queueDatas:
        bd = addrs.get(qd.brokerName)
        rows.append(
            [
                qd.brokerName,
                bd.cluster if bd else "",
                ";".join(f"{i}={ad}" for i, ad in sorted(bd.brokerAddrs.items())) if bd else "",
                qd.readQueueNums,
                qd.writeQueueNums,
                f"{qd.perm} ({perm_to_string(qd.perm)})",
            ]
        )
    print(table(["broker", "cluster", "addresses (id=addr)", "read", "write", "perm"], rows))


@command("topicRoute", "show a topic's route from the name server", _print_route)(_topic_only)
async def topic_route(admin: Any, a: argparse.Namespace) -> Any:
    return await admin.topic_route(a.topic)


def _print_status(stats: Any, a: argparse.Namespace) -> None:
    rows = [
        [o.brokerName, o.queueId, o.minOffset, o.maxOffset, o.lastUpdateTimestamp or ""]
        for o in sorted(stats, key=lambda o: (o.brokerName, o.queueId))
    ]
    print(table(["broker", "queue", "min offset", "max offset", "last update (ms)"], rows))
    print(f"total messages: {sum(o.maxOffset - o.minOffset for o in stats)}")


@command("topicStatus", "per-queue offsets of a topic", _print_status)(_topic_only)
async def topic_status(admin: Any, a: argparse.Namespace) -> Any:
    return await admin.topic_status(a.topic)


# --- cluster / broker ------------------------------------------------------------------------


def _no_args(p: argparse.ArgumentParser) -> None:
    pass


def _print_cluster(view: Any, a: argparse.Namespace) -> None:
    rows = []
    for b in view:
        rows.append(
            [
                b["cluster"],
                b["brokerName"],
                b["brokerId"],
                b["addr"],
                b.get("version", ""),
                b.get("putTps", ""),
                b.get("getTps", ""),
                b.get("commitLogMaxOffset", ""),
            ]
        )
    print(
        table(
            [
                "cluster",
                "broker",
                "id",
                "address",
                "version",
                "put tps",
                "get tps",
                "commitlog max",
            ],
            rows,
        )
    )


@command("clusterList", "brokers of every cluster with runtime figures", _print_cluster)(_no_args)
async def cluster_list(admin: Any, a: argparse.Namespace) -> Any:
    return await admin.cluster_list()


def _broker_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--broker", required=True, help="broker address host:port")


def _print_kv(kv: dict[str, Any], a: argparse.Namespace) -> None:
    width = max((len(k) for k in kv), default=0)
    for k in sorted(kv):
        print(f"{k.ljust(width)} : {kv[k]}")


@command("brokerStatus", "runtime statistics of a broker", _print_kv)(_broker_args)
async def broker_status(admin: Any, a: argparse.Namespace) -> Any:
    return await admin.broker_status(a.broker)


def _progress_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic")


def _print_progress(prog: Any, a: argparse.Namespace) -> None:
    rows = [
        [o.topic, o.brokerName, o.queueId, o.brokerOffset, o.consumerOffset, o.lag]
        for o in sorted(prog.offsets, key=lambda o: (o.topic, o.brokerName, o.queueId))
    ]
    print(table(["topic", "broker", "queue", "broker offset", "consumer offset", "lag"], rows))
    print(f"total lag: {prog.total_lag}   consumers online: {len(prog.clients)}")
    for c in prog.clients:
        print(f"  {c}")


@command("consumerProgress", "consumer group offsets and lag", _print_progress)(_progress_args)
async def consumer_progress(admin: Any, a: argparse.Namespace) -> Any:
    return await admin.consumer_progress(a.group, a.topic)


# --- plumbing --------------------------------------------------------------------------------


async def _run(a: argparse.Namespace) -> Any:
    from rocketrio.actors.client.admin import MQAdmin

    _help, _add, fn, _printer = _COMMANDS[a.admin_command]
    async with MQAdmin(a.namesrv) as admin:
        return await fn(admin, a)


def cmd_admin(a: argparse.Namespace) -> int:
    from rocketrio.actors.logs import configure_logging

    configure_logging("admin", "admin", None, console=None)
    try:
        result = trio.run(_run, a)
    except Exception as e:  # one readable line, not a traceback, for a person at a terminal
        print(f"rocketrio admin {a.admin_command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(to_plain(result), indent=2, default=str))
    else:
        _COMMANDS[a.admin_command][3](result, a)
    return 0


def add_parser(sub: Any) -> None:
    sp = sub.add_parser("admin", help="mqadmin-style administration")
    cmds = sp.add_subparsers(dest="admin_command", required=True, metavar="ADMIN_COMMAND")
    for name, (help_, add_args, _fn, _printer) in _COMMANDS.items():
        c = cmds.add_parser(name, help=help_)
        c.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="name server address(es)")
        c.add_argument("--json", action="store_true", help="machine-readable output")
        add_args(c)
    sp.set_defaults(func=cmd_admin)
