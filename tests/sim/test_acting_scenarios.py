"""Slave acting master (RIP-32, SPEC A1-A5) in the whole-cluster simulation (issue 27).

Each scenario runs the classic-mode world (acting_world.py: one NameServer with
supportActingMaster, broker-a and broker-b as SYNC_MASTER + SLAVE groups with
enableSlaveActingMaster and enableRemoteEscape) under the same seeded network, simulated disks,
MockClock, clients and end phases (healing, liveness, convergence, final reads) as the
controller-mode scenarios; its own checker (acting_checks.py) runs after every step with the
shared invariants, and the scenario also asserts that its critical situation happened, so it
cannot pass vacuously. `test_the_acting_scenarios_catch_a_broken_product` runs each against the
mutant it targets (mutants.py, ``acting_*``): each must fail.

Replay: ``pytest tests/sim/test_acting_scenarios.py -k NAME`` (seed `SEED` of scenario_kit.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from rocketrio.actors.client.api import PullStatus
from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.transaction_producer import TransactionProducer
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt
from rocketrio.protocol.pop_extra_info import pop_retry_topic
from tests.harness.clock import now_ms
from tests.harness.transactions import CommitByBody
from tests.sim.acting_checks import (
    ActingBound,
    DueMessages,
    OffsetsNeverBack,
    OneLockHolder,
    OrderedLog,
    Revives,
    TopicScan,
    Transactions,
)
from tests.sim.acting_clients import (
    RoutedTarget,
    ack,
    commit,
    lock,
    pop,
    query_offset,
    send_with,
)
from tests.sim.acting_world import ACTING_BOUND_S, CLIENT_ROUTE_POLL_MS, ActingWorld
from tests.sim.cluster_checks import ClusterFailure
from tests.sim.cluster_clients import TOPIC, pull_once
from tests.sim.cluster_run import run_seed
from tests.sim.cluster_sim import SimSpec, World
from tests.sim.mutants import applied
from tests.sim.scenario_kit import SEED, A, hold, wait_until
from tests.sim.scenario_kit import spec as base_spec

B = "broker-b"
Script = Callable[[ActingWorld], Awaitable[None]]


def spec(**kw: object) -> SimSpec:
    return base_spec(mode="acting", controllers=0, **kw)


async def run(name: str, script: Script, **kw: object) -> None:
    async def chaos(w: World) -> None:
        assert isinstance(w, ActingWorld)
        await script(w)

    await run_seed(
        SEED, spec=spec(**kw), chaos=chaos,
        replay=f"pytest tests/sim/test_acting_scenarios.py -k {name}",
    )  # fmt: skip


async def in_sync(w: ActingWorld) -> None:
    """broker-a's SYNC_MASTER acknowledged writes: its slave is in sync (a send before that
    is stored but answered SLAVE_NOT_AVAILABLE)."""
    await wait_until(w, lambda: acked_in(w, A) >= 3, 20, f"{A}'s slave in sync")


def acked_in(w: ActingWorld, set_name: str) -> int:
    return sum(1 for pos in w.checker.acked if pos[0] == set_name)


def client_of(w: ActingWorld, host: str) -> RemotingClient:
    return RemotingClient(w.net.transport(host))


async def master_dies(w: ActingWorld, *, silent: bool) -> ActingBound:
    """broker-a's master goes away: silent (its host cut off, no connection closes: only the
    missing heartbeats tell) or killed (kill -9: the NameServer sees the channel close)."""
    m = w.brokers[A][0]
    bound = ActingBound(w, A, trio.current_time(), silent, m.incarnation)
    w.step_checks.append(bound)
    if silent:
        w.net.isolate(m.host.ip, [p.host.ip for p in w.processes if p is not m] + CLIENTS)
        w.checker.note(f"{m.name} cut off (silent)")
    else:
        await w.kill(m)
        w.checker.note(f"kill -9 of {m.name}")
    await wait_until(w, lambda: bool(w.acting_of(A)), ACTING_BOUND_S + 1, "a slave acts")
    return bound


CLIENTS = [*(f"10.0.9.{k}" for k in range(1, 9)), "10.0.9.50", "10.0.9.60", "10.0.9.70"]
SCRIPT_HOST = "10.0.9.70"


# ---------------------------------------------------------------------------- 1. the bound


def script_bound(silent: bool) -> Script:
    async def script(w: ActingWorld) -> None:
        seen: list[float] = []  # when a client refreshing every 2 s first names the slave

        async def client_route(client: RemotingClient) -> None:
            routed = RoutedTarget(client, w.ns_addrs[0], A, CLIENT_ROUTE_POLL_MS / 1000)
            while not seen:
                if await routed.id0() == w.brokers[A][1].addr:
                    seen.append(trio.current_time())
                await trio.sleep(0.05)

        async with client_of(w, SCRIPT_HOST) as client, trio.open_nursery() as n:
            n.start_soon(client_route, client)
            await hold(w, 2, "traffic")
            bound = await master_dies(w, silent=silent)
            await hold(w, ACTING_BOUND_S + 2, "the acting slave serves; its route checked")
        assert bound.acted_after_s is not None and bound.acted_after_s <= ACTING_BOUND_S
        client_bound = ACTING_BOUND_S + CLIENT_ROUTE_POLL_MS / 1000
        assert seen and seen[0] - bound.died_at <= client_bound, (seen, bound.died_at)
        w.checker.note(f"the client's route named the slave {seen[0] - bound.died_at:.2f}s on")
        m = w.brokers[A][0]
        if silent:
            await w.kill(m)
            w.heal_network()
        await w.restart(m)
        await wait_until(w, lambda: w.master_of(A) is m, 30, f"{m.name} back through pre-online")
        await wait_until(w, lambda: not w.acting_of(A), 5, "the slave stopped acting")

    return script


@pytest.mark.parametrize("silent", [True, False], ids=["silent", "kill9"])
async def test_a_slave_acts_within_the_bound(
    mock_clock: trio.testing.MockClock, silent: bool
) -> None:
    await run("bound", script_bound(silent))


# ---------------------------------------------------------------------------- 2. delay, timer


async def script_due(w: ActingWorld) -> None:
    """Delayed (level 3: 10 s) and timer messages stored on broker-a's master before it dies,
    due during the outage; broker-b's master is down (kill -9) when the first fall due, so the
    first escapes fail and must be tried again, not skipped."""
    due = DueMessages(TopicScan(w, queues=range(w.spec.queues)))
    w.step_checks.append(due)
    m, bm = w.brokers[A][0], w.brokers[B][0]
    await in_sync(w)
    async with client_of(w, SCRIPT_HOST) as client:
        t0 = now_ms()
        for i in range(4):
            body = b"delayed-%d" % i
            assert await send_with(client, m.addr, body, {"DELAY": "3"}, queue_id=i % 2)
            due.due[body] = t0 + 10_000
            tbody = b"timer-%d" % i
            at = t0 + 14_000 + 1000 * i
            assert await send_with(client, m.addr, tbody, {"TIMER_DELIVER_MS": str(at)})
            due.due[tbody] = at
    await hold(w, 1, "the slave replicates them")
    await w.kill(m)
    await wait_until(w, lambda: bool(w.acting_of(A)), ACTING_BOUND_S, "a slave acts")
    await w.kill(bm)  # kill -9: broker-b keeps its files; no live master to escape to
    w.checker.note(f"kill -9 of {bm.name}: escapes fail until it returns")
    await hold(w, 12, "the delayed messages fall due with nowhere to go")
    await w.restart(bm)
    await wait_until(w, lambda: not due.undelivered(), 40, "every due message delivered")
    await w.restart(m)
    await wait_until(w, lambda: w.master_of(A) is m, 30, f"{m.name} back through pre-online")
    await hold(w, 5, "no second delivery by the returned master")
    due.count_duplicates()


async def test_due_messages_escape_none_lost_none_early(
    mock_clock: trio.testing.MockClock,
) -> None:
    await run("due", script_due)


# ---------------------------------------------------------------------------- 3. transactions


async def script_transactions(w: ActingWorld) -> None:
    """Halves left unresolved on broker-a's master, which dies; the acting slave escapes them
    to broker-b, whose check asks the producer: commits delivered, rollbacks never."""
    tx = Transactions(TopicScan(w, queues=range(w.spec.queues)))
    w.step_checks.append(tx)
    m = w.brokers[A][0]
    host = "10.0.9.71"
    await in_sync(w)
    producer = TransactionProducer(
        "SimTPG", w.ns_addrs[0], CommitByBody(), transport=w.net.transport(host),
        client_config=ClientConfig(clientIP=host, instanceName="tp"),
    )  # fmt: skip
    async with producer:
        on_a = 0
        for i in range(8):
            body = b"commit-%d" % i if i % 2 == 0 else b"rollback-%d" % i
            sent = await producer.send_message_in_transaction(Message(TOPIC, body))
            (tx.commits if i % 2 == 0 else tx.rollbacks).add(body)
            on_a += sent.message_queue.brokerName == A
        assert on_a >= 2, "halves left on the master that dies"
        await hold(w, 1, "the slave replicates the halves")
        await w.kill(m)
        await wait_until(w, lambda: bool(w.acting_of(A)), ACTING_BOUND_S, "a slave acts")
        bm = w.brokers[B][0]
        await w.kill(bm)  # kill -9: broker-b keeps its files; the first escapes fail
        await hold(w, 10, f"{bm.name} away: the halves wait on the acting slave")
        await w.restart(bm)
        await wait_until(w, lambda: not tx.uncommitted(), 60, "every commit delivered")
        await hold(w, 10, "later check rounds deliver no rollback")
    await w.restart(m)
    await wait_until(w, lambda: w.master_of(A) is m, 30, f"{m.name} back through pre-online")
    await hold(w, 10, "the returned master's checks deliver no rollback")


async def test_pending_transactions_checked_through_escape(
    mock_clock: trio.testing.MockClock,
) -> None:
    await run("transactions", script_transactions)


# ---------------------------------------------------------------------------- 4. POP


POP_GROUP = "SimPopG"


async def script_pop(w: ActingWorld) -> None:
    """Messages popped from broker-a's master, which dies: the one acked (to the acting slave)
    is never revived; the others are revived once each, after their invisible time, into the
    retry topic on broker-b."""
    retry = TopicScan(w, topic=pop_retry_topic(TOPIC, POP_GROUP, False), queues=range(1))
    revives = Revives(retry, INVISIBLE_MS / 1000)
    m = w.brokers[A][0]
    await in_sync(w)
    async with client_of(w, SCRIPT_HOST) as client:
        got = await pop_some(w, client, m.addr, POP_GROUP)
        popped = trio.current_time()
        await hold(w, 1, "the slave replicates the CK")
        await w.kill(m)
        await wait_until(w, lambda: bool(w.acting_of(A)), ACTING_BOUND_S, "a slave acts")
        slave = w.acting_of(A)[0]
        acked_msg, handle = got[0]
        await hold(w, 2, "a revive round read the replicated CK")
        assert await ack(client, slave.addr, POP_GROUP, 0, handle, acked_msg.queue_offset)
    revives.acked.add(acked_msg.body)
    revives.unacked.update((msg.body, popped) for msg, _ in got[1:])
    w.step_checks.append(revives)
    await wait_until(w, revives.all_revived, 60, "every unacked message revived")
    await hold(w, 20, "more revive rounds: still once")


INVISIBLE_MS = 20_000


async def pop_some(
    w: ActingWorld, client: RemotingClient, addr: str, group: str
) -> list[tuple[MessageExt, str]]:
    """Up to 3 messages of broker-a's queue 0 popped at ``addr`` (retried until some come)."""
    for _ in range(30):
        got = await pop(client, addr, group, 0, 3, INVISIBLE_MS)
        if got:
            return got
        await hold(w, 1, f"broker-a's queue 0 holds messages for {group}")
    w.checker.fail(f"scenario: nothing could be popped at {addr} for {group}")


