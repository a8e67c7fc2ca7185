"""System test: a real broker process whose disk really fills up (issue 14, item 2).

The broker's ConsumeQueue directory is a 1 MiB tmpfs mounted inside its store (needs root and
mount; skipped otherwise), nearly filled by a file of the test, while the CommitLog lives on the
roomy disk: the disk guard's usage ratio (which, as upstream, watches the CommitLog's disk)
never refuses, so the first refusal comes from a real ENOSPC in the ConsumeQueue write that
follows a CommitLog write (the store undoes that put whole). A producer sends until refused:
SERVICE_NOT_AVAILABLE with upstream's "the broker's disk is full" remark naming the error;
pulls go on; the process does not die. The test frees the space: within a few
cleanResourceIntervals the broker takes sends again by itself. Then kill -9 and a restart:
every acknowledged message is served, in order, and no refused one; the JSON log has one
disk_full line with the cause and one disk_space_recovered line, and no error beyond them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.kernel.transport import TcpTransport
from rocketrio.protocol.codes import ResponseCode
from tests.harness.broker import BrokerHarness, messages
from tests.harness.system import free_port_block, launch, stop_processes, wait_for_line

pytestmark = pytest.mark.system  # in conftest.XDIST_GROUPS

MOUNT_BYTES = 1024 * 1024
LEFT_BYTES = 8 * 1024  # room the filler leaves: two pages, a few hundred entries


@pytest.fixture
def small_consume_queue_disk(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path/store`` whose consumequeue directory is a nearly full 1 MiB tmpfs."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    cq = tmp_path / "store" / "consumequeue"
    cq.mkdir(parents=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={MOUNT_BYTES}", "tmpfs", str(cq)]
    done = subprocess.run(mount, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        st = os.statvfs(cq)
        with open(cq / "filler", "wb") as f:
            f.write(bytes(st.f_bavail * st.f_frsize - LEFT_BYTES))
        yield tmp_path / "store"
    finally:
        subprocess.run(["umount", "-l", str(cq)], check=False)


class Client(BrokerHarness):
    """The raw-protocol helpers of the actor tests (send, pull), over real TCP."""

    def __init__(self, client: RemotingClient, broker_addr: str) -> None:
        self.client = client
        self.broker_addr = broker_addr

    @property
    def addr(self) -> str:
        return self.broker_addr


async def fill(addr: str) -> tuple[list[bytes], list[Any]]:
    """Send until refused; the bodies acknowledged and the refusals (then 3 more sends)."""
    acked: list[bytes] = []
    refused: list[Any] = []
    async with RemotingClient(TcpTransport()) as rc:
        c = Client(rc, addr)
        for i in range(5000):
            body = f"m{i:05d}".encode()
            resp = await c.send("DiskFullTopic", body, queue_id=0)
            if resp.code == ResponseCode.SUCCESS:
                acked.append(body)
                continue
            refused.append(resp)
            if len(refused) == 4:
                break
        pulled = await pull_all(c)
    assert pulled == acked, "pulls must go on, serving exactly what was acknowledged"
    return acked, refused


async def pull_all(c: Client) -> list[bytes]:
    out: list[bytes] = []
    while True:
        resp = await c.pull("DiskFullTopic", 0, len(out), max_msgs=32)
        if resp.code != ResponseCode.SUCCESS:
            return out
        out += [m.body for m in messages(resp)]


async def send_when_writable(addr: str, body: bytes, timeout_s: float) -> float:
    """Send until it is acknowledged; returns how long that took."""
    start = trio.current_time()
    async with RemotingClient(TcpTransport()) as rc:
        c = Client(rc, addr)
        with trio.fail_after(timeout_s):
            while (await c.send("DiskFullTopic", body, queue_id=0)).code != ResponseCode.SUCCESS:
                await trio.sleep(0.2)
    return trio.current_time() - start


async def pulled(addr: str) -> list[bytes]:
    async with RemotingClient(TcpTransport()) as rc:
        return await pull_all(Client(rc, addr))


def test_a_broker_on_a_disk_that_fills_refuses_cleanly_and_recovers(
    small_consume_queue_disk: Path,
) -> None:
    store = small_consume_queue_disk
    work = str(store.parent)
    base = free_port_block(2)
    ns, addr = f"127.0.0.1:{base}", f"127.0.0.1:{base + 10}"
    logs = os.path.join(work, "logs")
    procs = [launch("namesrv", "ns", {"listenPort": str(base), "logDir": logs}, work)]
    broker_conf = {
        "namesrvAddr": ns, "brokerIP1": "127.0.0.1", "logDir": logs, "listenPort": str(base + 10),
        "storePathRootDir": str(store), "cleanResourceInterval": "1000",
        "mappedFileSizeConsumeQueue": str(300 * 20),
    }  # fmt: skip
    try:
        broker = launch("broker", "broker", broker_conf, work)
        procs.append(broker)
        wait_for_line(broker, "boot success")
        acked, refused = trio.run(fill, addr)
        assert len(acked) > 100, "the disk filled earlier than the test meant"
        for resp in refused:
            assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "the broker's disk is full [" in resp.remark, resp.remark
        assert "No space left on device" in refused[0].remark  # the ENOSPC, not the ratio
        assert broker.poll() is None, "the broker died on a full disk"
        os.unlink(store / "consumequeue" / "filler")
        took = trio.run(send_when_writable, addr, b"after", 30.0)
        print(f"{len(acked)} messages acknowledged before the disk filled; writable {took:.1f}s "
              "after space returned")  # fmt: skip
        acked.append(b"after")
        broker.send_signal(signal.SIGKILL)
        broker.wait(10)
        again = launch("broker", "broker-again", broker_conf, work)
        procs.append(again)
        wait_for_line(again, "boot success")
        assert trio.run(pulled, addr) == acked
        with open(os.path.join(logs, "broker.jsonl"), encoding="utf-8") as f:
            lines = [json.loads(line) for line in f]
        names = [e["event"] for e in lines if e["event"].startswith("disk")]
        assert names == ["disk_full", "disk_space_recovered"]
        assert (
            "No space left on device"
            in lines[[e["event"] for e in lines].index("disk_full")]["reason"]
        )
        unexpected = [
            e for e in lines
            if e["level"] in ("error", "critical") and e["event"] != "disk_full"
        ]  # fmt: skip
        assert not unexpected, unexpected
    finally:
        stop_processes(procs)
