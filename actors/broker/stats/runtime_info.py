"""GET_BROKER_RUNTIME_INFO (28): upstream 5.2.0's key set and value formats, from our figures.

`RuntimeInfo.table()` builds the KVTable upstream builds in StoreStatsService.getRuntimeInfo,
DefaultMessageStore.getRuntimeInfo and AdminBrokerProcessor.prepareRuntimeInfo (the key list:
``../shared/reference/admin-bodies/README.md`` §3). Every value is a figure of this broker. Where
rocketrio has no Java thread pool the key says what the broker's own queue holds:

- ``sendThreadPoolQueue*``: the store actor's inbox (every send waits there for the one writer);
  capacity = the inbox capacity; head wait = an upper bound of the oldest queued put's wait
  (since the actor last took a batch), 0 when nothing waits;
- ``pullThreadPoolQueue*``: pulls whose read waits for or runs in a worker thread (reads above
  pullReadOffLoopBytes; smaller reads run inline and never queue); capacity = the worker
  threads trio lets run at once; head wait = the oldest such read's age. Held (long-polling)
  pulls are not queued work; ``pullHoldCount`` counts them;
- ``litePullThreadPoolQueue*``, ``queryThreadPoolQueue*``, ``EndTransaction*``: rocketrio has no
  such queue (lite pulls and queries are served inline, transactions not at all): 0 waiting,
  capacity 0;
- ``pageCacheLockTimeMills``: how long the current CommitLog write (append, and its fsync with
  SYNC_FLUSH) has held the store actor; 0 when no write runs;
- timer keys: rocketrio has no timer wheel, so they are upstream's values for
  timerWheelEnable=false; ``remainTransientStoreBufferNumbs`` is upstream's value without a
  transient store pool (Integer.MAX_VALUE); there is no schedule service, so no
  ``scheduleMessageOffset_*`` (as a fresh upstream broker).

rocketrio's extra keys (none collide with upstream's) follow: brokerName, brokerId,
brokerRole, flushDiskType, commitLogFlushedOffset, pullHoldCount, sendBackTotal, dlqTotal and
the counts the broker adds (`extra`: table sizes, the role's keys, the background scrub's).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Protocol

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.store.disk_usage import DiskSpace, disk_space, used_ratio
from rocketrio.actors.broker.store.figures import java_fixed
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.protocol.codes import CURRENT_VERSION
from rocketrio.protocol.fastjson import java_double
from rocketrio.storage.message_store import COMMITLOG_DIR, CONSUME_QUEUE_DIR

VERSION_DESC = "V5_2_0"
JAVA_INT_MAX = 2**31 - 1


class SendQueue(Protocol):
    """The store actor, as the send path's queue."""

    inbox_capacity: int

    def queued(self) -> int: ...

    def queue_head_wait_ms(self) -> int: ...

    def write_held_ms(self) -> int: ...


class PullQueue(Protocol):
    """The read gate, as the pull path's queue (off-loop reads)."""

    def pending(self) -> int: ...

    def capacity(self) -> int: ...

    def oldest_wait_ms(self) -> int: ...


def human_bytes(n: int) -> str:
    """upstream MixAll.humanReadableByteCount(n, false): ``"0 B"``, ``"2.0 KiB"``."""
    if n < 1024:
        return f"{n} B"
    exp = int(math.log(n) / math.log(1024))
    return f"{java_fixed(n / 1024**exp, 1)} {'KMGTPE'[exp - 1]}iB"


