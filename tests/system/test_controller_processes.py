"""System test: three standalone controller processes (`rocketrio controller -c ...`) on loopback.

kill -9 the Raft leader: a new leader is elected and accepts writes (a new broker set goes
through the persistent-BrokerId flow); the killed replica restarts from its store and catches
up: it names the same leader, and after a clean SIGTERM stop all three stores replay to the
same controller state. No process logs an error or a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest
import trio

from rocketrio.actors.controller.controller import ControllerStateMachine
from rocketrio.actors.controller.replicas_info import ReplicasInfoManager
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.actors.kernel.transport import TcpTransport
from rocketrio.actors.raft.node import store_dir
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.controller_headers import (
    ApplyBrokerIdRequestHeader,
    BrokerReplicasInfo,
    GetNextBrokerIdRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    encode_broker_names,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_ext
from rocketrio.storage.raft_log import RaftLog
from tests.harness.system import free_port_block, log_problems

pytestmark = pytest.mark.system  # in conftest.XDIST_GROUPS

IDS = ("n0", "n1", "n2")
CLUSTER = "DefaultCluster"


@attrs.define
class Replica:
    node_id: str
    addr: str
    conf: Path
    out: Path
    proc: subprocess.Popen[bytes] | None = None
    out_from: int = 0  # where this incarnation's output starts in `out`

    def start(self) -> None:
        self.out_from = self.out.stat().st_size if self.out.exists() else 0
        with open(self.out, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rocketrio.cli.main", "controller", "-c", str(self.conf)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def wait_boot(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        marker = f"The controller[{self.node_id}, {self.addr}] boot success"
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, self.out.read_text()
            if marker in self.out.read_bytes()[self.out_from :].decode(errors="replace"):
                return
            time.sleep(0.05)
        raise AssertionError(f"{self.node_id} did not boot:\n{self.out.read_text()}")


def _write_confs(tmp: Path) -> dict[str, Replica]:
    base = free_port_block(3)
    addrs = {nid: f"127.0.0.1:{base + 10 * k}" for k, nid in enumerate(IDS)}
    peers = ";".join(f"{nid}-{addrs[nid]}" for nid in IDS)
    replicas = {}
    for nid in IDS:
        conf = tmp / f"controller-{nid}.conf"
        conf.write_text(
            f"controllerDLegerGroup=group1\ncontrollerDLegerPeers={peers}\n"
            f"controllerDLegerSelfId={nid}\ncontrollerStorePath={tmp / 'store'}\n"
            f"logDir={tmp / 'logs'}\n"
        )
        replicas[nid] = Replica(nid, addrs[nid], conf, tmp / "logs" / f"{nid}.out")
    (tmp / "logs").mkdir()
    return replicas


async def _call(
    client: RemotingClient, addr: str, code: int, header: object = None, body: bytes = b""
) -> RemotingCommand:
    ext = to_ext(header) if header is not None else {}
    return await client.invoke(addr, RemotingCommand(code=code, ext_fields=ext, body=body), 2)


async def _leader(client: RemotingClient, addrs: list[str], timeout_s: float) -> str:
    """Address of the replica that says it leads (asking every live one)."""
    with trio.fail_after(timeout_s):
        while True:
            for addr in addrs:
                try:
                    r = await _call(client, addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
                except RemotingError:
                    continue
                if r.ext_fields.get("isLeader") == "true":
                    return addr
            await trio.sleep(0.02)


async def _first_start(
    client: RemotingClient, addrs: list[str], broker_name: str, broker_addr: str, timeout_s: float
) -> str:
    """The persistent-BrokerId flow against whoever leads; retried until it commits."""
    with trio.fail_after(timeout_s):
        while True:
            at = await _leader(client, addrs, timeout_s)
            try:
                r = await _call(
                    client,
                    at,
                    RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                    GetNextBrokerIdRequestHeader(CLUSTER, broker_name),
                )
                if r.code != ResponseCode.SUCCESS:
                    await trio.sleep(0.02)
                    continue
                broker_id = int(r.ext_fields["nextBrokerId"])
                code = f"{broker_addr};1700000000000"
                h = ApplyBrokerIdRequestHeader(CLUSTER, broker_name, broker_id, code)
                r = await _call(client, at, RequestCode.CONTROLLER_APPLY_BROKER_ID, h)
                if r.code == ResponseCode.SUCCESS:
                    r = await _call(
                        client,
                        at,
                        RequestCode.CONTROLLER_REGISTER_BROKER,
                        RegisterBrokerToControllerRequestHeader(
                            CLUSTER, broker_name, broker_id, broker_addr
                        ),
                    )
                if r.code == ResponseCode.SUCCESS:
                    assert r.ext_fields["masterBrokerId"] == str(broker_id)
                    return at
            except RemotingError:
                pass
            await trio.sleep(0.02)


def _replay(path: str) -> dict[str, object]:
    """The controller state a stopped replica's store holds (snapshot + log)."""
    replicas = ReplicasInfoManager()
    machine = ControllerStateMachine(replicas)
    with RaftLog.open(path) as log:
        loaded = log.load_snapshot()
        if loaded is not None:
            machine.restore(loaded[1])
        for entry in log.all_entries():
            if entry.data:
                machine.apply(entry.data)
    return replicas.describe()