async def script_pop_on_the_acting_slave(w: ActingWorld) -> None:
    """Messages popped from the acting slave itself (their CK escaped to broker-b's master,
    pinned): the one acked there is never revived, the others once each, by broker-b reading
    them back from the acting slave; then the master returns."""
    retry = TopicScan(w, topic=pop_retry_topic(TOPIC, POP_ACTING_GROUP, False), queues=range(1))
    revives = Revives(retry, INVISIBLE_MS / 1000)
    m = w.brokers[A][0]
    await in_sync(w)
    await hold(w, 2, "traffic")
    await w.kill(m)
    await wait_until(w, lambda: bool(w.acting_of(A)), ACTING_BOUND_S, "a slave acts")
    slave = w.acting_of(A)[0]
    async with client_of(w, SCRIPT_HOST) as client:
        got = await pop_some(w, client, slave.addr, POP_ACTING_GROUP)
        popped = trio.current_time()
        acked_msg, handle = got[0]
        await hold(w, 1, "the CK is on broker-b")
        assert await ack(client, slave.addr, POP_ACTING_GROUP, 0, handle, acked_msg.queue_offset)
    revives.acked.add(acked_msg.body)
    revives.unacked.update((msg.body, popped) for msg, _ in got[1:])
    w.step_checks.append(revives)
    await wait_until(w, revives.all_revived, 60, "every unacked message revived")
    await hold(w, 10, "more revive rounds: still once")
    await w.restart(m)
    await wait_until(w, lambda: w.master_of(A) is m, 30, f"{m.name} back through pre-online")
    await hold(w, 20, "the returned master: still once, the acked one never")


