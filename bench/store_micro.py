"""MessageStore micro benchmark: put and get throughput of 1 KiB messages, one JSON line.

Puts ``--count`` messages in batches of ``--batch`` with `put_messages` (no fsync, like
ASYNC_FLUSH), and 20,000 one at a time; then the same through `put_batch_body`, the path of a
SEND_BATCH_MESSAGE request, from client-encoded batch bodies (``put_body_*``). Flushes once,
then pulls the `put_messages` topic back with get_messages (``--pull`` messages per call) with
and without a tag filter, and checks every message of both topics can be read. Last, a slave's
side of replication (``replica_apply_msgs_per_s``): the batch-bodies store's CommitLog bytes,
one client batch per transfer, go through `append_replicated` (every record checked, CRC
included) and `advance_confirm` (dispatched) on a replicated store, as a slave applies what
its master sends. Runs in a temporary directory that is removed afterwards.

    .venv/bin/python bench/store_micro.py [--count 100000] [--batch 32] [--pull 32]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

from rocketrio.protocol.message import BatchItem, encode_batch_body, tags_hash_code
from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig

TOPIC = "BenchTopic"
BODY_TOPIC = "BenchBatchTopic"
QUEUES = 4
BORN = 1_700_000_000_000
# what the broker appends to every message of a batch (request properties + CLUSTER)
# the batch-bodies CommitLog in one (sparse) segment: the replica frames are its records
_ONE_SEGMENT = 1 << 30
BATCH_PROPERTIES = "WAIT\x01true\x02CLUSTER\x01DefaultCluster\x02"


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
        store.put_messages(msgs[i : i + batch], BORN + i)
    return time.perf_counter() - start


def _batch_bodies(first: int, count: int, batch: int, body: bytes) -> list[bytes]:
    """Client-encoded SEND_BATCH_MESSAGE bodies, as a producer's MessageBatch.encode makes."""
    return [
        encode_batch_body(
            [
                BatchItem(
                    0, body, {"TAGS": "even" if j % 2 == 0 else "odd", "UNIQ_KEY": f"U{j:031d}"}
                )
                for j in range(i, min(i + batch, first + count))
            ]
        )
        for i in range(first, first + count, batch)
    ]


def _put_bodies(store: MessageStore, bodies: list[bytes]) -> float:
    born_host = (b"\x7f\x00\x00\x01", 50000)
    start = time.perf_counter()
    for i, body in enumerate(bodies):
        store.put_batch_body(
            BODY_TOPIC, i % QUEUES, body, BORN + i, properties=BATCH_PROPERTIES,
            born_timestamp=BORN, born_host=born_host,
        )  # fmt: skip
    return time.perf_counter() - start


def _get(
    store: MessageStore, pull: int, tag_codes: set[int] | None, topic: str = TOPIC
) -> tuple[int, float]:
    got = 0
    start = time.perf_counter()
    for qid in range(QUEUES):
        offset = 0
        while True:
            res = store.get_messages(topic, qid, offset, pull, 4 * 1024 * 1024, tag_codes)
            if res.message_count == 0 and res.next_begin_offset == offset:
                break
            got += res.message_count
            offset = res.next_begin_offset
    return got, time.perf_counter() - start


def _open(root: str, name: str, segment: int = 64 << 20, replicated: bool = False) -> MessageStore:
    store = MessageStore(
        os.path.join(root, name),
        StoreConfig(mappedFileSizeCommitLog=segment),
        replicated=replicated,
    )
    store.open()
    return store


def _bench_batch_bodies(
    root: str, count: int, batch: int, body: bytes, pull: int
) -> dict[str, int | bool]:
    """put_batch_body figures, measured on a store of their own so both paths start empty
    (appending to a page cache that already holds much unflushed data costs more kernel time).
    """
    store = _open(root, "batch-bodies", _ONE_SEGMENT)
    single = min(count, 20_000)
    body_single = _batch_bodies(0, single, 1, body)
    bodies = _batch_bodies(single, count, batch, body)
    put_single_s = _put_bodies(store, body_single)
    put_s = _put_bodies(store, bodies)
    got, _ = _get(store, pull, None, BODY_TOPIC)
    frames = _replica_frames(store, single, batch)
    store.close()
    replica = _open(root, "replica", _ONE_SEGMENT, replicated=True)
    apply_s = _apply(replica, frames)
    replica_got, _ = _get(replica, pull, None, BODY_TOPIC)
    replica.close()
    return {
        "put_body_msgs_per_s": round(count / put_s),
        "put_body_batch1_msgs_per_s": round(single / put_single_s),
        "put_body_all_read": got == single + count,
        "replica_apply_msgs_per_s": round((single + count) / apply_s),
        "replica_all_read": replica_got == single + count,
    }


def _replica_frames(store: MessageStore, single: int, batch: int) -> list[tuple[int, bytes]]:
    """The master's CommitLog as its slave receives it: (offset, bytes) per transfer, one
    record per transfer for the single puts, then one client batch each (the CommitLog is one
    segment, so it holds no BLANK record for transfers to carry)."""
    records, _ = store.commitlog.scan_records(0, store.get_commitlog_max_offset())
    frames: list[tuple[int, bytes]] = []
    i = 0
    while i < len(records):
        chunk = records[i : i + (1 if i < single else batch)]
        frames.append((chunk[0][0], b"".join(r for _, r in chunk)))
        i += len(chunk)
    return frames


def _apply(replica: MessageStore, frames: list[tuple[int, bytes]]) -> float:
    start = time.perf_counter()
    for offset, data in frames:
        end = replica.append_replicated(offset, data)
        replica.advance_confirm(end)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--pull", type=int, default=32)
    ap.add_argument("--body", type=int, default=1024)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="rocketrio-store-bench-")
    try:
        store = _open(root, "store")
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
        del msgs, single
        body_figures = _bench_batch_bodies(
            root, args.count, args.batch, b"x" * args.body, args.pull
        )
        print(
            json.dumps(
                {
                    "bench": "store_micro",
                    "messages": args.count,
                    "body_bytes": args.body,
                    "put_batch": args.batch,
                    "put_msgs_per_s": round(args.count / put_s),
                    "put_batch1_msgs_per_s": round(min(args.count, 20_000) / put_single_s),
                    "put_mb_per_s": round(args.count * args.body / put_s / 1e6, 1),
                    "put_body_msgs_per_s": body_figures["put_body_msgs_per_s"],
                    "put_body_batch1_msgs_per_s": body_figures["put_body_batch1_msgs_per_s"],
                    "replica_apply_msgs_per_s": body_figures["replica_apply_msgs_per_s"],
                    "flush_s": round(flush_s, 3),
                    "get_pull": args.pull,
                    "get_msgs_per_s": round(got / get_s),
                    "get_tag_filtered_msgs_per_s": round(got_even / get_tag_s),
                    "all_read": got == min(args.count, 20_000) + args.count
                    and got_even == (min(args.count, 20_000) + 1) // 2 + (args.count + 1) // 2
                    and body_figures["put_body_all_read"]
                    and body_figures["replica_all_read"],
                }
            )
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
