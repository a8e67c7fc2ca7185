"""What SQL92 filtering costs a pull: one queue of ``--count`` 1 KiB messages in a MessageStore,
read to the end in pulls of 32 through the broker's own read path (`read_selected` of
actors/broker/dispatch/filtered_read.py, the code PULL_MESSAGE and POP run), with no filter, a
TAG filter and SQL92 selectors of two selectivities. One JSON line: per case, the messages
handed out, the queue entries judged per second and the microseconds per entry.

Selectors are compiled once per subscription (not per pull) and judged on each record's
properties only (its body is never decoded); there is no bloom-filter bit-map
(enableCalcFilterBitMap), so a rejected record is still read from the CommitLog. The figure to
read is ``sql_10pct.us_per_entry`` against ``tag_10pct.us_per_entry`` (the ConsumeQueue's
tag code skips a rejected record without reading it).

    .venv/bin/python bench/sql92_filter.py [--count 50000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from typing import Any

import trio

from rocketrio.actors.broker.dispatch.filtered_read import read_selected
from rocketrio.actors.broker.dispatch.message_filter import MessageSelector, sql_keep
from rocketrio.protocol.message import tags_hash_code
from rocketrio.protocol.sql92_parse import parse_sql92
from rocketrio.storage.message_store import GetResult, MessageStore, MessageToStore, StoreConfig

TOPIC = "SqlBench"
REGIONS = ("eu", "us", "asia", "latam", "africa")


class _View:
    """The two StoreView calls `read_selected` makes, on a MessageStore, inline."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store

    async def read_messages(self, *args: Any) -> GetResult:
        return self.store.get_messages(*args)


def fill(store: MessageStore, count: int) -> None:
    body = b"x" * 1024
    for start in range(0, count, 256):
        batch = [
            MessageToStore(
                topic=TOPIC,
                queue_id=0,
                body=body,
                properties={
                    "TAGS": f"t{i % 10}",
                    "region": REGIONS[i % len(REGIONS)],
                    "price": str(i % 100),
                    "UNIQ_KEY": f"U{i:012d}",
                },
                born_timestamp=1_700_000_000_000,
            )
            for i in range(start, min(count, start + 256))
        ]
        store.put_messages(batch, 1_700_000_000_000 + start)


async def drain(store: MessageStore, sel: MessageSelector) -> tuple[int, float]:
    """Pull the queue to its end (32 per pull); (messages handed out, seconds)."""
    view, offset, got = _View(store), 0, 0
    end = store.get_max_offset(TOPIC, 0)
    started = time.perf_counter()
    while offset < end:
        r = await read_selected(view, TOPIC, 0, offset, 32, 256 * 1024, sel)  # type: ignore[arg-type]
        got += r.message_count
        offset = r.next_begin_offset
    return got, time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=50_000)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="rocketrio-sql92-")
    cases = {
        "all": MessageSelector(None),
        "tag_10pct": MessageSelector({tags_hash_code("t3")}),
        "sql_10pct": MessageSelector(None, sql_keep(parse_sql92("region = 'eu' AND price < 50"))),
        "sql_100pct": MessageSelector(None, sql_keep(parse_sql92("price BETWEEN 0 AND 99"))),
    }
    out: dict[str, Any] = {"bench": "sql92_filter", "messages": args.count}
    try:
        store = MessageStore(root, StoreConfig(mappedFileSizeCommitLog=256 << 20))
        store.open()
        fill(store, args.count)
        for name, sel in cases.items():
            trio.run(drain, store, sel)  # warm the page cache and the code
            got, secs = trio.run(drain, store, sel)
            out[name] = {
                "delivered": got,
                "entries_per_s": round(args.count / secs),
                "us_per_entry": round(secs / args.count * 1e6, 2),
            }
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
