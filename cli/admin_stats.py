"""``rocketrio admin clusterList | brokerStatus | statsAll``: mqadmin's runtime-figure commands.

Options and columns are mqadmin's (ClusterListSubCommand, BrokerStatusSubCommand,
StatsAllSubCommand in upstream tools/): the human output uses mqadmin's column layout so
scripts written for mqadmin's output keep working, with dates (not epoch ms) in brokerStatus;
``--json`` gives the same rows for scripts. The figures come from actors/client/admin_stats.py.

- ``clusterList [-c cluster] [-m] [-i seconds]``: one row per broker; ``-m`` the day counters
  view (#InTotalYest #OutTotalYest #InTotalToday #OutTotalToday); ``-i`` repeats every so many
  seconds until interrupted. A broker that does not answer is printed with empty figures and
  named on stderr (exit 1).
- ``brokerStatus -b addr | -c cluster``: the broker's GET_BROKER_RUNTIME_INFO table, sorted by
  key (with ``-c`` every broker of the cluster, each line prefixed by its address).
- ``statsAll [-a] [-t topic]``: per topic and consuming group: backlog, in / out TPS of the
  last minute and messages in / out over 24 hours (``-a``: only topics with traffic).
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

import trio

from rocketrio.actors.broker.store.figures import java_fixed
from rocketrio.actors.client.admin_stats import (
    BrokerFigures,
    TopicGroupStats,
    broker_status_of_cluster,
    cluster_figures,
    stats_all,
)
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.cli.admin import Incomplete, command
from rocketrio.cli.dates import dated_kv
from rocketrio.protocol.serde import to_plain

# --- clusterList -----------------------------------------------------------------------------

_BASE_HEAD = "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %16s  %-22s  %-11s  %-12s  %-8s  %-10s"
_BASE_ROW = "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %16s  %-22s  %11s  %-12s  %-8s  %10s"
_MORE_HEAD = "%-16s  %-32s %14s %14s %14s %14s"
_STATS_FMT = "%-64s  %-64s %12s %11s %11s %14s %14s"


_SPEC = re.compile(r"%(-?)(\d*)[sd]")


def printf(fmt: str, *args: object) -> str:
    """Java ``String.format`` for the ``%[-][width]s`` / ``%[-][width]d`` specs mqadmin's
    tables use (numbers with decimals are formatted before, with `_f`)."""
    it = iter(args)

    def one(m: re.Match[str]) -> str:
        text = str(next(it))
        width = int(m.group(2) or 0)
        return text.ljust(width) if m.group(1) else text.rjust(width)

    return _SPEC.sub(one, fmt)


def _f(x: float, digits: int, width: int = 0) -> str:
    """Java ``%<width>.<digits>f`` (HALF_UP rounding)."""
    return java_fixed(x, digits).rjust(width)


def cluster_base_lines(rows: list[BrokerFigures]) -> list[str]:
    head = (
        "#Cluster Name",
        "#Broker Name",
        "#BID",
        "#Addr",
        "#Version",
        "#InTPS(LOAD)",
        "#OutTPS(LOAD)",
        "#Timer(Progress)",
        "#PCWait(ms)",
        "#Hour",
        "#SPACE",
        "#ACTIVATED",
    )
    lines = [printf(_BASE_HEAD, *head)]
    for r in rows:
        timer = (
            f"{r.timerReadBehind}-{r.timerOffsetBehind}"
            f"({_f(r.timerCongestNum / 10000.0, 1)}w, {_f(r.timerEnqueueTps, 1)}, "
            f"{_f(r.timerDequeueTps, 1)})"
        )
        lines.append(
            printf(
                _BASE_ROW,
                r.cluster,
                r.brokerName,
                r.brokerId,
                r.addr,
                r.version,
                f"{_f(r.inTps, 2, 9)}({r.sendQueueSize},{r.sendQueueHeadWaitMs}ms)",
                f"{_f(r.outTps, 2, 9)}({r.pullQueueSize},{r.pullQueueHeadWaitMs}ms)",
                timer,
                r.pageCacheLockTimeMills,
                _f(r.hours, 2, 2),
                _f(r.space, 4),
                "true" if r.active else "false",
            )
        )
    return lines


def cluster_more_lines(rows: list[BrokerFigures]) -> list[str]:
    head = ("#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest")
    lines = [printf(_MORE_HEAD, *head, "#InTotalToday", "#OutTotalToday")]
    for r in rows:
        lines.append(
            printf(
                _MORE_HEAD,
                r.cluster,
                r.brokerName,
                r.inTotalYesterday,
                r.outTotalYesterday,
                r.inTotalToday,
                r.outTotalToday,
            )
        )
    return lines


def _print_cluster(rows: list[BrokerFigures], a: argparse.Namespace) -> None:
    lines = cluster_more_lines(rows) if a.more else cluster_base_lines(rows)
    print("\n".join(lines))


def _cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterName", dest="cluster", help="which cluster")
    p.add_argument("-m", "--moreStats", dest="more", action="store_true", help="print more stats")
    p.add_argument(
        "-i", "--interval", type=int, help="print again every so many seconds, until interrupted"
    )


def _unanswered(rows: list[BrokerFigures]) -> str | None:
    bad = [f"{r.brokerName} {r.addr} ({r.error})" for r in rows if r.error]
    return f"no runtime figures from {'; '.join(bad)}" if bad else None


@command("clusterList", "brokers of every cluster with runtime figures", _print_cluster)(
    _cluster_args
)
async def cluster_list(admin: Any, a: argparse.Namespace) -> Any:
    rows = await cluster_figures(admin, a.cluster)
    while a.interval:
        # mqadmin -i: print now and every interval until interrupted (Ctrl-C)
        if a.json:
            print(json.dumps(to_plain(rows)), flush=True)
        else:
            _print_cluster(rows, a)
            print(flush=True)
        await trio.sleep(a.interval)
        rows = await cluster_figures(admin, a.cluster)
    problem = _unanswered(rows)
    return rows if problem is None else Incomplete(rows, problem)


# --- brokerStatus ----------------------------------------------------------------------------


def _broker_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker", help="broker address host:port")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every broker of this cluster")


def _print_kv(result: dict[str, Any], a: argparse.Namespace) -> None:
    if a.broker:
        for k, v in sorted(dated_kv(result).items()):
            print(f"{k:<32}: {v}")
        return
    for addr, kv in result.items():
        for k, v in sorted(dated_kv(kv).items()):
            print(f"{addr:<24} {k:<32}: {v}")


@command("brokerStatus", "runtime statistics of a broker", _print_kv)(_broker_args)
async def broker_status(admin: Any, a: argparse.Namespace) -> Any:
    if a.cluster:
        tables = await broker_status_of_cluster(admin, a.cluster)
        bad = [f"{addr} ({kv['error']})" for addr, kv in tables.items() if "error" in kv]
        if bad:
            ok = {addr: kv for addr, kv in tables.items() if "error" not in kv}
            return Incomplete(ok, f"no runtime figures from {'; '.join(bad)}")
        return tables
    try:
        return await admin.broker_status(a.broker)
    except RemotingError as e:
        raise MQClientError(f"{e}; {await _registration_of(admin, a.broker)}") from None


async def _registration_of(admin: Any, addr: str) -> str:
    """What the name server knows of a broker address, for an error line."""
    from rocketrio.cli.failure import one_line

    try:
        info = await admin.cluster_info()
    except (RemotingError, MQClientError) as e:
        return f"the name server could not be asked either ({one_line(str(e))})"
    for name, bd in sorted(info.brokerAddrTable.items()):
        for bid, known in bd.brokerAddrs.items():
            if known == addr:
                return f"the name server lists it as {name} brokerId {bid}"
    known_addrs = sorted(a for bd in info.brokerAddrTable.values() for a in bd.brokerAddrs.values())
    return (
        f"{addr} is not a broker registered at the name server "
        f"(registered: {', '.join(known_addrs) or 'none'})"
    )


# --- statsAll --------------------------------------------------------------------------------


def stats_all_lines(rows: list[TopicGroupStats]) -> list[str]:
    head = ("#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS")
    lines = [printf(_STATS_FMT, *head, "#InMsg24Hour", "#OutMsg24Hour")]
    for r in rows:
        topic = r.topic[:64]
        if r.group is None:
            lines.append(
                printf(_STATS_FMT, topic, "", 0, _f(r.inTps, 2), "", r.inMsg24Hour, "NO_CONSUMER")
            )
            continue
        lines.append(
            printf(
                _STATS_FMT,
                topic,
                r.group[:64],
                r.accumulation,
                _f(r.inTps, 2),
                _f(r.outTps, 2),
                r.inMsg24Hour,
                r.outMsg24Hour,
            )
        )
    return lines


def _print_stats_all(rows: list[TopicGroupStats], a: argparse.Namespace) -> None:
    print("\n".join(stats_all_lines(rows)))


def _stats_all_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--activeTopic", dest="active", action="store_true", help="active only")
    p.add_argument("-t", "--topic", help="this topic only")


@command("statsAll", "topic and consumer group TPS and 24-hour traffic", _print_stats_all)(
    _stats_all_args
)
async def stats_all_command(admin: Any, a: argparse.Namespace) -> Any:
    return await stats_all(admin, a.topic, a.active)