class RuntimeInfo:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        stats: BrokerStats,
        store: StoreView,
        send_queue: SendQueue,
        pull_queue: PullQueue,
        held_pulls: Callable[[], int],
        is_master: Callable[[], bool],
        now_ms: Callable[[], int],
        extra: Callable[[], dict[str, str]] = dict,
        disk: Callable[[str], DiskSpace | None] = disk_space,
    ) -> None:
        self.config = config
        self.stats = stats
        self.store = store
        self.send_queue = send_queue
        self.pull_queue = pull_queue
        self.held_pulls = held_pulls
        self.is_master = is_master
        self.now_ms = now_ms
        self.extra = extra
        self.disk = disk

    def table(self) -> dict[str, str]:
        now = self.now_ms()
        t = self.stats.store.runtime_info(now)
        t.update(self._store_keys())
        t.update(self._broker_keys(now))
        t.update(self._queue_keys())
        t.update(self._extra_keys())
        return t

    def _store_keys(self) -> dict[str, str]:
        """DefaultMessageStore.getRuntimeInfo."""
        root = self.config.storePathRootDir
        clog = os.path.join(root, COMMITLOG_DIR)
        clog_ratio = used_ratio(self.disk(clog))
        store = self.store
        return {
            f"commitLogDiskRatio_{clog}": java_double(clog_ratio),
            "commitLogDiskRatio": java_double(clog_ratio),  # the minimum over the paths: one
            "consumeQueueDiskRatio": java_double(
                used_ratio(self.disk(os.path.join(root, CONSUME_QUEUE_DIR)))
            ),
            "commitLogMinOffset": str(store.commitlog_min_offset()),
            "commitLogMaxOffset": str(store.commitlog_max_offset()),
        }

    def _broker_keys(self, now: int) -> dict[str, str]:
        """AdminBrokerProcessor.prepareRuntimeInfo, but the thread-pool queues."""
        days = self.stats.days.figures(now)
        store = self.store
        t = {
            # upstream: the master-only services run (schedule, transaction check, pop revive)
            "brokerActive": "true" if self.is_master() else "false",
            "brokerVersionDesc": VERSION_DESC,
            "brokerVersion": str(CURRENT_VERSION),
            "msgPutTotalYesterdayMorning": str(days.msgPutTotalYesterdayMorning),
            "msgPutTotalTodayMorning": str(days.msgPutTotalTodayMorning),
            "msgPutTotalTodayNow": str(days.msgPutTotalTodayNow),
            "msgGetTotalYesterdayMorning": str(days.msgGetTotalYesterdayMorning),
            "msgGetTotalTodayMorning": str(days.msgGetTotalTodayMorning),
            "msgGetTotalTodayNow": str(days.msgGetTotalTodayNow),
            "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
            "pageCacheLockTimeMills": str(self.send_queue.write_held_ms()),
            "earliestMessageTimeStamp": str(store.earliest_message_time()),
            # rocketrio accepts sends from the start (upstream's default, 0)
            "startAcceptSendRequestTimeStamp": "0",
            "timerReadBehind": "0",
            "timerOffsetBehind": "0",
            "timerCongestNum": "0",
            "timerEnqueueTps": "0.0",
            "timerDequeueTps": "0.0",
            "remainTransientStoreBufferNumbs": str(JAVA_INT_MAX),
            "remainHowManyDataToFlush": human_bytes(store.flush_behind_bytes()),
        }
        space = self.disk(self.config.storePathRootDir)
        if space is not None:
            t["commitLogDirCapacity"] = (
                f"Total : {human_bytes(space.total)}, Free : {human_bytes(space.free)}."
            )
        return t

    def _queue_keys(self) -> dict[str, str]:
        send, pull = self.send_queue, self.pull_queue
        return {
            "sendThreadPoolQueueSize": str(send.queued()),
            "sendThreadPoolQueueCapacity": str(send.inbox_capacity),
            "sendThreadPoolQueueHeadWaitTimeMills": str(send.queue_head_wait_ms()),
            "pullThreadPoolQueueSize": str(pull.pending()),
            "pullThreadPoolQueueCapacity": str(pull.capacity()),
            "pullThreadPoolQueueHeadWaitTimeMills": str(pull.oldest_wait_ms()),
            "litePullThreadPoolQueueSize": "0",
            "litePullThreadPoolQueueCapacity": "0",
            "litePullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueSize": "0",
            "queryThreadPoolQueueCapacity": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": "0",
        }

    def _extra_keys(self) -> dict[str, str]:
        c, st = self.config, self.stats
        flushed = self.store.stats().commitlog_flushed_offset
        t = {
            "brokerName": c.brokerName,
            "brokerId": str(c.brokerId),
            "brokerRole": c.brokerRole.value,
            "flushDiskType": c.flushDiskType.value,
            "commitLogFlushedOffset": str(flushed),
            "pullHoldCount": str(self.held_pulls()),
            "sendBackTotal": str(st.send_back_total),
            "dlqTotal": str(st.dlq_total),
        }
        t.update(self.extra())
        return t
