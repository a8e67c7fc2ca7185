"""`rocketrio chaos (--dir UPDIR | --targets FILE) [--duration 2m] [--seed N | --fault NAME
[--fault NAME...]] [--every 15s] [--hold 4s] ...`: the flags, the refusals, the run.

Refused (exit 2, one line) before anything is touched: bad flags, a target that is not a
running `up` (or a readable target file), any address that is not on this machine's loopback,
a fault named with ``--fault`` that cannot run here (say why: no root for tc, a store on the
shared root filesystem...). A random schedule (no ``--fault``) leaves unavailable kinds out and
says so.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from typing import Any, NoReturn

import trio

from rocketrio.cli.chaos.blkio import Throttle
from rocketrio.cli.chaos.faults import Injector, unavailable_kinds
from rocketrio.cli.chaos.runner import EXIT_REFUSED, Options, command_line, default_out_dir
from rocketrio.cli.chaos.schedule import (
    RANDOM_POOL,
    FaultKind,
    ScheduleError,
    Timing,
    parse_fault,
    parse_seconds,
    plan,
    usable,
)
from rocketrio.cli.chaos.targets import (
    Cluster,
    TargetError,
    from_config_file,
    from_up_dir,
    not_local,
)


def _refuse(line: str) -> int:
    print(f"rocketrio chaos: {line}", file=sys.stderr)
    return EXIT_REFUSED


def _cluster(a: argparse.Namespace) -> Cluster:
    cluster = from_up_dir(a.dir) if a.dir else from_config_file(a.targets)
    if far := not_local(cluster):
        raise TargetError(
            f"{far[0]} is not on this machine's loopback; chaos injects faults only into local "
            "processes"
        )
    return cluster


def _options(a: argparse.Namespace, cluster: Cluster) -> Options:
    timing = Timing(
        duration_s=parse_seconds(a.duration), warmup_s=parse_seconds(a.warmup),
        drain_s=parse_seconds(a.drain), every_s=parse_seconds(a.every),
        hold_s=parse_seconds(a.hold),
    )  # fmt: skip
    unavailable = unavailable_kinds(cluster)
    if a.fault:
        for name in a.fault:
            for step in parse_fault(name):
                if step.kind in unavailable:
                    raise ScheduleError(f"--fault {name}: {unavailable[step.kind]}")
        names, seed = tuple(a.fault), None
    else:
        try:
            left_out = frozenset(FaultKind(k) for k in a.exclude or ())
        except ValueError as e:
            raise ScheduleError(f"--exclude: {e}; kinds: "
                                f"{', '.join(k.value for k in FaultKind)}") from None  # fmt: skip
        names = usable(RANDOM_POOL, frozenset(unavailable) | left_out)
        seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1, 10**6)
    plan(timing, names, seed)  # refuse a schedule with no room before touching anything
    tag = time.strftime("%Y%m%dT%H%M%S")
    out = os.path.abspath(a.out) if a.out else default_out_dir(cluster.up_dir, tag)
    throttle = Throttle(
        a.slow_disk_bps, a.slow_disk_iops,
        a.slow_disk_bps if a.slow_disk_read_bps is None else a.slow_disk_read_bps,
        a.slow_disk_iops if a.slow_disk_read_iops is None else a.slow_disk_read_iops,
    )  # fmt: skip
    try:
        throttle.check()
    except ValueError as e:
        raise ScheduleError(str(e)) from None
    return Options(timing, names, seed, a.rate, a.slow_kbit, parse_seconds(a.drain_timeout),
                   out, command_line(), throttle)  # fmt: skip


def cmd_chaos(a: argparse.Namespace) -> int:
    try:
        cluster = _cluster(a)
        opts = _options(a, cluster)
    except (TargetError, ScheduleError) as e:
        return _refuse(str(e))
    os.makedirs(opts.out_dir, exist_ok=True)
    from rocketrio.actors.observe.logs import configure_logging
    from rocketrio.cli.chaos.runner import execute

    configure_logging("chaos", "chaos", opts.out_dir, console=None)

    def say(line: str) -> None:
        print(line, flush=True)

    injector = Injector(cluster, opts.slow_kbit, say, opts.throttle)
    return trio.run(execute, injector, opts, say)


class _ChaosParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_REFUSED, f"rocketrio chaos: {message}\n")


def add_parser(sub: Any) -> None:
    sp = sub.add_parser(
        "chaos",
        help="inject faults into a running local cluster under a traced workload; check "
        "that nothing acknowledged is lost",
        description="Inject faults (kill, suspend, partition, delay, full or slow disk, "
        "controller-leader kill, combinations) into a cluster running on this machine while a "
        "traced workload runs; then check that nothing acknowledged was lost, order held, "
        "delays and transactions were honoured, metadata did not drift, and time each recovery "
        "(docs/chaos.md).",
    )
    sp.__class__ = _ChaosParser
    target = sp.add_mutually_exclusive_group(required=True)
    target.add_argument("--dir", help="the --dir of a running rocketrio up")
    target.add_argument("--targets", help="a JSON file of processes (docs/chaos.md)")
    sp.add_argument("--duration", default="2m", help="the whole run (default 2m)")
    sp.add_argument("--seed", type=int, help="random schedule from this seed (default: drawn)")
    sp.add_argument(
        "--fault", action="append",
        help="a named fault, e.g. kill-master or suspend-slave+kill-master (repeatable: taken "
        "in turn); default: a random schedule over every available kind",
    )  # fmt: skip
    sp.add_argument(
        "--exclude", action="append", metavar="KIND",
        help="leave a fault kind out of a random schedule (repeatable), e.g. slowdisk to replay "
        "a seed drawn when it was unavailable",
    )  # fmt: skip
    sp.add_argument("--every", default="15s", help="time between fault starts (mean if random)")
    sp.add_argument("--hold", default="4s", help="how long a healable fault lasts")
    sp.add_argument("--warmup", default="10s", help="no fault before this")
    sp.add_argument("--drain", default="20s", help="no fault in the last part of the run")
    sp.add_argument(
        "--drain-timeout", default="60s",
        help="after the producers stop, how long to wait for the consumers to catch up",
    )  # fmt: skip
    sp.add_argument("--rate", type=float, default=5.0, help="sends per second per producer kind")
    sp.add_argument(
        "--slow-kbit", type=int, default=256,
        help="a delay fault limits the target's outgoing packets to this many kbit/s",
    )  # fmt: skip
    sp.add_argument(
        "--slow-disk-bps", type=int, default=Throttle().write_bps,
        help="a slowdisk fault limits the store disk's writes to this many bytes/s (0: no "
        "limit; default 1 MiB/s)",
    )  # fmt: skip
    sp.add_argument(
        "--slow-disk-iops", type=int, default=Throttle().write_iops,
        help="... and to this many write I/Os per second (0: no limit; default 10: an fsync "
        "then takes 100-300 ms)",
    )  # fmt: skip
    sp.add_argument("--slow-disk-read-bps", type=int,
                    help="the read limit in bytes/s (default: as --slow-disk-bps)")  # fmt: skip
    sp.add_argument(
        "--slow-disk-read-iops", type=int,
        help="the read limit in I/Os per second (default: as --slow-disk-iops)",
    )  # fmt: skip
    sp.add_argument("--out", help="result directory (default <dir>/chaos/<time>)")
    sp.set_defaults(func=cmd_chaos)
