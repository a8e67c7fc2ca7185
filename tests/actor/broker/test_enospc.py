"""A broker whose disk really fills up: the real broker on the simulated network, its files on a
`SimFileSystem` with a capacity (a quota-like full disk: statvfs still says half free, so only
the failing writes tell) or an fsync that fails with ENOSPC and drops its pages.

- a send whose write finds the disk full is refused with SERVICE_NOT_AVAILABLE and upstream's
  "the broker's disk is full" remark naming the error, nothing of it is stored, the broker
  keeps serving pulls and refuses sends (one disk_full line, from the store's report), and it
  takes sends again by itself once the disk has room (disk_space_recovered); every
  acknowledged message survives a restart;
- SYNC_FLUSH: an fsync that fails with ENOSPC is never acknowledged, the broker does not die,
  and after the repair a power cut loses nothing that was acknowledged;
- the store actor's per-role rules (store_actor.py): a master whose fenced range lost a page
  stays fenced until restart; a slave's append on a full disk fails so its HA client
  reconnects, and succeeds once the disk has room.
"""

from __future__ import annotations

import errno
import os
import random
from typing import Any

import pytest
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import FlushDiskType
from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.actors.broker.store.messages import PutBatchBody, StoreRole
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import PULL_FLAG_COMMIT_OFFSET, PULL_FLAG_SUBSCRIPTION
from rocketrio.protocol.message import BatchItem, encode_batch_body
from rocketrio.storage.message_store import MessageStore, MessageToStore, PutResult, StoreConfig
from tests.harness.broker import harness, messages
from tests.harness.disk_full import Disk
from tests.harness.sim_disk import SimFileSystem
from tests.harness.store_actor import inline_store_actor

ROOT = "/sim/broker-a/store"


@pytest.fixture(autouse=True)
def half_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """statvfs says the disk is half free (a quota, or a file system that fills faster than
    the check sees): only the failing writes tell the broker the disk is full."""
    from rocketrio.actors.broker import broker as broker_module

    monkeypatch.setattr(broker_module, "disk_space", Disk(50))


CHECK = {"cleanResourceInterval": 1000, "diskSpaceWarningLevelRatio": 90}


async def pull_all(h: Any, topic: str = "T", queue_id: int = 0) -> list[bytes]:
    resp = await h.pull(topic, queue_id, 0, max_msgs=1000)
    return [m.body for m in messages(resp)] if resp.code == ResponseCode.SUCCESS else []


