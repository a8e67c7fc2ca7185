"""A controller-mode master whose restart finds a record lost with its page under later valid
records recovers without an operator (actors/broker/store/lost_page.py, docs/hardening.md).

Three controllers, a NameServer and broker set broker-a on the seeded simulated network under
MockClock (tests/harness/replication.py); the stores are files under tmp_path. The page loss is
made the way a power cut leaves it: the crashed master's CommitLog gets a zeroed record header
above its flushed checkpoint (lowered to below it: those pages were never fsynced) with whole,
valid records after it.

- two replicas: the slave is elected while the old master is down; the old master restarts,
  moves its tail into ``<store>/quarantine``, comes back as a slave that is NOT electable,
  fetches again from the new master, is added to the SyncStateSet and lifts its fence; every
  acknowledged message (before and after the failover) is on the disk of both replicas.
- one replica (it alone held the data): after the same restart the set has no master, the
  broker refuses writes and says why, and its fence and quarantine stay for an operator.
- the start-up shell per mode, without a cluster: a classic master still refuses with nothing
  changed on disk, a classic slave quarantines without a fence, controller mode fences.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.boot.store_open import open_store
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.message import decode_stored
from rocketrio.storage.catch_up_fence import load_fence
from rocketrio.storage.commitlog import CHECKPOINT_FILE, LostRecord, OffsetCheckpoint, segment_name
from rocketrio.storage.commitlog.quarantine import QUARANTINE_DIR
from rocketrio.storage.fs import OS_FS
from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig
from tests.harness.blocking import inline_blocking
from tests.harness.clock import EPOCH_MS
from tests.harness.replication import (
    Acked,
    Node,
    awaits_equal,
    awaits_true,
    cluster,
    pair,
    send,
    send_many,
    wait_until,
)

CTRL = ("n0", "n1", "n2")
STORE_CFG = StoreConfig(mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=100 * 20)
Logs = list[dict[str, Any]]


def stored_bodies(root: str) -> list[bytes]:
    """Every message body in the CommitLog on disk (the broker is stopped)."""
    store = MessageStore(root, STORE_CFG)
    store.open()
    try:
        return [decode_stored(r)[0].body for _, r in store.commitlog.iter_records(0)]
    finally:
        store.close()


def lose_a_page(root: str, records: list[int]) -> int:
    """Zero the header of the record at ``records[-3]`` (two whole records follow it) and lower
    the flushed checkpoint below it, as a power cut that kept later pages leaves the log."""
    lost = records[-3]
    commitlog = os.path.join(root, "commitlog")
    with open(os.path.join(commitlog, segment_name(0)), "r+b") as f:
        f.seek(lost + 4)
        f.write(bytes(32))
    OffsetCheckpoint(os.path.join(commitlog, CHECKPOINT_FILE)).store(records[-4], sync=True)
    return lost


def record_offsets(node: Node) -> list[int]:
    clog = node.b.store.message_store.commitlog
    return [offset for offset, _ in clog.iter_records(0)]


async def master_is(c: Any, broker_id: int | None) -> bool:
    info = await c.sync_state()
    return info is not None and info.master_broker_id == broker_id


def named(logs: Logs, event: str) -> Logs:
    return [e for e in logs if e["event"] == event]


@pytest.mark.parametrize("restart_at_once", [False, True], ids=["after_failover", "at_once"])
async def test_the_old_master_comes_back_as_a_slave_and_nothing_acknowledged_is_lost(
    tmp_path: Path, mock_clock: trio.testing.MockClock, restart_at_once: bool
) -> None:
    """``at_once``: it restarts right after the crash, its start-up racing the election (on
    this seed the controller, told by the closed connection, has elected the slave by the time
    the old master registers; the case where it still names the old master is unit-tested:
    test_role_core.py, test_replicas_info.py)."""
    acked: Acked = {}
    with structlog.testing.capture_logs() as logs:
        async with cluster(tmp_path, 2601, CTRL) as c:
            a, b = await pair(c)
            assert await send_many(c, a, 12, "before", acked) == 12
            offsets = record_offsets(a)
            await a.crash()
            lost = lose_a_page(a.root, offsets)
            if restart_at_once:
                assert await master_is(c, 1)
                await a.start()
            await wait_until(lambda: master_is(c, 2), "the slave was elected")
            assert await send_many(c, b, 6, "after", acked) == 6
            if not restart_at_once:
                await a.start()
            await wait_until(lambda: awaits_true(a.rm.role is BrokerRole.SLAVE), "A follows B")
            assert not a.rm.electable and await master_is(c, 2)
            await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "A caught up")
            await wait_until(lambda: awaits_true(a.rm.electable), "A lifted its fence")
            assert await master_is(c, 2) and b.rm.serving_as_master()
            await a.stop()
            await b.stop()
    [q] = named(logs, events.CommitlogQuarantined.NAME)
    assert q["offset"] == lost and q["fenced"] is True and os.path.exists(q["quarantine"])
    assert q["quarantine"].startswith(os.path.join(a.root, QUARANTINE_DIR))
    assert q["dropped_bytes"] >= q["old_end"] - lost > 0
    [lifted] = named(logs, events.CatchUpFenceLifted.NAME)
    assert lifted["master_id"] == 2 and lifted["lost_offset"] == lost
    assert load_fence(a.root) is None
    for root in (a.root, b.root):
        on_disk = stored_bodies(root)
        missing = [body for body in acked if body not in on_disk]
        assert not missing, f"{root} lost acknowledged messages {missing}"


async def test_a_lone_replica_stays_out_of_service_and_says_so(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    acked: Acked = {}
    with structlog.testing.capture_logs() as logs:
        async with cluster(tmp_path, 2602, CTRL) as c:
            a = c.node()
            await (await a.start()).wait_role()
            assert await send_many(c, a, 12, "only", acked) == 12
            offsets = record_offsets(a)
            await a.crash()
            lost = lose_a_page(a.root, offsets)
            await a.start()
            await wait_until(lambda: master_is(c, None), "the controller deposed it")
            await trio.sleep(30)  # elections keep finding nobody electable
            assert await master_is(c, None)
            assert not a.rm.serving_as_master() and a.rm.role is None
            resp = await send(c, a, b"refused", 0)
            assert resp.code == RC.SERVICE_NOT_AVAILABLE and "lost page" in (resp.remark or "")
            await a.stop()
    held = named(logs, events.CatchUpFenceHolds.NAME)
    assert held and "no master" in held[-1]["reason"]
    fence = load_fence(a.root)
    assert fence is not None and fence.lost_offset == lost
    assert os.path.exists(fence.quarantine)
    assert len(stored_bodies(a.root)) == offsets.index(lost)  # cut, never served as master


@pytest.mark.parametrize(
    ("controller", "role", "outcome"),
    [
        (False, BrokerRole.ASYNC_MASTER, "refused"),
        (False, BrokerRole.SLAVE, "quarantined"),
        (True, BrokerRole.ASYNC_MASTER, "fenced"),
    ],
)
async def test_start_up_per_mode(
    tmp_path: Path,
    mock_clock: trio.testing.MockClock,
    controller: bool,
    role: BrokerRole,
    outcome: str,
) -> None:
    """The start-up shell (boot/store_open.py) per mode: a classic master refuses with nothing
    changed on disk; a classic slave quarantines without a fence; controller mode fences."""
    root = str(tmp_path / "store")
    store = MessageStore(root, STORE_CFG)
    store.open()
    store.put_messages([MessageToStore("T", 0, b"m%d" % i * 30) for i in range(8)], 1)
    offsets = [o for o, _ in store.commitlog.iter_records(0)]
    store.close()
    lost = lose_a_page(root, offsets)
    segment = os.path.join(root, "commitlog", segment_name(0))
    size = os.path.getsize(segment)
    config = BrokerConfig(
        storePathRootDir=root,
        brokerRole=role,
        enableControllerMode=controller,
        controllerAddr="10.0.0.1:9878" if controller else "",
        mappedFileSizeCommitLog=STORE_CFG.mappedFileSizeCommitLog,
    )
    opening = MessageStore(root, STORE_CFG)
    with structlog.testing.capture_logs() as logs:
        if outcome == "refused":
            with pytest.raises(LostRecord):
                await open_store(config, opening, **shell_deps())
            assert os.path.getsize(segment) == size  # nothing cut
            assert not os.path.exists(os.path.join(root, QUARANTINE_DIR))
            assert named(logs, events.StoreCorrupt.NAME)
            return
        lock, _ = await open_store(config, opening, **shell_deps())
    assert opening.get_commitlog_max_offset() == lost
    opening.close()
    lock.release()
    [q] = named(logs, events.CommitlogQuarantined.NAME)
    assert q["fenced"] is (outcome == "fenced") and os.path.getsize(q["quarantine"]) == size - lost
    assert (load_fence(root) is not None) is (outcome == "fenced")


def shell_deps() -> dict[str, Any]:
    return {
        "fs": OS_FS,
        "run_blocking": inline_blocking,
        "wall_now_ms": lambda: EPOCH_MS,
        "log": structlog.get_logger("test"),
    }
