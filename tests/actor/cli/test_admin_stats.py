"""`rocketrio admin clusterList | brokerStatus | statsAll` and the broker's statistics, in
process (cli.main.main_async) against a controller, a NameServer and a broker on the simulated
network (MockClock): figures move under load, columns are mqadmin's, VIEW_BROKER_STATS_DATA
answers unknown items as upstream, and the day counters are right after a restart (clean or
kill -9 after a persist) and on disk."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.broker.tables.meta_log import META_QUEUE, META_TOPIC
from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext
from rocketrio.protocol.stats_bodies import ViewBrokerStatsDataRequestHeader
from tests.harness.admin_cli import client_kwargs
from tests.harness.replication import Cluster, cluster, wait_until

Capture = pytest.CaptureFixture[str]
HOST = "10.0.9.7"
ISO_DATE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d"
UPSTREAM_KEYS = {  # GET_BROKER_RUNTIME_INFO of a fresh 5.2.0 broker (admin-bodies README §3)
    *"bootTimestamp runtime putMessageEntireTimeMax putMessageTimesTotal putMessageFailedTimes"
    " putMessageSizeTotal putMessageDistributeTime putMessageAverageSize dispatchMaxBuffer"
    " getMessageEntireTimeMax putTps getFoundTps getMissTps getTotalTps getTransferredTps"
    " putLatency99 putLatency999 commitLogDiskRatio consumeQueueDiskRatio commitLogMinOffset"
    " commitLogMaxOffset brokerActive brokerVersionDesc brokerVersion"
    " msgPutTotalYesterdayMorning msgPutTotalTodayMorning msgPutTotalTodayNow"
    " msgGetTotalYesterdayMorning msgGetTotalTodayMorning msgGetTotalTodayNow"
    " dispatchBehindBytes pageCacheLockTimeMills earliestMessageTimeStamp"
    " startAcceptSendRequestTimeStamp timerReadBehind timerOffsetBehind timerCongestNum"
    " timerEnqueueTps timerDequeueTps remainTransientStoreBufferNumbs remainHowManyDataToFlush"
    " EndTransactionQueueSize EndTransactionThreadPoolQueueCapacity".split(),
    *(
        f"{pool}ThreadPoolQueue{what}"
        for pool in ("send", "pull", "litePull", "query")
        for what in ("Size", "Capacity", "HeadWaitTimeMills")
    ),
}


async def admin(capsys: Capture, c: Cluster, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with structlog.testing.capture_logs():
        code = await main_async(["admin", *argv], Wiring(c.net.transport(HOST)))
    out, err = capsys.readouterr()
    return code, out, err


async def started(c: Cluster) -> Any:
    node = await (await c.node().start()).wait_role()

    async def registered() -> bool:
        return bool(await c.namesrv_ids())

    await wait_until(registered, "broker registered")
    return node


async def test_stats_all_cluster_list_and_broker_status_under_load(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 31) as c:
        node = await started(c)
        ns, addr = c.namesrv_addr, node.b.addr
        async with MQAdmin(ns, c.net.transport(HOST)) as mq:
            await mq.update_topic("T", cluster="DefaultCluster", read_queues=2, write_queues=2)
            await wait_for_route(mq, "T")
        got: list[Any] = []

        def listener(msgs: list[Any]) -> ConsumeStatus:
            got.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            "G",
            ns,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            **client_kwargs(c, "10.0.9.9", "c"),
        )
        consumer.subscribe("T")
        consumer.register_listener(listener)
        sent = 0

        async def produce() -> None:  # 10 messages a second for 30 s
            nonlocal sent
            async with Producer("PG", ns, **client_kwargs(c, "10.0.9.8", "p")) as p:
                for i in range(300):
                    await p.send(Message("T", f"m{i}".encode()))
                    sent += 1
                    await trio.sleep(0.1)

        async with consumer, trio.open_nursery() as n:
            n.start_soon(produce)
            await trio.sleep(20)  # mid-load
            code, out, err = await admin(capsys, c, "clusterList", "-n", ns)
            assert code == 0 and err == "", err
            head, row = out.splitlines()[:2]
            assert head.split() == [
                "#Cluster",
                "Name",
                "#Broker",
                "Name",
                "#BID",
                "#Addr",
                "#Version",
                "#InTPS(LOAD)",
                "#OutTPS(LOAD)",
                "#Timer(Progress)",
                "#PCWait(ms)",
                "#Hour",
                "#SPACE",
                "#ACTIVATED",
            ]
            load = re.findall(r"(\d+\.\d\d)\((\d+),(\d+)ms\)", row)
            assert len(load) == 2 and "null" not in row, row
            (in_tps, *_), (out_tps, *_) = load
            assert float(in_tps) == pytest.approx(10.0, abs=1.5)  # 10 s window of 1 s samples
            assert float(out_tps) > 0
            assert row.split()[:5] == ["DefaultCluster", "broker-a", "0", addr, "V5_2_0"]
            assert row.split()[-1] == "true" and "0-0(0.0w, 0.0, 0.0)" in row
        # the producer is done and the consumer caught up; one more 10 s sample
        assert sent == 300 and len(got) >= 300
        await trio.sleep(11)

        code, out, err = await admin(capsys, c, "statsAll", "-n", ns, "-t", "T")
        assert code == 0 and err == "", err
        lines = out.splitlines()
        assert lines[0].split() == [
            "#Topic",
            "#Consumer",
            "Group",
            "#Accumulation",
            "#InTPS",
            "#OutTPS",
            "#InMsg24Hour",
            "#OutMsg24Hour",
        ]
        topic, group, backlog, in_tps, out_tps, in_24h, out_24h = lines[1].split()
        assert (topic, group, backlog, in_24h, out_24h) == ("T", "G", "0", "300", "300")
        assert float(in_tps) > 0 and float(out_tps) > 0  # the minute window still holds load
        code, out, _ = await admin(capsys, c, "statsAll", "-n", ns, "--json")
        rows = {(r["topic"], r.get("group")): r for r in json.loads(out)}
        assert rows[("T", "G")]["inMsg24Hour"] == 300
        assert all(not t.startswith("%RETRY%") for t, _ in rows)
        code, out, _ = await admin(capsys, c, "statsAll", "-n", ns, "-a")
        assert code == 0 and [ln.split()[0] for ln in out.splitlines()[1:]] == ["T"]

        code, out, err = await admin(capsys, c, "clusterList", "-n", ns, "-m")
        assert code == 0 and err == ""
        assert out.splitlines()[1].split() == ["DefaultCluster", "broker-a", "0", "0", "300", "300"]

        code, out, err = await admin(capsys, c, "brokerStatus", "-n", ns, "-b", addr)
        kv = dict(re.findall(r"^(\S+)\s*: (.*)$", out, re.M))
        assert code == 0 and UPSTREAM_KEYS <= set(kv), UPSTREAM_KEYS - set(kv)
        assert re.fullmatch(ISO_DATE, kv["bootTimestamp"]), kv["bootTimestamp"]
        # the store's figure counts every put, the metadata journal's records too (upstream's
        # counts its system topics); the day figure leaves system topics out (upstream)
        journal = node.b.store.message_store.get_max_offset(META_TOPIC, META_QUEUE)
        assert journal >= 1  # the topic auto-created by the first send
        assert kv["msgPutTotalTodayNow"] == "300"
        assert kv["putMessageTimesTotal"] == str(300 + journal)
        assert kv["putMessageDistributeTime"] == "null"  # upstream, in the first minute
        code, out, _ = await admin(capsys, c, "brokerStatus", "-n", ns, "-c", "DefaultCluster")
        assert code == 0 and re.search(rf"^{re.escape(addr)}\s+putTps\s+: ", out, re.M), out

        await trio.sleep(25)  # a minute after the first sample: the last minute's put times
        kv = await runtime(c, addr)
        counts = re.findall(r"\[[^\]]+\]:(\d+) ", kv["putMessageDistributeTime"])
        assert len(counts) == 13 and sum(map(int, counts)) == 300 + journal, kv[
            "putMessageDistributeTime"
        ]
        assert re.fullmatch(r"\d+\.\d\d", kv["putLatency99"])

        # -i: mqadmin prints again every interval until interrupted
        capsys.readouterr()
        with trio.move_on_after(2.5), structlog.testing.capture_logs():
            await main_async(
                ["admin", "clusterList", "-n", ns, "-i", "1"], Wiring(c.net.transport(HOST))
            )
        assert capsys.readouterr().out.count("#Cluster Name") == 3  # at 0, 1 and 2 s

        # VIEW_BROKER_STATS_DATA: upstream's code and remark for an item that does not exist
        assert c.client is not None
        for name, key in (("TOPIC_PUT_NUMS", "Nope"), ("NO_SUCH_STATS", "T")):
            header = to_ext(ViewBrokerStatsDataRequestHeader(name, key))
            cmd = RemotingCommand(RequestCode.VIEW_BROKER_STATS_DATA, ext_fields=header)
            resp = await c.client.invoke(addr, cmd, 5)
            assert resp.code == ResponseCode.SYSTEM_ERROR
            assert resp.remark == f"The stats <{name}> <{key}> not exist"


def day_file(node: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(node.root) / "config" / "brokerStats.json").read_text())
    return data


async def runtime(c: Cluster, addr: str) -> dict[str, str]:
    async with MQAdmin(c.namesrv_addr, c.net.transport(HOST)) as mq:
        return await mq.broker_status(addr)


async def test_day_counters_are_right_after_a_restart_and_a_crash(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 32) as c:
        node = await started(c)
        for _ in range(5):
            assert (await c.send(node)).code == ResponseCode.SUCCESS
        await node.stop()  # clean: the file is written at shutdown
        saved = day_file(node)
        assert (saved["msgPutTotal"], saved["msgPutTotalTodayMorning"]) == (5, 0)

        node = await (await node.start()).wait_role()
        kv = await runtime(c, node.b.addr)
        assert (kv["msgPutTotalTodayMorning"], kv["msgPutTotalTodayNow"]) == ("0", "5")
        for _ in range(3):
            assert (await c.send(node)).code == ResponseCode.SUCCESS
        await trio.sleep(11)  # the periodic write (every 10 s when changed)
        assert day_file(node)["msgPutTotal"] == 8
        await node.crash()  # kill -9: no shutdown write

        node = await (await node.start()).wait_role()
        kv = await runtime(c, node.b.addr)
        assert kv["msgPutTotalTodayNow"] == "8"
        assert kv["msgPutTotalTodayNow"] != kv["msgPutTotalTodayMorning"]