async def test_a_send_that_finds_the_disk_full_is_refused_and_the_broker_recovers(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    fs = SimFileSystem(random.Random(11))
    acked: list[bytes] = []
    async with harness(tmp_path, fs=fs, storePathRootDir=ROOT, **CHECK) as h:
        assert h.broker is not None
        for body in (b"m1", b"m2", b"m3"):
            assert (await h.send("T", body, queue_id=0)).code == ResponseCode.SUCCESS
            acked.append(body)
        store = h.broker.store.message_store
        end = store.get_commitlog_max_offset()
        with structlog.testing.capture_logs() as logs:
            fs.set_capacity(fs.used_bytes + 100)
            resp = await h.send("T", b"x" * 1000, queue_id=0)
            assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert resp.remark is not None
            assert "the broker's disk is full [No space left on device" in resp.remark
            assert store.get_commitlog_max_offset() == end  # nothing of it stored
            segment = store.commitlog.segment_files()[-1][1]
            assert len(fs.visible_bytes(segment)) == end  # nor half-written
            # the disk guard refuses now, before the store: the usage and the cause
            resp = await h.send("T", b"small", queue_id=0)
            assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "disk is full [CL:  0.50 CQ:  0.50 INDEX:  0.50; No space left" in (
                resp.remark or ""
            )
            assert await pull_all(h) == acked  # pulls go on
            await trio.sleep(5)  # the probes find no room: still refused, logged once
            assert (await h.send("T", b"y", queue_id=0)).code == (
                ResponseCode.SERVICE_NOT_AVAILABLE
            )
            assert h.running
            fs.set_capacity(None)  # room again: the next probe lets sends in
            await trio.sleep(1.1)
            assert (await h.send("T", b"after", queue_id=0)).code == ResponseCode.SUCCESS
            acked.append(b"after")
        names = [e["event"] for e in logs if e["event"].startswith("disk")]
        assert names == ["disk_full", "disk_space_recovered"]
        full = next(e for e in logs if e["event"] == "disk_full")
        assert "No space left on device" in full["reason"]
        assert await pull_all(h) == acked
    fs.crash(lose_unsynced=True)  # the graceful stop fsynced everything
    async with harness(tmp_path, fs=fs, storePathRootDir=ROOT, **CHECK) as h:
        assert await pull_all(h) == acked


async def test_config_files_on_a_full_disk_are_retried_not_fatal(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """Consumer offsets (flushed every flushConsumerOffsetInterval) cannot be written while the
    disk is full: logged, retried, written once there is room; the broker goes on."""
    fs = SimFileSystem(random.Random(12))
    overrides = {"flushConsumerOffsetInterval": 1000, **CHECK}
    async with harness(tmp_path, fs=fs, storePathRootDir=ROOT, **overrides) as h:
        assert h.broker is not None
        assert (await h.send("T", b"m", queue_id=0)).code == ResponseCode.SUCCESS
        await trio.sleep(2)
        with structlog.testing.capture_logs() as logs:
            fs.set_capacity(fs.used_bytes)
            flags = PULL_FLAG_SUBSCRIPTION | PULL_FLAG_COMMIT_OFFSET
            await h.pull("T", 0, 1, commit_offset=1, flags=flags)
            await trio.sleep(3)
            assert h.running
            fs.set_capacity(None)
            await trio.sleep(1.5)
        failed = {
            os.path.basename(e["path"]) for e in logs if e["event"] == "config_persist_failed"
        }
        # the pull committed an offset and created its group: both files waited for room
        assert failed == {"consumerOffset.json", "subscriptionGroup.json"}
        offsets = fs.visible_bytes(os.path.join(ROOT, "config", "consumerOffset.json"))
        assert b'{"T@CG":{"0":1}}' in offsets
        groups = fs.visible_bytes(os.path.join(ROOT, "config", "subscriptionGroup.json"))
        assert b'"CG"' in groups


async def test_sync_flush_fsync_enospc_is_not_acknowledged_and_loses_nothing_acknowledged(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    fs = SimFileSystem(random.Random(13))
    sync = {"flushDiskType": FlushDiskType.SYNC_FLUSH, **CHECK}
    acked: list[bytes] = []
    async with harness(tmp_path, fs=fs, storePathRootDir=ROOT, **sync) as h:
        assert h.broker is not None
        for body in (b"a", b"b"):
            assert (await h.send("T", body, queue_id=0)).code == ResponseCode.SUCCESS
            acked.append(body)
        fs.fail_fsync(os.path.join(ROOT, "commitlog"), err=errno.ENOSPC, lose_writeback=True)
        resp = await h.send("T", b"c", queue_id=0)
        assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE  # durability unknown: no ack
        assert "disk is full [No space left on device" in (resp.remark or "")
        assert h.running  # not a crash
        assert (await h.send("T", b"d", queue_id=0)).code == ResponseCode.SERVICE_NOT_AVAILABLE
        await trio.sleep(1.1)  # the probe writes the fenced range again
        assert (await h.send("T", b"e", queue_id=0)).code == ResponseCode.SUCCESS
        acked.append(b"e")
        await h.crash_broker()
    fs.crash(lose_unsynced=True)  # a power cut right after the last acknowledgement
    async with harness(tmp_path, fs=fs, storePathRootDir=ROOT, **sync) as h:
        got = await pull_all(h)
        # c was refused but is in the log: written again by the repair (a producer's retry
        # would store it twice: at-least-once); nothing acknowledged is missing
        assert got == [b"a", b"b", b"c", b"e"]
        assert [b for b in got if b in acked] == acked


def actor_for(
    store: MessageStore, role: StoreRole, *, sync_flush: bool = True
) -> tuple[StoreActor, list[str | None]]:
    reports: list[str | None] = []
    actor = inline_store_actor(
        store,
        sync_flush=sync_flush,
        role=role,
        probe_interval_ms=1000,
        on_write_fault=reports.append,
    )
    return actor, reports


async def put(actor: StoreActor, body: bytes) -> tuple[PutStatus, str | None]:
    answers: list[tuple[PutStatus, str | None]] = []

    def done(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        answers.append((status, remark))

    await actor.put([MessageToStore("T", 0, body)], done)
    while not answers:
        await trio.sleep(0.01)
    return answers[0]


CFG = StoreConfig(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=100 * 20)


async def test_a_master_whose_fenced_range_lost_a_page_takes_no_writes_until_restart(
    mock_clock: trio.testing.MockClock,
) -> None:
    fs = SimFileSystem(random.Random(14))
    store = MessageStore(ROOT, CFG, fs=fs)
    store.open()
    actor, reports = actor_for(store, StoreRole.MASTER)
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            assert (await put(actor, b"durable"))[0] is PutStatus.PUT_OK
            lost_at = store.get_commitlog_max_offset()
            fs.fail_fsync(ROOT, err=errno.ENOSPC, lose_writeback=True)
            status, remark = await put(actor, b"lost")
            assert status is PutStatus.SERVICE_NOT_AVAILABLE and "disk is full" in (remark or "")
            segment = store.commitlog.segment_files()[-1][1]
            fd = fs.open(segment, os.O_RDWR)
            fs.pwrite(fd, bytes(40), lost_at + 4)  # the page was dropped and reads back zeros
            fs.close(fd)
            assert await actor.probe_disk() is False
            status, remark = await put(actor, b"refused")
            assert status is PutStatus.SERVICE_NOT_AVAILABLE
            assert f"from offset {lost_at} may not be on disk" in (remark or "")
            assert "until it restarts" in (remark or "")
            await trio.sleep(5)  # no more probes: only a restart ends it
            assert actor.faults.fault is not None and actor.faults.fault.until_restart
            assert store.get_commitlog_max_offset() > lost_at  # a master never cuts it
            nursery.cancel_scope.cancel()
    assert len(reports) == 1 and "No space left on device" in (reports[0] or "")
    fenced = [e for e in logs if e["event"] == "store_fenced_until_restart"]
    assert [e["offset"] for e in fenced] == [lost_at]


async def test_a_slave_append_on_a_full_disk_fails_and_goes_in_once_there_is_room(
    mock_clock: trio.testing.MockClock,
) -> None:
    master_fs, slave_fs = SimFileSystem(random.Random(15)), SimFileSystem(random.Random(16))
    master = MessageStore("/sim/master/store", CFG, fs=master_fs)
    master.open()
    master.put_messages([MessageToStore("T", 0, b"r%d" % i) for i in range(5)], 1)
    data = master.commitlog.read(0, master.commitlog.max_offset)
    slave = MessageStore(ROOT, CFG, fs=slave_fs, replicated=True)
    slave.open()
    actor, reports = actor_for(slave, StoreRole.SLAVE)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        slave_fs.set_capacity(slave_fs.used_bytes + 50)
        try:
            await actor.append_replicated(0, data)
        except OSError as e:  # what makes the HA client reconnect
            assert e.errno == errno.ENOSPC and "disk is full" in str(e)
        else:
            raise AssertionError("a full disk took the replicated append")
        assert slave.get_commitlog_max_offset() == 0 and actor.faults.fault is not None
        slave_fs.set_capacity(None)
        await trio.sleep(1.1)  # the probe
        assert actor.faults.fault is None and reports[-1] is None
        assert await actor.append_replicated(0, data) == len(data)
        nursery.cancel_scope.cancel()


async def test_an_eio_fsync_is_still_fail_stop(mock_clock: trio.testing.MockClock) -> None:
    """A broken disk (EIO), not a full one: the put is answered UNKNOWN_ERROR and the store
    actor stops, so the process restarts and recovers (store_actor.py)."""
    fs = SimFileSystem(random.Random(17))
    store = MessageStore(ROOT, CFG, fs=fs)
    store.open()
    actor, reports = actor_for(store, StoreRole.STANDALONE)
    answers: list[PutStatus] = []
    with pytest.raises(BaseExceptionGroup) as stopped:
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            fs.fail_fsync(ROOT, err=errno.EIO)
            await actor.put(
                [MessageToStore("T", 0, b"x")], lambda _r, status, _m: answers.append(status)
            )
            await trio.sleep(10)
            nursery.cancel_scope.cancel()  # not reached unless the actor went on
    assert stopped.group_contains(OSError, match="simulated fsync failure")
    assert answers == [PutStatus.UNKNOWN_ERROR] and reports == []


async def test_once_a_put_found_the_disk_full_the_rest_of_its_turn_is_refused_unwritten(
    mock_clock: trio.testing.MockClock,
) -> None:
    """One behaviour for every client: a small put queued behind a big one that did not fit
    is refused too, even where it would have fit (the same turn, any kind of put)."""
    fs = SimFileSystem(random.Random(18))
    store = MessageStore(ROOT, CFG, fs=fs)
    store.open()
    actor, _ = actor_for(store, StoreRole.STANDALONE, sync_flush=False)
    answers: list[PutStatus] = []

    def on_done(_r: Any, status: PutStatus, _m: str | None) -> None:
        answers.append(status)

    batch = encode_batch_body([BatchItem(0, b"small batch", {})])
    fs.set_capacity(fs.used_bytes + 400)
    actor.put_nowait([MessageToStore("T", 0, b"x" * 1000)], on_done)  # does not fit
    actor.put_batch_nowait(PutBatchBody("T", 0, batch, {}, on_done))  # would fit
    actor.put_nowait([MessageToStore("T", 0, b"small")], on_done)  # would fit
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        while len(answers) < 3:
            await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert answers == [PutStatus.SERVICE_NOT_AVAILABLE] * 3
    assert store.get_commitlog_max_offset() == 0
