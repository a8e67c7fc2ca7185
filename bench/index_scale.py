"""Key index at scale: memory, add throughput, restart and lookup latency, one JSON line.

Fills a `MessageIndex` directly (no broker) with ``--keys`` distinct 32-hex-digit keys (like
UNIQ_KEYs), in batches of ``--batch`` as the put path does, flushing every ``--flush-every``
keys (the broker flushes every 500 ms). Then closes it, reopens it (``open_s``: a restart) and
times ``--lookups`` lookups of random stored keys (page cache warm), checking each finds its
message's offset. Figures:

- rss_mb            resident memory the filled index added to the process (/proc/self/statm)
- add_keys_per_s    `add_keys` alone; flush_s is the flushes' total time
- open_s            reopening after a clean close; lookup_p50_ms / lookup_p99_ms
- disk_mb           the index files' allocated blocks

and the same for a reference measured in the same run, so ratios do not depend on the
machine: a plain dict ``key hash -> offset`` of the same keys (what the old index loaded at
start; its ``open_s`` rebuilds the dict from the old format's 16-byte records). Each side runs
in its own child process, so neither sees the other's memory. ``--index-only`` skips the
reference (a dict of 10 M keys takes about a gigabyte).

    .venv/bin/python bench/index_scale.py [--keys 1000000] [--batch 32]
    .venv/bin/python bench/index_scale.py --keys 10000000 --index-only
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

from rocketrio.storage.index_file import MessageIndex, key_hash, key_hash_from, key_hash_seed

TOPIC = "BenchTopic"
MSG_BYTES = 1024  # commitlog offsets as if every message took 1 KiB
_MIX = 0x9E3779B97F4A7C15
_OLD_RECORD = struct.Struct(">Qq")


def key_of(i: int) -> str:
    """The i-th key: unique, its first half spread like a random id."""
    return f"{(i * _MIX) & 0xFFFFFFFFFFFFFFFF:016X}{i:016X}"


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def percentiles(samples: list[float]) -> tuple[float, float]:
    samples.sort()
    return samples[len(samples) // 2] * 1000, samples[int(len(samples) * 0.99)] * 1000


def run_index(args: argparse.Namespace) -> dict[str, float]:
    root = tempfile.mkdtemp(prefix="rocketrio-index-bench-")
    try:
        before = rss_mb()
        ix = MessageIndex(root)
        ix.open(0)
        add_s = flush_s = 0.0
        since_flush = 0
        for first in range(0, args.keys, args.batch):
            ids = range(first, min(first + args.batch, args.keys))
            keys = [key_of(i).encode() for i in ids]
            offsets = [i * MSG_BYTES for i in ids]
            t = time.perf_counter()
            ix.add_keys(TOPIC, keys, offsets)
            add_s += time.perf_counter() - t
            since_flush += len(keys)
            if since_flush >= args.flush_every:
                t = time.perf_counter()
                ix.flush()
                flush_s += time.perf_counter() - t
                since_flush = 0
        t = time.perf_counter()
        ix.flush()
        flush_s += time.perf_counter() - t
        filled = rss_mb() - before
        ix.close()
        t = time.perf_counter()
        ix = MessageIndex(root)
        ix.open(1 << 62)
        open_s = time.perf_counter() - t
        rng = random.Random(7)
        lat = []
        for _ in range(args.lookups):
            i = rng.randrange(args.keys)
            t = time.perf_counter()
            found = ix.lookup(TOPIC, key_of(i))
            lat.append(time.perf_counter() - t)
            if i * MSG_BYTES not in found:
                raise AssertionError(f"key {i} not found: {found}")
        p50, p99 = percentiles(lat)
        files = [os.path.join(ix.dir, n) for n in ix.files]
        disk = sum(os.stat(p).st_blocks * 512 for p in files) / 2**20
        ix.close()
        return {
            "rss_mb": round(filled, 1),
            "add_keys_per_s": round(args.keys / add_s),
            "flush_s": round(flush_s, 3),
            "open_s": round(open_s, 4),
            "lookup_p50_ms": round(p50, 4),
            "lookup_p99_ms": round(p99, 4),
            "disk_mb": round(disk, 1),
            "files": len(files),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_dict(args: argparse.Namespace) -> dict[str, float]:
    seed = key_hash_seed(TOPIC)
    before = rss_mb()
    table: dict[int, int] = {}
    add_s = 0.0
    for first in range(0, args.keys, args.batch):
        ids = range(first, min(first + args.batch, args.keys))
        keys = [key_of(i).encode() for i in ids]
        t = time.perf_counter()
        for i, k in zip(ids, keys, strict=True):
            table[key_hash_from(seed, k)] = i * MSG_BYTES
        add_s += time.perf_counter() - t
    filled = rss_mb() - before
    log = b"".join(_OLD_RECORD.pack(h, off) for h, off in table.items())
    t = time.perf_counter()
    rebuilt = dict(_OLD_RECORD.iter_unpack(log))  # the old index's start: records -> dict
    open_s = time.perf_counter() - t
    del log, table
    rng = random.Random(7)
    lat = []
    for _ in range(args.lookups):
        i = rng.randrange(args.keys)
        t = time.perf_counter()
        found = rebuilt.get(key_hash(TOPIC, key_of(i)))
        lat.append(time.perf_counter() - t)
        if found != i * MSG_BYTES:
            raise AssertionError(f"key {i} not found")
    p50, p99 = percentiles(lat)
    return {
        "rss_mb": round(filled, 1),
        "add_keys_per_s": round(args.keys / add_s),
        "open_s": round(open_s, 4),
        "lookup_p50_ms": round(p50, 4),
        "lookup_p99_ms": round(p99, 4),
    }


def child(part: str, args: argparse.Namespace) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--part", part]
    for name in ("keys", "batch", "flush_every", "lookups"):
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--flush-every", type=int, default=50_000)
    ap.add_argument("--lookups", type=int, default=2000)
    ap.add_argument("--index-only", action="store_true", help="skip the dict reference")
    ap.add_argument("--part", choices=["index", "dict"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.part is not None:  # a child process: one side's figures
        print(json.dumps(run_index(args) if args.part == "index" else run_dict(args)))
        return
    out: dict[str, object] = {"bench": "index_scale", "keys": args.keys, "batch": args.batch}
    index = child("index", args)
    out["index"] = index
    if not args.index_only:
        ref = child("dict", args)
        out["reference_dict"] = ref
        out["ratio_index_to_dict"] = {
            k: round(index[k] / ref[k], 3) if ref[k] else None
            for k in ("rss_mb", "add_keys_per_s", "open_s", "lookup_p50_ms", "lookup_p99_ms")
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
