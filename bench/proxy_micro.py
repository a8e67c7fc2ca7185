"""The proxy's own Python per message of an SDK receive + ack, in-process (no sockets, no
grpcio): what `bench/proxy.py` cannot tell apart from grpcio's work.

- receive: a POP_MESSAGE response of 32 messages (1 KiB bodies) turned into the 32
  ReceiveMessageResponse messages the SDK reads: the client's decode of the response
  (`popped_messages`), the receipt handle of each (`encode_receipt`), the answer written in
  place (`fill_received`).
- ack: one AckMessage of one entry as the gRPC loop answers it (loop_remoting.py): the
  receipt handle decoded, the ACK_MESSAGE written, the broker's response decoded, the answer.

Prints one JSON line: us per message of each (median and min of ``--rounds`` rounds) and the
Python calls per message (cProfile, one extra round). Runs against whichever rocketrio the
interpreter imports, so one script times two trees:

    /work/ab-main/.venv/bin/python bench/proxy_micro.py     # before
    .venv/bin/python bench/proxy_micro.py                   # after
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

from rocketrio.actors.client import simple_consumer as sc
from rocketrio.actors.proxy import mapping as mp
from rocketrio.actors.proxy.ack_nowait import ack_answer, ack_ext
from rocketrio.actors.proxy.receipt import decode_receipt, encode_receipt
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.message import encode_properties
from rocketrio.protocol.message_build import build_stored_message
from rocketrio.protocol.pop_extra_info import ExtraInfo
from rocketrio.protocol.remoting import FrameDecoder, RemotingCommand, encode_command

TOPIC = "BenchPop"
BROKER = "broker-a"
BATCH = 32


def pop_response() -> RemotingCommand:
    """A POP_MESSAGE response as the broker writes it: 32 records of queue 0 from offset 100."""
    body = b"".join(
        build_stored_message(
            topic=TOPIC, queue_id=0, body=bytes(1024), flag=0,
            properties=encode_properties({"UNIQ_KEY": f"7F000001{i:024X}", "TAGS": "t"}),
            sys_flag=0, born_timestamp=1_700_000_000_000, born_host=(b"\x7f\0\0\1", 5000),
            store_timestamp=1_700_000_000_001, store_host=(b"\x7f\0\0\1", 10911),
            queue_offset=100 + i, physical_offset=4096 * i,
        )
        for i in range(BATCH)
    )  # fmt: skip
    ext = {
        "popTime": "1700000000123", "invisibleTime": "30000", "reviveQid": "0", "restNum": "0",
        "startOffsetInfo": "0 0 100",
        "msgOffsetInfo": "0 0 " + ",".join(str(100 + i) for i in range(BATCH)),
    }  # fmt: skip
    return RemotingCommand(ResponseCode.SUCCESS, ext_fields=ext, body=body, flag=1)


def popped(resp: RemotingCommand) -> list[Any]:
    """The client's decode of a POP response (`popped_messages`; before it existed, the same
    steps as `SimpleConsumer._pop` took them)."""
    fn = getattr(sc, "popped_messages", None)
    if fn is not None:
        return fn(resp, TOPIC, BROKER, False)  # type: ignore[no-any-return]
    rh = sc.from_ext(sc.PopMessageResponseHeader, resp.ext_fields)
    msgs = list(sc.iter_stored(resp.body))
    out = []
    for m, receipt in zip(msgs, sc.receipts_of(rh, msgs, BROKER), strict=True):
        count = sc.order_count_of({}, m.topic, m.queue_id, m.queue_offset)
        if count > 0:
            m.reconsume_times = count
        m.properties.setdefault(sc.PROPERTY_FIRST_POP_TIME, str(rh.popTime))
        out.append(sc.ReceivedMessage(m, TOPIC, BROKER, receipt))
    return out


def receive_once(resp: RemotingCommand) -> list[Any]:
    """What `ProxyService.receive_message` does per POP (without auto renewal)."""
    out = []
    for m in popped(resp):
        handle = encode_receipt(
            m.receipt_handle, m.message.queue_offset, m.message.commitlog_offset
        )
        out.append(answer := spb.ReceiveMessageResponse())
        mp.fill_received(answer.message, m.message, TOPIC, handle, 30_000)
    return out


def ack_request() -> Any:
    extra = ExtraInfo(100, 1_700_000_000_123, 30_000, 0, "0", BROKER, 0, 105).build()
    entry = spb.AckMessageEntry(message_id="M", receipt_handle=encode_receipt(extra, 105, 4096))
    return spb.AckMessageRequest(
        group=pb.Resource(name="G"), topic=pb.Resource(name=TOPIC), entries=[entry]
    )


def ack_once(req: Any, answer: bytes) -> Any:
    """What `LoopCalls._start_ack` and `_ack` do per ack, less the loop's own futures."""
    entry = req.entries[0]
    receipt = decode_receipt(entry.receipt_handle)
    cmd = RemotingCommand(
        RequestCode.ACK_MESSAGE, ext_fields=ack_ext(req.group.name, req.topic.name, receipt)
    )
    encode_command(cmd)
    decoder = FrameDecoder()
    decoder.feed(answer)
    resp = decoder.next_command()
    assert resp is not None
    return ack_answer(entry, resp, "127.0.0.1:10911")


def timed(fn: Callable[[], Any], per: int, reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / (reps * per) * 1e6


def calls(fn: Callable[[], Any], per: int, reps: int) -> float:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(reps):
        fn()
    prof.disable()
    stats = pstats.Stats(prof)
    return sum(s[1] for s in stats.stats.values()) / (reps * per)  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    resp = pop_response()
    req = ack_request()
    ok = RemotingCommand(ResponseCode.SUCCESS, opaque=7, flag=1)
    answer = encode_command(ok)
    cases: dict[str, tuple[Callable[[], Any], int]] = {
        "receive": (lambda: receive_once(resp), BATCH),
        "ack": (lambda: ack_once(req, answer), 1),
    }
    out: dict[str, Any] = {"bench": "proxy_micro"}
    for name, (fn, per) in cases.items():
        reps = args.reps if per > 1 else args.reps * BATCH
        fn()
        runs = [timed(fn, per, reps) for _ in range(args.rounds)]
        out[f"{name}_us_per_msg"] = round(statistics.median(runs), 2)
        out[f"{name}_us_per_msg_min"] = round(min(runs), 2)
        out[f"{name}_python_calls_per_msg"] = round(calls(fn, per, max(1, reps // 10)), 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
