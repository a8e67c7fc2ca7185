"""`rocketrio admin` config and permission commands, mqadmin's names and options:

    getBrokerConfig        -b host:port | -c cluster          (-c: masters and slaves)
    updateBrokerConfig     -b host:port | -c cluster [-a]  -k key -v value   (-a: slaves too)
    getNamesrvConfig       [-n "ns1;ns2"]                     (every name server of -n)
    updateNamesrvConfig    -k key -v value [-n "ns1;ns2"]
    getControllerConfig    -a "c1;c2"                         (each replica listed)
    updateControllerConfig -a "c1;c2" -k key -v value         (each replica: its own config)
    wipeWritePerm          -b brokerName [-n "ns1;ns2"]       (routes lose W on each -n)
    addWritePerm           -b brokerName [-n "ns1;ns2"]
    updateTopicPerm        -t topic -p 2|4|6  -b host:port | -c cluster
    deleteExpiredCommitLog -b host:port | -c cluster          (-c: masters and slaves)

An update only takes keys the server can change while it runs; a key that needs a restart, an
unknown key, a bad value or a black-listed key is refused with the server's remark and nothing
changes (exit 1). Commands that reach several servers report each; if any failed, the others'
results are printed and the command exits 1 naming the failures. Registered from cli/admin.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import attrs

from rocketrio.actors.client import config_admin as ca
from rocketrio.actors.client.errors import MQClientError, NotFound, UsageError
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.cli.admin import Incomplete, command, controller_command, table
from rocketrio.cli.failure import one_line
from rocketrio.protocol.bodies import perm_to_string

T = TypeVar("T")
R = TypeVar("R")


@attrs.frozen
class Done:
    """One server's part of an update: the line printed for it."""

    server: str
    line: str


async def _each(
    items: Sequence[T], call: Callable[[T], Awaitable[R]], name: Callable[[T], str]
) -> list[R] | Incomplete:
    """``call`` for every item; the failures become an `Incomplete` (all failed: the first
    failure is raised, so the exit status and line are the server's own)."""
    results: list[R] = []
    failed: list[tuple[str, Exception]] = []
    for item in items:
        try:
            results.append(await call(item))
        except (MQClientError, RemotingError) as e:
            failed.append((name(item), e))
    if failed and not results:
        raise failed[0][1]
    if failed:
        problem = "; ".join(f"{who}: {one_line(str(e))}" for who, e in failed)
        return Incomplete(results, f"failed on {len(failed)} of {len(items)}: {problem}")
    return results


def _print_done(result: list[Done], a: argparse.Namespace) -> None:
    for d in result:
        print(d.line)


def _print_configs(result: list[ca.ServerConfig], a: argparse.Namespace) -> None:
    for cfg in result:
        print(f"============{cfg.server}============")
        print(table(["key", "value"], sorted(cfg.values.items())))
        print()


def _key_value(p: argparse.ArgumentParser) -> None:
    p.add_argument("-k", "--key", required=True, help="config key (upstream name)")
    p.add_argument("-v", "--value", required=True, help="config value")


def _namesrvs(a: argparse.Namespace) -> list[str]:
    addrs = [x.strip() for x in a.namesrv.split(";") if x.strip()]
    if not addrs:
        raise UsageError("give the name server address(es) with -n")
    return addrs


# --- brokers -----------------------------------------------------------------------------------


