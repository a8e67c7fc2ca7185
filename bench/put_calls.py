"""Python calls and CPU per single put in the store's put path: `MessageStore.put_messages`
of ONE message at a time (what a Java client's plain send becomes), its properties a text as
the broker stamps it (TAGS, KEYS, UNIQ_KEY, WAIT, CLUSTER). Prints ONE JSON line:
``calls_per_put`` (every call the interpreter made under cProfile, divided by the puts),
``py_functions_per_put`` (the Python frames among them) and ``cpu_us_per_put`` (process CPU of
a second, unprofiled run of the same puts). Runs in a temporary directory.

    .venv/bin/python bench/put_calls.py [--count 20000] [--per-put 1]

``--per-put N`` puts N messages per call instead (a store turn's run of single sends: the
Java Producer's turns hold ~15-35); the figures stay per message.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import tempfile
import time

from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig

BORN = 1_700_000_000_000


def _messages(count: int, first: int) -> list[MessageToStore]:
    body = b"x" * 1024
    return [
        MessageToStore(
            topic="BenchTopic",
            queue_id=i % 4,
            body=body,
            properties=f"TAGS\x01TagA\x02KEYS\x01k{i}\x02UNIQ_KEY\x01{i:032X}\x02WAIT\x01true"
            "\x02CLUSTER\x01DefaultCluster\x02",
            born_timestamp=BORN,
            born_host=(b"\x7f\x00\x00\x01", 50000),
        )
        for i in range(first, first + count)
    ]


def _run(store: MessageStore, msgs: list[MessageToStore], per_put: int = 1) -> None:
    put = store.put_messages
    if per_put == 1:
        for i, m in enumerate(msgs):
            put([m], BORN + i)
        return
    for i in range(0, len(msgs), per_put):
        put(msgs[i : i + per_put], BORN + i)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--per-put", type=int, default=1)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="rr-put-calls-")
    try:
        store = MessageStore(root, StoreConfig())
        store.open()
        _run(store, _messages(2000, 0))  # warm
        msgs = _messages(args.count, 10**6)
        prof = cProfile.Profile()
        prof.enable()
        _run(store, msgs, args.per_put)
        prof.disable()
        stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
        calls = sum(v[1] for v in stats.values())
        py = sum(v[1] for k, v in stats.items() if not k[0].startswith("~"))
        msgs = _messages(args.count, 2 * 10**6)
        start = time.process_time()
        _run(store, msgs, args.per_put)
        cpu = time.process_time() - start
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    n = args.count
    print(
        json.dumps(
            {
                "calls_per_put": round(calls / n, 2),
                "py_functions_per_put": round(py / n, 2),
                "cpu_us_per_put": round(cpu / n * 1e6, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
