"""Named whole-cluster scenarios for upstream RocketMQ controller-mode failures (SPEC F1).

Each test scripts its faults (instead of drawing them from a seed) on the same world as the
seeded simulation (tests/sim/cluster_sim.py): real NameServer, controllers, brokers and clients
on the simulated network and disks, the checker after every step, then healing, liveness and
the final checks (nothing acknowledged lost, nothing consumed truncated, confirmed bytes
identical, epoch files agreeing, one acknowledging master per epoch). Each script also asserts
that its critical situation really happened, so a scenario cannot pass vacuously.

Upstream issues (apache/rocketmq): #5663 SyncStateSet expand whose answer is lost, then the
master dies; #6662 an isolated old master and its slave must not advance confirmOffset; #7017 a
"datacenter" (master + controller leader) isolated: no two acknowledging masters; #7689 the
controller leader and the master killed together: no queue offset reused; #10666 a slave killed
during truncation recovers consistently; #9689 / #9942 the same master re-elected into a new
epoch while its slave stays connected: epoch files agree; #4800 a master cut from the controller
leader only should not lose its role; #6316 the NameServer prefers the newer master.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.controller_admin import ControllerUnavailable
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.protocol.codes import RequestCode
from tests.harness.sim_disk import PowerCut, cut_power_after
from tests.sim.cluster_checks import ClusterFailure
from tests.sim.cluster_clients import TOPIC
from tests.sim.cluster_run import run_seed
from tests.sim.cluster_sim import World
from tests.sim.mutants import applied
from tests.sim.scenario_kit import (
    SEED,
    A,
    bid,
    controller_view,
    full_set,
    hold,
    master_proc,
    spec,
    wait_until,
)


async def run(name: str, script: Callable[[World], Awaitable[None]], **kw: object) -> None:
    await run_seed(
        SEED, spec=spec(**kw), chaos=script,
        replay=f"pytest tests/sim/test_cluster_scenarios.py -k {name}",
    )  # fmt: skip


# ---------------------------------------------------------------------------- helpers


# producers 10.0.9.1.., the consumer .50, the admin .60 (tests/sim/cluster_run.py)
CLIENT_HOSTS = [*(f"10.0.9.{k}" for k in range(1, 9)), "10.0.9.50", "10.0.9.60"]


def hosts(*procs: object) -> list[str]:
    return [p.host.ip for p in procs]  # type: ignore[attr-defined]


def others(w: World, *procs: object) -> list[str]:
    mine = set(hosts(*procs))
    return [p.host.ip for p in w.processes if p.host.ip not in mine]


def acked_in(w: World, set_name: str) -> int:
    return sum(1 for pos in w.checker.acked if pos[0] == set_name)


# ---------------------------------------------------------------------------- scenarios


async def test_5663_expand_answer_lost_then_master_dies(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The slave catches up, the master proposes it into the SyncStateSet, the controller
    applies it but its answer never arrives; the master keeps writing (it must count the slave
    as a member from the moment it proposed it) and then loses power. The controller elects the
    slave, which must hold every acknowledged write."""
    lost: list[float] = []

    async def script(w: World) -> None:
        m = master_proc(w)
        s = next(p for p in w.brokers[A] if p is not m)
        await full_set(w)
        w.partition(hosts(m), hosts(s))
        await wait_until(
            w, lambda: (v := controller_view(w)) is not None and v.sync_state_set == {bid(m)},
            15, "the SyncStateSet shrank to the master",
        )  # fmt: skip
        calls = m.live_broker.roles.calls  # type: ignore[union-attr]
        real_call = calls.call

        async def call(code: int, header: object, body: bytes = b"") -> object:
            resp = await real_call(code, header, body)
            if code == RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET and not lost:
                lost.append(trio.current_time())  # the controller applied it; we never hear
                raise ControllerUnavailable("scenario: the AlterSyncStateSet answer was lost")
            return resp

        calls.call = call
        w.heal_network()
        await wait_until(w, lambda: bool(lost), 15, "an expand was applied, its answer lost")
        v = controller_view(w)
        assert v is not None and v.sync_state_set == {bid(m), bid(s)}
        before = acked_in(w, A)
        await wait_until(w, lambda: acked_in(w, A) >= before + 10, 20, "10 more writes acked")
        await w.kill(m, machine=True, lose=True)
        w.checker.note(f"power cut of the master {m.name}")
        await wait_until(
            w, lambda: w.master_of(A) is s, 20, f"the slave {s.name} became master"
        )  # fmt: skip
        await hold(w, 2, "the new master takes writes")

    await run("5663", script)


