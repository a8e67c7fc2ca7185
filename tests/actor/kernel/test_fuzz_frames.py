"""Malformed input: random, truncated and corrupted frames thrown at a Broker and a NameServer.

For a bounded number of rounds (seeded, replayable with FUZZ_SEED) each round opens a raw
connection and sends one kind of garbage: random bytes, a valid frame cut short, a valid frame
with flipped bytes, absurd lengths, valid frames with random codes / extFields / bodies. Both
servers must survive every round and afterwards serve a well-behaved client: route lookup, send,
pull back. A round whose frame is bad in a way that is certain (a length word out of range, a
header longer than its frame, a header of the wrong JSON shape) must also be refused: the
connection closed at once and one WARN ``bad_frame`` line naming the remote and the reason.
"""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import structlog
import trio
import trio.testing

from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.pull_consumer import LitePullConsumer
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.headers import SendMessageRequestHeaderV2
from rocketrio.protocol.remoting import RemotingCommand, encode_command
from rocketrio.protocol.serde import to_ext
from tests.harness.clients import cluster, create_topic

SEED = int(os.environ.get("FUZZ_SEED", "20261122"))
ROUNDS = int(os.environ.get("FUZZ_ROUNDS", "300"))
CODES = [c.value for c in RequestCode]


def _valid_frame(rng: random.Random) -> bytes:
    header = SendMessageRequestHeaderV2(
        a="g",
        b="FuzzT",
        c="TBW102",
        d=4,
        e=rng.randrange(-2, 6),
        f=0,
        g=1,
        h=0,
        i="TAGS\x01x\x02",
    )
    return encode_command(
        RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=to_ext(header), body=b"fuzz")
    )


_LENGTH_REASONS = {
    -1: "negative_length",
    0: "frame_too_short",
    3: "frame_too_short",
    1 << 30: "frame_too_long",
    0x7FFFFFFF: "frame_too_long",
}


def garbage(rng: random.Random) -> tuple[bytes, str | None]:
    """Bytes to send, and the refusal reason the server must log (None: it may or may not)."""
    kind = rng.randrange(8)
    if kind == 0:
        return rng.randbytes(rng.randrange(1, 400)), None
    if kind == 1:
        f = _valid_frame(rng)
        return f[: rng.randrange(1, len(f))], None
    if kind == 2:
        f = bytearray(_valid_frame(rng))
        for _ in range(rng.randrange(1, 6)):
            f[rng.randrange(len(f))] = rng.randrange(256)
        return bytes(f), None
    if kind == 3:
        length = rng.choice(list(_LENGTH_REASONS))
        return struct.pack(">i", length) + rng.randbytes(8), _LENGTH_REASONS[length]
    if kind == 4:  # header length larger than the frame
        return struct.pack(">ii", 8, 0xFFFFFF) + b"{}{}", "header_longer_than_frame"
    if kind == 5:  # any code, random ext fields and body: the server must answer, not crash
        ext = {
            rng.choice(["topic", "queueId", "a", "b", "e", "brokerName", "x"]): str(
                rng.choice([-1, 0, 2**40, "abc", ""])
            )
            for _ in range(rng.randrange(4))
        }
        return encode_command(
            RemotingCommand(
                code=rng.choice(CODES), ext_fields=ext, body=rng.randbytes(rng.randrange(50))
            )
        ), None
    if kind == 6:  # JSON header of the wrong shapes
        h = rng.choice(
            [b"null", b"[]", b'{"code":"x"}', b'{"code":10,"extFields":"s"}', b"\xff\xfe"]
        )
        return struct.pack(">ii", 4 + len(h), len(h)) + h, "malformed"
    return b"".join(_valid_frame(rng) for _ in range(3))[: -rng.randrange(1, 20)], None


async def test_garbage_never_takes_down_broker_or_namesrv(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    rng = random.Random(SEED)
    async with cluster(tmp_path) as c:
        await create_topic(c, "FuzzT")
        attacker = c.net.transport("10.0.6.6")
        targets = [c.ns_addr, c.brokers["broker-a"].addr]
        assert c.namesrv is not None
        servers = [c.namesrv.server, c.brokers["broker-a"].server]
        refused = 0
        for i in range(ROUNDS):
            target, server = targets[i % 2], servers[i % 2]
            data, reason = garbage(rng)
            stream = await attacker.connect(target)
            closed = False
            with structlog.testing.capture_logs() as logs:
                try:
                    await stream.send_all(data)
                    with trio.move_on_after(0.5):
                        while await stream.receive_some(65536):
                            pass
                        closed = True
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    closed = True
                finally:
                    await stream.aclose()
            if reason is not None:
                refused += 1
                where = f"round {i} ({target}, {data[:12]!r}), replay with FUZZ_SEED={SEED}"
                assert closed, f"not refused: {where}"
                bad = [e for e in logs if e["event"] == events.BadFrame.NAME]
                if not bad:  # a flood of bad frames is logged at a bounded rate
                    assert server.side.log_limiter.suppressed > 0, where
                    continue
                assert [(e["log_level"], e["remote"], e["reason"]) for e in bad] == [
                    ("warning", "10.0.6.6", reason)
                ], where
        assert refused > ROUNDS // 4
        # a well-behaved client is still served, by both
        async with Producer("p", c.ns_addr, **c.kwargs()) as p:
            sent = [await p.send(Message("FuzzT", b"ok-%d" % i)) for i in range(8)]
        assert all(r.send_status.name == "SEND_OK" for r in sent)
        pc = LitePullConsumer(
            "fuzz_reader", c.ns_addr, **c.kwargs(), consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        )
        pc.subscribe("FuzzT", "*")
        got: list[bytes] = []
        async with pc:
            with trio.fail_after(60):
                while len([b for b in got if b.startswith(b"ok-")]) < 8:
                    got.extend(m.body for m in await pc.poll(1.0))
        assert {b"ok-%d" % i for i in range(8)} <= set(got), f"replay with FUZZ_SEED={SEED}"
