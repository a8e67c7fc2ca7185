"""Retention on a running broker (clean_service.py), under MockClock on the simulated network:
the clean-up deletes exactly the expired CommitLog segments (never the current one), the
ConsumeQueue files and min offsets follow, topicStatus shows the new min offsets, and a
consumer whose committed offset fell below the min offset is corrected (PULL_OFFSET_MOVED)
and goes on from the oldest stored message without losing any still stored."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.broker.store.clean_policy import hour_of_day
from rocketrio.actors.client.producer import Producer
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from rocketrio.storage.commitlog import segment_name
from tests.harness.clients import Collector, cluster, consumer, create_topic, send_all, wait_for
from tests.harness.clock import now_ms

SEG = 64 * 1024
ALL_HOURS = ";".join(f"{h:02d}" for h in range(24))
RETENTION: dict[str, Any] = {
    "mappedFileSizeCommitLog": SEG,
    "fileReservedTime": 0.002,  # 7.2 s
    "deleteWhen": ALL_HOURS,
    "cleanResourceInterval": 1000,
    "deleteCommitLogFilesInterval": 0,
    "flushIntervalCommitLog": 200,
}


def on_disk(store: Path) -> list[str]:
    return sorted(n for n in os.listdir(store / "commitlog") if n.isdigit())


async def test_expired_segments_go_min_offsets_move_and_a_consumer_below_is_corrected(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c:
        broker = await c.start_broker("b", "10.0.1.1", **RETENTION)
        store = tmp_path / "b"
        await create_topic(c, "T", queues=2)
        body = b"x" * 1024
        with structlog.testing.capture_logs() as logs:
            async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
                early = Collector()
                async with consumer(c, "g", early, consume_from_where="CONSUME_FROM_FIRST_OFFSET"):
                    await send_all(p, "T", [b"early-%d" % i + body for i in range(40)])
                    await wait_for(lambda: len(early.msgs) >= 40)
                # the group committed 40 messages; 300 more fill about six segments, sent in
                # rounds a second apart so the segments close at different times
                for r in range(10):
                    await send_all(p, "T", [b"m-%d-%d" % (r, i) + body for i in range(30)])
                    await trio.sleep(1)
                last_base = broker.store.message_store.retention_segments()[-1][0]
                assert last_base >= 5 * SEG
                sent_done = trio.current_time()
                await trio.sleep(8)  # past the reservation of every closed segment
                kept = on_disk(store)
        deleted = [e for e in logs if e["event"] == "commitlog_deleted"]
        assert deleted, "nothing was deleted"
        gone = {s for e in deleted for s in e["segments"].split(",")}
        # every closed segment expired (the last one closed before the sends ended, 8 s ago)
        # and went, the current one stays: exactly what is on disk
        assert gone == {segment_name(b) for b in range(0, last_base, SEG)}
        assert kept == [segment_name(last_base)]
        assert broker.store.message_store.get_commitlog_min_offset() == last_base
        assert all(e["trigger"] == "time" and not e["forced"] for e in deleted)
        assert trio.current_time() - sent_done >= 8

        async with c.admin() as admin:
            status = await admin.topic_status("T")
        mins = {q.queueId: q.minOffset for q in status}
        maxs = {q.queueId: q.maxOffset for q in status}
        for qid in (0, 1):
            assert mins[qid] == broker.store.message_store.get_min_offset("T", qid)
            assert 20 < mins[qid] <= maxs[qid]  # above the group's committed offset (~20)
        # every queue entry below the min offset points into deleted data, none above does
        clog_min = broker.store.message_store.get_commitlog_min_offset()
        for qid in (0, 1):
            cq = broker.store.message_store.consume_queue("T", qid)
            if mins[qid] < maxs[qid]:
                entry = cq.entry(mins[qid])
                assert entry is not None and entry[0] >= clog_min

        # the group comes back with offsets below the min: corrected, then everything stored
        late = Collector()
        async with consumer(c, "g", late):
            await wait_for(lambda: len(late.msgs) >= sum(maxs[q] - mins[q] for q in (0, 1)))
            await trio.sleep(3)
        got = {(m.queue_id, m.queue_offset) for m in late.msgs}
        want = {(q, o) for q in (0, 1) for o in range(mins[q], maxs[q])}
        assert got == want
        assert all(not m.body.startswith(b"early") for m in late.msgs)
        async with c.admin() as admin:
            progress = await admin.consumer_progress("g", "T")
        assert {o.queueId: o.consumerOffset for o in progress.offsets} == maxs


async def test_the_current_segment_and_young_segments_are_kept(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c:
        # a 6-minute reservation (0.1 h): long enough to see young segments kept, short enough
        # that mock time does not spin the broker's 200 ms timers for an hour
        broker = await c.start_broker("b", "10.0.1.1", **{**RETENTION, "fileReservedTime": 0.1})
        await create_topic(c, "T", queues=1)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            await send_all(p, "T", [b"x" * 1024] * 200)
            before = on_disk(tmp_path / "b")
            assert len(before) >= 3
            await trio.sleep(300)  # under the 360 s reservation
            assert on_disk(tmp_path / "b") == before
            await trio.sleep(70)  # now past it: every closed segment goes, not the last
            assert on_disk(tmp_path / "b") == before[-1:]
        store = broker.store.message_store
        low, clog_min = store.get_min_offset("T", 0), store.get_commitlog_min_offset()
        assert 0 < low < store.get_max_offset("T", 0)
        entry = store.consume_queue("T", 0).entry(low)
        assert entry is not None and entry[0] == clog_min  # the first message still stored


async def test_outside_delete_when_only_an_operator_request_deletes_and_keys_change_live(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster(tmp_path, ()) as c:
        hour = hour_of_day(now_ms())
        other = f"{(hour + 12) % 24:02d}"  # never reached within the test
        broker = await c.start_broker("b", "10.0.1.1", **{**RETENTION, "deleteWhen": other})
        await create_topic(c, "T", queues=1)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            await send_all(p, "T", [b"x" * 1024] * 200)
        before = on_disk(tmp_path / "b")
        await trio.sleep(30)  # long expired, but not the hour and the disk is not full
        assert on_disk(tmp_path / "b") == before
        # a bad deleteWhen is refused and changes nothing
        code, _, err, _ = await run_admin(
            capsys, c, "updateBrokerConfig", "-b", broker.addr, "-k", "deleteWhen", "-v", "25"
        )
        assert code == 1 and "deleteWhen" in err and broker.config.deleteWhen == other
        code, out, _, logs = await run_admin(
            capsys, c, "deleteExpiredCommitLog", "-c", "DefaultCluster"
        )
        assert code == 0 and f"delete expired commitlog requested, {broker.addr}" in out
        assert any(e["event"] == "delete_files_manually" for e in logs)
        await trio.sleep(1.5)
        assert on_disk(tmp_path / "b") == before[-1:]
        # the reservation changed live: a new segment's worth is kept for a day
        code, _, _, _ = await run_admin(
            capsys, c, "updateBrokerConfig", "-b", broker.addr, "-k", "fileReservedTime", "-v", "24"
        )
        assert code == 0 and broker.config.fileReservedTime == 24
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            await send_all(p, "T", [b"y" * 1024] * 200)
        grown = on_disk(tmp_path / "b")
        await run_admin(capsys, c, "deleteExpiredCommitLog", "-b", broker.addr)
        await trio.sleep(30)
        assert on_disk(tmp_path / "b") == grown  # not expired under the new reservation


async def run_admin(
    capsys: pytest.CaptureFixture[str], c: Any, *argv: str
) -> tuple[int, str, str, list[Any]]:
    capsys.readouterr()
    with structlog.testing.capture_logs() as logs:
        code = await main_async(
            ["admin", argv[0], "-n", c.ns_addr, *argv[1:]], Wiring(c.net.transport("10.0.9.200"))
        )
    out, err = capsys.readouterr()
    return code, out, err, logs
