"""Directory durability on the simulated disk, which loses every directory entry nobody fsynced
when the power is cut (tests/harness/sim_disk.py): `makedirs_synced` makes a directory that
already exists durable too (issue 26: a kill -9 during a store's first open can leave it in the
page cache only), and a deleted topic's ConsumeQueues stay deleted."""

from __future__ import annotations

import random

from rocketrio.storage.consume_queue import ENTRY
from rocketrio.storage.consume_queue_store import ConsumeQueueStore
from rocketrio.storage.durable import makedirs_synced, write_file_atomic
from tests.harness.sim_disk import SimFileSystem

STORE = "/data/store/consumequeue"


def test_a_directory_created_before_a_kill_is_made_durable_by_the_next_open() -> None:
    fs = SimFileSystem(random.Random(1))
    fs.makedirs(STORE, exist_ok=True)  # the first open: killed before its directory fsyncs
    fs.crash(keep_unsynced=True)  # kill -9: the page cache keeps the directories
    makedirs_synced(STORE, fs=fs)  # the next open: the directory exists already
    fs.crash(lose_unsynced=True)  # then the power is cut
    assert fs.isdir(STORE)


def test_without_sync_existing_only_created_directories_are_synced() -> None:
    """The light mode (a directory its owner made durable at open) really is lighter: what it
    did not create stays as durable as it was."""
    fs = SimFileSystem(random.Random(1))
    fs.makedirs(STORE, exist_ok=True)
    makedirs_synced(STORE, fs=fs, sync_existing=False)
    fs.crash(lose_unsynced=True)
    assert not fs.exists("/data")


def test_a_file_written_atomically_under_a_synced_directory_survives() -> None:
    fs = SimFileSystem(random.Random(2))
    fs.makedirs("/data/store/config", exist_ok=True)
    fs.crash(keep_unsynced=True)
    makedirs_synced("/data/store/config", fs=fs)
    write_file_atomic("/data/store/config/topics.json", b"{}", fs=fs)
    fs.crash(lose_unsynced=True)
    assert fs.visible_bytes("/data/store/config/topics.json") == b"{}"


def test_a_deleted_topics_queues_stay_deleted_after_a_power_cut() -> None:
    fs = SimFileSystem(random.Random(3))
    makedirs_synced(STORE, fs=fs)
    cqs = ConsumeQueueStore(STORE, 20 * 32, fs=fs)
    cqs.append(("Doomed", 0), ENTRY.pack(0, 100, 0), 0)
    cqs.flush()  # the queue's file and its directories are durable
    assert fs.listdir_durable(STORE) == ["Doomed"]
    assert cqs.delete_topic("Doomed") == 1
    fs.crash(lose_unsynced=True)
    assert not fs.exists(f"{STORE}/Doomed")
