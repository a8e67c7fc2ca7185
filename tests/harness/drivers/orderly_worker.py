"""An orderly consumer process for the system test (tests/system/test_orderly_processes.py).

    python -m tests.harness.drivers.orderly_worker <namesrv> <group> <topic> <out-file> <work-ms>

Consumes ``<topic>`` with an `OrderlyPushConsumer` until SIGINT / SIGTERM, then shuts down
(last batches finish, offsets are committed, locks given back). Every message the listener
consumed is appended to ``<out-file>`` as one JSON line, written and flushed before the
listener returns SUCCESS: ``{"pid", "queue", "body", "start", "end", "reconsume"}`` (wall-clock
seconds, comparable between processes on one machine).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import IO

import trio

from rocketrio.actors.client.orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from rocketrio.actors.client.orderly_consumer import OrderlyPushConsumer
from rocketrio.protocol.message import MessageExt


def listener(out: IO[str], work_s: float):  # type: ignore[no-untyped-def]
    async def consume(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        start = time.time()
        await trio.sleep(work_s)
        end = time.time()
        for m in msgs:
            rec = {
                "pid": os.getpid(),
                "queue": ctx.message_queue.queueId,
                "body": m.body.decode(),
                "start": start,
                "end": end,
                "reconsume": m.reconsume_times,
            }
            out.write(json.dumps(rec) + "\n")
        out.flush()
        return ConsumeOrderlyStatus.SUCCESS

    return consume


async def main(namesrv: str, group: str, topic: str, path: str, work_ms: int) -> None:
    with open(path, "a", encoding="utf-8") as out:
        consumer = OrderlyPushConsumer(
            group, namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        )
        consumer.subscribe(topic, "*")
        consumer.register_listener(listener(out, work_ms / 1000))
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with consumer:
                print(f"orderly worker {os.getpid()} started", flush=True)
                async for _ in signals:
                    break
        print(f"orderly worker {os.getpid()} stopped", flush=True)


if __name__ == "__main__":
    ns, grp, tpc, file, work = sys.argv[1:6]
    trio.run(main, ns, grp, tpc, file, int(work))
