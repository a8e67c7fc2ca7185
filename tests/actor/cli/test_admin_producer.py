"""`rocketrio admin producer -b` (GET_ALL_PRODUCER_INFO, 328) in-process against a controller, a
NameServer and a broker on the simulated network (MockClock): every producer connected to the
broker, by group, printed as mqadmin prints it (client id, remote address as ``/ip:port``,
language, version, the last heartbeat as epoch ms); a producer that left is no longer listed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import trio
import trio.testing

from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.protocol.codes import CURRENT_VERSION
from tests.harness.admin_cli import Capture, admin, client_kwargs, make_topic, start_broker_node
from tests.harness.clock import EPOCH_MS
from tests.harness.replication import cluster

LINE = re.compile(
    r"^producer group \((\w+)\) instance : clientId=(\S+),remoteIP=/([\d.]+)(?::\d+)?, "
    r"language=(\w+), version=(\d+), lastUpdateTimestamp=(\d+)$",
    re.M,
)


async def test_producer_lists_every_connected_producer_by_group(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 45) as c:
        node = await start_broker_node(c)
        ns, addr = c.namesrv_addr, node.b.addr
        await make_topic(c, "T", 1)
        async with (
            Producer("PG1", ns, **client_kwargs(c, "10.0.9.8", "p1")) as p1,
            Producer("PG2", ns, **client_kwargs(c, "10.0.9.9", "p2")) as p2,
        ):
            for p in (p1, p2):
                await p.send(Message("T", b"x"))  # connected to the broker, heartbeats sent
            await trio.sleep(1)
            code, out, err = await admin(capsys, c, "producer", "-n", ns, "-b", addr)
            assert code == 0, err
            rows = {m.group(1): m.groups()[1:] for m in LINE.finditer(out)}
            assert set(rows) == {"PG1", "PG2"}, out
            assert rows["PG1"][:4] == ("10.0.9.8@p1", "10.0.9.8", "PYTHON", str(CURRENT_VERSION))
            assert rows["PG2"][:2] == ("10.0.9.9@p2", "10.0.9.9")
            assert int(rows["PG1"][4]) >= EPOCH_MS  # epoch ms of the last heartbeat
            code, out, _ = await admin(capsys, c, "producer", "-n", ns, "-b", addr, "--json")
            assert code == 0 and set(json.loads(out)["data"]) == {"PG1", "PG2"}
        await trio.sleep(1)  # both unregistered on close
        code, out, _ = await admin(capsys, c, "producer", "-n", ns, "-b", addr)
        assert code == 0 and not LINE.search(out)
