"""MessageStore micro benchmark: put and get throughput of 1 KiB messages, one JSON line.

Puts ``--count`` messages in batches of ``--batch`` (no fsync, like ASYNC_FLUSH), flushes once,
then pulls them all back with get_messages (``--pull`` messages per call) with and without a
tag filter. Runs in a temporary directory that is removed afterwards.

    .venv/bin/python bench/store_micro.py [--count 100000] [--batch 32] [--pull 32]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

from rocketrio.protocol.message import tags_hash_code
from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig

TOPIC = "BenchTopic"
QUEUES = 4


def _messages(count: int, body: bytes) -> list[MessageToStore]:
    return [
        MessageToStore(
            topic=TOPIC,
            queue_id=i % QUEUES,
            body=body,
            properties={"TAGS": "even" if i % 2 == 0 else "odd", "UNIQ_KEY": f"U{i:012d}"},
            born_timestamp=1_700_000_000_000,
            born_host=(b"\x7f\x00\x00\x01", 50000),
        )
        for i in range(count)
    ]


def _put(store: MessageStore, msgs: list[MessageToStore], batch: int) -> float:
    start = time.perf_counter()
    for i in range(0, len(msgs), batch):
        store.put_messages(msgs[i : i + batch], 1_700_000_000_000 + i)
    return time.perf_counter() - start


def _get(store: MessageStore, pull: int, tag_codes: set[int] | None) -> tuple[int, float]:
    got = 0
    start = time.perf_counter()
    for qid in range(QUEUES):
        offset = 0
        while True:
            res = store.get_messages(TOPIC, qid, offset, pull, 4 * 1024 * 1024, tag_codes)
            if res.message_count == 0 and res.next_begin_offset == offset:
                break
            got += res.message_count
            offset = res.next_begin_offset
    return got, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--pull", type=int, default=32)
    ap.add_argument("--body", type=int, default=1024)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="rocketrio-store-bench-")
    try:
        cfg = StoreConfig(mappedFileSizeCommitLog=64 * 1024 * 1024)
        store = MessageStore(os.path.join(root, "store"), cfg)
        store.open()
        msgs = _messages(args.count, b"x" * args.body)
        single = msgs[: min(len(msgs), 20_000)]
        put_single_s = _put(store, single, 1)
        put_s = _put(store, msgs, args.batch)
        flush_start = time.perf_counter()
        store.flush()
        flush_s = time.perf_counter() - flush_start
        got, get_s = _get(store, args.pull, None)
        got_even, get_tag_s = _get(store, args.pull, {tags_hash_code("even")})
        store.close()
        print(
            json.dumps(
                {
                    "bench": "store_micro",
                    "messages": args.count,
                    "body_bytes": args.body,
                    "put_batch": args.batch,
                    "put_msgs_per_s": round(args.count / put_s),
                    "put_batch1_msgs_per_s": round(len(single) / put_single_s),
                    "put_mb_per_s": round(args.count * args.body / put_s / 1e6, 1),
                    "flush_s": round(flush_s, 3),
                    "get_pull": args.pull,
                    "get_msgs_per_s": round(got / get_s),
                    "get_tag_filtered_msgs_per_s": round(got_even / get_tag_s),
                    "all_read": got == len(single) + args.count
                    and got_even == (len(single) + 1) // 2 + (args.count + 1) // 2,
                }
            )
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