POP_ACTING_GROUP = "SimPopOnActingG"


async def test_popped_on_the_acting_slave_revived_once_acked_never(
    mock_clock: trio.testing.MockClock,
) -> None:
    await run("pop_on_acting", script_pop_on_the_acting_slave)


async def test_popped_messages_not_acked_are_revived_once(
    mock_clock: trio.testing.MockClock,
) -> None:
    await run("pop", script_pop)


# ---------------------------------------------------------------------------- 5. pre-online


OFFSET_GROUP = "SimOffsetG"


async def script_pre_online(w: ActingWorld) -> None:
    """A committer moves OFFSET_GROUP's offsets on whatever the NameServer routes as broker-a's
    id 0: the master, then the acting slave; the master returns and must go online with the
    slave's newer offsets (no offset moves back anywhere, nor on the routed broker)."""
    offsets = OffsetsNeverBack(w, (OFFSET_GROUP,), w.spec.queues, delay_levels=(3,))
    w.step_checks.append(offsets)
    m = w.brokers[A][0]
    state = {"next": 1}
    await in_sync(w)

    async def committer(client: RemotingClient) -> None:
        routed = RoutedTarget(client, w.ns_addrs[0], A, CLIENT_ROUTE_POLL_MS / 1000)
        while True:
            addr = await routed.id0()
            if addr is not None and await commit(client, addr, OFFSET_GROUP, 0, state["next"]):
                state["next"] += 1
            await trio.sleep(0.5)

    async with client_of(w, SCRIPT_HOST) as client, trio.open_nursery() as n:
        assert await send_with(client, m.addr, b"due-in-outage", {"DELAY": "3"})
        n.start_soon(committer, client)
        await hold(w, 4, "offsets committed to the master, copied by slave sync")
        await w.kill(m)
        await wait_until(w, lambda: bool(w.acting_of(A)), ACTING_BOUND_S, "a slave acts")
        await hold(w, 12, "offsets committed to the acting slave; the delayed message escapes")
        before = state["next"]
        await w.restart(m)
        await wait_until(w, lambda: w.master_of(A) is m, 30, f"{m.name} back through pre-online")
        await hold(w, 10, "commits go to the returned master")
        assert state["next"] > before + 5
        n.cancel_scope.cancel()


