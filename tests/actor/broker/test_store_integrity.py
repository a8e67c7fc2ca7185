"""A broker on a real store directory: damaged records are never delivered, a cut tail is a
WARN, damage recovery must not cut stops the start with an ERROR, and a store is locked by one
broker (issue 7, items 3 and 4). The NameServer and clients run on SimNetwork with MockClock.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import structlog
import trio
import trio.testing

from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import KVTable
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json
from rocketrio.storage.commitlog import CorruptionError, list_segments, segment_name
from rocketrio.storage.message_store import ABORT_FILE
from rocketrio.storage.store_lock import StoreLocked
from tests.harness.broker import BrokerHarness, harness, messages

SEG = 4096
SMALL = {"mappedFileSizeCommitLog": SEG}


def body(i: int) -> bytes:
    return f"msg-{i:04d}-".encode().ljust(120, b"x")


def commitlog_dir(h: BrokerHarness) -> str:
    return os.path.join(h.root, "store", "commitlog")


def patch_file(path: str, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def flip_in_body(h: BrokerHarness, i: int) -> tuple[str, int]:
    """Flip a byte inside message i's body on disk; (segment path, its position)."""
    for base in list_segments(commitlog_dir(h)):
        path = os.path.join(commitlog_dir(h), segment_name(base))
        with open(path, "rb") as f:
            data = f.read()
        pos = data.find(body(i)[:9])
        if pos >= 0:
            patch_file(path, pos + 20, bytes([data[pos + 20] ^ 0x01]))
            return path, pos
    raise AssertionError(f"message {i} not found")


def leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def test_a_damaged_record_in_an_old_segment_is_never_delivered(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, **SMALL) as h:
        for i in range(60):
            assert (await h.send("I", body(i), queue_id=0)).code == ResponseCode.SUCCESS
        await h.stop_broker()  # clean: the restart checks only the checkpoint's segment
        segment, _ = flip_in_body(h, 5)
        assert segment.endswith(segment_name(0))
        assert len(list_segments(commitlog_dir(h))) >= 3
        await h.start_broker(**SMALL)
        with structlog.testing.capture_logs() as logs:
            resp = await h.pull("I", 0, 0)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert not resp.body, "no byte of a damaged read is sent"
        assert segment in (resp.remark or "") and "checkStore" in (resp.remark or "")
        [line] = [e for e in logs if e["event"] == events.CommitlogRecordCorrupt.NAME]
        assert line["log_level"] == "error"
        assert line["segment"] == segment and line["reason"] == "record CRC mismatch"
        assert f"offset {line['offset']}" in (resp.remark or "")
        # what comes before and after the damaged record is still served
        before = await h.pull("I", 0, 0, max_msgs=5)
        assert [m.body for m in messages(before)] == [body(i) for i in range(5)]
        after = await h.pull("I", 0, 6, max_msgs=32)
        assert [m.body for m in messages(after)] == [body(i) for i in range(6, 38)]


async def test_the_broker_scrub_finds_old_damage_before_any_pull(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    rate = 1024  # bytes/s: the whole store below the checkpoint in well under a minute
    async with harness(tmp_path, **SMALL) as h:
        for i in range(60):
            assert (await h.send("S", body(i), queue_id=0)).code == ResponseCode.SUCCESS
        await h.stop_broker()
        segment, pos = flip_in_body(h, 5)
        with structlog.testing.capture_logs() as logs:
            await h.start_broker(scrubBytesPerSecond=rate, **SMALL)
            await trio.sleep(SEG / rate + 2)  # the damage is in the first segment
        [line] = [e for e in logs if e["event"] == events.StoreScrubDamage.NAME]
        assert line["log_level"] == "error" and line["segment"] == segment
        assert line["offset"] < pos and line["reason"] == "record CRC mismatch"
        assert not [e for e in logs if e["event"] == events.CommitlogRecordCorrupt.NAME]
        status = await h.invoke(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO))
        table = from_json(KVTable, status.body).table
        assert table["scrubDamageFound"] == "1" and int(table["scrubVerifiedBytes"]) > 0
        assert (await h.pull("S", 0, 0)).code == ResponseCode.SYSTEM_ERROR  # never served


async def test_a_cut_tail_is_truncated_with_a_warning(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, **SMALL) as h:
        for i in range(10):
            await h.send("C", body(i), queue_id=0)
        await h.crash_broker()  # kill -9: no flush, no close
        last = os.path.join(commitlog_dir(h), segment_name(list_segments(commitlog_dir(h))[-1]))
        size = os.path.getsize(last)
        os.truncate(last, size - 30)  # the last record loses its end
        with structlog.testing.capture_logs() as logs:
            await h.start_broker(**SMALL)
        [warn] = [e for e in logs if e["event"] == events.CommitlogTruncated.NAME]
        assert warn["log_level"] == "warning"
        assert warn["segment"] == last
        assert warn["offset"] > 0 and warn["dropped_bytes"] > 0
        assert size - 30 - warn["dropped_bytes"] == warn["offset"] % SEG
        [rec] = [e for e in logs if e["event"] == events.CommitlogRecovered.NAME]
        assert rec["unclean_shutdown"] is True and rec["scanned_from"] == 0
        resp = await h.pull("C", 0, 0)
        assert [m.body for m in messages(resp)] == [body(i) for i in range(9)]


async def test_damage_recovery_must_not_cut_refuses_the_start(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, **SMALL) as h:
        for i in range(60):
            await h.send("D", body(i), queue_id=0)
        await h.crash_broker()
        assert os.path.exists(os.path.join(h.root, "store", ABORT_FILE))
        segment, _ = flip_in_body(h, 3)  # an old segment, before valid records
        with structlog.testing.capture_logs() as logs:
            with pytest.raises(BaseException) as err:
                await h.start_broker(**SMALL)
        assert isinstance(leaf(err.value), CorruptionError)
        [line] = [e for e in logs if e["event"] == events.StoreCorrupt.NAME]
        assert line["log_level"] == "error"
        assert segment in line["error"] and "record CRC mismatch" in line["error"]
        assert "checkStore" in line["remark"] and "slave of its master" in line["remark"]
        # nothing was cut: the damaged segment is as it was
        assert os.path.getsize(segment) == SEG


async def test_a_second_broker_on_the_same_store_is_refused(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        assert h.broker is not None
        other = Broker(
            h.config(brokerIP1="10.0.0.3", brokerName="broker-z"), h.net.transport("10.0.0.3")
        )
        with pytest.raises(StoreLocked) as err:
            await other.open()
        text = str(err.value)
        assert "broker broker-a (pid" in text and str(os.getpid()) in text
        # the first keeps serving
        assert (await h.send("L", b"still here", queue_id=0)).code == ResponseCode.SUCCESS
        # and once it stops, the store is free
        await h.stop_broker()
        await other.open()
        other.store.message_store.close()
        other.release_store_lock()
