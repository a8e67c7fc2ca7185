"""`rocketrio admin haStatus`: replication status of brokers (mqadmin's HAStatusSubCommand).

``-b host:port`` asks one broker, ``-c cluster`` every broker of a cluster (masters and slaves;
mqadmin asks only the masters, but a slave that lost its master shows up only in its own
view); ``-i N`` repeats every N seconds (``-i`` alone: 3, as mqadmin) until interrupted.

Per broker, from its GET_BROKER_HA_STATUS (907) answer: a master prints its CommitLog end, how
many slaves are connected and how many are in its SyncStateSet, then a row per connected slave
(address, ack offset, diff, in sync, KB/s transferred in the last second, the offset it
transfers from); a slave prints its master's HA address, its CommitLog end, KB/s received,
when it last read from and wrote to the master (local dates) and the master's confirmed
offset. ``--json`` prints ``{broker address: body}`` with each body in upstream's HARuntimeInfo
shape and epoch-ms timestamps.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import trio

from rocketrio.actors.client.admin import broker_addrs_of
from rocketrio.actors.client.errors import MQClientError, UsageError
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.cli.admin import Incomplete, command, table
from rocketrio.cli.dates import format_ms
from rocketrio.cli.failure import one_line
from rocketrio.protocol.ha_bodies import HARuntimeInfo
from rocketrio.protocol.serde import to_plain

DEFAULT_INTERVAL_S = 3  # mqadmin's -i without a value


def _ha_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker", help="one broker, host:port")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every broker of a cluster")
    p.add_argument(
        "-i",
        "--interval",
        type=int,
        nargs="?",
        const=DEFAULT_INTERVAL_S,
        help=f"repeat every N seconds until interrupted (no N: {DEFAULT_INTERVAL_S})",
    )


def _kbps(bytes_per_s: int) -> str:
    return f"{bytes_per_s / 1024:.2f}"


def _print_master(addr: str, info: HARuntimeInfo) -> None:
    conns = info.haConnectionInfo
    print(f"broker {addr}: master")
    print(f"  CommitLog max offset  {info.masterCommitLogMaxOffset}")
    print(f"  slaves connected      {len(conns)}")
    print(f"  slaves in sync        {info.inSyncSlaveNums}")
    if not conns:
        return
    rows = [
        [
            c.addr,
            c.slaveAckOffset,
            c.diff,
            "yes" if c.inSync else "no",
            _kbps(c.transferredByteInSecond),
            c.transferFromWhere,
        ]
        for c in conns
    ]
    headers = ["slave address", "ack offset", "diff", "in sync", "transfer KB/s", "from where"]
    print("  " + table(headers, rows).replace("\n", "\n  "))


def _print_slave(addr: str, info: HARuntimeInfo) -> None:
    c = info.haClientRuntimeInfo
    master = c.masterAddr or "unknown (not following a master yet)"
    print(f"broker {addr}: slave")
    print(f"  master HA address     {master}")
    print(f"  CommitLog max offset  {c.maxOffset}")
    print(f"  transfer KB/s         {_kbps(c.transferredByteInSecond)}")
    print(f"  last read             {format_ms(c.lastReadTimestamp)}")
    print(f"  last write            {format_ms(c.lastWriteTimestamp)}")
    print(f"  master flush offset   {c.masterFlushOffset}")


def print_ha_status(statuses: dict[str, HARuntimeInfo], a: argparse.Namespace) -> None:
    for i, (addr, info) in enumerate(statuses.items()):
        if i:
            print()
        (_print_master if info.master else _print_slave)(addr, info)


async def _collect(admin: Any, a: argparse.Namespace) -> dict[str, HARuntimeInfo] | Incomplete:
    if a.broker:
        return {a.broker: await admin.broker_ha_status(a.broker)}
    addrs = broker_addrs_of(await admin.cluster_info(), a.cluster)
    statuses: dict[str, HARuntimeInfo] = {}
    failed: list[str] = []
    for addr in addrs:
        try:
            statuses[addr] = await admin.broker_ha_status(addr)
        except (RemotingError, MQClientError) as e:
            failed.append(f"{addr} ({one_line(str(e))})")
    if not failed:
        return statuses
    problem = f"no HA status from {'; '.join(failed)}"
    if not statuses:
        raise MQClientError(problem)
    return Incomplete(statuses, problem)


def _emit(result: dict[str, HARuntimeInfo] | Incomplete, a: argparse.Namespace) -> None:
    """One round of ``-i``: what run_admin prints for a single run."""
    problem = None
    if isinstance(result, Incomplete):
        result, problem = result.result, result.problem
    if a.json:
        print(json.dumps(to_plain(result), indent=2))
    else:
        print_ha_status(result, a)
        print()
    if problem is not None:
        print(f"{a.tool}: {problem}", file=sys.stderr)
    sys.stdout.flush()


@command("haStatus", "replication status: a master's slaves, a slave's master", print_ha_status)(
    _ha_args
)
async def ha_status(admin: Any, a: argparse.Namespace) -> Any:
    if a.interval is None:
        return await _collect(admin, a)
    if a.interval < 1:
        raise UsageError(f"-i/--interval must be at least 1 second, not {a.interval}")
    while True:
        _emit(await _collect(admin, a), a)
        await trio.sleep(a.interval)
