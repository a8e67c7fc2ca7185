"""The broker's store and what keeps it: the MessageStore, its one writer (actor.py), the
read-only view and its gate (view.py), the disk guard with its monitor (disk_guard.py,
disk_usage.py), the clean-up service (clean_service.py) and the background scrub
(scrub_service.py).

A replicated broker (controller mode) keeps its ConsumeQueues at confirmOffset and writes
nothing until its role is known (the actor starts FENCED); otherwise puts are dispatched at
once (STANDALONE). The MessageStore is opened by the broker's boot (boot/store_open.py).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

import trio

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import BrokerConfig, FlushDiskType
from rocketrio.actors.broker.dispatch.answers import host_tuple
from rocketrio.actors.broker.dispatch.bloom import filter_bloom
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.actors.broker.store.clean_service import CleanService
from rocketrio.actors.broker.store.disk_guard import DiskGuard
from rocketrio.actors.broker.store.disk_usage import DiskMonitor
from rocketrio.actors.broker.store.messages import ArrivalListener, PutStats, StoreRole
from rocketrio.actors.broker.store.scrub_service import ScrubService
from rocketrio.actors.broker.store.view import ReadGate, StoreView
from rocketrio.actors.kernel.runtime import every_sync
from rocketrio.actors.kernel.transport import split_addr
from rocketrio.protocol.codes import RequestCode
from rocketrio.storage.fs import FileSystem
from rocketrio.storage.message_store import COMMITLOG_DIR, MessageStore, StoreConfig

_NO_IP = (b"\x00\x00\x00\x00", 0)


def store_host_of(addr: str) -> tuple[bytes, int]:
    """The broker's own address for offset message ids; a host name is resolved once, at
    start, because clients decode the ip from every offset message id."""
    host = host_tuple(addr)
    if host != _NO_IP:
        return host
    name, port = split_addr(addr)
    try:
        return socket.inet_aton(socket.gethostbyname(name)), port
    except OSError:
        raise ValueError(f"brokerIP1 {name!r} is neither an ip address nor resolvable") from None


def message_store(
    config: BrokerConfig, store_host: tuple[bytes, int], fs: FileSystem
) -> MessageStore:
    c = config
    store_config = StoreConfig(
        mappedFileSizeCommitLog=c.mappedFileSizeCommitLog,
        mappedFileSizeConsumeQueue=c.mappedFileSizeConsumeQueue,
        maxMessageSize=c.maxMessageSize,
        messageIndexEnable=c.messageIndexEnable,
        maxHashSlotNum=c.maxHashSlotNum,
        maxIndexNum=c.maxIndexNum,
        messageDelayLevel=c.messageDelayLevel,
        checkCRCOnRecover=c.checkCRCOnRecover,
        checkCRCOnPull=c.checkCRCOnPull,
        enableConsumeQueueExt=c.enableConsumeQueueExt,
        # upstream's ConsumerFilterManager sets the ext's bit-map length to its bloom's size
        bitMapLengthConsumeQueueExt=filter_bloom(c).m,
    )
    return MessageStore(
        c.storePathRootDir,
        store_config,
        store_host=store_host,
        fs=fs,
        # controller mode: consume queues only up to confirmOffset (failovers truncate)
        replicated=c.enableControllerMode,
        # classic master/slave, SYNC_FLUSH: dispatched (and shipped) once fsynced (store/actor.py)
        dispatch_after_flush=c.flushDiskType == FlushDiskType.SYNC_FLUSH,
        epoch_file_path=c.epoch_file_path,
    )


class BrokerStore:
    """The store parts of one broker (module docstring)."""

    def __init__(
        self,
        io: BrokerIO,
        *,
        store_host: tuple[bytes, int],
        stats: PutStats,
        on_arrival: ArrivalListener,
        replica_floor: Callable[[bool], int | None],
    ) -> None:
        config, now_ms, run_blocking, log = io.config, io.now_ms, io.run_blocking, io.log
        self.config = config
        self.message_store = message_store(config, store_host, io.fs)
        self.read_gate = ReadGate(run_blocking)
        self.view = StoreView(
            self.message_store, self.read_gate, off_loop_read_bytes=config.pullReadOffLoopBytes
        )
        self.guard = DiskGuard(config.diskSpaceWarningLevelRatio)
        self.disks = DiskMonitor(config.storePathRootDir, self.guard, disk=io.disk, log=log)
        self.actor = StoreActor(
            self.message_store,
            sync_flush=config.flushDiskType == FlushDiskType.SYNC_FLUSH,
            flush_interval_ms=config.flushIntervalCommitLog,
            sync_flush_timeout_ms=config.syncFlushTimeout,
            now_ms=now_ms,
            on_arrival=on_arrival,
            stats=stats,
            run_blocking=run_blocking,
            read_gate=self.read_gate,
            # a replicated broker writes nothing until its role is known
            role=StoreRole.FENCED if config.enableControllerMode else StoreRole.STANDALONE,
            # a write the disk refused: probed (repair, then a scratch write) at the same period
            probe_interval_ms=config.cleanResourceInterval,
            on_write_fault=self.disks.store_write_fault,
        )
        self.clean = CleanService(
            config,
            self.actor,
            usage=self.disks.store_usage,
            replica_floor=replica_floor,
            now_ms=now_ms,
            log=log.bind(actor="clean_service"),
        )
        self.scrub = ScrubService(
            config,
            self.view,
            self.read_gate,
            os.path.join(config.storePathRootDir, COMMITLOG_DIR),
            log=log.bind(actor="scrub_service"),
        )

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        """UPDATE_BROKER_CONFIG: the flush period, the sync-flush wait, the largest message."""
        if not changed & {"flushIntervalCommitLog", "syncFlushTimeout", "maxMessageSize"}:
            return
        self.actor.set_limits(
            flush_interval_ms=config.flushIntervalCommitLog,
            sync_flush_timeout_ms=config.syncFlushTimeout,
            max_message_size=config.maxMessageSize,
        )

    def handlers(self) -> Handlers:
        return {RequestCode.DELETE_EXPIRED_COMMITLOG: self.clean.handle_delete_expired}

    async def run_services(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The writer, the disk sampling (once before the first send), the clean-up and the
        background scrub."""
        async with trio.open_nursery() as n:
            await n.start(self.actor.run)
            self.disks.sample()
            n.start_soon(every_sync, self.config.cleanResourceInterval / 1000, self.disks.sample)
            n.start_soon(self.clean.run)
            n.start_soon(self.scrub.run)
            task_status.started()