async def script_6662(w: World) -> None:
    """Master and one slave are cut from the controllers and the third broker; the controller
    elects the third. The old pair still reaches the clients: it must neither acknowledge nor
    make visible (confirmOffset, ConsumeQueues) anything the new master lacks."""
    await full_set(w)
    m = master_proc(w)
    s1, s2 = (p for p in w.brokers[A] if p is not m)
    w.partition(hosts(m, s1), others(w, m, s1))
    await wait_until(w, lambda: w.master_of(A) is s2, 20, f"{s2.name} elected")
    await hold(w, 6, "old master + slave isolated, clients reach both sides")
    w.heal_network()
    await wait_until(
        w, lambda: not m.live_broker.roles.serving_as_master(), 20,  # type: ignore[union-attr]
        f"the old master {m.name} stepped down",
    )  # fmt: skip


async def test_6662_isolated_old_master_and_slave_do_not_advance_confirm(
    mock_clock: trio.testing.MockClock,
) -> None:
    await run("6662", script_6662, set_sizes=(3, 2))


async def script_7017(w: World) -> None:
    """One "datacenter" (the master and the controller leader) is cut from the rest; the
    remaining controllers elect a new master. Clients reach both: only one master per epoch may
    acknowledge, and nothing acknowledged may be lost when the old master comes back."""
    await full_set(w)
    m = master_proc(w)
    leader = w.controller_leader()
    assert leader is not None
    dc = [m.host.ip, leader.host.ip]
    w.partition(dc, [ip for ip in others(w) if ip not in dc])
    await wait_until(
        w, lambda: (n := w.master_of(A)) is not None and n is not m, 20,
        "the majority side elected a new master",
    )  # fmt: skip
    await hold(w, 6, "two datacenters, clients in both")
    w.heal_network()


async def test_7017_isolated_datacenter_has_no_second_acknowledging_master(
    mock_clock: trio.testing.MockClock,
) -> None:
    await run("7017", script_7017, set_sizes=(3, 2))


@pytest.mark.parametrize(
    ("mutant", "script"),
    [
        ("ack_before_replicas", script_7017),
        ("confirm_over_connected_replicas", script_6662),
        ("dispatch_past_confirm", script_6662),
    ],
    ids=["7017-ack_before_replicas", "6662-confirm_over_connected", "6662-dispatch_past_confirm"],
)
async def test_the_scenarios_catch_a_broken_product(
    mock_clock: trio.testing.MockClock, mutant: str, script: Callable[[World], Awaitable[None]]
) -> None:
    """Teeth: the same scripts against a mutant (tests/sim/mutants.py) must fail a check."""
    with applied(mutant), pytest.raises(ClusterFailure):
        await run(mutant, script, set_sizes=(3, 2))


async def test_7689_controller_leader_and_master_killed_together(
    mock_clock: trio.testing.MockClock,
) -> None:
    """OpenChaos' major kill: the controller leader and the master lose power together
    (nothing unsynced kept) while producers send; both come back. No queue offset may be
    reused and nothing acknowledged lost."""

    async def script(w: World) -> None:
        await full_set(w)
        await hold(w, 2, "traffic")
        m = master_proc(w)
        leader = w.controller_leader()
        assert leader is not None
        epoch = controller_view(w)
        await w.kill(leader, machine=True, lose=True)
        await w.kill(m, machine=True, lose=True)
        w.checker.note(f"power cut of {leader.name} and {m.name}")
        await wait_until(
            w, lambda: (v := controller_view(w)) is not None and epoch is not None
            and v.epoch > epoch.epoch and v.master is not None, 20, "a new master elected",
        )  # fmt: skip
        await hold(w, 2, "the new master takes writes")
        await w.restart(leader)
        await w.restart(m)
        await hold(w, 4, "both back")

    await run("7689", script, set_sizes=(3, 2))


