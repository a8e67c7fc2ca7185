"""The fault schedule of the whole-cluster simulation: every fault drawn from the run's seed.

`seeded_chaos(world)` runs ``spec.steps`` steps; a step is one action drawn from the world's
seeded RNG plus a slice of simulated time (0.3-2.5 s), then the checker looks at every live
replica. The actions, weighted by the run's ``focus`` (mixed; controllers: their crashes, stalls
and leader isolation three times as likely; replication: broker-set faults twice as likely):

- crash a broker (the master half the time): with SYNC_FLUSH a power cut of its host (the disk
  keeps only what was fsynced, plus a random prefix of the rest, the last write maybe torn; a
  third of them keep nothing unsynced), with ASYNC_FLUSH a kill -9 (the page cache survives:
  with asynchronous flushing only a process kill may keep every acknowledged message);
- crash a controller / NameServer process (the Raft leader half the time), the same way;
- kill the controller leader and a master together (#7689, OpenChaos' major kill);
- a correlated failure: every broker of a set, or every controller, at once (a rack's power);
- restart a process that is down (and any that has been down for 3 steps);
- partitions: random groups of hosts; a master from every controller; a master from its slaves;
  a master from the controller leader only (#4800: it still reaches the other controllers); the
  controller leader from the other controllers (a new Raft leader while the old one may hold
  uncommitted entries);
- heal the network; reset every connection between two hosts (`cut`); delay a link;
- a slow (0.5-8 ms per storage call) or stalled (50-400 ms) disk on a host, or fast again;
- fail the next fsync on a host: its process must die (the simulation restarts it later);
- nothing: time passes.

`heal_everything` ends the chaos: network healed, fsync failures disarmed, disks fast again,
every process restarted.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence

import trio

from tests.sim.cluster_nodes import BrokerProc, Process
from tests.sim.cluster_sim import SETS, World

AUTO_RESTART_STEPS = 3
SLICE_S = (0.3, 2.5)
Action = Callable[[float, float], Awaitable[str | None]]


def _pick(rng: random.Random, items: list[str] | list[Process] | list[BrokerProc]) -> object:
    """One draw whatever the list, so later draws do not depend on its length."""
    x = rng.random()
    return items[min(int(x * len(items)), len(items) - 1)]


class Chaos:
    def __init__(self, world: World) -> None:
        self.world = world
        self.rng = random.Random(world.rng.getrandbits(32))
        self.down_since: dict[str, int] = {}
        self.step_no = 0

    # ------------------------------------------------------------------ helpers

    def _hosts(self) -> list[str]:
        return [p.host.ip for p in self.world.processes]

    def _master_or_any(self, a: float, b: float) -> BrokerProc | None:
        w = self.world
        s = SETS[int(a * 2) % 2]
        master = w.master_of(s)
        if master is not None and b < 0.5:
            return master
        up = [p for p in w.brokers[s] if p.up]
        return _pick(random.Random(b), up) if up else None  # type: ignore[return-value]

    async def crash(self, proc: Process, a: float) -> str:
        """Power cut with SYNC_FLUSH (a third keep nothing unsynced), kill -9 otherwise."""
        if self.world.spec.sync_flush:
            lose = a < 0.33
            await self.world.kill(proc, machine=True, lose=lose)
            return f"power cut {proc.name}" + (" (nothing unsynced kept)" if lose else "")
        await self.world.kill(proc)
        return f"kill -9 {proc.name}"

    async def crash_all(self, procs: Sequence[Process], a: float, what: str) -> str:
        """A correlated failure (a rack loses power): every running process of the group at
        once. With SYNC_FLUSH every acknowledged message and every committed Raft entry was
        fsynced on a quorum, so even this must lose nothing."""
        up = [p for p in procs if p.up]
        if not up:
            return "nothing"
        lose = a < 0.33
        for p in up:
            await self.world.kill(p, machine=self.world.spec.sync_flush, lose=lose)
        how = "power cut" if self.world.spec.sync_flush else "kill -9"
        return f"{how} all {what} ({', '.join(p.name for p in up)})"

    # ------------------------------------------------------------------ the actions
    # each takes two uniform draws and returns what it did, or None when it does not apply

    def _set(self, a: float) -> str:
        return SETS[int(a * 2) % 2]

    async def crash_broker(self, a: float, b: float) -> str | None:
        proc = self._master_or_any(a, b)
        if proc is None or sum(not p.up for p in self.world.all_brokers()) >= 2:
            return None
        return await self.crash(proc, self.rng.random())

    async def crash_controller(self, a: float, b: float) -> str | None:
        w = self.world
        up = [p for p in w.controls if p.up]
        proc = (w.controller_leader() if a < 0.5 else None) or (
            _pick(random.Random(b), up) if up else None
        )
        return await self.crash(proc, self.rng.random()) if isinstance(proc, Process) else None

    async def crash_leader_and_master(self, a: float, b: float) -> str | None:
        leader, master = self.world.controller_leader(), self.world.master_of(self._set(a))
        if leader is None or master is None:
            return None
        await self.crash(leader, b)
        return "together: " + await self.crash(master, b)

    async def crash_set(self, a: float, b: float) -> str | None:
        return await self.crash_all(self.world.brokers[self._set(a)], b, "set")

    async def crash_controllers(self, a: float, b: float) -> str | None:
        return await self.crash_all(self.world.controller_procs(), b, "controllers")

    async def restart_one(self, a: float, b: float) -> str | None:
        down = [p for p in self.world.processes if not p.up]
        if not down:
            return None
        proc = _pick(random.Random(a), down)
        assert isinstance(proc, Process)
        await self.world.restart(proc)
        return f"restart {proc.name}"

    async def partition_random(self, a: float, b: float) -> str | None:
        hosts = self._hosts()
        shuffled = random.Random(a).sample(hosts, len(hosts))
        cut = 1 + int(b * (len(hosts) - 1))
        self.world.partition(shuffled[:cut], shuffled[cut:])
        return f"partition {sorted(shuffled[:cut])} | rest"

    async def partition_master_controllers(self, a: float, b: float) -> str | None:
        w = self.world
        master = w.master_of(self._set(a))
        if master is None:
            return None
        w.partition([master.host.ip], [p.host.ip for p in w.controller_procs()])
        return f"partition master {master.name} | controllers"

    async def partition_master_slaves(self, a: float, b: float) -> str | None:
        w, s = self.world, self._set(a)
        master = w.master_of(s)
        if master is None:
            return None
        w.partition([master.host.ip], [p.host.ip for p in w.brokers[s] if p is not master])
        return f"partition master {master.name} | its slaves"

    async def partition_master_leader(self, a: float, b: float) -> str | None:
        w = self.world
        master, leader = w.master_of(self._set(a)), w.controller_leader()
        if master is None or leader is None:
            return None
        w.partition([master.host.ip], [leader.host.ip])
        return f"partition master {master.name} | controller leader {leader.name} only"

    async def isolate_controller_leader(self, a: float, b: float) -> str | None:
        """The Raft leader loses its peers (it keeps the brokers): a new leader is elected
        while the old one may still hold uncommitted entries (Raft's Figure 8 material)."""
        w = self.world
        leader = w.controller_leader()
        peers = [p.host.ip for p in w.controller_procs() if p is not leader]
        if leader is None or not peers:
            return None
        w.partition([leader.host.ip], peers)
        return f"partition controller leader {leader.name} | other controllers"

    async def heal(self, a: float, b: float) -> str | None:
        self.world.heal_network()
        return "heal network"

    async def cut(self, a: float, b: float) -> str | None:
        x, y = random.Random(a).sample(self._hosts(), 2)
        self.world.net.cut(x, y)
        return f"cut {x}-{y}"

    async def delay(self, a: float, b: float) -> str | None:
        x, y = random.Random(a).sample(self._hosts(), 2)
        extra = (0.002, 0.02, 0.15, 0.6)[int(b * 4)]
        self.world.net.set_delay(x, y, extra)
        return f"delay {x}-{y} +{extra}s"

    async def disk_speed(self, a: float, b: float) -> str | None:
        focus = self.world.spec.focus
        pool: list[Process] = list(self.world.processes)
        if focus == "controllers":
            pool = list(self.world.controller_procs())
        proc = _pick(random.Random(a), pool)
        assert isinstance(proc, Process)
        level = (None, "slow", "stalled")[int(b * 3)]
        proc.host.slow.level = level
        return f"disk of {proc.name}: {level or 'fast again'}"

    async def fail_fsync(self, a: float, b: float) -> str | None:
        w = self.world
        proc = _pick(random.Random(a), [p for p in w.processes if p.up] or w.processes)
        assert isinstance(proc, Process)
        proc.host.disk.fail_fsync(None, 1)
        return f"fail next fsync on {proc.name}"

    def _weights(self) -> list[tuple[float, Action]]:
        focus = self.world.spec.focus
        c = 3.0 if focus == "controllers" else 1.0  # controller faults
        r = 2.0 if focus == "replication" else 1.0  # broker-set faults
        return [
            (13 * r, self.crash_broker),
            (6 * c, self.crash_controller),
            (3 * c, self.crash_leader_and_master),
            (2.5 * r, self.crash_set),
            (2.5 * c, self.crash_controllers),
            (9, self.restart_one),
            (3, self.partition_random),
            (4, self.partition_master_controllers),
            (4 * r, self.partition_master_slaves),
            (3, self.partition_master_leader),
            (3 * c, self.isolate_controller_leader),
            (8, self.heal),
            (6, self.cut),
            (5, self.delay),
            (4 * c, self.disk_speed),
            (4, self.fail_fsync),
            (20, self.nothing),
        ]

    async def nothing(self, a: float, b: float) -> str | None:
        return "nothing"

    async def step(self) -> str:
        roll, a, b = self.rng.random(), self.rng.random(), self.rng.random()
        weights = self._weights()
        x = roll * sum(wt for wt, _ in weights)
        for wt, action in weights:
            x -= wt
            if x < 0:
                return await action(a, b) or "nothing"
        return "nothing"

    async def auto_restart(self) -> list[str]:
        out = []
        for p in self.world.processes:
            if p.up:
                self.down_since.pop(p.name, None)
                continue
            since = self.down_since.setdefault(p.name, self.step_no)
            if self.step_no - since >= AUTO_RESTART_STEPS:
                await self.world.restart(p)
                self.down_since.pop(p.name, None)
                out.append(p.name)
        return out

    async def run(self) -> None:
        w, checker = self.world, self.world.checker
        for i in range(w.spec.steps):
            self.step_no = i
            action = await self.step()
            restarted = await self.auto_restart()
            if restarted:
                action += f"; restart {', '.join(restarted)}"
            checker.count("step_" + action.split()[0])
            await trio.sleep(self.rng.uniform(*SLICE_S))
            checker.note(f"step {i}: {action} (t={trio.current_time():.2f})")
            w.check_step()


async def seeded_chaos(world: World) -> None:
    await Chaos(world).run()


async def heal_everything(world: World) -> None:
    world.heal_network()
    for p in world.processes:
        p.host.disk.heal()
        p.host.slow.level = None
    for p in world.processes:
        await world.restart(p)
