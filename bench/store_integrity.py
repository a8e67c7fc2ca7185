"""Integrity checks of the store, in process: recovery verification, checkStore, pull check.

Fills a store with ``--mb`` MiB of 1 KiB messages (4 queues, 64 MiB segments), flushes, then
prints ONE JSON line with:
- recovery_verify_mb_per_s      `MessageStore.open` after an unclean shutdown and without its
                                flushed checkpoint, so every record of every segment is checked,
                                CRC included (a restart with its checkpoint scans only the
                                unflushed tail; the page cache is warm: this is the CPU cost)
- recovery_layout_only_mb_per_s the same with checkCRCOnRecover=false (layout checks only)
- check_store_mb_per_s          `check_store` (rocketrio admin checkStore): records, CRC, every
                                consume-queue entry read back
- pull_check_on_us_per_msg / pull_check_off_us_per_msg / pull_check_cost_pct: the store's pull
                                path (get_messages, 32 per call, all 4 queues) over data a clean
                                start did not check (checkCRCOnPull on), against the same reads
                                with the key off, alternated 3 times in this run (medians)

    .venv/bin/python bench/store_integrity.py [--mb 256]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

from rocketrio.storage.commitlog import CHECKPOINT_FILE
from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig
from rocketrio.storage.store_check import check_store

SEGMENT = 64 * 1024 * 1024
QUEUES = 4
BODY = b"x" * 1024


def _config(**over: bool) -> StoreConfig:
    return StoreConfig(mappedFileSizeCommitLog=SEGMENT, messageIndexEnable=False, **over)


def _fill(path: str, mb: int) -> int:
    store = MessageStore(path, _config())
    store.open()
    count = 0
    batch = [
        MessageToStore(topic="B", queue_id=i % QUEUES, body=BODY, properties={"UNIQ_KEY": f"U{i}"})
        for i in range(64)
    ]
    while store.get_commitlog_max_offset() < mb * 1024 * 1024:
        store.put_messages(batch, 1_700_000_000_000 + count)
        count += len(batch)
    store.flush()
    return count  # left open: the abort marker stays, as after kill -9


def _recover(path: str, crc: bool) -> float:
    ckpt = os.path.join(path, "commitlog", CHECKPOINT_FILE)
    if os.path.exists(ckpt):
        os.unlink(ckpt)  # without it the scan covers every segment
    store = MessageStore(path, _config(checkCRCOnRecover=crc))
    t0 = time.perf_counter()
    report = store.open()
    took = time.perf_counter() - t0
    assert report.commitlog.full_scan
    mb = report.commitlog.bytes_scanned / 1024 / 1024
    # leave the abort marker: the next open is unclean again
    store.close_files()
    return mb / took


def _pull(path: str, check: bool, count: int) -> float:
    store = MessageStore(path, _config(checkCRCOnPull=check))
    store.open()
    t0 = time.perf_counter()
    got = 0
    for q in range(QUEUES):
        offset = 0
        while True:
            res = store.get_messages("B", q, offset, 32, 1 << 30)
            if not res.message_count:
                break
            got += res.message_count
            offset = res.next_begin_offset
    took = time.perf_counter() - t0
    assert got == count, (got, count)
    store.close()
    return took / got * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rocketrio-integrity-")
    try:
        count = _fill(work, args.mb)
        verify = statistics.median(_recover(work, True) for _ in range(3))
        layout = statistics.median(_recover(work, False) for _ in range(3))
        t0 = time.perf_counter()
        report = check_store(work)
        took = time.perf_counter() - t0
        assert report.ok, [f.line() for f in report.findings]
        check_mb = report.bytes_checked / 1024 / 1024 / took
        # a clean close, then clean opens: nothing below the checkpoint is checked at start,
        # so the pull check has every record to do
        MessageStore(work, _config()).open()
        store = MessageStore(work, _config())
        store.open()
        store.close()
        on, off = [], []
        for _ in range(3):
            on.append(_pull(work, True, count))
            off.append(_pull(work, False, count))
        on_us, off_us = statistics.median(on), statistics.median(off)
        print(
            json.dumps(
                {
                    "bench": "store_integrity",
                    "mb": args.mb,
                    "messages": count,
                    "recovery_verify_mb_per_s": round(verify),
                    "recovery_layout_only_mb_per_s": round(layout),
                    "check_store_mb_per_s": round(check_mb),
                    "pull_check_on_us_per_msg": round(on_us, 3),
                    "pull_check_off_us_per_msg": round(off_us, 3),
                    "pull_check_cost_pct": round((on_us / off_us - 1) * 100, 1),
                }
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