async def _scenario(replicas: dict[str, Replica]) -> tuple[str, float]:
    all_addrs = [r.addr for r in replicas.values()]
    async with RemotingClient(TcpTransport()) as client:
        leader_addr = await _first_start(client, all_addrs, "broker-a", "127.0.0.1:20911", 20)
        old = next(r for r in replicas.values() if r.addr == leader_addr)
        survivors = [a for a in all_addrs if a != leader_addr]
        assert old.proc is not None
        killed_at = time.monotonic()
        os.kill(old.proc.pid, signal.SIGKILL)
        old.proc.wait()
        client.close_connection(leader_addr)
        new_addr = await _first_start(client, survivors, "broker-b", "127.0.0.1:21911", 15)
        failover_s = time.monotonic() - killed_at
        r = await _call(
            client,
            new_addr,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
            body=encode_broker_names(["broker-a", "broker-b"]),
        )
        table = from_json(BrokerReplicasInfo, r.body).replicasInfoTable
        assert sorted(table) == ["broker-a", "broker-b"]  # nothing committed was lost
        assert table["broker-a"].masterAddress == "127.0.0.1:20911"

        old.start()
        old.wait_boot()
        with trio.fail_after(10):
            while True:
                r = await _call(client, old.addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
                if r.ext_fields.get("controllerLeaderAddress") == new_addr:
                    break
                await trio.sleep(0.05)
        assert r.ext_fields["isLeader"] == "false"
        # one more write, which the restarted replica must also receive
        await _first_start(client, all_addrs, "broker-c", "127.0.0.1:22911", 10)
        await trio.sleep(1)
    return old.node_id, failover_s


def test_kill_leader_new_leader_takes_writes_old_one_catches_up(tmp_path: Path) -> None:
    replicas = _write_confs(tmp_path)
    try:
        for r in replicas.values():
            r.start()
        for r in replicas.values():
            r.wait_boot()
        restarted, failover_s = trio.run(_scenario, replicas)
    finally:
        for r in replicas.values():
            if r.proc is not None and r.proc.poll() is None:
                r.proc.send_signal(signal.SIGTERM)
        for r in replicas.values():
            if r.proc is not None:
                try:
                    r.proc.wait(20)
                except subprocess.TimeoutExpired:
                    r.proc.kill()
                    r.proc.wait()
    assert failover_s < 5, f"failover took {failover_s:.2f}s"
    for r in replicas.values():
        assert r.proc is not None and r.proc.returncode == 0, r.out.read_text()
    states = {nid: _replay(store_dir(str(tmp_path / "store"), nid)) for nid in IDS}
    assert sorted(states[restarted]) == ["broker-a", "broker-b", "broker-c"]
    assert states[restarted] == states[IDS[0]] == states[IDS[1]] == states[IDS[2]]
    assert log_problems(str(tmp_path / "logs")) == []
