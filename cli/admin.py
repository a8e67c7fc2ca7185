"""`rocketrio admin <command>`: mqadmin-style cluster administration.

Each command calls `MQAdmin` (the async admin API in actors/client/admin.py) and prints a human
table, or JSON with ``--json`` for scripts. Option letters follow mqadmin (``-n`` name servers,
``-t`` topic, ``-c`` cluster, ``-b`` broker address, ``-g`` group, ``-r``/``-w`` queue numbers,
``-p`` perm). Controller-mode commands (getControllerMetaData, getSyncStateSet, electMaster,
cleanBrokerMetadata, getBrokerEpoch) call `ControllerAdmin` with ``-a`` controller addresses
(``-n`` still names the name servers used to expand a cluster or broker name).

Exit status (cli/failure.py): 0 done; 1 the topic, group, broker, cluster, message or controller
asked for is missing, a server refused, or nothing answered at the address (one line on stderr,
never a traceback); 2 usage. A command that found only part of what was asked for prints that
part and exits 1 naming the rest (`Incomplete`). The human tables print times as local
ISO-8601 dates (cli/dates.py); ``--json`` keeps the servers' raw values (epoch ms).

Adding commands: a module defines them with ``@command(name, help, printer)(add_args)`` (or
``@controller_command``) on ``async def fn(admin, args)``, and `load_command_modules` imports
it, one line per module; nothing else here changes.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

from rocketrio.actors.client.errors import NotFound
from rocketrio.cli.dates import format_ms
from rocketrio.cli.failure import EXIT_FAILED, EXIT_OK, Wiring, one_line, run_tool
from rocketrio.protocol.bodies import perm_to_string
from rocketrio.protocol.controller_headers import MAX_EPOCH_END_OFFSET
from rocketrio.protocol.message import MessageExt
from rocketrio.protocol.serde import to_plain
from rocketrio.protocol.static_topic import LOGICAL_QUEUE_MOCK_BROKER_PREFIX

Command = Callable[[Any, argparse.Namespace], Awaitable[Any]]
Printer = Callable[[Any, argparse.Namespace], None]
AddArgs = Callable[[argparse.ArgumentParser], None]


@attrs.frozen
class AdminCommand:
    """One ``rocketrio admin`` subcommand: its options, its call and its human printer."""

    name: str
    help: str
    add_args: AddArgs
    run: Command
    printer: Printer
    controller: bool = False  # talks to the controller group (ControllerAdmin, -a)


@attrs.frozen
class Incomplete:
    """A command's result when only part of what was asked for exists: the part is printed,
    then ``problem`` on stderr, and the exit status is 1."""

    result: Any
    problem: str


_COMMANDS: dict[str, AdminCommand] = {}


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[("" if c is None else str(c)) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def command(
    name: str, help_: str, printer: Printer, *, controller: bool = False
) -> Callable[[AddArgs], Callable[[Command], Command]]:
    """Register ``fn(admin, args)`` as ``rocketrio admin <name>``; ``add_args`` adds its
    options (``-n`` and ``--json`` are added for every command)."""

    def with_args(add_args: AddArgs) -> Callable[[Command], Command]:
        def register(fn: Command) -> Command:
            if name in _COMMANDS:
                raise ValueError(f"admin command {name} is registered twice")
            _COMMANDS[name] = AdminCommand(name, help_, add_args, fn, printer, controller)
            return fn

        return register

    return with_args


# --- topic commands --------------------------------------------------------------------------


def print_done(result: Any, args: argparse.Namespace) -> None:
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


@command("updateTopic", "create or update a topic", print_done)(_topic_args)
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


@command("deleteTopic", "delete a topic from brokers and name servers", print_done)(_delete_args)
async def delete_topic(admin: Any, a: argparse.Namespace) -> str:
    await admin.topic_route(a.topic)  # an unknown topic is an error, not a silent no-op
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
        [o.brokerName, o.queueId, o.minOffset, o.maxOffset, format_ms(o.lastUpdateTimestamp)]
        for o in stats
    ]
    print(table(["broker", "queue", "min offset", "max offset", "last stored"], rows))
    physical = [o for o in stats if not o.brokerName.startswith(LOGICAL_QUEUE_MOCK_BROKER_PREFIX)]
    print(f"total messages: {sum(o.maxOffset - o.minOffset for o in physical)}")


@command("topicStatus", "per-queue offsets of a topic", _print_status)(_topic_only)
async def topic_status(admin: Any, a: argparse.Namespace) -> Any:
    # a static topic's logic queues follow its physical ones (as upstream's examineTopicStats)
    from rocketrio.actors.client.static_topic_admin import topic_status_with_logic

    return await topic_status_with_logic(admin, a.topic)


# --- cluster / broker ------------------------------------------------------------------------


def _no_args(p: argparse.ArgumentParser) -> None:
    pass


def _progress_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic")


def _print_progress(prog: Any, a: argparse.Namespace) -> None:
    rows = [
        [
            o.topic,
            o.brokerName,
            o.queueId,
            o.brokerOffset,
            o.consumerOffset,
            o.pullOffset,
            o.lag,
            format_ms(o.lastTimestamp),
        ]
        for o in sorted(prog.offsets, key=lambda o: (o.topic, o.brokerName, o.queueId))
    ]
    headers = ["topic", "broker", "queue", "broker offset", "consumer offset", "pull offset"]
    print(table([*headers, "lag", "last time"], rows))
    if not prog.offsets:
        print(f"group {prog.group} exists but has no consume offsets yet")
    print(f"consume tps: {prog.consume_tps:.2f}   total lag: {prog.total_lag}   "
          f"consumers online: {len(prog.clients)}")  # fmt: skip
    for c in prog.clients:
        print(f"  {c}")


@command("consumerProgress", "consumer group offsets and lag", _print_progress)(_progress_args)
async def consumer_progress(admin: Any, a: argparse.Namespace) -> Any:
    return await admin.consumer_progress(a.group, a.topic)


# --- controller mode (RIP-44) -----------------------------------------------------------------


def controller_command(
    name: str, help_: str, printer: Printer
) -> Callable[[AddArgs], Callable[[Command], Command]]:
    """A command that talks to the controller group (-a) and uses the name servers only to
    expand names: ``fn`` gets a `ControllerAdmin`."""
    return command(name, help_, printer, controller=True)


def _controller_arg(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument(
        "-a",
        "--controllerAddress",
        dest="controller",
        required=required,
        help='controller address(es), "host:port;host:port" (any replica; the leader is found)',
    )


def _print_controller_metadata(meta: Any, a: argparse.Namespace) -> None:
    print(f"group   {meta.group}")
    print(f"leader  {meta.controllerLeaderId} at {meta.controllerLeaderAddress}")
    rows = []
    for peer in (meta.peers or "").split(";"):
        node, _, addr = peer.strip().partition("-")
        if node:
            rows.append([node, addr, "leader" if node == meta.controllerLeaderId else "follower"])
    print(table(["peer", "address", "role"], rows))


@controller_command(
    "getControllerMetaData", "controller group, leader and peers", _print_controller_metadata
)(_controller_arg)
async def get_controller_metadata(admin: Any, a: argparse.Namespace) -> Any:
    return await admin.get_controller_metadata()


def _sync_state_args(p: argparse.ArgumentParser) -> None:
    _controller_arg(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerName", dest="broker_names", help='broker names, "a;b"')
    g.add_argument("-c", "--clusterName", dest="cluster", help="every broker set of a cluster")


def _print_sync_state_set(info: Any, a: argparse.Namespace) -> None:
    for name in sorted(info.replicasInfoTable):
        r = info.replicasInfoTable[name]
        print(
            f"{name}: master brokerId {r.masterBrokerId} at {r.masterAddress}, "
            f"masterEpoch {r.masterEpoch}, syncStateSetEpoch {r.syncStateSetEpoch}"
        )
        rows = [
            [m.brokerId, m.brokerAddress, "alive" if m.alive else "dead", state]
            for state, members in (
                ("in sync", r.inSyncReplicas),
                ("not in sync", r.notInSyncReplicas),
            )
            for m in members
        ]
        print(table(["brokerId", "address", "liveness", "state"], sorted(rows)))


@controller_command(
    "getSyncStateSet", "SyncStateSet and replicas of broker sets", _print_sync_state_set
)(_sync_state_args)
async def get_sync_state_set(admin: Any, a: argparse.Namespace) -> Any:
    names = [n.strip() for n in (a.broker_names or "").split(";") if n.strip()]
    info = await admin.get_sync_state_set(names, cluster=a.cluster)
    if a.cluster:
        names = await admin.broker_names_of_cluster(a.cluster)
    missing = [n for n in names if n not in info.replicasInfoTable]
    if not missing:
        return info
    unknown = f"broker set(s) {', '.join(missing)} unknown to the controller"
    if not info.replicasInfoTable:
        raise NotFound(unknown)
    return Incomplete(info, unknown)


def _elect_args(p: argparse.ArgumentParser) -> None:
    _controller_arg(p)
    p.add_argument("-c", "--clusterName", dest="cluster", required=True)
    p.add_argument("-bn", "--brokerName", dest="broker_name", required=True)
    p.add_argument("-b", "--brokerId", dest="broker_id", type=int, required=True)


def _print_elect(result: Any, a: argparse.Namespace) -> None:
    h, body = result.header, result.body
    group = body.brokerMemberGroup
    name = group.brokerName if group is not None else "the broker set"
    print(
        f"elect master of {name}: brokerId {h.masterBrokerId} at {h.masterAddress}, "
        f"masterEpoch {h.masterEpoch}, syncStateSetEpoch {h.syncStateSetEpoch}, "
        f"SyncStateSet {body.syncStateSet}"
    )


@controller_command("electMaster", "make a broker the master of its set", _print_elect)(_elect_args)
async def elect_master(admin: Any, a: argparse.Namespace) -> Any:
    return await admin.elect_master(a.cluster, a.broker_name, a.broker_id)


def _clean_args(p: argparse.ArgumentParser) -> None:
    _controller_arg(p)
    p.add_argument("-c", "--clusterName", dest="cluster")
    p.add_argument("-bn", "--brokerName", dest="broker_name", required=True)
    p.add_argument(
        "-b", "--brokerControllerIdsToClean", dest="broker_ids", help='"1;2"; none = whole set'
    )
    p.add_argument(
        "-l", "--cleanLivingBroker", dest="clean_living", action="store_true", help="also alive"
    )


@controller_command(
    "cleanBrokerMetadata", "forget brokerIds (or a whole set) in the controller", print_done
)(_clean_args)
async def clean_broker_metadata(admin: Any, a: argparse.Namespace) -> str:
    await admin.clean_broker_metadata(a.cluster, a.broker_name, a.broker_ids, a.clean_living)
    which = f"brokerIds {a.broker_ids}" if a.broker_ids else "all brokers"
    return f"cleaned {which} of {a.broker_name} from the controller"


def _epoch_args(p: argparse.ArgumentParser) -> None:
    _controller_arg(p, required=False)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", help="one broker, host:port")
    g.add_argument("-bn", "--brokerName", dest="broker_name", help="every replica of a set")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every broker of a cluster")


def _print_epochs(caches: Any, a: argparse.Namespace) -> None:
    for cache in caches:
        print(
            f"{cache.clusterName}/{cache.brokerName} brokerId {cache.brokerId}: "
            f"maxOffset {cache.maxOffset}"
        )
        rows = [
            [e.epoch, e.startOffset, "open" if e.endOffset >= MAX_EPOCH_END_OFFSET else e.endOffset]
            for e in cache.epochList
        ]
        print(table(["epoch", "start offset", "end offset"], rows))


@controller_command("getBrokerEpoch", "epoch entries of brokers", _print_epochs)(_epoch_args)
async def get_broker_epoch(admin: Any, a: argparse.Namespace) -> Any:
    return await admin.get_broker_epoch(a.broker_addr, cluster=a.cluster, broker_name=a.broker_name)


# --- messages --------------------------------------------------------------------------------


def _print_messages(msgs: Any, a: argparse.Namespace) -> None:
    msgs = msgs if isinstance(msgs, list) else [msgs]
    for m in msgs:
        body = m.body.decode(errors="replace")
        print(f"msgId          : {m.msg_id}")
        print(f"offsetMsgId    : {m.offset_msg_id}")
        print(f"topic / queue  : {m.topic} / {m.queue_id} (offset {m.queue_offset})")
        print(f"tags / keys    : {m.tags or ''} / {' '.join(m.keys)}")
        print(f"born           : {format_ms(m.born_timestamp)} at {m.born_host}")
        print(f"stored         : {format_ms(m.store_timestamp)} at {m.store_host}")
        print(f"reconsumeTimes : {m.reconsume_times}")
        print(f"properties     : {m.properties}")
        print(f"body           : {body[:200]}{'...' if len(body) > 200 else ''}")
        print()
    print(f"{len(msgs)} message(s)")


def _by_key_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-m", "--max", type=int, default=64)


@command("queryMsgByKey", "messages of a topic with a key", _print_messages)(_by_key_args)
async def query_msg_by_key(admin: Any, a: argparse.Namespace) -> Any:
    found = await admin.query_msg_by_key(a.topic, a.key, a.max)
    if not found:
        raise NotFound(f"no message with key {a.key} in topic {a.topic}")
    return found


# --- plumbing --------------------------------------------------------------------------------


def load_command_modules() -> None:
    """Import the modules that register more admin commands, one line per module, e.g.
    ``from rocketrio.cli import admin_acl  # noqa: F401``. Such a module imports `command`
    from here, so it is imported here (once the registry exists), not at the top."""
    from rocketrio.cli import (
        admin_auth,  # noqa: F401 (ACL 2.0 users and ACLs)
        admin_clean_unused_topic,  # noqa: F401 (cleanUnusedTopic)
        admin_config,  # noqa: F401 (configs, write perms, topic perm)
        admin_consume_mode,  # noqa: F401 (setConsumeMode, getConsumeMode)
        admin_consumer_status,  # noqa: F401 (consumerStatus)
        admin_container,  # noqa: F401 (addBroker, removeBroker: broker containers)
        admin_get_consumer_status,  # noqa: F401 (getConsumerStatus)
        admin_group_forbidden,  # noqa: F401 (updateAndGetGroupReadForbidden)
        admin_groups,  # noqa: F401 (groups, connections, topic lists)
        admin_ha,  # noqa: F401 (replication status)
        admin_msgs,  # noqa: F401 (message queries, printMsg, sendMessage, consumeMessage)
        admin_offsets,  # noqa: F401 (reset / skip / clone offsets)
        admin_pop,  # noqa: F401 (popProgress)
        admin_query_cq,  # noqa: F401 (queryCq)
        admin_resume_half,  # noqa: F401 (resumeCheckHalfMessage)
        admin_static,  # noqa: F401 (updateStaticTopic, remappingStaticTopic)
        admin_stats,  # noqa: F401 (clusterList, brokerStatus, statsAll)
    )


async def _call(a: argparse.Namespace, wiring: Wiring) -> Any:
    from rocketrio.actors.client.admin import MQAdmin
    from rocketrio.actors.client.config import request_signer
    from rocketrio.actors.client.controller_admin import ControllerAdmin

    cmd = _COMMANDS[a.admin_command]
    hook = request_signer(a.access_key, a.secret_key)  # ACL: sign every request
    if cmd.controller:
        async with ControllerAdmin(
            a.controller, a.namesrv, wiring.transport, request_hook=hook
        ) as controller_admin:
            return await cmd.run(controller_admin, a)
    async with MQAdmin(a.namesrv, wiring.transport, request_hook=hook) as admin:
        return await cmd.run(admin, a)


def _json_ready(result: Any) -> Any:
    if isinstance(result, list) and result and isinstance(result[0], MessageExt):
        return [_json_ready(m) for m in result]
    if isinstance(result, MessageExt):
        out = {f: getattr(result, f) for f in MessageExt._FIELDS if f != "body"}
        try:
            out["body"] = result.body.decode()
        except UnicodeDecodeError:
            out["body_base64"] = base64.b64encode(result.body).decode()
        out["msgId"] = result.msg_id
        return out
    return to_plain(result)


async def run_admin(a: argparse.Namespace, wiring: Wiring) -> int:
    """One admin command: call, print (table or ``--json``), exit status."""
    result = await _call(a, wiring)
    problem = None
    if isinstance(result, Incomplete):
        result, problem = result.result, result.problem
    if a.json:
        print(json.dumps(_json_ready(result), indent=2, default=str))
    else:
        _COMMANDS[a.admin_command].printer(result, a)
    if problem is not None:
        print(f"{a.tool}: {one_line(problem)}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def cmd_admin(a: argparse.Namespace) -> int:
    return run_tool(a.tool, run_admin, a)


def add_parser(sub: Any) -> None:
    load_command_modules()
    from rocketrio.cli.tools import add_credentials

    sp = sub.add_parser("admin", help="mqadmin-style administration")
    cmds = sp.add_subparsers(dest="admin_command", required=True, metavar="ADMIN_COMMAND")
    for name, cmd in _COMMANDS.items():
        c = cmds.add_parser(name, help=cmd.help)
        c.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="name server address(es)")
        c.add_argument("--json", action="store_true", help="machine-readable output")
        add_credentials(c)
        cmd.add_args(c)
        c.set_defaults(tool=f"rocketrio admin {name}", func=cmd_admin, run=run_admin)
    from rocketrio.cli import check_store  # offline: no name server, its own exit codes

    check_store.add_parser(cmds)
