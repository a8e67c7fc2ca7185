"""What SQL92 filtering costs a pull: one queue of ``--count`` 1 KiB messages in a MessageStore,
read to the end in pulls of 32 through the broker's own read path (`read_selected` of
actors/broker/dispatch/filtered_read.py, the code PULL_MESSAGE and POP run), with no filter, a
TAG filter and SQL92 selectors of two selectivities. One JSON line: per case, the messages
handed out, the queue entries judged per second and the microseconds per entry.

Selectors are compiled once per subscription (not per pull) and judged on each record's
properties only (its body is never decoded). Without the bit-map a rejected record is still read
from the CommitLog and judged; ``sql_10pct_bitmap`` runs the same selector on a second store
filled with enableConsumeQueueExt and the selector registered as a heartbeat filter
(enableCalcFilterBitMap: its bloom bits computed at dispatch), so rejected records are skipped
on the ConsumeQueue ext. The figures to read: ``rejected_entry_us`` (a selector that matches
nothing, ``sql_none`` against ``sql_none_bitmap``: what one rejected entry costs judged and on
the bit-map, and the ratio), ``bitmap_speedup_10pct`` (the 10 % selector, whose matches are still
read and judged) and ``tag_10pct.us_per_entry`` (the ConsumeQueue's tag code skips a rejected
record without reading it); ``put_us_per_msg`` shows what computing the maps (two filters)
costs the put path (``plain`` vs ``bitmap``).

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

from rocketrio.actors.broker.dispatch.filter_data import ConsumerFilterManager
from rocketrio.actors.broker.dispatch.filtered_read import read_selected
from rocketrio.actors.broker.dispatch.message_filter import MessageSelector, sql_keep
from rocketrio.protocol.bodies import SubscriptionData
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


SQL_10PCT = "region = 'eu' AND price < 50"
SQL_NONE = "region = 'antarctica'"  # rejects every record: what a rejected entry costs


def fill(store: MessageStore, count: int) -> float:
    """Put ``count`` messages in batches of 256; returns the seconds it took."""
    started = time.perf_counter()
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
    return time.perf_counter() - started


def bitmap_store(root: str, count: int) -> tuple[MessageStore, list[MessageSelector], float]:
    """A store whose maps were computed with SQL_10PCT and SQL_NONE registered (two groups),
    their selectors probing the maps, and the seconds its fill took."""
    subs = {
        group: SubscriptionData(topic=TOPIC, subString=sql, expressionType="SQL92")
        for group, sql in (("g10", SQL_10PCT), ("none", SQL_NONE))
    }
    clock = [1]
    manager = ConsumerFilterManager(lambda group, topic: subs[group], now_ms=lambda: clock[0])
    datas = [manager.get(TOPIC, group) for group in subs]
    clock[0] = 2  # every map is computed after the filters' birth
    cfg = StoreConfig(mappedFileSizeCommitLog=256 << 20, enableConsumeQueueExt=True)
    store = MessageStore(root, cfg)
    store.set_filter_bitmaps(manager)
    store.open()
    secs = fill(store, count)
    sels = []
    for data in datas:
        assert data is not None
        sels.append(MessageSelector(None, sql_keep(data.compiled), manager.probe(data)))
    return store, sels, secs


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
        "sql_10pct": MessageSelector(None, sql_keep(parse_sql92(SQL_10PCT))),
        "sql_none": MessageSelector(None, sql_keep(parse_sql92(SQL_NONE))),
        "sql_100pct": MessageSelector(None, sql_keep(parse_sql92("price BETWEEN 0 AND 99"))),
    }
    out: dict[str, Any] = {"bench": "sql92_filter", "messages": args.count}
    try:
        store = MessageStore(f"{root}/plain", StoreConfig(mappedFileSizeCommitLog=256 << 20))
        store.open()
        plain_put = fill(store, args.count)
        bits, (bits_10, bits_none), bits_put = bitmap_store(f"{root}/bitmap", args.count)
        runs = [(name, store, sel) for name, sel in cases.items()]
        runs += [("sql_10pct_bitmap", bits, bits_10), ("sql_none_bitmap", bits, bits_none)]
        for name, on, sel in runs:
            trio.run(drain, on, sel)  # warm the page cache and the code
            got, secs = trio.run(drain, on, sel)
            out[name] = {
                "delivered": got,
                "entries_per_s": round(args.count / secs),
                "us_per_entry": round(secs / args.count * 1e6, 2),
            }
        slow, fast = out["sql_none"]["us_per_entry"], out["sql_none_bitmap"]["us_per_entry"]
        out["rejected_entry_us"] = {"judged": slow, "bitmap": fast, "ratio": round(slow / fast, 1)}
        out["bitmap_speedup_10pct"] = round(
            out["sql_10pct"]["us_per_entry"] / out["sql_10pct_bitmap"]["us_per_entry"], 1
        )
        out["put_us_per_msg"] = {
            "plain": round(plain_put / args.count * 1e6, 1),
            "bitmap": round(bits_put / args.count * 1e6, 1),
        }
        store.close()
        bits.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
