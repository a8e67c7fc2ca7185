"""`rocketrio admin checkStore --store DIR`: verify a broker store offline (read-only).

Runs `rocketrio.storage.store_check.check_store` on the directory (storePathRootDir) and prints
a summary, then every problem and warning with its file and offset. Exit status: 0 when no
problem was found (warnings allowed: a torn tail a crash left, which recovery cuts), 1 when
there is a problem, 2 when the arguments are wrong. Nothing is written and no lock is taken, so
it may run beside the broker that owns the store. With ``-c broker.conf`` the store directory
and the file sizes come from the broker's config (``--store`` still wins).

    rocketrio admin checkStore --store ~/store
    rocketrio admin checkStore -c broker-a.conf --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from rocketrio.storage.store_check import CheckReport, check_store


def add_parser(cmds: Any) -> None:
    """Register ``checkStore`` under the ``admin`` sub-commands."""
    c = cmds.add_parser("checkStore", help="verify a broker store offline (read-only)")
    c.add_argument("--store", help="the store directory (storePathRootDir)")
    c.add_argument("-c", "--config", help="broker.conf: storePathRootDir and file sizes")
    c.add_argument(
        "--segment-size",
        type=int,
        help="mappedFileSizeCommitLog (default: from the file names or the config, else 1 GiB)",
    )
    c.add_argument("--cq-file-size", type=int, help="mappedFileSizeConsumeQueue")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.set_defaults(func=cmd_check_store)


def cmd_check_store(a: argparse.Namespace) -> int:
    store, segment_size, cq_size, epoch_file = a.store, a.segment_size, a.cq_file_size, None
    if a.config:
        from rocketrio.actors.broker.boot.config import BrokerConfig
        from rocketrio.protocol.config import ConfigError, load_config

        try:
            cfg = load_config(BrokerConfig, a.config, {})
        except ConfigError as e:
            print(f"rocketrio admin checkStore: config error: {e}", file=sys.stderr)
            return 2
        store = store or cfg.storePathRootDir
        segment_size = segment_size or cfg.mappedFileSizeCommitLog
        cq_size = cq_size or cfg.mappedFileSizeConsumeQueue
        epoch_file = cfg.epoch_file_path
    if not store:
        print("rocketrio admin checkStore: give --store DIR (or -c broker.conf)", file=sys.stderr)
        return 2
    report = check_store(
        store, segment_size=segment_size, cq_file_size=cq_size, epoch_file=epoch_file
    )
    if a.json:
        print(json.dumps(_plain(report), indent=2))
    else:
        print(summary(report))
    return 0 if report.ok else 1


def summary(r: CheckReport) -> str:
    ckpts = ", ".join(f"{os.path.basename(p)} {s}" for p, s in r.checkpoints.items())
    lines = [
        f"store {r.store}",
        f"  commitlog: {r.segments} segments of {r.segment_size} bytes, {r.records} records "
        f"checked (CRC included), data [{r.commitlog_min}, {r.commitlog_end})",
        f"  consume queues: {r.queues} queues, {r.cq_entries} entries checked",
        f"  checkpoints: {ckpts or 'none'}",
        "  epoch file: " + ("none" if r.epochs is None else f"{r.epochs} entries"),
    ]
    lines += [f.line() for f in r.findings]
    verdict = "OK" if r.ok else "DAMAGED"
    lines.append(f"{verdict}: {len(r.problems)} problem(s), {len(r.warnings)} warning(s)")
    return "\n".join(lines)


def _plain(r: CheckReport) -> dict[str, Any]:
    return {
        "store": r.store,
        "ok": r.ok,
        "segmentSize": r.segment_size,
        "segments": r.segments,
        "records": r.records,
        "bytesChecked": r.bytes_checked,
        "commitlogMinOffset": r.commitlog_min,
        "commitlogValidEnd": r.commitlog_end,
        "queues": r.queues,
        "cqEntries": r.cq_entries,
        "checkpoints": r.checkpoints,
        "epochs": r.epochs,
        "findings": [
            {
                "severity": "problem" if f.severe else "warning",
                "file": f.file,
                "offset": f.offset,
                "what": f.what,
            }
            for f in r.findings
        ],
    }
