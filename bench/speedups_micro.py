"""Each compiled twin of `rocketrio.protocol._speedups` against its pure-Python reference: us
per call of each, and the process's RSS before and after a long run of the compiled one (a
reference leaked per call shows as RSS growing by tens of MiB over 1,000,000 calls).

    .venv/bin/python bench/speedups_micro.py [--calls 1000000] [--py-calls 100000]

Inputs are the send path's: a 16-message batch of 1 KiB bodies with a Java producer's
properties (`build_records`), the ROCKETMQ header of a Java SEND_MESSAGE_V2 (its decode) and
of a send answer (its encode), one 1 KiB record (`append_record`), a Java send's whole frame,
its V2 send header and its stored answer's frame; then each error path (a
truncated batch, a header whose lengths lie, a field out of range), whose references must be
released too; and a slave's twins on the records of one 64 x 1 KiB batch (`replica_cases`).
The compiled twins run ``--calls`` times, the Python ones
``--py-calls`` times (slower, and no leak to look for). Prints ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import mmap
import resource
import struct
import time
from collections.abc import Callable
from typing import Any

from rocketrio.actors.broker.send.handlers import parse_send_header_v2
from rocketrio.protocol import message_build, remoting, send_answer
from rocketrio.protocol.compiled import speedups
from rocketrio.protocol.headers import SendMessageRequestHeader
from rocketrio.protocol.message_build import BatchConstants, _batch_layout
from rocketrio.storage import dispatch_request, index_segment
from rocketrio.storage.commitlog import records

PROPS = (
    b"TAGS\x01TagA\x02KEYS\x01key-1\x02UNIQ_KEY\x017F0000014D2818B4AAC27A1A5F7B0000\x02"
    b"WAIT\x01true\x02"
)
SEND_V2 = {
    "a": "please_rename_unique_group_name_4", "b": "BenchmarkTest", "c": "TBW102", "d": "4",
    "e": "3", "f": "0", "g": "1732848000000", "h": "0", "i": "KEYS\x01key\x02WAIT\x01true\x02",
    "j": "0", "k": "false", "l": "0", "m": "false", "n": "broker-a",
}  # fmt: skip
ANSWER = {"msgId": "7F00000100002A9F0000000000001234", "queueId": "3", "queueOffset": "12345"}
UNIQ = "7F0000014D2818B4AAC27A1A5F7B0000"


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def per_call_us(fn: Callable[[], Any], calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def swallow(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[], Any]:
    """A call of fn that returns the exception it raises (the error paths' loop)."""

    def call() -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            return e

    return call


def batch_body(n: int) -> bytes:
    one = b"".join(
        (struct.pack(">iiiii", 20 + 1024 + 2 + len(PROPS), 0, 0, 0, 1024), b"m" * 1024,
         struct.pack(">H", len(PROPS)), PROPS)
    )  # fmt: skip
    return one * n


def python_frame(decoder: remoting.FrameDecoder) -> Any:
    """FrameDecoder.next_command's Python path on its one buffered frame, again and again."""
    decoder._pos = 0
    fast, remoting._next_rocketmq_frame = remoting._next_rocketmq_frame, None
    try:
        return decoder.next_command()
    finally:
        remoting._next_rocketmq_frame = fast


def cases() -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """Name -> (compiled call, Python call) on the same input."""
    assert speedups is not None, "the extension is not built (or ROCKETRIO_PURE_PYTHON is set)"
    const = BatchConstants(
        "BenchmarkTest", 3, 0, 1732848000000, (b"\x7f\x00\x00\x01", 5000), 1732848000001,
        (b"\x7f\x00\x00\x01", 10911), 0, b"CLUSTER\x01DefaultCluster\x02",
    )  # fmt: skip
    data = batch_body(16)
    extra, uniq_all, tags_all, mid, _, magic, topic_part = _batch_layout(const)
    c_args = (data, extra, uniq_all, tags_all, mid, magic, topic_part, 3, 10, 5000, 4 << 20, None,
              False)  # fmt: skip
    cmd = remoting.RemotingCommand(
        310, opaque=7, ext_fields=SEND_V2, body=b"x" * 1024, language="JAVA", version=453,
        serialize_type=1,
    )  # fmt: skip
    raw = remoting._rocketmq_header(cmd)
    body = cmd.body
    h_args = ("0", "PYTHON", 453, 7, 1, None, ANSWER)
    host = (b"\x7f\x00\x00\x01", 5000)
    r_args = ("BenchmarkTest", 3, b"m" * 1024, 0, PROPS, 0, 1732848000000, host, 1732848000001,
              host, 0, 0, 10, 5000)  # fmt: skip
    bad_r_args = (*r_args[:1], 2**31, *r_args[2:])
    frame = bytearray(remoting.encode_command(cmd))
    decoder = remoting.FrameDecoder()
    decoder.feed(bytes(frame))
    return {
        "build_records_16x1KiB": (
            lambda: speedups.build_records(*c_args),
            lambda: message_build._build_records_py(
                data, const, 10, 5000, 4 << 20, None, strip_crc=False
            ),
        ),
        "decode_rocketmq_header_send_v2": (
            lambda: speedups.decode_rocketmq_header(raw, body),
            lambda: remoting._decode_rocketmq_header_py(raw, body),
        ),
        "rocketmq_header_send_answer": (
            lambda: speedups.rocketmq_header(0, *h_args[1:]),
            lambda: remoting._rocketmq_header_of_py(0, *h_args[1:]),
        ),
        "append_record_1KiB": (
            lambda: speedups.append_record([], *r_args),
            lambda: message_build._append_record_py([], *r_args),
        ),
        # issue 28's fifth pass: a Java send's whole frame (its Python path: FrameDecoder's
        # checks and copies with the compiled header decode), header and answer
        "next_rocketmq_frame_send_v2": (
            lambda: speedups.next_rocketmq_frame(frame, 0, remoting.DEFAULT_MAX_FRAME),
            lambda: python_frame(decoder),
        ),
        "send_header_v2": (
            lambda: speedups.send_header_v2(SEND_V2, SendMessageRequestHeader),
            lambda: parse_send_header_v2(SEND_V2),
        ),
        "send_answer_frame": (
            lambda: send_answer._send_answer_frame_c(cmd, None, ANSWER["msgId"], 3, 12345, UNIQ),
            lambda: send_answer._send_answer_frame_py(cmd, None, ANSWER["msgId"], 3, 12345, UNIQ),
        ),
        # the error paths: a batch cut short (raises), a header that lies about a length
        # (declined), a record field out of range (handed to the twin, which raises)
        "build_records_truncated": (
            swallow(speedups.build_records, data[:-7], *c_args[1:]),
            swallow(
                message_build._build_records_py,
                data[:-7],
                const,
                10,
                5000,
                4 << 20,
                None,
                strip_crc=False,
            ),
        ),
        "decode_rocketmq_header_bad_length": (
            lambda: speedups.decode_rocketmq_header(raw[:-3], body),
            swallow(remoting._decode_rocketmq_header_py, raw[:-3], body),
        ),
        "append_record_out_of_range": (
            swallow(speedups.append_record, [], *bad_r_args),
            swallow(message_build._append_record_py, [], *bad_r_args),
        ),
    }


def replica_cases() -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """A slave's twins on what a master ships for one 64 x 1 KiB batch: the chunk's check
    (`check_replicated`), the dispatch of its records once confirmed (`replica_runs`), the index
    entries of their keys (`index_entries`); and a chunk whose last CRC is wrong (declined,
    then the reference raises)."""
    host = (b"\x7f\x00\x00\x01", 5000)
    parts: list[Any] = []
    at, seg = 1 << 20, 1 << 30
    for i in range(64):
        at += message_build._append_record_py(
            parts, "BenchmarkTest", 3, b"m" * 1024, 0, PROPS, 0, 1732848000000, host,
            1732848000001, host, 0, 0, 10 + i, at,
        )  # fmt: skip
    chunk = b"".join(parts)
    bad = chunk[:-5] + bytes([chunk[-5] ^ 1]) + chunk[-4:]
    items = records._check_replicated_py(1 << 20, chunk, seg, True)
    requests = dispatch_request.DispatchRequests([1000], indexed=True)
    ns = 5_000_000
    slots = memoryview(mmap.mmap(-1, 4 * ns)).cast("I")
    dirty = bytearray(-(-ns // 1024))
    his = [i * 2654435761 % 2**32 for i in range(64)]
    offsets = [item[0] for item in items]
    e_args = (slots, dirty, ns, his, his, offsets, 0, 64, 100)
    return {
        "check_replicated_64x1KiB": (
            lambda: speedups.check_replicated(1 << 20, chunk, seg, True),
            lambda: records._check_replicated_py(1 << 20, chunk, seg, True),
        ),
        "replica_runs_64": (
            lambda: speedups.replica_runs(items, True),
            lambda: dispatch_request.replica_runs_py(items, requests),
        ),
        "index_entries_64": (
            lambda: speedups.index_entries(*e_args),
            lambda: index_segment._index_entries_py(*e_args),
        ),
        "check_replicated_bad_crc": (
            swallow(records.check_replicated, 1 << 20, bad, seg, True),
            swallow(records._check_replicated_py, 1 << 20, bad, seg, True),
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--py-calls", type=int, default=100_000)
    args = ap.parse_args()
    out: dict[str, Any] = {}
    for name, (c_fn, py_fn) in {**cases(), **replica_cases()}.items():
        per_call_us(c_fn, 1000)  # warm
        before = rss_kib()
        c_us = per_call_us(c_fn, args.calls)
        after = rss_kib()
        py_us = per_call_us(py_fn, args.py_calls)
        out[name] = {
            "c_us": round(c_us, 3), "py_us": round(py_us, 3), "speedup": round(py_us / c_us, 1),
            "c_calls": args.calls, "rss_kib_before": before, "rss_kib_after": after,
        }  # fmt: skip
    print(json.dumps(out))


if __name__ == "__main__":
    main()
