"""The HA slave's read path in its shell (ha/slave_client.py `_read`): the packets a read holds
reach the slave core as merged runs (one Transfer per run, not per haTransferBatchSize packet),
and the reads go through `bulk_receiver` (one reused buffer on a TCP stream). The equivalence of
the merged and per-packet paths is tests/unit/actors/broker/ha/test_slave_reads.py's."""

from __future__ import annotations

import random
from typing import Any

import trio

from rocketrio.actors.broker.ha import slave_client
from rocketrio.actors.broker.ha.slave_core import SlaveCore
from rocketrio.actors.broker.ha.sync_state import AckPolicy
from rocketrio.actors.kernel.stream_read import bulk_receiver
from rocketrio.protocol.ha import Transfer
from rocketrio.storage.epoch_file import EpochRecord
from tests.actor.broker.test_ha_shells import FakeStore, ShellGroup, wait_for
from tests.harness.sim_network import SimNetwork


async def test_a_reads_packets_reach_the_slave_core_as_one_run(mock_clock, monkeypatch) -> None:
    transfers: list[Transfer] = []
    receivers: list[int] = []
    on_event = SlaveCore.on_event

    def noted(self: SlaveCore, ev: Any, now_ms: int, **kw: Any) -> Any:
        if isinstance(ev, Transfer) and ev.body:
            transfers.append(ev)
        return on_event(self, ev, now_ms, **kw)

    def receiver(stream: trio.abc.Stream, max_bytes: int) -> Any:
        receivers.append(max_bytes)
        return bulk_receiver(stream, max_bytes)

    monkeypatch.setattr(SlaveCore, "on_event", noted)
    monkeypatch.setattr(slave_client, "bulk_receiver", receiver)
    rng = random.Random(3)
    master = FakeStore([EpochRecord(1, 0)])
    master.write(300, rng)  # ~33 KiB: 34 packets of haTransferBatchSize 1000 here
    async with trio.open_nursery() as nursery:
        c = ShellGroup(nursery, SimNetwork(1), master)
        await c.start_master(AckPolicy(all_ack_in_sync_state_set=True))
        slave = FakeStore()
        c.start_slave(slave)
        await wait_for(lambda: bytes(slave.log) == bytes(master.log))
        nursery.cancel_scope.cancel()
    packets = -(-len(master.log) // 1000)
    assert receivers == [slave_client.READ_SIZE]  # one receiver for the session's reads
    assert b"".join(t.body for t in transfers) == bytes(master.log)
    assert len(transfers) * 4 <= packets, (len(transfers), packets)
