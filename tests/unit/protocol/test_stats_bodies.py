"""The statistics bodies against upstream 5.2.0's own bytes (tests/golden/admin-bodies):

- VIEW_BROKER_STATS_DATA (315): remoting/src/main/java/org/apache/rocketmq/remoting/protocol/
  body/BrokerStatsData.java (+ BrokerStatsItem.java), byte for byte;
- GET_BROKER_RUNTIME_INFO (28): remoting/src/main/java/org/apache/rocketmq/remoting/protocol/
  body/KVTable.java filled by store/.../StoreStatsService.java, store/.../DefaultMessageStore.java
  and broker/.../processor/AdminBrokerProcessor.java#prepareRuntimeInfo: every key upstream
  sends, each value in upstream's format, and every field mqadmin's ClusterListSubCommand parses
  parses (admin-bodies README §3 "What mqadmin parses").
"""

from __future__ import annotations

import re
from pathlib import Path

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.stats.runtime_info import DiskSpace, RuntimeInfo
from rocketrio.actors.broker.store.view import ReadGate, StoreView
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import KVTable
from rocketrio.protocol.serde import from_json
from rocketrio.protocol.stats_bodies import BrokerStatsData, BrokerStatsItem
from rocketrio.storage.message_store import MessageStore, MessageToStore, StoreConfig
from tests.harness.paths import GOLDEN_ADMIN_BODIES

GOLDEN = GOLDEN_ADMIN_BODIES
NOW_MS = 1_795_440_000_000
TPS = 4.166666666666667

LONG = r"-?\d+"
DOUBLE = r"-?\d+\.\d+(E-?\d+)?"
TRIPLE = rf"({DOUBLE})? ({DOUBLE})? ({DOUBLE})?"
# upstream's value format of every key (README §3), checked on upstream's samples and ours
FORMATS: dict[str, str] = {
    "bootTimestamp": LONG,
    "runtime": r"\[ [\d,]+ days, \d+ hours, \d+ minutes, \d+ seconds \]",
    "putMessageEntireTimeMax": LONG,
    "putMessageTimesTotal": r"[1-9]\d*",
    "putMessageFailedTimes": LONG,
    "putMessageSizeTotal": LONG,
    "putMessageDistributeTime": r"null|(\[[^\]]+\]:\d+ ){13}",
    "putMessageAverageSize": DOUBLE,
    "dispatchMaxBuffer": LONG,
    "getMessageEntireTimeMax": LONG,
    "putTps": TRIPLE,
    "getFoundTps": TRIPLE,
    "getMissTps": TRIPLE,
    "getTransferredTps": TRIPLE,
    "getTotalTps": rf"{DOUBLE} {DOUBLE} {DOUBLE}",
    "putLatency99": r"\d+\.\d\d",
    "putLatency999": r"\d+\.\d\d",
    "commitLogDiskRatio": DOUBLE,
    "consumeQueueDiskRatio": DOUBLE,
    "commitLogMinOffset": LONG,
    "commitLogMaxOffset": LONG,
    "brokerActive": "true|false",
    "brokerVersionDesc": r"V\d+_\d+_\d+",
    "brokerVersion": LONG,
    "msgPutTotalYesterdayMorning": LONG,
    "msgPutTotalTodayMorning": LONG,
    "msgPutTotalTodayNow": LONG,
    "msgGetTotalYesterdayMorning": LONG,
    "msgGetTotalTodayMorning": LONG,
    "msgGetTotalTodayNow": LONG,
    "dispatchBehindBytes": LONG,
    "pageCacheLockTimeMills": LONG,
    "earliestMessageTimeStamp": LONG,
    "startAcceptSendRequestTimeStamp": LONG,
    "timerReadBehind": LONG,
    "timerOffsetBehind": LONG,
    "timerCongestNum": LONG,
    "timerEnqueueTps": DOUBLE,
    "timerDequeueTps": DOUBLE,
    "remainTransientStoreBufferNumbs": LONG,
    "remainHowManyDataToFlush": r"\d+ B|\d+\.\d [KMGTPE]iB",
    "commitLogDirCapacity": r"Total : \S+ \S+, Free : \S+ \S+\.",
    "EndTransactionQueueSize": LONG,
    "EndTransactionThreadPoolQueueCapacity": LONG,
    **{
        f"{pool}ThreadPoolQueue{what}": LONG
        for pool in ("send", "pull", "litePull", "query")
        for what in ("Size", "Capacity", "HeadWaitTimeMills")
    },
}
PATH_KEYS = ("commitLogDiskRatio_",)  # one key per commitlog path
ABSENT_WITHOUT_SCHEDULE = "scheduleMessageOffset_"


def golden(name: str) -> bytes:
    return (GOLDEN / f"{name}.json").read_bytes()


def test_broker_stats_data_is_byte_identical_to_upstream() -> None:
    body = BrokerStatsData(
        statsMinute=BrokerStatsItem(250, TPS, 0.5),
        statsHour=BrokerStatsItem(15000, TPS, 0.4866666666666667),
        statsDay=BrokerStatsItem(360000, TPS, 0.49),
    )
    assert fastjson.encode(body) == golden("broker_stats_data")
    assert from_json(BrokerStatsData, golden("broker_stats_data")) == body
    live = from_json(BrokerStatsData, golden("live_broker_stats_data"))
    assert live.statsMinute == BrokerStatsItem(96, 1.6, 1.0)
    assert fastjson.encode(live) == golden("live_broker_stats_data")  # 0.0 doubles, long sums


