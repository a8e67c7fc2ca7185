"""A broker whose CommitLog disk fills up (the file system's usage is injected; everything
else is the real broker on the simulated network under MockClock): above
diskSpaceWarningLevelRatio every send is refused with SERVICE_NOT_AVAILABLE and upstream's
remark, nothing is written, pulls go on, brokerStatus shows the ratio, one disk_full line is
logged; once the usage is back at or below the limit, the next check lets sends in again
(disk_space_recovered). A broker that starts on a full disk refuses its very first send."""

from __future__ import annotations

from typing import Any

import structlog.testing
import trio
import trio.testing

from rocketrio.protocol.bodies import KVTable
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json
from tests.harness.broker import harness, messages
from tests.harness.disk_full import Disk

CHECK = {"cleanResourceInterval": 1000, "diskSpaceWarningLevelRatio": 85}


async def test_a_full_disk_refuses_sends_until_space_returns(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, **CHECK) as h:
        assert h.broker is not None
        disk = Disk(50)
        h.broker.store.disks.disk = h.broker.stats.runtime_info.disk = disk
        assert (await h.send("T", b"before", queue_id=0)).code == ResponseCode.SUCCESS
        end = h.broker.store.message_store.get_commitlog_max_offset()

        with structlog.testing.capture_logs() as logs:
            disk.used_percent = 90
            await trio.sleep(1.1)  # one check later
            resp = await h.send("T", b"refused", queue_id=0)
            assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert resp.remark == (
                "service not available now. It may be caused by one of the following reasons: "
                "the broker's disk is full [CL:  0.90 CQ:  0.90 INDEX:  0.90], messages are "
                "put to the slave, message store has been shut down, etc."
            )
            assert h.broker.store.message_store.get_commitlog_max_offset() == end  # nothing written
            pulled = await h.pull("T", 0, 0)
            assert [m.body for m in messages(pulled)] == [b"before"]
            status = await h.invoke(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO))
            assert from_json(KVTable, status.body).table["commitLogDiskRatio"] == "0.9"
            for _ in range(5):
                await trio.sleep(1)  # still full: logged once, not at every check
            disk.used_percent = 85  # at the limit is not full
            await trio.sleep(1.1)
            assert (await h.send("T", b"after", queue_id=0)).code == ResponseCode.SUCCESS
        names = [e["event"] for e in logs if e["event"].startswith("disk")]
        assert names == ["disk_full", "disk_space_recovered"]
        full = next(e for e in logs if e["event"] == "disk_full")
        assert full["warning_ratio"] == 0.85 and full["disk_usage"].startswith("CL:  0.90")


async def test_a_broker_started_on_a_full_disk_refuses_its_first_send(
    tmp_path: Any, mock_clock: trio.testing.MockClock, monkeypatch: Any
) -> None:
    from rocketrio.actors.broker import broker as broker_module

    monkeypatch.setattr(broker_module, "disk_space", Disk(97))
    async with harness(tmp_path, **CHECK) as h:
        resp = await h.send("T", b"x", queue_id=0)
        assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "disk is full [CL:  0.97" in resp.remark
