"""The broker's queue assignment on the simulated network (MockClock): two consumers of a group
heartbeat, QUERY_ASSIGNMENT splits the topic's 4 queues between them in PULL mode (AVG);
`rocketrio admin setConsumeMode` turns the group to POP and both then pop the whole broker
(queue id -1); `getConsumeMode` reads it back; after a restart the broker still answers POP
(messageRequestMode.json). A slave copies its master's modes (SlaveSynchronize). A mode for a
retry topic or an unknown topic is refused with upstream's remark, and an unknown strategy gets
no assignment (``{}``)."""

from __future__ import annotations

import json
from pathlib import Path

import trio
import trio.testing

from rocketrio.actors.broker.roles.slave_sync import SlaveSynchronize
from rocketrio.actors.broker.tables.request_mode import REQUEST_MODE_FILE, RequestModeTable
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.protocol import fastjson
from rocketrio.protocol.assignment import (
    MessageRequestModeSerializeWrapper,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from rocketrio.protocol.bodies import ConsumerData, HeartbeatData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_json
from tests.harness.admin_cli import Capture, admin, make_topic, start_broker_node
from tests.harness.replication import cluster
from tests.harness.slave_sync import OLD, ScriptedMaster, inline, tables

Queues = list[tuple[int, str]]


async def heartbeat(rc: RemotingClient, addr: str, cid: str) -> None:
    data = HeartbeatData(cid, consumerDataSet=[ConsumerData("G")])
    resp = await rc.invoke(addr, RemotingCommand(RequestCode.HEART_BEAT, body=to_json(data)), 5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def query(rc: RemotingClient, addr: str, cid: str, strategy: str = "AVG") -> Queues | None:
    body = fastjson.encode(QueryAssignmentRequestBody("T", "G", cid, strategy))
    resp = await rc.invoke(addr, RemotingCommand(RequestCode.QUERY_ASSIGNMENT, body=body), 5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    got = from_json(QueryAssignmentResponseBody, resp.body).messageQueueAssignments
    if got is None:
        return None
    assert all(a.messageQueue.topic == "T" for a in got)
    return [(a.messageQueue.queueId, a.mode) for a in got]


async def test_set_pop_mode_query_as_two_consumers_and_restart(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 61) as c:
        node = await start_broker_node(c)
        addr = node.b.addr
        await make_topic(c, "T", 4)
        async with (
            RemotingClient(c.net.transport("10.0.9.21")) as rc1,
            RemotingClient(c.net.transport("10.0.9.22")) as rc2,
        ):
            for rc, cid in ((rc1, "c1"), (rc2, "c2")):
                await heartbeat(rc, addr, cid)
            assert await query(rc1, addr, "c1") == [(0, "PULL"), (1, "PULL")]
            assert await query(rc2, addr, "c2") == [(2, "PULL"), (3, "PULL")]
            assert await query(rc1, addr, "c1", "NO_SUCH") is None

            argv = ["setConsumeMode", "-n", c.namesrv_addr, "-b", addr, "-t", "T", "-g", "G"]
            code, out, err = await admin(capsys, c, *argv, "-m", "POP")
            assert code == 0, err
            assert out.splitlines() == [
                f"set consume mode to {addr} success.",
                "topic[T] group[G] consume mode[POP] popShareQueueNum[0]",
            ]
            for rc, cid in ((rc1, "c1"), (rc2, "c2")):
                assert await query(rc, addr, cid) == [(-1, "POP")]
            code, out, _ = await admin(capsys, c, "getConsumeMode", "-b", addr, "--json")
            [modes] = json.loads(out)
            assert modes["modes"]["messageRequestModeMap"]["T"]["G"]["mode"] == "POP"

            await node.stop()
            await (await node.start()).wait_role()
            for rc, cid in ((rc1, "c1"), (rc2, "c2")):
                await heartbeat(rc, addr, cid)
            assert await query(rc1, addr, "c1") == [(-1, "POP")]
            code, out, _ = await admin(capsys, c, "getConsumeMode", "-b", addr)
            assert code == 0 and ["T", "G", "POP", "0"] in [
                ln.split()[1:] for ln in out.splitlines()
            ]


async def test_modes_for_retry_and_unknown_topics_are_refused(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 62) as c:
        node = await start_broker_node(c)
        ns, addr = c.namesrv_addr, node.b.addr
        for topic, remark in (
            ("%RETRY%G", "retry topic is not allowed to set mode"),
            ("NoTopic", "topic[NoTopic] not exist"),
        ):
            argv = ["setConsumeMode", "-n", ns, "-b", addr, "-t", topic, "-g", "G", "-m", "POP"]
            code, out, err = await admin(capsys, c, *argv)
            assert code == 1 and remark in err, (out, err)
        code, out, err = await admin(capsys, c, "getConsumeMode", "-n", ns, "-c", "DefaultCluster")
        assert code == 0 and "POP" not in out, err


class ModesMaster(ScriptedMaster):
    """A scripted master that also answers GET_ALL_MESSAGE_REQUEST_MODE."""

    def __init__(self, modes: MessageRequestModeSerializeWrapper) -> None:
        super().__init__(queues=4, offset=0)
        self.modes = modes

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        if cmd.code == RequestCode.GET_ALL_MESSAGE_REQUEST_MODE:
            self.calls.append(cmd.code)
            return RemotingCommand(ResponseCode.SUCCESS, body=fastjson.encode(self.modes))
        return await super().invoke(addr, cmd, timeout)


async def test_a_slave_copies_and_persists_its_masters_modes(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    topics, groups, offsets = tables(tmp_path)
    modes = RequestModeTable("broker-a", str(tmp_path), run_blocking=inline)
    await modes.load_file()
    modes.set_mode(SetMessageRequestModeRequestBody("Old", "G", "POP"))  # not on the master
    pop = SetMessageRequestModeRequestBody("T", "G", "POP", 2)
    master = ModesMaster(MessageRequestModeSerializeWrapper({"T": {"G": pop}}))
    sync = SlaveSynchronize(
        topics=topics, groups=groups, offsets=offsets, master_addr=lambda: OLD, request_modes=modes
    )
    await sync.sync_all(master, OLD)  # type: ignore[arg-type]
    assert RequestCode.GET_ALL_MESSAGE_REQUEST_MODE in master.calls
    assert modes.modes == {"T": {"G": pop}}
    on_disk = json.loads((tmp_path / "config" / REQUEST_MODE_FILE).read_text())
    assert on_disk["messageRequestModeMap"]["T"]["G"]["popShareQueueNum"] == 2