async def test_a_returning_master_moves_no_offset_backwards(
    mock_clock: trio.testing.MockClock,
) -> None:
    await run("pre_online", script_pre_online)


# ---------------------------------------------------------------------------- 6. strict locks


LOCK_GROUP = "SimOrderG"
DEFAULT_ROUTE_POLL_S = 30.0
STRICT = (("lockInStrictMode", True), ("totalReplicas", 2))


def script_locks_of(check_locks: bool) -> Script:
    """The locks scenario; without ``check_locks`` only the processing order is checked (the
    mutant test shows the order violation on its own)."""

    async def script(w: ActingWorld) -> None:
        await _locks(w, check_locks)

    return script


async def _locks(w: ActingWorld, check_locks: bool) -> None:
    """Two orderly consumers of broker-a's queue 0, each every second: lock it on the route's
    id 0, and while it holds the lock pull the next messages there (from the committed offset
    when it just took the queue), process them, commit. c1 starts while the slave acts and
    refreshes its route every 30 s (pollNameServerInterval's default), so it keeps calling the
    slave after the master is back; c2 starts then, routed to the master. With
    lockInStrictMode a lock needs both members: never two holders, never out of order."""
    order = OrderedLog(w)
    if check_locks:
        w.step_checks.append(OneLockHolder(w, LOCK_GROUP))
    m = w.brokers[A][0]
    locked: dict[str, int] = {"c1": 0, "c2": 0}

    async def consumer(client: RemotingClient, cid: str, poll_s: float) -> None:
        routed = RoutedTarget(client, w.ns_addrs[0], A, poll_s)
        mq = MessageQueue(TOPIC, A, 0)
        next_offset: int | None = None  # None: not holding the queue
        while True:
            await trio.sleep(1)
            addr = await routed.id0()
            if addr is None or not await lock(client, addr, LOCK_GROUP, cid, mq):
                next_offset = None
                continue
            locked[cid] += 1
            if next_offset is None:
                next_offset = await query_offset(client, addr, LOCK_GROUP, 0)
            got = None if next_offset is None else await pull_once(client, addr, 0, next_offset)
            if got is None or got[0] is not PullStatus.FOUND or not got[2]:
                continue
            offsets = [o for o, _ in got[2]]
            order.processed(cid, 0, offsets)
            next_offset = offsets[-1] + 1
            await commit(client, addr, LOCK_GROUP, 0, next_offset)

    async def feed(client: RemotingClient, addr: str) -> None:
        """An ordered producer of queue 0 (the sim's producers keep away from broker-a until
        their route refresh)."""
        for k in range(10_000):
            await send_with(client, addr, b"ordered-%d" % k, {}, queue_id=0)
            await trio.sleep(0.3)

    async with client_of(w, SCRIPT_HOST) as client, trio.open_nursery() as n:
        await in_sync(w)
        await w.kill(m)
        await wait_until(w, lambda: bool(w.acting_of(A)), ACTING_BOUND_S, "a slave acts")
        n.start_soon(consumer, client, "c1", DEFAULT_ROUTE_POLL_S)
        await hold(w, 5, "c1 tries to lock on the acting slave")
        await w.restart(m)
        await wait_until(w, lambda: w.master_of(A) is m, 30, f"{m.name} back through pre-online")
        before = locked["c1"] + locked["c2"]
        n.start_soon(feed, client, m.addr)
        n.start_soon(consumer, client, "c2", CLIENT_ROUTE_POLL_MS / 1000)
        await hold(w, 15, "c2 tries on the master, c1 on the slave its route still names")
        assert locked["c1"] + locked["c2"] > before, "nobody locked the queue after the return"
        assert order.runs, "nothing was processed in order"
        n.cancel_scope.cancel()


