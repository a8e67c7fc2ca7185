"""The POP ACK and END_TRANSACTION pieces of issue 28 item 5, CPU time per call.

Prints one JSON line: the ACK_MESSAGE and END_TRANSACTION headers from extFields, the receipt
parse, the ACK SUCCESS answer (built and encoded), a half read back by CommitLog offset with its
properties (a store in a temporary directory). Best of 3 x 20,000 calls, `time.process_time`, so
another process on the cores does not count. Run it with the venv of the tree to measure, e.g.
`cd ../main && .venv/bin/python ../rocketrio/bench/pop_txn_pieces.py`: it imports that tree's code
(a tree without protocol/answer_frames.py encodes the answer as `make_response` + `encode_command`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from rocketrio.actors.broker.transaction.policy import half_message
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import EndTransactionRequestHeader
from rocketrio.protocol.message_format import encode_properties
from rocketrio.protocol.pop_extra_info import ExtraInfo
from rocketrio.protocol.pop_headers import AckMessageRequestHeader
from rocketrio.protocol.remoting import RemotingCommand, encode_command
from rocketrio.protocol.serde import from_ext, to_ext
from rocketrio.storage.message_store import MessageStore, MessageToStore
from rocketrio.storage.store_types import StoreConfig

try:
    from rocketrio.protocol.answer_frames import empty_answer_frame
except ImportError:  # a tree before the second pass
    empty_answer_frame = None

CALLS = 20_000
RECEIPT = "1234 1764360000000 60000 3 0 bench-pop 2 1240"


def cpu_us(f: Callable[[], Any]) -> float:
    """Process CPU per call of ``f``, best of 3 x CALLS."""
    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        for _ in range(CALLS):
            f()
        best = min(best, (time.process_time() - t) / CALLS * 1e6)
    return round(best, 2)


def headers() -> tuple[dict[str, str], dict[str, str]]:
    ack = AckMessageRequestHeader(
        consumerGroup="bench_pop", topic="BenchPop", queueId=2, extraInfo=RECEIPT, offset=1240
    )
    end = EndTransactionRequestHeader(
        producerGroup="bench_tx",
        tranStateTableOffset=12,
        commitLogOffset=123456,
        commitOrRollback=8,
        msgId="7F000001ABCD",
        topic="BenchTx",
        fromTransactionCheck=False,
        transactionId="7F0000011234",
    )
    return to_ext(ack), to_ext(end)


def stored_half(store: MessageStore) -> int:
    """A 1 KiB transactional message stored as its half; its CommitLog offset."""
    props = {"UNIQ_KEY": "7F0000011234ABCDEF01", "WAIT": "true", "PGROUP": "bench_tx",
             "TRAN_MSG": "true"}  # fmt: skip
    msg = MessageToStore(
        topic="BenchTx",
        queue_id=1,
        body=b"x" * 1024,
        properties=encode_properties(props),
        born_host=(b"\x7f\0\0\1", 5555),
    )
    return store.put_messages([half_message(msg)], 1764360000000)[0].commitlog_offset


def main() -> None:
    ack, end = headers()
    req = RemotingCommand(RequestCode.ACK_MESSAGE, opaque=123456, ext_fields=ack)

    def answer() -> bytes | None:
        if empty_answer_frame is not None:
            return empty_answer_frame(req, ResponseCode.SUCCESS)
        return encode_command(req.make_response(ResponseCode.SUCCESS))

    work = tempfile.mkdtemp(prefix="rocketrio-pieces-")
    try:
        store = MessageStore(work, StoreConfig())
        store.open()
        off = stored_half(store)

        def read_back() -> object:
            half = store.look_message_by_offset(off)
            assert half is not None
            return half.properties

        out = {
            "ack_header_us": cpu_us(lambda: from_ext(AckMessageRequestHeader, ack)),
            "end_header_us": cpu_us(lambda: from_ext(EndTransactionRequestHeader, end)),
            "receipt_parse_us": cpu_us(lambda: ExtraInfo.parse(RECEIPT)),
            "ack_answer_us": cpu_us(answer),
            "half_read_back_us": cpu_us(read_back),
        }
        store.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