class Queues:
    inbox_capacity = 4096

    def queued(self) -> int:
        return 3

    def queue_head_wait_ms(self) -> int:
        return 12

    def write_held_ms(self) -> int:
        return 0

    def pending(self) -> int:
        return 0

    def capacity(self) -> int:
        return 40

    def oldest_wait_ms(self) -> int:
        return 0


def runtime_table(tmp_path: Path) -> dict[str, str]:
    store = MessageStore(str(tmp_path / "commitlog-root"), StoreConfig())
    store.open()
    store.put_messages([MessageToStore("T", 0, b"m%d" % i) for i in range(4)], NOW_MS - 5000)
    stats = BrokerStats("DefaultCluster")
    stats.boot_ms = NOW_MS - 3_723_000
    stats.days.restore(None, NOW_MS)
    stats.on_topic_put("T", 4, 400)
    config = BrokerConfig(storePathRootDir=str(tmp_path / "commitlog-root"))
    info = RuntimeInfo(
        config,
        stats=stats,
        store=StoreView(store, ReadGate()),
        send_queue=Queues(),
        pull_queue=Queues(),
        held_pulls=lambda: 2,
        is_master=lambda: True,
        now_ms=lambda: NOW_MS,
        disk=lambda _path: DiskSpace(50 * 1024**3, 28 * 1024**3, 27 * 1024**3),
    )
    try:
        return info.table()
    finally:
        store.close()


def upstream_keys(name: str) -> dict[str, str]:
    return from_json(KVTable, golden(name)).table


def test_runtime_info_has_every_upstream_key_in_upstream_format(tmp_path: Path) -> None:
    ours = runtime_table(tmp_path)
    for sample in ("kv_table_broker_runtime_info", "live_kv_table_broker_runtime_info"):
        theirs = upstream_keys(sample)
        for key, value in theirs.items():
            if key.startswith(ABSENT_WITHOUT_SCHEDULE):
                continue  # no schedule service here, as on a fresh upstream broker
            fmt = DOUBLE if key.startswith(PATH_KEYS) else FORMATS[key]
            assert re.fullmatch(fmt, value), (sample, key, value)  # the regex fits upstream
            if key.startswith(PATH_KEYS):
                assert any(k.startswith(PATH_KEYS) for k in ours), key
                continue
            assert key in ours, f"{key} missing"
            assert re.fullmatch(fmt, ours[key]), (key, ours[key])
    assert ours["runtime"] == "[ 0 days, 1 hours, 2 minutes, 3 seconds ]"
    assert ours["commitLogDirCapacity"] == "Total : 50.0 GiB, Free : 28.0 GiB."
    assert ours["commitLogDiskRatio"] == "0.45"  # 22 GiB used / (22 + 27 usable), rounded up
    assert ours["earliestMessageTimeStamp"] == str(NOW_MS - 5000)
    assert ours["putMessageTimesTotal"] == "4" and ours["putMessageAverageSize"] == "100.0"
    assert ours["sendThreadPoolQueueSize"] == "3"
    assert ours["sendThreadPoolQueueHeadWaitTimeMills"] == "12"
    assert ours["remainTransientStoreBufferNumbs"] == "2147483647"
    # rocketrio's extra keys do not collide with upstream's
    extra = set(ours) - set(FORMATS) - {k for k in ours if k.startswith(PATH_KEYS)}
    assert extra == {
        "brokerName",
        "brokerId",
        "brokerRole",
        "flushDiskType",
        "commitLogFlushedOffset",
        "pullHoldCount",
        "sendBackTotal",
        "dlqTotal",
    }
    # the body is a KVTable of strings, as upstream writes it
    decoded = from_json(KVTable, fastjson.encode(KVTable(ours))).table
    assert decoded == ours and all(isinstance(v, str) for v in decoded.values())


def test_every_field_mqadmin_cluster_list_parses_parses(tmp_path: Path) -> None:
    """ClusterListSubCommand: Long.parseLong, Float.parseFloat, Double.parseDouble of the first
    TPS figure, Boolean.parseBoolean; brokerStatus prints the rest verbatim."""
    t = runtime_table(tmp_path)
    for key in (
        "msgPutTotalYesterdayMorning",
        "msgPutTotalTodayMorning",
        "msgPutTotalTodayNow",
        "msgGetTotalYesterdayMorning",
        "msgGetTotalTodayMorning",
        "msgGetTotalTodayNow",
        "timerReadBehind",
        "timerOffsetBehind",
        "timerCongestNum",
        "earliestMessageTimeStamp",
    ):
        assert re.fullmatch(LONG, t[key]), key
    for key in ("timerEnqueueTps", "timerDequeueTps", "commitLogDiskRatio"):
        float(t[key])
    for key in ("putTps", "getTransferredTps"):
        first = t[key].split(" ")[0]
        assert first == "" or re.fullmatch(DOUBLE, first), (key, t[key])
    assert t["brokerActive"] in ("true", "false")
    assert "null" not in {t[k] for k in ("sendThreadPoolQueueSize", "pageCacheLockTimeMills")}