def _broker_target(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker", help="one broker, host:port")
    g.add_argument("-c", "--clusterName", dest="cluster", help="the brokers of a cluster")


async def _brokers(admin: Any, a: argparse.Namespace, *, with_slaves: bool) -> list[Any]:
    if a.broker:
        return [ca.BrokerTarget(a.broker.strip())]
    return await ca.brokers_of_cluster(admin, a.cluster, with_slaves=with_slaves)


@command("getBrokerConfig", "config of a broker or of every broker of a cluster", _print_configs)(
    _broker_target
)
async def get_broker_config(admin: Any, a: argparse.Namespace) -> Any:
    targets = await _brokers(admin, a, with_slaves=True)
    return await _each(targets, lambda t: ca.get_broker_config(admin, t), lambda t: t.label)


def _update_broker_args(p: argparse.ArgumentParser) -> None:
    _broker_target(p)
    p.add_argument(
        "-a",
        "--updateAllBroker",
        dest="all_brokers",
        nargs="?",
        const="true",
        default="false",
        help="with -c: slaves too (mqadmin: -a true)",
    )
    _key_value(p)


@command("updateBrokerConfig", "change a live broker config key", _print_done)(_update_broker_args)
async def update_broker_config(admin: Any, a: argparse.Namespace) -> Any:
    slaves = str(a.all_brokers).strip().lower() == "true"
    targets = await _brokers(admin, a, with_slaves=slaves)
    values = {a.key.strip(): a.value.strip()}

    async def one(t: ca.BrokerTarget) -> Done:
        remark = await ca.update_broker_config(admin, t.addr, values)
        note = f" ({remark})" if remark else ""
        return Done(t.addr, f"update broker config success, {t.addr}{note}")

    return await _each(targets, one, lambda t: t.label)


@command(
    "deleteExpiredCommitLog",
    "delete expired CommitLog files now (whatever deleteWhen says)",
    _print_done,
)(_broker_target)
async def delete_expired_commit_log(admin: Any, a: argparse.Namespace) -> Any:
    targets = await _brokers(admin, a, with_slaves=True)

    async def one(t: ca.BrokerTarget) -> Done:
        await ca.delete_expired_commitlog(admin, t.addr)
        return Done(t.addr, f"delete expired commitlog requested, {t.addr}")

    return await _each(targets, one, lambda t: t.label)


# --- name servers ------------------------------------------------------------------------------


def _no_args(p: argparse.ArgumentParser) -> None:
    pass


@command("getNamesrvConfig", "config of every name server of -n", _print_configs)(_no_args)
async def get_namesrv_config(admin: Any, a: argparse.Namespace) -> Any:
    return await _each(_namesrvs(a), lambda ns: ca.get_namesrv_config(admin, ns), str)


@command("updateNamesrvConfig", "change a live name server key on every -n", _print_done)(
    _key_value
)
async def update_namesrv_config(admin: Any, a: argparse.Namespace) -> Any:
    values = {a.key.strip(): a.value.strip()}

    async def one(ns: str) -> Done:
        await ca.update_namesrv_config(admin, ns, values)
        return Done(ns, f"update name server config success! {ns}: {a.key} : {a.value}")

    return await _each(_namesrvs(a), one, str)


def _broker_name(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="broker name")


async def _known_broker_set(admin: Any, name: str) -> None:
    """An unknown broker name is an error (upstream's name server answers "OK, 0")."""
    info = await admin.cluster_info()
    if name not in info.brokerAddrTable:
        known = ", ".join(sorted(info.brokerAddrTable)) or "none"
        raise NotFound(f"broker {name} is not registered at the name server (known: {known})")


@command("wipeWritePerm", "routes of a broker set lose write perm on every -n", _print_done)(
    _broker_name
)
async def wipe_write_perm(admin: Any, a: argparse.Namespace) -> Any:
    await _known_broker_set(admin, a.broker_name)

    async def one(ns: str) -> Done:
        count = await ca.wipe_write_perm(admin, ns, a.broker_name)
        return Done(
            ns, f"wipe write perm of broker[{a.broker_name}] in name server[{ns}] OK, {count}"
        )

    return await _each(_namesrvs(a), one, lambda ns: f"name server[{ns}]")


@command("addWritePerm", "routes of a broker set get write perm back on every -n", _print_done)(
    _broker_name
)
async def add_write_perm(admin: Any, a: argparse.Namespace) -> Any:
    await _known_broker_set(admin, a.broker_name)

    async def one(ns: str) -> Done:
        count = await ca.add_write_perm(admin, ns, a.broker_name)
        return Done(
            ns, f"add write perm of broker[{a.broker_name}] in name server[{ns}] OK, {count}"
        )

    return await _each(_namesrvs(a), one, lambda ns: f"name server[{ns}]")


# --- topics ------------------------------------------------------------------------------------


def _topic_perm_args(p: argparse.ArgumentParser) -> None:
    _broker_target(p)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument(
        "-p", "--perm", type=int, required=True, choices=(2, 4, 6), help="2 W, 4 R, 6 RW"
    )


@command(
    "updateTopicPerm", "change a topic's perm on a broker or a cluster's masters", _print_done
)(_topic_perm_args)
async def update_topic_perm(admin: Any, a: argparse.Namespace) -> Any:
    targets = await _brokers(admin, a, with_slaves=False)

    async def one(t: ca.BrokerTarget) -> Done:
        try:
            tc = await ca.topic_config(admin, t.addr, a.topic)
        except MQClientError as e:
            raise NotFound(f"topic {a.topic} on broker {t.addr}: {e}") from None
        if tc.perm == a.perm:
            return Done(t.addr, f"new perm equals to the old one! ({a.topic} on {t.addr})")
        await ca.update_topic_config(admin, t.addr, attrs.evolve(tc, perm=a.perm))
        return Done(
            t.addr,
            f"update topic perm from {tc.perm} ({perm_to_string(tc.perm)}) to {a.perm} "
            f"({perm_to_string(a.perm)}) in {t.addr} success.",
        )

    return await _each(targets, one, lambda t: t.label)


# --- controllers -------------------------------------------------------------------------------


def _controllers(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-a",
        "--controllerAddress",
        dest="controller",
        required=True,
        help='controller replicas, "host:port;host:port" (each one is asked)',
    )


@controller_command("getControllerConfig", "config of each controller replica", _print_configs)(
    _controllers
)
async def get_controller_config(admin: Any, a: argparse.Namespace) -> Any:
    addrs = ca.controller_addrs(admin)
    return await _each(addrs, lambda c: ca.get_controller_config(admin, c), str)


def _update_controller_args(p: argparse.ArgumentParser) -> None:
    _controllers(p)
    _key_value(p)


@controller_command(
    "updateControllerConfig", "change a live key on each controller replica", _print_done
)(_update_controller_args)
async def update_controller_config(admin: Any, a: argparse.Namespace) -> Any:
    values = {a.key.strip(): a.value.strip()}

    async def one(c: str) -> Done:
        await ca.update_controller_config(admin, c, values)
        return Done(c, f"update controller config success! {c}: {a.key} : {a.value}")

    return await _each(ca.controller_addrs(admin), one, str)
