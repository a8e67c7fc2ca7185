"""The chaos workload against a real NameServer and Broker on the simulated network (MockClock):
a transaction whose commit never reached the broker is still committed by the broker's check
after the producers stopped, because the workload's transaction producer stays up until the
run ends (a CI run once reported such a message lost: the producer had closed, so the new
master's check found nobody to ask)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.client.transaction_producer import LocalTransactionState
from rocketrio.cli.chaos import workload
from rocketrio.cli.chaos.workload import Workload
from tests.harness.clients import cluster, create_topic, wait_for

RATE = 2.0  # sends per second per kind
SEND_S = 2.0  # shorter than transactionTimeOut: no half is checked while the producers run


async def test_a_lost_commit_is_resolved_by_a_check_after_the_producers_stopped(
    tmp_path: Path, mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every commit is lost: the local transaction answers UNKNOW, so END_TRANSACTION carries no
    # decision and only a check (answered from the body) can commit or roll back
    monkeypatch.setattr(
        workload._TxnListener,
        "execute_local_transaction",
        lambda self, msg, arg: LocalTransactionState.UNKNOW,
    )
    async with cluster(tmp_path, ()) as c:
        await c.start_broker(
            "broker-a", "10.0.1.1", transactionCheckInterval=5_000, transactionTimeOut=6_000
        )
        wl = Workload(c.ns_addr, "t1", RATE, transport=c.net.transport(c.client_host()))
        for spec in wl.specs():
            await create_topic(c, spec.topic, spec.write_queues)
        async with trio.open_nursery() as n:
            await n.start(wl.run_consumers)
            done = trio.Event()

            async def produce() -> None:
                await wl.run_producers()
                done.set()

            n.start_soon(produce)
            await trio.sleep(SEND_S)
            wl.producing = False
            await done.wait()
            txn = [i for i in wl.intents.values() if i.key is None and i.delay_ms == 0]
            commits = sum(1 for i in txn if not i.rollback)
            assert wl.counters.acked["txn"] >= 3 and commits >= 2
            assert wl.counters.consumed["txn"] == 0  # nothing decided yet
            await wait_for(lambda: wl.counters.consumed["txn"] >= commits, timeout=60.0)
            await trio.sleep(20.0)  # and the rolled-back ones never come
            assert wl.counters.consumed["txn"] == commits
            n.cancel_scope.cancel()
