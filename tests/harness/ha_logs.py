"""Commit-log bytes and epochs for the HA connection cores' tests: whole records of a chosen size
(blank-padded segments like the CommitLog's), epoch records and a slave core to feed them.
"""

from __future__ import annotations

import random

from rocketrio.actors.broker.ha.slave_core import (
    SlaveCore,
)
from rocketrio.protocol.message import BLANK_MAGIC_CODE, append_record
from rocketrio.storage.epoch_file import EpochRecord

SEG = 4096


def recs(*pairs: tuple[int, int]) -> list[EpochRecord]:
    return [EpochRecord(e, s) for e, s in pairs]


_BLANK = BLANK_MAGIC_CODE.to_bytes(4, "big", signed=True)


def record(body: bytes, offset: int) -> bytes:
    parts: list = []
    append_record(
        parts, "T", 0, body, 0, b"", 0, 0, (b"\x7f\x00\x00\x01", 1), 0,
        (b"\x7f\x00\x00\x01", 2), 0, 0, 0, offset,
    )  # fmt: skip
    return b"".join(parts)


def build_log(n: int, seed: int) -> bytes:
    """A CommitLog image: records rolling over segments with a BLANK fill, like the store."""
    rng = random.Random(seed)
    out = bytearray()
    for _ in range(n):
        body = rng.randbytes(rng.randint(1, 300))
        rec = record(body, len(out))
        room = SEG - len(out) % SEG
        if len(rec) + 8 > room:
            out += room.to_bytes(4, "big") + _BLANK + bytes(room - 8)
            rec = record(body, len(out))
        out += rec
    return bytes(out)


def slave(expected_epoch: int = 2) -> SlaveCore:
    return SlaveCore(
        broker_id=2, expected_epoch=expected_epoch, segment_size=SEG,
        heartbeat_interval_ms=1000, housekeeping_interval_ms=5000,
    )  # fmt: skip