@pytest.mark.parametrize("cut_at", [1, 3, 6, 10])
async def test_10666_slave_killed_during_truncation_recovers(
    mock_clock: trio.testing.MockClock, cut_at: int
) -> None:
    """The master is isolated with writes it could not replicate (a divergent tail); a new
    master is elected and written to; when the old master comes back as a slave it must cut
    that tail, and it loses power in the middle of the cut (at its ``cut_at``-th file call).
    After restarting it must cut again and end identical to the new master."""
    fired: list[float] = []

    async def script(w: World) -> None:
        await full_set(w)
        await wait_until(w, lambda: acked_in(w, A) >= 5, 20, "writes replicated in epoch 1")
        m = master_proc(w)
        s = next(p for p in w.brokers[A] if p is not m)
        w.partition(hosts(m), [ip for ip in others(w, m) if not ip.startswith("10.0.9.")])
        await wait_until(w, lambda: w.master_of(A) is s, 20, f"{s.name} elected")
        await hold(w, 3, "both take writes: the old master's tail diverges")
        b = m.live_broker
        assert b is not None
        store, disk = b.store.message_store, m.host.disk
        real = store.truncate_to

        def truncate_to(offset: int) -> None:
            if fired:
                real(offset)
                return
            with cut_power_after(disk, cut_at) as switch:
                try:
                    real(offset)
                except PowerCut:
                    m.fs.dead = True  # the machine is off: nothing more reaches its disk
                    raise
                finally:
                    if switch.fired:
                        fired.append(trio.current_time())

        store.truncate_to = truncate_to  # type: ignore[method-assign]
        w.heal_network()
        await wait_until(w, lambda: bool(fired), 20, "power cut during the slave's truncation")
        await wait_until(w, lambda: not m.up, 10, f"{m.name} died")
        await w.restart(m)
        await hold(w, 3, "restarted on the half-truncated disk")

    await run(f"10666 and {cut_at}", script)