async def test_strict_locks_keep_one_holder_across_the_switch(
    mock_clock: trio.testing.MockClock,
) -> None:
    overrides = tuple((f"{A}-{k}", STRICT) for k in range(2))
    await run("locks", script_locks_of(True), broker_overrides=overrides)


# ---------------------------------------------------------------------------- mutants


# each mutant, the scenario that must catch it and what its checker says
MUTANT_CASES = [
    ("acting_slave_never_acts", "bound", script_bound(True), "no acting slave"),
    ("acting_due_message_skipped_after_failed_escape", "due", script_due,
     "every due message delivered did not happen"),
    ("acting_half_skipped_after_failed_escape", "transactions", script_transactions,
     "every commit delivered did not happen"),
    ("acting_ack_not_applied", "pop", script_pop, "acked POP message .* was revived"),
    ("acting_pop_ack_not_escaped", "pop_on_acting", script_pop_on_the_acting_slave,
     "acked POP message .* was revived"),
    ("acting_master_skips_pre_online", "pre_online", script_pre_online,
     "routed id 0 broker-a-0#2: .* a consumer re-reads"),
    ("acting_strict_locks_off", "locks", script_locks_of(True),
     r"locked by \['c1', 'c2'\] at once"),
    ("acting_strict_locks_off", "locks_order", script_locks_of(False),
     r"c1 processes queue 0 again after c2 took it over"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("mutant", "name", "script", "match"), MUTANT_CASES, ids=[c[1] for c in MUTANT_CASES]
)
async def test_the_acting_scenarios_catch_a_broken_product(
    mock_clock: trio.testing.MockClock, mutant: str, name: str, script: Script, match: str
) -> None:
    """Teeth: each scenario against the mutant it targets (acting_mutants.py) fails, and by
    the check meant for it."""
    kw: dict[str, object] = {}
    if name.startswith("locks"):
        kw["broker_overrides"] = tuple((f"{A}-{k}", STRICT) for k in range(2))
    with applied(mutant), pytest.raises(ClusterFailure, match=match):
        await run(f"{name} and --mutant {mutant}", script, **kw)
