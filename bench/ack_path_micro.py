"""CPU of one ACK_MESSAGE's broker path in process, from its decoded frame to its answer's
frame queued: `DirectAck` (the connection's direct path), `PopAckProcessor.ack_parsed` (the
receipt check, the offset check against a real store's consume queue, the batcher's queue),
then, per turn of ``--per-turn`` ACKs, the batcher's records built and every ACK answered
(its SUCCESS frame queued on a stub connection). No socket, no Trio loop, no store write: the
per-ACK Python the broker runs between the frame read and the socket write, which bench/pop.py
cannot resolve on a loaded VM (its figure moves by more than this path costs).

Runs in any tree that has the direct ACK path (it uses only constructors and the public
calls), so a "before" tree runs this same file:

    .venv/bin/python bench/ack_path_micro.py [--acks N] [--rounds R] [--per-turn K]

Prints ONE JSON line: us of process CPU per ACK for each round, and their median and minimum.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from typing import Any

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.pop.ack import PopAckProcessor
from rocketrio.actors.broker.pop.attempt import PopConfig
from rocketrio.actors.broker.pop.direct_ack import DirectAck
from rocketrio.actors.broker.static_topic.logic_store import LogicQueueStore
from rocketrio.actors.broker.store.view import ReadGate, StoreView
from rocketrio.actors.broker.tables.topic_config import TopicConfig, TopicConfigManager
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingManager
from rocketrio.protocol.codes import SERIALIZE_JSON, RequestCode
from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig

TOPIC, GROUP, POP_TIME, NOW_MS = "T", "G", 1_764_360_000_000, 1_764_360_000_005


class Conn:
    """A server connection as the ACK's answer sees it: frames queued, nothing sent."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.send_frame_nowait = self.frames.append

    def send_nowait(self, cmd: Any) -> None:
        raise AssertionError(f"a refusal: {cmd}")


class Requests:
    stopping = False


class Writer:
    def put_nowait(self, messages: Any, on_done: Any) -> None:
        raise AssertionError("the batcher refused an ACK")


def setup(root: str) -> tuple[DirectAck, PopAckProcessor, MessageStore]:
    store = MessageStore(root, StoreConfig(mappedFileSizeCommitLog=1 << 20))
    store.open()
    store.put_messages([MessageToStore(TOPIC, 0, b"m%d" % i) for i in range(64)], NOW_MS)
    view = StoreView(store, ReadGate())
    queues = LogicQueueStore(view, TopicQueueMappingManager("b", lambda: 0), None, None)  # type: ignore[arg-type]
    topics = TopicConfigManager(BrokerConfig(), lambda: NOW_MS)
    topics.table[TOPIC] = TopicConfig(TOPIC, 4, 4)
    acks = PopAckProcessor(
        PopConfig("b", "C", 6, "127.0.0.1", revive_queue_num=8),
        topics=topics,  # type: ignore[arg-type]
        order=None,  # type: ignore[arg-type]
        store=queues,
        writer=Writer(),  # type: ignore[arg-type]
        now_ms=lambda: NOW_MS,
        store_host=(b"\x7f\0\0\1", 10911),
        next_revive_qid=lambda: 0,
    )
    acks.batcher._puts.running = True  # its task's part is played by `one_round`
    return DirectAck(acks, Requests()), acks, store  # type: ignore[arg-type]


def requests(n: int) -> list[tuple[Any, ...]]:
    """Client ACK frames as the decoder hands them to the direct path (a `DirectRequest`)."""
    out = []
    for i in range(n):
        offset = i % 60
        ext = {
            "consumerGroup": GROUP,
            "topic": TOPIC,
            "queueId": "0",
            "extraInfo": f"{offset - offset % 32} {POP_TIME} 60000 {i % 8} 0 b 0 {offset}",
            "offset": str(offset),
        }
        out.append((int(RequestCode.ACK_MESSAGE), i + 1, ext, None, SERIALIZE_JSON, b""))
    return out


def one_round(direct: DirectAck, acks: PopAckProcessor, reqs: list[Any], per_turn: int) -> float:
    conn = Conn()
    puts = acks.batcher._puts
    t0 = time.process_time()
    for start in range(0, len(reqs), per_turn):
        for req in reqs[start : start + per_turn]:
            if direct(conn, req) is not None:  # type: ignore[arg-type]
                raise AssertionError("not taken inline")
        batch, puts._queued = puts._queued, []
        puts.to_messages(batch)  # the turn's records (merged per CK)
        puts.answer(batch, None)  # stored: every ACK answered
    cpu = time.process_time() - t0
    assert len(conn.frames) == len(reqs)
    return cpu * 1e6 / len(reqs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--acks", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--per-turn", type=int, default=16)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as root:
        direct, acks, store = setup(root)
        reqs = requests(a.acks)
        one_round(direct, acks, reqs[:2000], a.per_turn)  # warm
        us = [round(one_round(direct, acks, reqs, a.per_turn), 3) for _ in range(a.rounds)]
        store.close()
    print(
        json.dumps(
            {
                "bench": "ack_path_micro",
                "acks": a.acks,
                "per_turn": a.per_turn,
                "us_per_ack": us,
                "us_per_ack_median": statistics.median(us),
                "us_per_ack_min": min(us),
            }
        )
    )


if __name__ == "__main__":
    main()