async def test_10666_cut_tail_never_comes_back_after_a_restart(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The old master returns as a slave and cuts its divergent tail; it learns the new
    master's epoch (which starts at the cut) before the new master has written anything
    after it. Cut off again, it restarts while the new master writes past the old tail's
    end. The cut must have reached the disk: bytes it dropped must not reappear as records
    of the new epoch, which the handshake would keep (same last epoch, both logs long
    enough) and the slave would acknowledge (upstream #10666: truncation only in memory)."""
    cuts: list[tuple[int, int]] = []

    async def script(w: World) -> None:
        await full_set(w)
        await wait_until(w, lambda: acked_in(w, A) >= 5, 20, "writes replicated in epoch 1")
        m = master_proc(w)
        s = next(p for p in w.brokers[A] if p is not m)
        clients = CLIENT_HOSTS
        w.partition(hosts(m), others(w, m))
        await wait_until(w, lambda: w.master_of(A) is s, 20, f"{s.name} elected")
        w.partition(hosts(s), clients)  # the new master writes nothing for now
        await hold(w, 2, "the old master's tail diverges")
        b = m.live_broker
        assert b is not None
        store = b.store.message_store
        real = store.truncate_to

        def truncate_to(offset: int) -> None:
            cuts.append((store.get_commitlog_max_offset(), offset))
            real(offset)

        store.truncate_to = truncate_to  # type: ignore[method-assign]
        w.net.heal_between(hosts(m), others(w, m))
        await wait_until(w, lambda: bool(cuts), 20, f"{m.name} cut its tail as a slave")
        epoch = controller_view(w)
        assert epoch is not None
        await wait_until(
            w, lambda: store.epoch_records()[-1].epoch == epoch.epoch, 10,
            f"{m.name} holds epoch {epoch.epoch}",
        )  # fmt: skip
        tail, cut = cuts[0]
        assert tail > cut, "no divergent tail was cut"
        w.partition(hosts(m), hosts(s))
        w.net.heal_between(hosts(s), clients)
        s_store = s.live_broker.store.message_store  # type: ignore[union-attr]
        await wait_until(
            w, lambda: s_store.get_commitlog_max_offset() >= tail, 20,
            f"{s.name} wrote past the old tail's end {tail}",
        )  # fmt: skip
        await w.kill(m)
        await w.restart(m)
        await hold(w, 1, f"{m.name} restarted")
        w.heal_network()
        await hold(w, 4, "the new master takes writes again")

    await run("10666_cut_tail", script)


async def test_9689_same_master_reelected_into_a_new_epoch(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The slave falls out of the SyncStateSet, then the master loses the controllers: the
    controller finds no live member to elect and fences the set (new epoch, no master). The
    slave reconnects to the master; when the master reaches the controllers again it is elected
    again, in a newer epoch, with its slave attached. The slave must learn the new epoch
    (upstream kept each connection's epoch cursor, #9689) and every epoch file must agree on
    every epoch's start (#9942)."""

    async def script(w: World) -> None:
        await full_set(w)
        m = master_proc(w)
        s = next(p for p in w.brokers[A] if p is not m)
        before = controller_view(w)
        assert before is not None
        w.partition(hosts(m), hosts(s))
        await wait_until(
            w, lambda: (v := controller_view(w)) is not None and v.sync_state_set == {bid(m)},
            15, "the SyncStateSet shrank to the master",
        )  # fmt: skip
        ctrl = hosts(*w.controller_procs())
        w.partition(hosts(m), ctrl)
        await wait_until(
            w, lambda: (v := controller_view(w)) is not None and v.master is None, 20,
            "the controller fenced the set: no live member to elect",
        )  # fmt: skip
        w.net.heal_between(hosts(m), hosts(s))
        await hold(w, 2, "the slave reconnects to the master")
        w.net.heal_between(hosts(m), ctrl)
        await wait_until(
            w, lambda: (v := controller_view(w)) is not None and v.master == bid(m)
            and v.epoch > before.epoch + 1, 20, f"{m.name} re-elected in a new epoch",
        )  # fmt: skip
        await hold(w, 4, "the re-elected master writes to its slave")
        w.heal_network()
        await hold(w, 3, "healed")
        me = m.live_broker.store.message_store  # type: ignore[union-attr]
        se = s.live_broker.store.message_store  # type: ignore[union-attr]
        assert me.epoch_records()[-1] == se.epoch_records()[-1], "the slave lacks the epoch"

    await run("9689", script)


async def test_4800_master_cut_from_the_controller_leader_only_keeps_its_role(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Asymmetric partition: the master reaches two of three controllers, not the leader.
    It is alive (the other controllers hear its heartbeats), so no failover should happen."""

    async def script(w: World) -> None:
        await full_set(w)
        m = master_proc(w)
        leader = w.controller_leader()
        assert leader is not None
        before = controller_view(w)
        w.partition(hosts(m), hosts(leader))
        await hold(w, 10, "master cut from the controller leader only")
        after = controller_view(w)
        assert before is not None and after is not None
        assert (after.master, after.epoch) == (before.master, before.epoch), (
            f"needless failover: {before} -> {after}"
        )
        w.heal_network()

    await run("4800", script)


async def test_6316_namesrv_prefers_the_newer_master(mock_clock: trio.testing.MockClock) -> None:
    """The master loses the controllers but not the NameServer: a new master is elected and
    registers as brokerId 0, while the old one keeps registering as brokerId 0 too. Every
    route the NameServer gives out must name the new master."""

    async def script(w: World) -> None:
        await full_set(w)
        m = master_proc(w)
        s = next(p for p in w.brokers[A] if p is not m)
        w.partition(hosts(m), hosts(*w.controller_procs()))
        await wait_until(w, lambda: w.master_of(A) is s, 20, f"{s.name} elected")
        seen: list[str | None] = []
        async with MQAdmin(";".join(w.ns_addrs), w.net.transport(w.client_ip)) as admin:
            end = trio.current_time() + 12  # > 2 registerNameServerPeriods of the old master
            while trio.current_time() < end:
                w.check_step()
                try:
                    route = await admin.topic_route(TOPIC)
                except (RemotingError, MQClientError):
                    route = None
                if route is not None:
                    bd = next(d for d in route.brokerDatas if d.brokerName == A)
                    seen.append(bd.brokerAddrs.get(0))
                await trio.sleep(0.5)
        first = seen.index(s.addr) if s.addr in seen else len(seen)
        assert first < len(seen), f"the new master never appeared in a route: {seen}"
        wrong = [a for a in seen[first:] if a != s.addr]
        assert not wrong, f"routes named the old master after the new one: {seen}"
        w.heal_network()

    await run("6316", script)
